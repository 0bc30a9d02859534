/**
 * The language server: wiring only. LSP events feed the AnalysisSession (incremental trees, per-URI cache); analysis
 * is debounced off the keystroke path; findings become diagnostics; fixes become code actions.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { basename } from 'node:path';
import {
  CodeActionKind, createConnection, ProposedFeatures, TextDocumentSyncKind,
  type CodeAction, type CodeActionParams, type Diagnostic, type InitializeResult, type Position,
} from 'vscode-languageserver/node';
import { TextDocument } from 'vscode-languageserver-textdocument';
import { SOURCE } from '../../common/codes';
import { EnvironmentNotification, StatusNotification, type EnvironmentParams, type StatusParams } from '../../common/protocol';
import { resolveSettings, SETTINGS_SECTION, type PrecisionLensSettings } from '../../common/settings';
import { locateFallbackModule } from './fallback-location';
import { fixesForFinding, sourceFixes, type FallbackModule } from './fixes';
import { factsForFile, workspaceFactsOf } from './engine';
import { findingToDiagnostic, fixToCodeAction, REWRITE_KIND, type DiagnosticData } from './lsp-convert';
import { createPythonParser } from './parser';
import type { WorkspaceFacts } from './rules/types';
import { AnalysisSession, type DocumentState } from './session';
import { scanWorkspace, type ScanResult } from './workspace-scan';

const DEBOUNCE_MS = 120;

const connection = createConnection(ProposedFeatures.all);
let session: AnalysisSession | undefined;
const settingsCache = new Map<string, Promise<PrecisionLensSettings>>();
const timers = new Map<string, NodeJS.Timeout>();
let workspaceRoots: string[] = [];
let scan: ScanResult | undefined;
let environment: EnvironmentParams = {};
let canAskConfiguration = false;
/** The client applies CreateFile in a WorkspaceEdit: the project's fallback module can be created by a fix. */
let canCreateFiles = false;

function log(message: string): void {
  connection.console.log(message);
}

function status(params: Omit<StatusParams, 'documents'>): void {
  void connection.sendNotification(StatusNotification, { ...params, documents: session?.size ?? 0 } satisfies StatusParams);
}

function settingsFor(uri: string): Promise<PrecisionLensSettings> {
  let cached = settingsCache.get(uri);
  if (!cached) {
    cached = canAskConfiguration
      ? connection.workspace.getConfiguration({ scopeUri: uri, section: SETTINGS_SECTION }).then(resolveSettings, () => resolveSettings({}))
      : Promise.resolve(resolveSettings({}));
    settingsCache.set(uri, cached);
  }
  return cached;
}

/** A document's path for module-name matching (the URI's path when it is a file URI). */
function uriPath(uri: string): string {
  try {
    return uri.startsWith('file:') ? fileURLToPath(uri) : uri;
  } catch {
    return uri;
  }
}

/** What the workspace as a whole says; PL302 stays quiet (undefined) until the scan has proven there is no autocast. */
function workspaceFacts(): WorkspaceFacts {
  // The open documents' facts as the CLI derives them from its inputs, then what the scan found in the others.
  const open = workspaceFactsOf([...(session?.all() ?? [])].flatMap((d) => (d.analysis ? [d.analysis.ir] : [])));
  const stackImports = { ...open.stackImports };
  for (const [file, mods] of scan?.stackFiles ?? []) for (const mod of mods) stackImports[mod] ??= `the FP8 conversion or quantization in ${basename(file)}`;
  const scanned = scan && !scan.truncated;
  return {
    anyAutocastRegion: open.anyAutocastRegion || (scan && scan.autocastFiles.size > 0) ? true : scanned ? false : undefined,
    anyTraining: open.anyTraining || (scan && scan.trainFiles.size > 0) ? true : scanned ? false : undefined,
    ...(Object.keys(stackImports).length ? { stackImports } : {}),
    anyCompile: open.anyCompile || (scan ? scan.compileFiles.size > 0 : undefined),
    teVersion: environment.teVersion,
  };
}

