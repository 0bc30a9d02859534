/**
 * Checks on what the editor sends that the server must not take on trust: text changes whose positions it cannot
 * apply exactly, and custom notifications with malformed parameters. Pure (no connection), so tests call it directly.
 */
import type { Position, TextDocumentContentChangeEvent } from 'vscode-languageserver/node';
import type { EnvironmentParams } from '../../../common/protocol';
import type { DocumentState, SessionChange } from './session';

/** Why a position cannot be mapped exactly onto the text, or its offset. */
function offsetOf(state: DocumentState, p: Position): number | string {
  if (!Number.isInteger(p?.line) || !Number.isInteger(p?.character) || p.line < 0 || p.character < 0) {
    return `invalid position ${JSON.stringify(p)}`;
  }
  // LSP lets a position point past the end of a line or of the document: it means the end (of the line).
  if (p.line >= state.lineStarts.length) return state.text.length;
  const lineStart = state.lineStarts[p.line];
  let lineEnd = p.line + 1 < state.lineStarts.length ? state.lineStarts[p.line + 1] : state.text.length;
  if (lineEnd > lineStart && state.text[lineEnd - 1] === '\n') lineEnd--;
  if (lineEnd > lineStart && state.text[lineEnd - 1] === '\r') lineEnd--;
  return Math.min(lineStart + p.character, lineEnd);
}

/** The offset of an LSP position in the session's text, or undefined when the position is invalid. */
export function offsetAt(state: Pick<DocumentState, 'text' | 'lineStarts'>, p: Position): number | undefined {
  const at = offsetOf(state as DocumentState, p);
  return typeof at === 'number' ? at : undefined;
}

/**
 * An LSP content change as offsets into the session's text (which must reflect the previous changes of the same
 * notification). A range the server cannot apply exactly (reversed, negative, not numbers) is marked invalid: the
 * session then stops trusting its copy of the text instead of drifting from the editor's.
 */
export function changeOffsets(state: DocumentState, change: TextDocumentContentChangeEvent): SessionChange {
  const text = typeof change?.text === 'string' ? change.text : undefined;
  if (text === undefined) return { startOffset: 0, endOffset: 0, text: '', invalid: 'the editor sent a change without text' };
  if (!('range' in change) || change.range === undefined) return { text };
  const start = offsetOf(state, change.range.start);
  const end = offsetOf(state, change.range.end);
  const invalid = typeof start === 'string' ? start : typeof end === 'string' ? end
    : end < start ? `reversed range ${JSON.stringify(change.range)}` : undefined;
  if (invalid || typeof start !== 'number' || typeof end !== 'number') {
    return { startOffset: 0, endOffset: 0, text, invalid: `the editor sent a change the server cannot apply exactly (${invalid}): not analysed until the document is reopened` };
  }
  return { startOffset: start, endOffset: end, text };
}

/** Whether `params` is a valid precisionLens/environment payload (an object whose fields, if present, are strings). */
export function isEnvironment(params: unknown): params is EnvironmentParams {
  if (typeof params !== 'object' || params === null || Array.isArray(params)) return false;
  const p = params as Record<string, unknown>;
  return (p.teVersion === undefined || typeof p.teVersion === 'string') && (p.pythonPath === undefined || typeof p.pythonPath === 'string');
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): boolean => Number.isInteger(v) && (v as number) >= 0;

/** Why `p` is not an LSP Position (non-negative integers), or undefined. */
function invalidPosition(p: unknown, name: string): string | undefined {
  if (!isObject(p) || !isCount(p.line) || !isCount(p.character)) return `${name} must be {line, character} with non-negative integers, got ${brief(p)}`;
  return undefined;
}

/** Why `r` is not an LSP Range whose start is not after its end, or undefined. */
function invalidRange(r: unknown, name: string): string | undefined {
  if (!isObject(r)) return `${name} must be {start, end}, got ${brief(r)}`;
  const bad = invalidPosition(r.start, `${name}.start`) ?? invalidPosition(r.end, `${name}.end`);
  if (bad) return bad;
  const s = r.start as Position;
  const e = r.end as Position;
  if (e.line < s.line || (e.line === s.line && e.character < s.character)) return `${name} is reversed: ${brief(r)}`;
  return undefined;
}

