/** Span and text helpers over web-tree-sitter nodes (positions are UTF-16 code units, as LSP wants). */
import type { SyntaxNode } from './node';
import type { Span } from './ir';
import { lineAt, lineStartsOf, pointAt } from '../engine/lines';

/**
 * Line starts of the text being analysed, set once per analysis (`useText`): positions are computed from offsets in
 * JS, which is far cheaper than asking WASM for `endPosition` (each query marshals the node).
 */
let lineText: string | undefined;
let lineStarts: number[] = [0];

export function useText(src: string, starts?: readonly number[]): void {
  if (lineText === src) return;
  lineText = src;
  // the caller's table for this text (the language server keeps one per document, updated around each edit)
  lineStarts = starts ? starts as number[] : lineStartsOf(src);
}

/** Row and column of an offset of the current text (what tree-sitter reports for it). */
export function positionAt(offset: number): { row: number; column: number } {
  return pointAt(lineStarts, offset);
}

/** The span between two offsets of the current text. */
export function spanAt(start: number, end: number): Span {
  const sl = lineAt(lineStarts, start);
  const el = lineAt(lineStarts, end);
  return { startLine: sl, startColumn: start - lineStarts[sl], endLine: el, endColumn: end - lineStarts[el], startOffset: start, endOffset: end };
}

/** The span of a node (startIndex and startPosition are plain fields; the end comes from the line table). */
export function spanOf(n: SyntaxNode): Span {
  if (lineText === undefined) {
    const s = n.startPosition;
    const e = n.endPosition;
    return { startLine: s.row, startColumn: s.column, endLine: e.row, endColumn: e.column, startOffset: n.startIndex, endOffset: n.endIndex };
  }
  const s = n.startPosition;
  const end = n.endIndex;
  const el = lineAt(lineStarts, end);
  return { startLine: s.row, startColumn: s.column, endLine: el, endColumn: end - lineStarts[el], startOffset: n.startIndex, endOffset: end };
}

/** Text of a node, sliced from the document (cheaper than crossing into WASM for it). */
export function textOf(src: string, n: SyntaxNode): string {
  return src.slice(n.startIndex, n.endIndex);
}

/** Collapses whitespace runs and truncates, for texts stored in the IR. */
/** `s` as a literal inside a regular expression. */
export function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

export function shortText(s: string, max = 240): string {
  const t = s.replace(/\s+/g, ' ').trim();
  return t.length > max ? `${t.slice(0, max - 1)}…` : t;
}

/** Strips quotes and prefixes from a Python string literal's text; undefined for f-strings with fields. */
export function stringValue(text: string): string | undefined {
  const m = /^([rRbBuUfF]{0,2})('''|"""|'|")([\s\S]*)\2$/.exec(text);
  if (!m) return undefined;
  if (/f/i.test(m[1]) && /\{/.test(m[3])) return undefined;
  return m[3];
}

/**
 * The text with comments and the contents of string literals blanked (same length, newlines kept), so that a name in
 * a comment (`(B, nh, T, hs) x (B, nh, hs, T)`) or a docstring is not read as a use.
 */
export function codeOnly(text: string): string {
  if (!/[#'"]/.test(text)) return text;
  // The code as slices of the text, the comments' and strings' contents as blanks: no per-character array (a class of
  // 20,000 layers is read this way once per analysis).
  const parts: string[] = [];
  let last = 0;
  const blank = (from: number, to: number): void => {
    if (to <= from) return;
    parts.push(text.slice(last, from), text.slice(from, to).replace(/[^\n]/g, ' '));
    last = to;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 35) { // #
      const eol = text.indexOf('\n', i);
      const to = eol < 0 ? text.length : eol;
      blank(i, to);
      i = to - 1;
      continue;
    }
    if (c !== 34 && c !== 39) continue; // " '
    const q = text[i];
    const triple = text.startsWith(q + q + q, i);
    const quote = triple ? q + q + q : q;
    let j = i + quote.length;
    for (; j < text.length; j++) {
      const d = text.charCodeAt(j);
      if (d === 92) { // a backslash and the character it escapes (a line continuation keeps its newline)
        j++;
        continue;
      }
      if (text.startsWith(quote, j)) break;
      if (!triple && d === 10) break;
    }
    blank(i + quote.length, Math.min(j, text.length));
    i = j + quote.length - 1;
  }
  parts.push(text.slice(last));
  return parts.join('');
}
