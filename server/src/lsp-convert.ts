/**
 * Conversions between the engine's types and LSP's: findings -> diagnostics, fixes -> code actions.
 */
import { pathToFileURL } from 'node:url';
import {
  CodeAction, CodeActionKind, CreateFile, Diagnostic, DiagnosticSeverity, TextDocumentEdit, type Range, type TextEdit, type WorkspaceEdit,
} from 'vscode-languageserver/node';
import type { TextDocument } from 'vscode-languageserver-textdocument';
import { ruleDocUrl, SOURCE, type Severity } from '../../common/codes';
import type { Span } from './analysis/ir';
import type { Fix } from './fixes';
import type { Finding } from './rules/types';

const SEVERITY: Record<Severity, DiagnosticSeverity> = {
  error: DiagnosticSeverity.Error,
  warning: DiagnosticSeverity.Warning,
  information: DiagnosticSeverity.Information,
  hint: DiagnosticSeverity.Hint,
};

export const REWRITE_KIND = `${CodeActionKind.RefactorRewrite}.precisionLens`;

/** What a diagnostic carries so a code action request can find its finding again. */
export interface DiagnosticData {
  version: number;
  index: number;
}

export function spanToRange(span: Span): Range {
  return { start: { line: span.startLine, character: span.startColumn }, end: { line: span.endLine, character: span.endColumn } };
}

export function findingToDiagnostic(finding: Finding, index: number, version: number): Diagnostic {
  const data: DiagnosticData = { version, index };
  return {
    range: spanToRange(finding.span),
    severity: SEVERITY[finding.severity],
    code: finding.code,
    codeDescription: { href: ruleDocUrl(finding.code) },
    source: SOURCE,
    message: finding.message,
    data,
  };
}

export function fixToCodeAction(fix: Fix, document: TextDocument, diagnostics: Diagnostic[]): CodeAction {
  const edits: TextEdit[] = fix.edits.map((e) => ({
    range: { start: document.positionAt(e.startOffset), end: document.positionAt(e.endOffset) },
    newText: e.newText,
  }));
  // File- and class-wide rewrites are refactorings: they show in the lightbulb menu next to the quick fixes.
  const kind = fix.kind === 'quickfix' ? CodeActionKind.QuickFix : REWRITE_KIND;
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
