/**
 * Line tables over a text: the one place that maps UTF-16 offsets to 0-based rows and columns (analysis spans, the
 * fixes' statement scanner and incremental parsing all use it).
 */

/**
 * Offsets at which each line starts, by Python's (and LSP's) rules: a line ends at \n, \r\n or a lone \r.
 */
export function lineStartsOf(text: string): number[] {
  const starts = [0];
  if (text.indexOf('\r') === -1) {
    for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
    return starts;
  }
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 10 || (c === 13 && text.charCodeAt(i + 1) !== 10)) starts.push(i + 1);
  }
  return starts;
}

/**
 * The line table after replacing [startOffset, endOffset) of a text whose table is `starts` by `inserted`, without
 * reading the rest of the text: the lines before the change are kept, those after it move by the change in length.
 * Only for texts and insertions without \r (a \r\n can be split or joined at the edges: recompute then).
 */
export function lineStartsAfter(starts: readonly number[], startOffset: number, endOffset: number, inserted: string): number[] {
  const first = lineAt(starts, startOffset) + 1; // the first line start after startOffset
  let after = first;
  while (after < starts.length && starts[after] <= endOffset) after++;
  const delta = inserted.length - (endOffset - startOffset);
  const out = starts.slice(0, first);
  for (let i = inserted.indexOf('\n'); i !== -1; i = inserted.indexOf('\n', i + 1)) out.push(startOffset + i + 1);
  for (let i = after; i < starts.length; i++) out.push(starts[i] + delta);
  return out;
}

/**
 * The text the parser and the analysis read, in the CLI and the server alike: a lone \r (old Mac line ending, which
 * Python accepts) becomes \n, so tree-sitter sees the same lines as Python; and the byte-order marks a text starts
 * with, however many, become form feeds (blank at a line's start for Python and tree-sitter). The CLI removes one BOM
 * when it decodes a file (cli/analyze.ts) and an editor one or two (or none), so a double-BOM file reached the parser
 * with one U+FEFF from the CLI and two from some editors, and two made tree-sitter lose the first statement (0 findings
 * instead of 7). Same length, so every offset is the same in both texts.
 */
export function pythonSource(text: string): string {
  let source = text.indexOf('\r') === -1 ? text : text.replace(/\r(?!\n)/g, '\n');
  if (source.charCodeAt(0) === 0xfeff) source = source.replace(/^\ufeff+/, (boms) => '\f'.repeat(boms.length));
  return source;
}

/** The 0-based line containing `offset` (binary search over a line table). */
export function lineAt(lineStarts: readonly number[], offset: number): number {
  let lo = 0;
  let hi = lineStarts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (lineStarts[mid] <= offset) lo = mid; else hi = mid - 1;
  }
  return lo;
}

export interface Point { row: number; column: number }

/** Row and UTF-16 column of an offset. */
export function pointAt(lineStarts: readonly number[], offset: number): Point {
  const row = lineAt(lineStarts, offset);
  return { row, column: offset - lineStarts[row] };
}