function offsetAt(state: DocumentState, position: Position): number {
  const lineStart = state.lineStarts[Math.min(position.line, state.lineStarts.length - 1)] ?? 0;
  const lineEnd = position.line + 1 < state.lineStarts.length ? state.lineStarts[position.line + 1] - 1 : state.text.length;
  return position.line >= state.lineStarts.length ? state.text.length : Math.min(lineStart + position.character, lineEnd);
}

async function publish(uri: string): Promise<void> {
  if (!session?.get(uri)) return;
  const settings = await settingsFor(uri);
  const facts = workspaceFacts();
  const before = JSON.stringify(facts);
  const analysis = session.analyze(uri, settings, factsForFile(facts, uriPath(uri)));
  const state = session.get(uri);
  if (!analysis || !state) return;
  const diagnostics: Diagnostic[] = analysis.findings.map((f, i) => findingToDiagnostic(f, i, analysis.version));
  void connection.sendDiagnostics({ uri, version: analysis.version, diagnostics });
  status({ state: 'ready', message: analysis.skipped ?? `${diagnostics.length} finding${diagnostics.length === 1 ? '' : 's'}`, lastAnalysisMs: analysis.ms });
  // A document that gained or lost an autocast region changes what other documents may be told (PL302).
  if (JSON.stringify(workspaceFacts()) !== before) reanalyzeAll(uri);
}

function schedule(uri: string, delay = DEBOUNCE_MS): void {
  clearTimeout(timers.get(uri));
  timers.set(uri, setTimeout(() => {
    timers.delete(uri);
    publish(uri).catch((e) => log(`analysis of ${uri} failed: ${e instanceof Error ? e.stack : String(e)}`));
  }, delay));
}

function reanalyzeAll(except?: string): void {
  session?.invalidate();
  for (const doc of session?.all() ?? []) if (doc.uri !== except) schedule(doc.uri, 0);
}

connection.onInitialize(async (params): Promise<InitializeResult> => {
  session = new AnalysisSession(await createPythonParser());
  canAskConfiguration = !!params.capabilities.workspace?.configuration;
  const workspaceEdit = params.capabilities.workspace?.workspaceEdit;
  canCreateFiles = !!workspaceEdit?.documentChanges && !!workspaceEdit.resourceOperations?.includes('create');
  workspaceRoots = (params.workspaceFolders ?? [])
    .filter((f) => f.uri.startsWith('file:'))
    .map((f) => fileURLToPath(f.uri));
  return {
    capabilities: {
      textDocumentSync: { openClose: true, change: TextDocumentSyncKind.Incremental },
      codeActionProvider: { codeActionKinds: [CodeActionKind.QuickFix, REWRITE_KIND], resolveProvider: false },
    },
    serverInfo: { name: SOURCE, version: '0.1.0' },
  };
});

connection.onInitialized(() => {
  status({ state: 'ready', message: 'ready' });
  if (workspaceRoots.length) {
    scanWorkspace(workspaceRoots).then((result) => {
      scan = result;
      log(`workspace scan: ${result.files} Python files, ${result.autocastFiles.size} with FP8 autocast${result.truncated ? ' (truncated)' : ''}`);
      reanalyzeAll();
    }, (e) => log(`workspace scan failed: ${String(e)}`));
  }
});

connection.onDidChangeConfiguration(() => {
  settingsCache.clear();
  reanalyzeAll();
});

connection.onNotification(EnvironmentNotification, (params: EnvironmentParams) => {
  environment = params;
  log(`environment: Transformer Engine ${params.teVersion ?? 'not found'} (${params.pythonPath ?? 'no interpreter'})`);
  reanalyzeAll();
});

connection.onDidOpenTextDocument(({ textDocument }) => {
  session?.open(textDocument.uri, textDocument.text, textDocument.version);
  schedule(textDocument.uri, 0);
});

