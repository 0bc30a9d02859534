/**
 * Conversions between the engine's types and LSP's: findings -> diagnostics, fixes -> code actions.
 */
import { pathToFileURL } from 'node:url';
import {
  CodeAction, CodeActionKind, Command, CreateFile, Diagnostic, DiagnosticSeverity, TextDocumentEdit, type Range, type TextEdit, type WorkspaceEdit,
} from 'vscode-languageserver/node';
import type { TextDocument } from 'vscode-languageserver-textdocument';
import { ruleDocUrl, SOURCE, type Severity } from '../../../common/codes';
import type { Span } from '../analysis/ir';
import type { Fix, RefusedFix } from '../fixes/index';
import { gistOf } from '../rules/explain';
import type { Finding } from '../rules/types';

const SEVERITY: Record<Severity, DiagnosticSeverity> = {
  error: DiagnosticSeverity.Error,
  warning: DiagnosticSeverity.Warning,
  information: DiagnosticSeverity.Information,
  hint: DiagnosticSeverity.Hint,
};

export const REWRITE_KIND = `${CodeActionKind.RefactorRewrite}.precisionLens`;
/** The action that explains a refused quick fix (a quick fix sub-kind, so Ctrl+. lists it). */
export const EXPLAIN_KIND = `${CodeActionKind.QuickFix}.precisionLens.explain`;
/** File- and class-wide actions also under VS Code's "Source Action..." menu (which asks for `source` kinds only). */
export const SOURCE_KIND = `${CodeActionKind.Source}.precisionLens`;

/** `source.precisionLens.convertAll` for `convert-all:class:Block`, `source.precisionLens.wrapTrainingStep`... */
export function sourceKindOf(id: string): string {
  const head = id.split(':')[0].replace(/^refused-?/, '') || 'action';
  return `${SOURCE_KIND}.${head.replace(/-(\w)/g, (_, c: string) => c.toUpperCase())}`;
}

/** What a diagnostic carries so a code action request can find its finding again. */
export interface DiagnosticData {
  version: number;
  index: number;
}

export function spanToRange(span: Span): Range {
  return { start: { line: span.startLine, character: span.startColumn }, end: { line: span.endLine, character: span.endColumn } };
}

/**
 * A finding as an LSP diagnostic: the one-sentence message, and its evidence as relatedInformation (locations in the
 * same document) when the client shows it (`publishDiagnostics.relatedInformation`).
 */
export function findingToDiagnostic(finding: Finding, index: number, version: number, uri?: string): Diagnostic {
  const data: DiagnosticData = { version, index };
  const related = uri && finding.related?.length
    ? { relatedInformation: finding.related.map((r) => ({ location: { uri, range: spanToRange(r.span) }, message: r.message })) }
    : {};
  return {
    range: spanToRange(finding.span),
    severity: SEVERITY[finding.severity],
    code: finding.code,
    codeDescription: { href: ruleDocUrl(finding.code) },
    source: SOURCE,
    message: finding.message,
    ...related,
    data,
  };
}

/**
 * A fix as a code action. File- and class-wide rewrites are refactorings (they show in the lightbulb menu next to the
 * quick fixes); `asSource` gives them a `source.*` kind instead, for the "Source Action..." menu.
 */
export function fixToCodeAction(fix: Fix, document: TextDocument, diagnostics: Diagnostic[], asSource = false): CodeAction {
  const edits: TextEdit[] = fix.edits.map((e) => ({
    range: { start: document.positionAt(e.startOffset), end: document.positionAt(e.endOffset) },
    newText: e.newText,
  }));
  const kind = fix.kind === 'quickfix' ? CodeActionKind.QuickFix : asSource ? sourceKindOf(fix.id) : REWRITE_KIND;
  const action = CodeAction.create(fix.title, workspaceEdit(fix, document, edits), kind);
  if (diagnostics.length) action.diagnostics = diagnostics;
  if (fix.isPreferred) action.isPreferred = true;
  return action;
}

/**
 * The fix as a WorkspaceEdit: plain `changes` for edits of the document; `documentChanges` (LSP 3.13 resource
 * operations: CreateFile, then its text) when the fix creates the project's FP8 fallback module. The server offers
 * module creation only to clients that announce workspaceEdit.resourceOperations "create".
 */
function workspaceEdit(fix: Fix, document: TextDocument, edits: TextEdit[]): WorkspaceEdit {
  if (!fix.createFiles?.length) return { changes: { [document.uri]: edits } };
  const created = fix.createFiles.flatMap((f) => {
    const uri = pathToFileURL(f.path).toString();
    return [
      CreateFile.create(uri, { ignoreIfExists: true }),
      TextDocumentEdit.create({ uri, version: null }, [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, newText: f.text }]),
    ];
  });
  return { documentChanges: [...created, TextDocumentEdit.create({ uri: document.uri, version: document.version }, edits)] };
}

/** A refused fix as a disabled code action: no edit, and `disabled.reason` says why (LSP 3.16). */
export function refusedToCodeAction(refused: RefusedFix, diagnostics: Diagnostic[], asSource = false): CodeAction {
  const kind = refused.kind === 'quickfix' ? CodeActionKind.QuickFix : asSource ? sourceKindOf(refused.id) : REWRITE_KIND;
  const action = CodeAction.create(refused.title, kind);
  if (diagnostics.length) action.diagnostics = diagnostics;
  action.disabled = { reason: refused.reason };
  return action;
}

/**
 * For a refused quick fix, an enabled action that says why in its title and opens the hover card: VS Code hides
 * disabled actions from a plain Ctrl+. (it shows them only when a kind is asked for), so without it Ctrl+. on a
 * refused layer would say "No code actions available".
 */
export function explainRefusalAction(refused: RefusedFix, diagnostics: Diagnostic[]): CodeAction {
  const action = CodeAction.create(`Why no fix: ${gistOf(refused.reason)}`, Command.create('Show why', 'editor.action.showHover'), EXPLAIN_KIND);
  if (diagnostics.length) action.diagnostics = diagnostics;
  return action;
}
