/**
 * The language server: wiring only. LSP events feed the AnalysisSession (incremental trees, per-URI cache); analysis
 * is debounced off the keystroke path; findings become diagnostics; fixes become code actions.
 */
import { fileURLToPath, pathToFileURL } from 'node:url';
import { existsSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import {
  CodeActionKind, CodeLensRefreshRequest, createConnection, ErrorCodes, ResponseError, type CancellationToken, DidChangeWatchedFilesNotification, MarkupKind, ProposedFeatures, TextDocumentSyncKind,
  type CodeAction, type CodeActionParams, type CodeLens, type CodeLensParams, type Diagnostic, type Hover, type HoverParams, type InitializeResult,
} from 'vscode-languageserver/node';
import { TextDocument } from 'vscode-languageserver-textdocument';
import { SOURCE } from '../../common/codes';
import { EnvironmentNotification, MemoryRequest, StatusNotification, type EnvironmentParams, type MemoryReport, type StatusParams } from '../../common/protocol';
import { resolveSettings, SETTINGS_SECTION, type PrecisionLensSettings } from '../../common/settings';
import { clearProjectConfigCache, findProjectConfig, overlaySettings } from './engine/config';
import { ignoreOnLineEdit, isExcluded } from './engine/suppress';
import { locateFallbackModule } from './engine/fallback-location';
import { fallbackLacks } from './fixes/fallback';
import { fixOutcome, sourceFixOutcome, type FallbackModule } from './fixes';
import { factsForFile } from './engine/engine';
import { WorkspaceFactsView } from './workspace/facts';
import { ImportedModelGains } from './workspace/gains';
import { hoverMarkdown } from './lsp/hover';
import { modelCodeLenses } from './lsp/codelens';
import { explainRefusalAction, findingToDiagnostic, fixToCodeAction, refusedToCodeAction, REWRITE_KIND, SOURCE_KIND, spanToRange, type DiagnosticData } from './lsp/convert';
import { PythonParser } from './engine/parser';
import { fixAll, FIX_ALL_KIND, wantsFixAll } from './lsp/fix-all';
import { pythonSource } from './engine/lines';
import { collectAllGarbage, mb, processMemory } from './lsp/memory';
import type { WorkspaceFacts } from './rules/types';
import { AnalysisSession, changedSincePublished } from './lsp/session';
import { changeOffsets, invalidChanges, invalidDocumentParams, invalidInitializeParams, isEnvironment, offsetAt } from './lsp/sync';
import { FrameGuard, FrameJoiner } from './lsp/framing';
import type { ScanResult } from './workspace/scan';
import { WorkspaceScan } from './workspace/watch';
import { AnalysisScheduler } from './lsp/scheduler';

/** 120 ms; PRECISION_LENS_DEBOUNCE_MS overrides it (the fuzzer's server leg uses 0: it times the analysis, not the wait). */
const DEBOUNCE_MS = debounceMs(process.env.PRECISION_LENS_DEBOUNCE_MS);
function debounceMs(env: string | undefined): number {
  const n = env === undefined || env === '' ? NaN : Number(env);
  return Number.isFinite(n) && n >= 0 && n <= 10_000 ? n : 120;
}
/**
 * A WASM memory past this (twice the runtime's initial 32 MB: only a document of about 1 MB or more grows it) is given
 * back when a document closes, though others stay open: they are parsed afresh by a new runtime at their next edit.
 */
const WASM_SHED_BYTES = 64 * 1048576;

/** The method a malformed initialize request is renamed to (checkedMessages), answered InvalidParams by our handler. */
const INVALID_INITIALIZE = 'precisionLens/invalidInitialize';

/**
 * Every message passes here before vscode-languageserver sees it: an initialize request with malformed parameters
 * (null, not an object, no capabilities object) is renamed so that our handler answers it with InvalidParams saying
 * what is wrong; the library's own initialize handler reads `params.processId` and `params.capabilities` before any
 * of our code runs (a null answered -32603 "Cannot read properties of null").
 */
const checkedMessages = {
  handleMessage(message: unknown, next: (message: never) => void): void {
    const m = message as { id?: unknown; method?: unknown; params?: unknown };
    if (m.method === 'initialize' && m.id !== undefined) {
      const invalid = invalidInitializeParams(m.params);
      if (invalid) { next({ ...m, method: INVALID_INITIALIZE, params: { invalid } } as never); return; }
    }
    next(message as never);
  },
};

/** Over stdio, frames pass a guard first and go out in one write each (framing.ts); over IPC (VS Code) there is no framing. */
function connect(): ReturnType<typeof createConnection> {
  if (!process.argv.includes('--stdio')) return createConnection(ProposedFeatures.all, { messageStrategy: checkedMessages });
  const guard = new FrameGuard((what) => process.stderr.write(`precision-lens: dropped ${what} from the client\n`));
  process.stdin.pipe(guard);
  return createConnection(ProposedFeatures.all, guard, new FrameJoiner(process.stdout), { messageStrategy: checkedMessages });
}

const connection = connect();
let session: AnalysisSession | undefined;
let parser: PythonParser | undefined;
const settingsCache = new Map<string, Promise<PrecisionLensSettings>>();
let workspaceRoots: string[] = [];
let scan: ScanResult | undefined;
let environment: EnvironmentParams = {};
let canAskConfiguration = false;
/** The client watches files for the server when asked (LSP dynamic registration of workspace/didChangeWatchedFiles). */
let canWatchFiles = false;
/** The workspace scan, kept current by the watcher (workspace/watch.ts). */
let workspaceScan: WorkspaceScan | undefined;
/** The client shows a diagnostic's relatedInformation (LSP publishDiagnostics capability). */
let relatedInformation = false;
/** The client applies CreateFile in a WorkspaceEdit: the project's fallback module can be created by a fix. */
let canCreateFiles = false;
/** The client shows disabled code actions with their reason (LSP 3.16 codeAction.disabledSupport). */
let disabledActions = false;
/** The client asks again for the code lenses when told (LSP 3.16 workspace/codeLens/refresh). */
let canRefreshCodeLenses = false;

/** The model lens's estimate depends on the settings (tokensPerStep, the recipe) and the workspace's sizes: ask again. */
function refreshCodeLenses(): void {
  if (!canRefreshCodeLenses || shutDown) return;
  connection.sendRequest(CodeLensRefreshRequest.type).catch((e) => log(`workspace/codeLens/refresh failed: ${String(e)}`));
}

function log(message: string): void {
  connection.console.log(message);
}

function status(params: Omit<StatusParams, 'documents'>): void {
  void connection.sendNotification(StatusNotification, { ...params, documents: session?.size ?? 0 } satisfies StatusParams);
}

/** pyproject.toml files whose problems were already logged (once per file and content). */
const reportedConfigs = new Set<string>();

/**
 * How long the server waits for the client to answer a request (workspace/configuration): past it the server goes on
 * with defaults and says so, since one unanswered request once held the analysis queue for good.
 */
const CLIENT_DEADLINE_MS = 3000;

/**
 * `request` or, past `ms`, `fallback` (logged with `what`); a late answer is passed to `late` (when it still matters).
 * A rejected request also gives the fallback.
 */
function withDeadline<T>(request: Promise<T>, ms: number, fallback: T, what: string, late?: (value: T) => void): Promise<T> {
  return new Promise<T>((resolve) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      log(`${what}: no answer from the client in ${ms} ms, going on with the defaults`);
      resolve(fallback);
    }, ms);
    request.then((value) => {
      clearTimeout(timer);
      if (timedOut) late?.(value); else resolve(value);
    }, (e) => {
      clearTimeout(timer);
      if (!timedOut) { log(`${what} failed (${e instanceof Error ? e.message : String(e)}), going on with the defaults`); resolve(fallback); }
    });
  });
}