connection.onDidChangeTextDocument(({ textDocument, contentChanges }) => {
  const state = session?.get(textDocument.uri);
  if (!state) return;
  // Offsets are computed change by change: each range refers to the text after the previous change.
  for (const change of contentChanges) {
    if ('range' in change) {
      session!.change(state.uri, [{ startOffset: offsetAt(state, change.range.start), endOffset: offsetAt(state, change.range.end), text: change.text }], textDocument.version);
    } else {
      session!.change(state.uri, [{ text: change.text }], textDocument.version);
    }
  }
  schedule(textDocument.uri);
});

connection.onDidCloseTextDocument(({ textDocument }) => {
  clearTimeout(timers.get(textDocument.uri));
  timers.delete(textDocument.uri);
  session?.close(textDocument.uri);
  settingsCache.delete(textDocument.uri);
  void connection.sendDiagnostics({ uri: textDocument.uri, diagnostics: [] });
});

/**
 * The project's FP8 fallback module for a document, found on disk or among the open documents. Undefined (an inline
 * block) outside any workspace folder, and for a client that cannot create files until the module exists.
 */
function fallbackModuleFor(uri: string, text: string, settings: PrecisionLensSettings): FallbackModule | undefined {
  if (!uri.startsWith('file:')) return undefined;
  const open = new Set([...(session?.all() ?? [])].map((d) => uriPath(d.uri)));
  const found = locateFallbackModule(uriPath(uri), workspaceRoots, settings.fallbackModule, (p) => open.has(p) || existsSync(p), text);
  return found && (found.exists || canCreateFiles) ? found : undefined;
}

connection.onCodeAction(async (params: CodeActionParams, token): Promise<CodeAction[]> => {
  const uri = params.textDocument.uri;
  const settings = await settingsFor(uri);
  if (token.isCancellationRequested || !session?.get(uri)) return [];
  const facts = factsForFile(workspaceFacts(), uriPath(uri));
  const analysis = session.analyze(uri, settings, facts);
  const state = session.get(uri)!;
  if (!analysis || analysis.skipped) return [];
  const document = TextDocument.create(uri, 'python', state.version, state.text);
  const env = { teVersion: environment.teVersion, otherStack: facts.otherStack, fallbackModule: fallbackModuleFor(uri, state.text, settings) };
  const actions: CodeAction[] = [];
  const wantsQuickFix = !params.context.only || params.context.only.some((k) => k === CodeActionKind.QuickFix || CodeActionKind.QuickFix.startsWith(k));
  if (wantsQuickFix) {
    for (const diagnostic of params.context.diagnostics) {
      if (diagnostic.source !== SOURCE) continue;
      const data = diagnostic.data as DiagnosticData | undefined;
      // A diagnostic from an older version may point at moved text: match the current finding by code and range.
      const finding = data && data.version === analysis.version
        ? analysis.findings[data.index]
        : analysis.findings.find((f) => f.code === diagnostic.code && f.span.startLine === diagnostic.range.start.line && f.span.startColumn === diagnostic.range.start.character);
      if (!finding) continue;
      for (const fix of fixesForFinding(state.text, analysis.ir, finding, settings, env)) actions.push(fixToCodeAction(fix, document, [diagnostic]));
    }
  }
  const wantsRewrite = !params.context.only || params.context.only.some((k) => REWRITE_KIND.startsWith(k));
  if (wantsRewrite) {
    const start = document.offsetAt(params.range.start);
    const end = document.offsetAt(params.range.end);
    const owner = analysis.ir.classes.find((c) => c.span.startOffset <= start && start <= c.span.endOffset);
    const options = { className: owner?.name, selection: end > start ? { startOffset: start, endOffset: end } : undefined };
    for (const fix of sourceFixes(state.text, analysis.ir, settings, { ...options, env })) actions.push(fixToCodeAction(fix, document, []));
  }
  return token.isCancellationRequested ? [] : actions;
});

connection.onShutdown(() => {
  for (const t of timers.values()) clearTimeout(t);
  session?.dispose();
});

connection.listen();
