/**
 * Text edits, the one output format of every fix: the server turns them into an LSP WorkspaceEdit, the CLI applies
 * them to the file with `applyEdits`.
 */
import type { CallArg, CallArgs } from './source';

/** Replace text[startOffset, endOffset) by newText. Offsets are UTF-16 indices into the document text. */
export interface TextEdit {
  startOffset: number;
  endOffset: number;
  newText: string;
}

export function replace(startOffset: number, endOffset: number, newText: string): TextEdit {
  return { startOffset, endOffset, newText };
}

export function insert(offset: number, newText: string): TextEdit {
  return { startOffset: offset, endOffset: offset, newText };
}

/** Thrown by applyEdits when two edits touch the same text. */
export class OverlappingEditsError extends Error {}

/**
 * Sorts, de-duplicates and merges edits: identical edits collapse into one (two findings' fixes may both add the
 * same `import`), insertions at one offset are joined (joinInsertions).
 * Edits that replace overlapping ranges cannot both be right: that is a programming error and throws.
 */
export function normalizeEdits(edits: readonly TextEdit[]): TextEdit[] {
  const out: TextEdit[] = [];
  const sorted = edits
    .map((e, order) => ({ e, order }))
    .sort((a, b) => a.e.startOffset - b.e.startOffset || a.e.endOffset - b.e.endOffset || a.order - b.order)
    .map((x) => x.e);
  for (const e of sorted) {
    const prev = out[out.length - 1];
    if (prev && prev.startOffset === e.startOffset && prev.endOffset === e.endOffset) {
      if (prev.newText === e.newText || (e.startOffset === e.endOffset && prev.newText.includes(e.newText))) continue;
      if (e.startOffset === e.endOffset) {
        out[out.length - 1] = { ...prev, newText: joinInsertions(prev.newText, e.newText) };
        continue;
      }
    }
    if (prev && e.startOffset < prev.endOffset) {
      throw new OverlappingEditsError(`edits overlap at offsets ${prev.startOffset}-${prev.endOffset} and ${e.startOffset}-${e.endOffset}`);
    }
    // An insertion at the start of a replaced range belongs before it; order is already right after sorting.
    out.push({ ...e });
  }
  return out;
}

/** Applies edits (any order, non-overlapping) to the text. */
export function applyEdits(text: string, edits: readonly TextEdit[]): string {
  const sorted = normalizeEdits(edits);
  let out = '';
  let pos = 0;
  for (const e of sorted) {
    out += text.slice(pos, e.startOffset) + e.newText;
    pos = e.endOffset;
  }
  return out + text.slice(pos);
}

/**
 * A growing set of normalized edits (what normalizeEdits would make of everything added so far) that takes a whole
 * list of edits or none: each edit finds its place by binary search, so combining thousands of fixes (a conversion per
 * layer, each carrying the file's one fallback insertion) stays O(n log n) instead of re-normalizing per fix.
 */
export class EditSet {
  private readonly list: TextEdit[] = [];

  get edits(): TextEdit[] {
    return this.list.map((e) => ({ ...e }));
  }

  /** Adds `edits` when they can all go with those already taken (normalizeEdits of the union would not throw). */
  tryAdd(edits: readonly TextEdit[]): boolean {
    let own: TextEdit[];
    try {
      own = normalizeEdits(edits);
    } catch (err) {
      if (err instanceof OverlappingEditsError) return false;
      throw err;
    }
    if (own.some((e) => this.conflicts(e))) return false;
    for (const e of edits) this.place(e);
    return true;
  }

