/**
 * Incremental parsing support: turns a text change (UTF-16 offsets, what LSP's incremental sync and
 * TextDocument give) into a tree-sitter edit, so a one-character edit re-parses only what changed.
 */
import { lineStartsOf, pointAt, type Point } from '../engine/lines';
import { Edit, type Parser, type Tree } from '../engine/parser';

export { lineStartsOf, pointAt };

/** Position after inserting `inserted` at `start`. */
function endPointOf(start: Point, inserted: string): Point {
  const lastNl = inserted.lastIndexOf('\n');
  if (lastNl === -1) return { row: start.row, column: start.column + inserted.length };
  let rows = 0;
  for (let i = inserted.indexOf('\n'); i !== -1; i = inserted.indexOf('\n', i + 1)) rows++;
  return { row: start.row + rows, column: inserted.length - lastNl - 1 };
}

export interface TextChange {
  /** UTF-16 offsets into the old text. */
  startOffset: number;
  endOffset: number;
  text: string;
}

/**
 * Applies one change to `oldText`, records it on `tree` (tree.edit) and returns the new text.
 * web-tree-sitter measures indices and columns in UTF-16 code units for JS strings, like LSP.
 */
export function editTree(tree: Tree, oldText: string, oldLineStarts: readonly number[], change: TextChange): string {
  const startPosition = pointAt(oldLineStarts, change.startOffset);
  const oldEndPosition = pointAt(oldLineStarts, change.endOffset);
  tree.edit(new Edit({
    startIndex: change.startOffset,
    oldEndIndex: change.endOffset,
    newEndIndex: change.startOffset + change.text.length,
    startPosition,
    oldEndPosition,
    newEndPosition: endPointOf(startPosition, change.text),
  }));
  return oldText.slice(0, change.startOffset) + change.text + oldText.slice(change.endOffset);
}

/** Re-parses after edits; the old tree is deleted (WASM memory is only reclaimed by delete()). */
export function reparse(parser: Parser, text: string, editedTree: Tree): Tree | null {
  const next = parser.parse(text, editedTree);
  editedTree.delete();
  return next;
}