/** A value shown in a message, cut short. */
function brief(v: unknown): string {
  const s = v === undefined ? 'nothing' : JSON.stringify(v) ?? String(v);
  return s.length > 80 ? `${s.slice(0, 79)}…` : s;
}

/**
 * Why the parameters of a request or notification about a document are malformed (the server answers InvalidParams
 * with it, or logs it for a notification), or undefined. `textDocument.uri` always; the rest as `needs` says.
 */
export function invalidDocumentParams(params: unknown, needs: { position?: boolean; range?: boolean; context?: boolean; text?: boolean; version?: boolean } = {}): string | undefined {
  if (!isObject(params)) return `the parameters must be an object, got ${brief(params)}`;
  const doc = params.textDocument;
  if (!isObject(doc) || typeof doc.uri !== 'string') return `textDocument must be {uri: string}, got ${brief(doc)}`;
  if (needs.text && typeof doc.text !== 'string') return 'textDocument.text must be a string';
  if (needs.version && !Number.isInteger(doc.version)) return `textDocument.version must be an integer, got ${brief(doc.version)}`;
  if (needs.position) { const bad = invalidPosition(params.position, 'position'); if (bad) return bad; }
  if (needs.range) { const bad = invalidRange(params.range, 'range'); if (bad) return bad; }
  if (needs.context) {
    const c = params.context;
    if (!isObject(c) || !Array.isArray(c.diagnostics)) return `context must be {diagnostics: [...]}, got ${brief(c)}`;
    if (c.only !== undefined && (!Array.isArray(c.only) || !c.only.every((k) => typeof k === 'string'))) return `context.only must be a list of strings, got ${brief(c.only)}`;
    const d = c.diagnostics.find((x) => !isObject(x) || invalidRange(x.range, 'range'));
    if (d !== undefined) return `every diagnostic in context.diagnostics needs a range, got ${brief(d)}`;
  }
  return undefined;
}

/**
 * Why an initialize request's parameters are malformed, or undefined: the object with a `capabilities` object that
 * the server and vscode-languageserver read before anything else (the library's own handler read `params.processId`
 * of a null and answered -32603 "Cannot read properties of null").
 */
export function invalidInitializeParams(params: unknown): string | undefined {
  if (!isObject(params)) return `the parameters must be an object, got ${brief(params)}`;
  if (!isObject(params.capabilities)) return `capabilities must be an object, got ${brief(params.capabilities)}`;
  for (const key of ['workspace', 'textDocument'] as const) {
    const v = params.capabilities[key];
    if (v !== undefined && v !== null && !isObject(v)) return `capabilities.${key} must be an object, got ${brief(v)}`;
  }
  const folders = params.workspaceFolders;
  if (folders !== undefined && folders !== null && (!Array.isArray(folders) || !folders.every((f) => isObject(f) && typeof f.uri === 'string'))) {
    return `workspaceFolders must be a list of {uri, name} or null, got ${brief(folders)}`;
  }
  return undefined;
}

/**
 * Why a didChange's contentChanges cannot all be applied, or undefined: checked before any is applied, so a
 * notification is applied whole or not at all (the first changes applied and then a throw left text and version apart).
 */
export function invalidChanges(changes: unknown): string | undefined {
  if (!Array.isArray(changes)) return `contentChanges must be a list, got ${brief(changes)}`;
  for (let i = 0; i < changes.length; i++) {
    const c: unknown = changes[i];
    if (!isObject(c) || typeof c.text !== 'string') return `change ${i + 1} of ${changes.length} has no text: ${brief(c)}`;
    if ('range' in c && c.range !== undefined) {
      const bad = invalidRange(c.range, `change ${i + 1} of ${changes.length}: range`);
      if (bad) return bad;
    }
  }
  return undefined;
}