  /** The index after every taken edit that sorts at or before `e` (by start, then end). */
  private slot(e: TextEdit): number {
    let lo = 0;
    let hi = this.list.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const m = this.list[mid];
      if (m.startOffset < e.startOffset || (m.startOffset === e.startOffset && m.endOffset <= e.endOffset)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Whether `e` would make normalizeEdits throw against the taken edits (its neighbours in sorted order). */
  private conflicts(e: TextEdit): boolean {
    const at = this.slot(e);
    const prev = this.list[at - 1];
    const next = this.list[at];
    if (next && next.startOffset < e.endOffset) return true;
    if (!prev) return false;
    if (prev.startOffset === e.startOffset && prev.endOffset === e.endOffset && (prev.newText === e.newText || e.startOffset === e.endOffset)) return false;
    return e.startOffset < prev.endOffset;
  }

  /** Inserts `e` as normalizeEdits would: an identical edit collapses, insertions at one offset concatenate. */
  private place(e: TextEdit): void {
    const at = this.slot(e);
    const prev = this.list[at - 1];
    if (prev && prev.startOffset === e.startOffset && prev.endOffset === e.endOffset) {
      if (prev.newText === e.newText || (e.startOffset === e.endOffset && prev.newText.includes(e.newText))) return;
      if (e.startOffset === e.endOffset) {
        this.list[at - 1] = { ...prev, newText: joinInsertions(prev.newText, e.newText) };
        return;
      }
    }
    this.list.splice(at, 0, { ...e });
  }
}

const FROM_IMPORT = /^from[ \t]+([\w.]+)[ \t]+import[ \t]+([\w \t,]+?)[ \t]*$/;

/**
 * Two insertions at one offset as one: concatenated in the order given unless one already contains the other, and two
 * fixes that each import from the same module (`from m import a` and `from m import a, b`) give one line with the
 * names once, sorted, instead of two lines naming `a` twice.
 */
function joinInsertions(first: string, second: string): string {
  return mergeFromImports(second.includes(first) ? second : first + second);
}

function mergeFromImports(text: string): string {
  const lines = text.split('\n');
  const first = new Map<string, { index: number; names: Set<string> }>();
  const out: string[] = [];
  for (const line of lines) {
    const m = FROM_IMPORT.exec(line);
    if (!m) { out.push(line); continue; }
    const names = m[2].split(',').map((n) => n.trim()).filter(Boolean);
    const seen = first.get(m[1]);
    if (!seen) {
      first.set(m[1], { index: out.length, names: new Set(names) });
      out.push(line);
      continue;
    }
    for (const n of names) seen.names.add(n);
    out[seen.index] = `from ${m[1]} import ${[...seen.names].sort().join(', ')}`;
  }
  return out.join('\n');
}

/** Whether two edit lists can be applied together. */
export function editsConflict(a: readonly TextEdit[], b: readonly TextEdit[]): boolean {
  try {
    normalizeEdits([...a, ...b]);
    return false;
  } catch (err) {
    if (err instanceof OverlappingEditsError) return true;
    throw err;
  }
}

/** Renames a keyword argument, leaving its value and any comments untouched. */
export function renameArg(arg: CallArg, newName: string): TextEdit {
  return replace(arg.nameStart!, arg.nameEnd!, newName);
}

/**
 * Removes arguments together with exactly the commas that separated them, so that `f(a, b=1)`, `f(b=1, a)`, runs
 * of adjacent arguments and one-argument-per-line layouts (with a trailing comma) all stay well formed and keep
 * their layout. Returns one edit per run of adjacent removed arguments.
 */
export function removeArgs(text: string, call: CallArgs, remove: readonly CallArg[]): TextEdit[] {
  const edits: TextEdit[] = [];
  const gone = new Set(remove);
  const lineStartOf = (offset: number) => text.lastIndexOf('\n', offset - 1) + 1;
  const ownLine = (offset: number) => /^[ \t]*$/.test(text.slice(lineStartOf(offset), offset));
  for (let i = 0; i < call.args.length; i++) {
    if (!gone.has(call.args[i])) continue;
    let j = i;
    while (j + 1 < call.args.length && gone.has(call.args[j + 1])) j++;
    const first = call.args[i];
    const last = call.args[j];
    const next = call.args[j + 1];
    const prev = call.args[i - 1];
    if (next) {
      // Up to the next kept argument; whole lines when both start their own line.
      edits.push(ownLine(first.start) && ownLine(next.start) ? replace(lineStartOf(first.start), lineStartOf(next.start), '') : replace(first.start, next.start, ''));
    } else if (call.trailingComma && ownLine(first.start) && ownLine(call.close)) {
      edits.push(replace(lineStartOf(first.start), lineStartOf(call.close), ''));
    } else if (prev) {
      // The comma to drop is the one after the previous argument; a trailing comma (if any) stays valid.
      edits.push(replace(prev.end, last.end, ''));
    } else {
      const m = /^\s*,/.exec(text.slice(last.end, call.close));
      edits.push(replace(first.start, last.end + (m ? m[0].length : 0), ''));
    }
    i = j;
  }
  return edits;
}

/** Inserts keyword arguments at the end of an argument list, after the last argument (before a trailing comma). */
export function appendArgs(text: string, call: CallArgs, newArgs: string[]): TextEdit | undefined {
  if (!newArgs.length) return undefined;
  const joined = newArgs.join(', ');
  const last = call.args[call.args.length - 1];
  if (!last) return insert(call.open + 1, joined);
  return insert(last.end, `, ${joined}`);
}