/** The editor's settings for the document, with the project's [tool.precision-lens] table laid over them. */
function settingsFor(uri: string): Promise<PrecisionLensSettings> {
  let cached = settingsCache.get(uri);
  if (!cached) {
    const editor: Promise<unknown> = canAskConfiguration
      ? withDeadline<unknown>(connection.workspace.getConfiguration({ scopeUri: uri, section: SETTINGS_SECTION }), CLIENT_DEADLINE_MS, {},
        `workspace/configuration for ${uri}`, () => {
          // The answer came after all: ask again (it is quick now) and bring the document up to date with it.
          if (settingsCache.get(uri) !== cached) return;
          settingsCache.delete(uri);
          if (session?.get(uri)) scheduler.background(uri);
        })
      : Promise.resolve({});
    cached = editor.then((raw) => {
      const project = uri.startsWith('file:') ? findProjectConfig(dirname(uriPath(uri))) : undefined;
      for (const problem of project?.problems ?? []) {
        if (reportedConfigs.has(problem)) continue;
        reportedConfigs.add(problem);
        log(problem);
        void connection.window.showWarningMessage(`Precision Lens: ${problem}`);
      }
      return resolveSettings(overlaySettings(raw, project?.settings));
    });
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

/** The models compiling scripts import, read from disk when not open: PL306 knows their predicted gain as the CLI does. */
const importedGains = new ImportedModelGains({
  parser: () => parser,
  settings: (path) => settingsFor(pathToFileURL(path).toString()),
  workspaceFiles: () => scan?.pythonFiles ?? [],
  isOpen: (path) => [...(session?.all() ?? [])].some((d) => d.uri.startsWith('file:') && uriPath(d.uri) === path),
  changed: () => reanalyzeIfFactsChanged(),
  log,
});

/** What the workspace as a whole says (merged once per change of what the open documents contribute). */
const workspace = new WorkspaceFactsView(() => session, importedGains);
function workspaceFacts(): WorkspaceFacts {
  return workspace.facts(scan, environment.teVersion);
}

/** The workspace facts the documents were last analysed with: when they change, every document's rules re-run. */
let lastFactsKey = '';

async function publish(uri: string): Promise<void> {
  if (!session?.get(uri)) return;
  // A fresh WASM runtime is loading (after a trap or a shed): parse with it, not "not analysed" meanwhile.
  if (renewing) await renewing;
  const settings = await settingsFor(uri);
  const facts = workspaceFacts();
  lastFactsKey ||= workspace.key(scan, environment.teVersion);
  const analysis = session.analyze(uri, settings, factsForFile(facts, uriPath(uri)));
  const state = session.get(uri);
  if (!analysis || !state) return;
  if (parser?.needsRenewal) renewParser(`the parser trapped (${parser.traps} so far)`);
  if (uri.startsWith('file:')) importedGains.track(uriPath(uri), analysis.ir);
  // [tool.precision-lens] exclude / extend-exclude: the file is out of the project's checks, here as in the CLI.
  const excluded = isExcluded(settings, uriPath(uri));
  const diagnostics: Diagnostic[] = excluded ? [] : analysis.findings.map((f, i) => findingToDiagnostic(f, i, analysis.version, relatedInformation ? uri : undefined));
  // Publish only what changed: the same version with the same diagnostics is not sent again.
  if (changedSincePublished(state, analysis.version, diagnostics)) {
    void connection.sendDiagnostics({ uri, version: analysis.version, diagnostics });
    const note = analysis.skipped ?? analysis.ir.incomplete;
    status({ state: 'ready', message: note ?? `${diagnostics.length} finding${diagnostics.length === 1 ? '' : 's'}`, lastAnalysisMs: analysis.ms });
  }
  reanalyzeIfFactsChanged();
}

/**
 * A document that gained or lost an autocast region (or a training step...) changes what every document may be told
 * (PL302): re-run the rules everywhere, once per change of the merged facts. Documents whose own facts did not change
 * keep their findings (the session compares what their rules read) and publish nothing, so this converges.
 */
function reanalyzeIfFactsChanged(): void {
  const factsKey = workspace.key(scan, environment.teVersion);
  if (factsKey === lastFactsKey) return;
  lastFactsKey = factsKey;
  reanalyzeAll();
}

/** Edits wait for the debounce; due documents run one per event-loop turn, edited ones first (scheduler.ts). */
const scheduler = new AnalysisScheduler(
  (uri) => publish(uri).catch((e) => log(`analysis of ${uri} failed: ${e instanceof Error ? e.stack : String(e)}`)),
  DEBOUNCE_MS,
  undefined,
  CLIENT_DEADLINE_MS * 3,
  (uri) => log(`analysis of ${uri} is still waiting after ${CLIENT_DEADLINE_MS * 3} ms: the other documents go on`),
);

/** Brings every open document up to date (each re-runs only what its changed inputs need). */
function reanalyzeAll(): void {
  for (const doc of session?.all() ?? []) scheduler.background(doc.uri);
}

/**
 * With every document closed, memory-reducing collections (memory.ts) return the old WASM runtime, the documents'
 * caches and the young generation V8 grew under load to the system; without allocation pressure V8 would keep them
 * (the RSS stayed near its peak). Two, a second apart: pages the first one frees are unmapped by background tasks,
 * and only a later collection gives the pooled ones back. Each release is counted and logged (protocol tests wait
 * for the line).
 */
let releaseTimer: NodeJS.Timeout | undefined;
let releases = 0;
function releaseMemorySoon(rounds = 2): void {
  clearTimeout(releaseTimer);
  releaseTimer = setTimeout(() => {
    if (session?.size) return;
    void collectAllGarbage().then((how) => {
      if (session?.size) return;
      if (rounds > 1) return releaseMemorySoon(rounds - 1);
      releases++;
      const m = processMemory();
      log(`all documents closed: memory released (${how} collection): RSS ${mb(m.rss)}, JS heap ${mb(m.heapUsed)} of ${mb(m.heapTotal)}, WASM ${mb(parser?.wasmBytes ?? 0)}`);
    });
  }, 1000);
}

/** After a parser trap, a recycle or a shed: load a fresh WASM runtime, then re-analyse the documents (their trees went with the old one). */
let renewing: Promise<void> | undefined;
function renewParser(reason: string): void {
  if (renewing || !parser) return;
  log(`${reason}: loading a fresh WASM runtime`);
  renewing = parser.renew().then(() => { renewing = undefined; reanalyzeAll(); }, (e) => {
    renewing = undefined;
    status({ state: 'error', message: `the parser could not be reloaded: ${String(e)}` });
  });
}

/** Set by the shutdown request: from then on requests are refused (InvalidRequest) and notifications ignored, as LSP says. */
let shutDown = false;

/** Refuses a request after shutdown (InvalidRequest) or with malformed parameters (InvalidParams, saying what is wrong). */
function checkRequest(method: string, invalid: string | undefined): void {
  if (shutDown) throw new ResponseError(ErrorCodes.InvalidRequest, `${method}: the server has been shut down; only exit is accepted`);
  if (invalid) throw new ResponseError(ErrorCodes.InvalidParams, `${method}: ${invalid}`);
}

/**
 * A request handler's arguments as (params, token): vscode-jsonrpc calls a handler registered by name with the token
 * alone when the request has no params. The params are checked before use (checkRequest), hence the cast.
 */
function requestArgs<P>(args: unknown[]): [P, CancellationToken] {
  return (args.length < 2 ? [undefined, args[0]] : args) as [P, CancellationToken];
}

/** Whether to act on a notification: not after shutdown, not with malformed parameters (logged: a notification has no answer). */
function acceptNotification(method: string, invalid: string | undefined): boolean {
  if (shutDown) { log(`ignored ${method} after shutdown`); return false; }
  if (invalid) { log(`ignored a ${method} notification with invalid parameters: ${invalid}`); return false; }
  return true;
}

connection.onRequest(INVALID_INITIALIZE, (params: { invalid: string }) => {
  checkRequest('initialize', undefined);
  throw new ResponseError(ErrorCodes.InvalidParams, `initialize: ${params.invalid}`);
});

connection.onInitialize(async (params): Promise<InitializeResult> => {
  // Once only (LSP): a second initialize used to start a new session and drop every open document, their
  // diagnostics left on screen. It is refused and the session kept.
  if (session || shutDown) {
    throw new ResponseError(ErrorCodes.InvalidRequest, shutDown
      ? 'initialize: the server has been shut down; only exit is accepted'
      : 'initialize: the server is already initialized (initialize is sent once); the open documents are kept');
  }
  parser = await PythonParser.create();
  session = new AnalysisSession(parser);
  canAskConfiguration = !!params.capabilities.workspace?.configuration;
  canWatchFiles = !!params.capabilities.workspace?.didChangeWatchedFiles?.dynamicRegistration;
  relatedInformation = !!params.capabilities.textDocument?.publishDiagnostics?.relatedInformation;
  disabledActions = !!params.capabilities.textDocument?.codeAction?.disabledSupport;
  canRefreshCodeLenses = !!params.capabilities.workspace?.codeLens?.refreshSupport;
  const workspaceEdit = params.capabilities.workspace?.workspaceEdit;
  canCreateFiles = !!workspaceEdit?.documentChanges && !!workspaceEdit.resourceOperations?.includes('create');
  workspaceRoots = (params.workspaceFolders ?? [])
    .filter((f) => f.uri.startsWith('file:'))
    .map((f) => fileURLToPath(f.uri));
  return {
    capabilities: {
      textDocumentSync: { openClose: true, change: TextDocumentSyncKind.Incremental },
      codeActionProvider: { codeActionKinds: [CodeActionKind.QuickFix, REWRITE_KIND, SOURCE_KIND, FIX_ALL_KIND], resolveProvider: false },
      hoverProvider: true,
      codeLensProvider: { resolveProvider: false },
    },
    serverInfo: { name: SOURCE, version: '0.1.0' },
  };
});

/** A new workspace scan (the full one, or after files changed): the facts and the construction sites may differ. */
function scanUpdated(result: ScanResult, paths?: readonly string[]): void {
  scan = result;
  if (session) session.workspaceFiles = result.pythonFiles;
  for (const path of paths ?? []) importedGains.touched(path);
  log(paths
    ? `workspace files changed: ${paths.length} Python file${paths.length === 1 ? '' : 's'} read again`
    : `workspace scan: ${result.files} Python files, ${result.autocastFiles.size} with FP8 autocast${result.truncated ? ' (truncated)' : ''}`);
  reanalyzeAll();
  refreshCodeLenses();
}

connection.onInitialized(() => {
  status({ state: 'ready', message: 'ready' });
  workspaceScan = new WorkspaceScan(workspaceRoots, scanUpdated);
  workspaceScan.start().catch((e) => log(`workspace scan failed: ${String(e)}`));
  // New, changed and deleted .py files update the scan (the client's pyproject.toml watcher is its own).
  if (canWatchFiles && workspaceRoots.length) {
    connection.client.register(DidChangeWatchedFilesNotification.type, { watchers: [{ globPattern: '**/*.py' }] })
      .catch((e) => log(`could not watch the workspace's Python files: ${String(e)}`));
  }
});

connection.onDidChangeConfiguration(() => {
  settingsCache.clear();
  reanalyzeAll();
  refreshCodeLenses();
});

// A pyproject.toml changed (the client watches them): its [tool.precision-lens] table may say something else now.
connection.onDidChangeWatchedFiles((params) => {
  const changes = Array.isArray(params?.changes) ? params.changes.filter((c) => typeof c?.uri === 'string') : [];
  if (!acceptNotification('workspace/didChangeWatchedFiles', Array.isArray(params?.changes) ? undefined : 'changes must be a list')) return;
  const python = changes.filter((c) => c.uri.startsWith('file:') && c.uri.endsWith('.py')).map((c) => uriPath(c.uri));
  if (python.length) workspaceScan?.changed(python).catch((e) => log(`workspace update failed: ${String(e)}`));
  if (!changes.some((c) => /(^|\/)pyproject\.toml$/.test(c.uri))) return;
  clearProjectConfigCache();
  reportedConfigs.clear();
  settingsCache.clear();
  reanalyzeAll();
  refreshCodeLenses();
});

connection.onNotification(EnvironmentNotification, (params: unknown) => {
  // A malformed notification is refused and the environment kept: it must not switch analysis off.
  if (!isEnvironment(params)) {
    log(`ignored a ${EnvironmentNotification} notification with invalid parameters: ${JSON.stringify(params)}`);
    return;
  }
  environment = params;
  log(`environment: Transformer Engine ${params.teVersion ?? 'not found'} (${params.pythonPath ?? 'no interpreter'})`);
  reanalyzeAll();
});

connection.onDidOpenTextDocument((params) => {
  if (!acceptNotification('textDocument/didOpen', invalidDocumentParams(params, { text: true, version: true }))) return;
  const { textDocument } = params;
  session?.open(textDocument.uri, textDocument.text, textDocument.version);
  scheduler.background(textDocument.uri);
});

connection.onDidChangeTextDocument((params) => {
  if (!acceptNotification('textDocument/didChange', invalidDocumentParams(params, { version: true }))) return;
  const { textDocument, contentChanges } = params;
  const state = session?.get(textDocument.uri);
  if (!state) return;
  const wasDesynced = state.desynced;
  // All or none: a malformed change anywhere in the list applies none of them. The editor has applied them all, so
  // the text is no longer the editor's: not analysed until it sends the whole text or reopens the document.
  const malformed = invalidChanges(contentChanges);
  if (malformed) {
    const n = Array.isArray(contentChanges) ? contentChanges.length : 0;
    session!.change(state.uri, [{ startOffset: 0, endOffset: 0, text: '', invalid: `the editor sent a change the server cannot apply exactly (${malformed}): none of the ${n} change${n === 1 ? '' : 's'} of version ${textDocument.version} applied; not analysed until the document is reopened` }], textDocument.version);
    if (!wasDesynced) log(`${textDocument.uri}: ${state.desynced}`);
    scheduler.edited(textDocument.uri);
    return;
  }
  // Offsets are computed change by change: each range refers to the text after the previous change.
  for (const change of contentChanges) session!.change(state.uri, [changeOffsets(state, change)], textDocument.version);
  if (state.desynced && !wasDesynced) log(`${textDocument.uri}: ${state.desynced}`);
  scheduler.edited(textDocument.uri);
});

connection.onDidCloseTextDocument((params) => {
  if (!acceptNotification('textDocument/didClose', invalidDocumentParams(params))) return;
  const { textDocument } = params;
  scheduler.cancel(textDocument.uri);
  session?.close(textDocument.uri);
  settingsCache.delete(textDocument.uri);
  void connection.sendDiagnostics({ uri: textDocument.uri, diagnostics: [] });
  // The facts of the closed document leave the workspace's.
  reanalyzeIfFactsChanged();
  // Nothing open: give the parser's WASM memory back (a new runtime is loaded for the next document); with documents
  // still open, only a WASM memory grown past its bound.
  if (!session || !parser) return;
  if (session.size === 0 ? parser.recycle() : session.shedParserIfLarger(WASM_SHED_BYTES)) {
    renewParser(session.size ? `the parser's WASM memory grew past ${mb(WASM_SHED_BYTES)}` : 'all documents closed');
  }
  if (session.size === 0) releaseMemorySoon();
});

connection.onRequest(MemoryRequest, (): MemoryReport => (checkRequest(MemoryRequest, undefined), {
  ...(session?.holdings() ?? { documents: 0, trees: 0, cachedStatements: 0 }),
  parserRuntimes: parser?.runtimesLoaded ?? 0,
  wasmBytes: parser?.wasmBytes ?? 0,
  releases,
  process: processMemory(),
}));

/**
 * The project's FP8 fallback module for a document, found on disk or among the open documents. Undefined (an inline
 * block) outside any workspace folder, and for a client that cannot create files until the module exists.
 */
function fallbackModuleFor(uri: string, text: string, settings: PrecisionLensSettings): FallbackModule | undefined {
  if (!uri.startsWith('file:')) return undefined;
  const open = new Set([...(session?.all() ?? [])].map((d) => uriPath(d.uri)));
  const found = locateFallbackModule(uriPath(uri), workspaceRoots, settings.fallbackModule, (p) => open.has(p) || existsSync(p), text);
  if (found?.exists) {
    // What an existing module defines: one written by an earlier version may lack a function a fix would import.
    const doc = [...(session?.all() ?? [])].find((d) => uriPath(d.uri) === found.path);
    try {
      found.lacks = fallbackLacks(doc ? doc.text : readFileSync(found.path, 'utf8'));
    } catch { /* unreadable: the import will say so */ }
  }
  return found && (found.exists || canCreateFiles) ? found : undefined;
}

// Registered by method name, not through connection.onCodeAction / onHover: those read params.workDoneToken before
// the handler runs, so null params failed with a JavaScript error (-32603) before they could be checked.
connection.onRequest('textDocument/codeAction', async (...args: unknown[]): Promise<CodeAction[]> => {
  const [params, token] = requestArgs<CodeActionParams>(args);
  checkRequest('textDocument/codeAction', invalidDocumentParams(params, { range: true, context: true }));
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
  const only = params.context.only;
  const wants = (kind: string) => !only || only.some((k) => kind === k || kind.startsWith(`${k}.`));
  if (wants(CodeActionKind.QuickFix)) {
    for (const diagnostic of params.context.diagnostics) {
      if (diagnostic.source !== SOURCE) continue;
      const data = diagnostic.data as DiagnosticData | undefined;
      // A diagnostic from an older version may point at moved text: match the current finding by code and range.
      const finding = data && data.version === analysis.version
        ? analysis.findings[data.index]
        : analysis.findings.find((f) => f.code === diagnostic.code && f.span.startLine === diagnostic.range.start.line && f.span.startColumn === diagnostic.range.start.character);
      if (!finding) continue;
      const result = fixOutcome(state.text, analysis.ir, finding, settings, env);
      for (const fix of result.fixes) actions.push(fixToCodeAction(fix, document, [diagnostic]));
      if (disabledActions) for (const r of result.refused ?? []) actions.push(refusedToCodeAction(r, [diagnostic]), explainRefusalAction(r, [diagnostic]));
      // "Ignore PL101 on this line": a `# noqa` comment; offered here only, so `check --fix` never applies it.
      const ignore = finding.code === 'PL001' || finding.code === 'PL002' ? undefined : ignoreOnLineEdit(state.text, finding);
      if (ignore) {
        actions.push(fixToCodeAction({ id: `noqa:${finding.code}`, title: `Ignore ${finding.code} on this line`, kind: 'quickfix', codes: [finding.code], safe: true, edits: [ignore] }, document, [diagnostic]));
      }
    }
  }
  // The same file- and class-wide actions under two kinds: refactor (lightbulb) and source ("Source Action...").
  const asRewrite = wants(REWRITE_KIND);
  // source.fixAll (what editor.codeActionsOnSave asks for) is not the Source Action menu: no file-wide rewrites for it.
  const asSource = !!only && only.some((k) => k.startsWith(CodeActionKind.Source) && !k.startsWith(CodeActionKind.SourceFixAll));
  if (asRewrite || asSource) {
    const start = document.offsetAt(params.range.start);
    const end = document.offsetAt(params.range.end);
    const owner = analysis.ir.classes.find((c) => c.span.startOffset <= start && start <= c.span.endOffset);
    const options = { className: owner?.name, selection: end > start ? { startOffset: start, endOffset: end } : undefined };
    const result = sourceFixOutcome(state.text, analysis.ir, settings, { ...options, env });
    for (const kindAsSource of [...(asRewrite ? [false] : []), ...(asSource ? [true] : [])]) {
      for (const fix of result.fixes) actions.push(fixToCodeAction(fix, document, [], kindAsSource));
      if (disabledActions) for (const r of result.refused ?? []) actions.push(refusedToCodeAction(r, [], kindAsSource));
    }
  }
  // source.fixAll.precisionLens: the safe fixes only (fix-all.ts), never asked for without `only`.
  if (wantsFixAll(only)) {
    const all = fixAll(state.text, analysis.ir, analysis.findings, settings, env, parsesCleanly);
    if (all.refused) log(`fix all on ${uri}: ${all.refused}`);
    if (all.fix) actions.push({ ...fixToCodeAction(all.fix, document, []), kind: FIX_ALL_KIND });
  }
  if (token.isCancellationRequested) return [];
  return only ? actions.filter((a) => only.some((k) => a.kind === k || !!a.kind?.startsWith(`${k}.`))) : actions;
});

/** Whether `text` parses without a syntax error (undefined when the parser could not tell: a trap). */
function parsesCleanly(text: string): boolean | undefined {
  if (!parser) return undefined;
  try {
    const tree = parser.parse(pythonSource(text));
    const ok = tree ? !tree.rootNode.hasError : undefined;
    parser.release(tree);
    return ok;
  } catch {
    return undefined;
  }
}

connection.onRequest('textDocument/hover', async (...args: unknown[]): Promise<Hover | null> => {
  const [params, token] = requestArgs<HoverParams>(args);
  checkRequest('textDocument/hover', invalidDocumentParams(params, { position: true }));
  const uri = params.textDocument.uri;
  const settings = await settingsFor(uri);
  if (token.isCancellationRequested || !session?.get(uri)) return null;
  const facts = factsForFile(workspaceFacts(), uriPath(uri));
  const analysis = session.analyze(uri, settings, facts);
  const state = session.get(uri)!;
  if (!analysis || analysis.skipped) return null;
  const env = { teVersion: environment.teVersion, otherStack: facts.otherStack, fallbackModule: fallbackModuleFor(uri, state.text, settings) };
  const at = offsetAt(state, params.position);
  if (at === undefined) return null;
  const card = hoverMarkdown(state.text, analysis.ir, analysis.findings, at, settings, env);
  return card ? { contents: { kind: MarkupKind.Markdown, value: card.markdown }, range: spanToRange(card.finding.span) } : null;
});

// The model's predicted FP8 step speedup on its class line (lsp/codelens.ts), from the document's current analysis.
connection.onRequest('textDocument/codeLens', async (...args: unknown[]): Promise<CodeLens[]> => {
  const [params, token] = requestArgs<CodeLensParams>(args);
  checkRequest('textDocument/codeLens', invalidDocumentParams(params));
  const uri = params.textDocument.uri;
  const settings = await settingsFor(uri);
  if (token.isCancellationRequested || !session?.get(uri)) return [];
  const facts = factsForFile(workspaceFacts(), uriPath(uri));
  const analysis = session.analyze(uri, settings, facts);
  const state = session.get(uri)!;
  if (!analysis || analysis.skipped || isExcluded(settings, uriPath(uri))) return [];
  return modelCodeLenses(state.text, analysis.ir, settings, facts.anyCompile);
});

connection.onShutdown(() => {
  shutDown = true;
  scheduler.stop();
  clearTimeout(releaseTimer);
  session?.dispose();
  parser?.dispose();
});

connection.listen();
