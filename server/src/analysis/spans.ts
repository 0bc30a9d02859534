/** Span and text helpers over web-tree-sitter nodes (positions are UTF-16 code units, as LSP wants). */
import type { SyntaxNode } from '../parser';
import type { Span } from './ir';

/** The span of a node. */
export function spanOf(n: SyntaxNode): Span {
  const s = n.startPosition;
  const e = n.endPosition;
  return {
    startLine: s.row,
    startColumn: s.column,
    endLine: e.row,
    endColumn: e.column,
    startOffset: n.startIndex,
    endOffset: n.endIndex,
  };
}

/** Text of a node, sliced from the document (cheaper than crossing into WASM for it). */
export function textOf(src: string, n: SyntaxNode): string {
  return src.slice(n.startIndex, n.endIndex);
}

/** Collapses whitespace runs and truncates, for texts stored in the IR. */
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
