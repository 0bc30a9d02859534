/**
 * Checks on what the editor sends that the server must not take on trust: text changes whose positions it cannot
 * apply exactly, and custom notifications with malformed parameters. Pure (no connection), so tests call it directly.
 */
import type { Position, TextDocumentContentChangeEvent } from 'vscode-languageserver/node';
import type { EnvironmentParams } from '../../common/protocol';
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
