/**
 * Trees kept from one parse of a file to the next in `check --fix`: a round's edits are recorded on the old tree
 * (tree.edit, one per edit) and the fixed text is parsed from it, so tree-sitter re-reads only the edited stretches
 * (the language server does the same per keystroke, session.ts). The analysis still runs on the whole new tree.
 *
 * A tree is kept only while the kept files' texts stay under a budget (WASM memory only grows). The parser reads
 * pythonSource(text), where a lone \r is a \n: an edit right after a \r can change what that \r is, so the span
 * recorded on the tree starts one character earlier there (spansOf).
 */
import { Edit, type PythonParser, type Tree } from '../engine/parser';
import { lineStartsOf, pointAt, pythonSource, type Point } from '../engine/lines';
import { normalizeEdits, type TextEdit } from '../fixes/edits';
import type { AnalysedFile } from './analyze';

/** Total length of the texts whose trees are kept at one time: about 10-15 bytes of WASM per character. */
const KEPT_TEXT_BUDGET = 4 * 1048576;

export interface TreeReuse {
  /** The file's kept tree, edited to its current text, or undefined (then the parse starts from scratch). */
  takeBase(parser: PythonParser, file: AnalysedFile): Tree | undefined;
  /** Keeps the tree of the file's current text; false: the caller deletes it. */
  keep(parser: PythonParser, file: AnalysedFile, tree: Tree | null | undefined): boolean;
}

interface Kept { tree: Tree; text: string; edited?: { edits: readonly TextEdit[]; text: string } }

function endPointOf(start: Point, inserted: string): Point {
  const lastNl = inserted.lastIndexOf('\n');
  if (lastNl === -1) return { row: start.row, column: start.column + inserted.length };
  let rows = 0;
  for (let i = inserted.indexOf('\n'); i !== -1; i = inserted.indexOf('\n', i + 1)) rows++;
  return { row: start.row + rows, column: inserted.length - lastNl - 1 };
}

/** One span of the tree to re-read: [start, oldEnd) of the old text became [newStart, newEnd) of the new one. */
interface Span { start: number; oldEnd: number; newStart: number; newEnd: number }

/**
 * The spans the parser must re-read, in order: each edit's range, widened by one character when a \r stands right
 * before it (it ends a line or not by what follows it, which the edit may change), and merged with its neighbour when
 * they touch. Every character outside the spans then reads the same in both texts as the parser sees them.
 */
function spansOf(before: string, edits: readonly TextEdit[]): Span[] {
  const spans: Span[] = [];
  let shift = 0;
  for (const e of edits) {
    const start = e.startOffset > 0 && before.charCodeAt(e.startOffset - 1) === 13 ? e.startOffset - 1 : e.startOffset;
    const newEnd = e.startOffset + shift + e.newText.length;
    const last = spans[spans.length - 1];
    if (last && start <= last.oldEnd) {
      last.oldEnd = e.endOffset;
      last.newEnd = newEnd;
    } else {
      spans.push({ start, oldEnd: e.endOffset, newStart: start + shift, newEnd });
    }
    shift += e.newText.length - (e.endOffset - e.startOffset);
  }
  return spans;
}

/**
 * Records the edits that made `after` from `before` on `tree` (parsed from pythonSource(before)), last span first: a
 * span never moves the text before it, so every span's old positions stay those of `before`. Rows count \n only, as
 * tree-sitter does, in the text it reads (where a lone \r is a \n).
 */
function recordEdits(tree: Tree, before: string, after: string, edits: readonly TextEdit[]): void {
  const starts = lineStartsOf(before);
  const source = pythonSource(after);
  const spans = spansOf(before, edits);
  for (let i = spans.length - 1; i >= 0; i--) {
    const s = spans[i];
    const startPosition = pointAt(starts, s.start);
    tree.edit(new Edit({
      startIndex: s.start,
      oldEndIndex: s.oldEnd,
      newEndIndex: s.start + (s.newEnd - s.newStart),
      startPosition,
      oldEndPosition: pointAt(starts, s.oldEnd),
      newEndPosition: endPointOf(startPosition, source.slice(s.newStart, s.newEnd)),
    }));
  }
}

export class KeptTrees implements TreeReuse {
  private readonly kept = new Map<AnalysedFile, Kept>();
  private size = 0;

  constructor(private readonly budget = KEPT_TEXT_BUDGET) {}

  takeBase(parser: PythonParser, file: AnalysedFile): Tree | undefined {
    const kept = this.kept.get(file);
    if (!kept) return undefined;
    this.drop(file);
    const { tree, text, edited } = kept;
    if (!parser.owns(tree) || !edited || edited.text !== file.text) {
      parser.release(tree);
      return undefined;
    }
    recordEdits(tree, text, file.text, normalizeEdits(edited.edits));
    return tree;
  }

  keep(parser: PythonParser, file: AnalysedFile, tree: Tree | null | undefined): boolean {
    if (!tree || !parser.owns(tree) || !file.ir || file.skipped || file.error) return false;
    if (this.size + file.text.length > this.budget) return false;
    this.kept.set(file, { tree, text: file.text });
    this.size += file.text.length;
    return true;
  }

  /** The file's text became `after` by `edits` (normalized, into its kept text): its next parse starts from the tree. */
  edited(file: AnalysedFile, edits: readonly TextEdit[], after: string): void {
    const kept = this.kept.get(file);
    if (kept) kept.edited = { edits, text: after };
  }

  /** The file needs no further parse: its tree goes. */
  release(parser: PythonParser, file: AnalysedFile): void {
    const kept = this.kept.get(file);
    if (!kept) return;
    this.drop(file);
    parser.release(kept.tree);
  }

  /** Every kept tree goes (the end of a run, or of one fuzzed input). */
  releaseAll(parser: PythonParser): void {
    for (const file of [...this.kept.keys()]) this.release(parser, file);
  }

  private drop(file: AnalysedFile): void {
    const kept = this.kept.get(file);
    if (!kept) return;
    this.kept.delete(file);
    this.size -= kept.text.length;
  }
}
