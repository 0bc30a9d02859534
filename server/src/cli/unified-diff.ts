/**
 * The unified diff `--diff` prints. jsdiff's Myers diff costs O(N * D): a fix that rewrites 10,000 layer lines of
 * one class took minutes. Here the lines the two texts share at both ends are set aside first; a changed middle of
 * up to `myersLines` lines goes to jsdiff as before (same output as always), a larger one is aligned on the lines
 * that occur once in each side (in order: a longest increasing subsequence, O(n log n)), and only the stretches
 * between those anchors that are small go through jsdiff; a large stretch with no anchor is a removal then an
 * addition. The hunks (3 lines of context, `\ No newline at end of file`) are then formatted by jsdiff.
 */
import type { StructuredPatch } from 'diff';

type Jsdiff = typeof import('diff');
const jsdiff = (): Jsdiff => require('diff') as Jsdiff;

/** One run of the alignment: lines kept (`=`), removed (`-`) or added (`+`), each with its line ending. */
interface Run { op: '=' | '-' | '+'; lines: string[] }

/** Lines with their endings, as jsdiff's diffLines splits them (a last line without a newline stays one line). */
function linesOf(text: string): string[] {
  const out: string[] = [];
  let at = 0;
  while (at < text.length) {
    const nl = text.indexOf('\n', at);
    const end = nl === -1 ? text.length : nl + 1;
    out.push(text.slice(at, end));
    at = end;
  }
  return out;
}

/** Indices (into `a`) of the longest increasing subsequence of `a` (patience sorting). */
function longestIncreasing(a: readonly number[]): number[] {
  const tails: number[] = [];
  const prev = new Array<number>(a.length).fill(-1);
  for (let i = 0; i < a.length; i++) {
    let lo = 0;
    let hi = tails.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (a[tails[mid]] < a[i]) lo = mid + 1; else hi = mid;
    }
    if (lo > 0) prev[i] = tails[lo - 1];
    tails[lo] = i;
  }
  const out: number[] = [];
  for (let i = tails.length ? tails[tails.length - 1] : -1; i !== -1; i = prev[i]) out.push(i);
  return out.reverse();
}

/** Pairs (i in `a`, j in `b`) of lines that occur exactly once in each, in an order both sides agree on. */
function anchorsOf(a: readonly string[], b: readonly string[]): Array<[number, number]> {
  const count = new Map<string, { a: number; b: number; ai: number; bj: number }>();
  a.forEach((line, i) => { const c = count.get(line); if (c) c.a++; else count.set(line, { a: 1, b: 0, ai: i, bj: -1 }); });
  b.forEach((line, j) => { const c = count.get(line); if (c) { c.b++; c.bj = j; } });
  const pairs: Array<[number, number]> = [];
  for (const c of count.values()) if (c.a === 1 && c.b === 1) pairs.push([c.ai, c.bj]);
  pairs.sort((x, y) => x[0] - y[0]);
  return longestIncreasing(pairs.map((p) => p[1])).map((k) => pairs[k]);
}

function push(runs: Run[], op: Run['op'], lines: readonly string[]): void {
  if (!lines.length) return;
  const last = runs[runs.length - 1];
  if (last?.op === op) for (const l of lines) last.lines.push(l);
  else runs.push({ op, lines: [...lines] });
}

/**
 * The alignment of two stretches of lines, bounded: jsdiff below `myersLines`, else anchors (looked for again inside
 * the stretches between anchors, at most `depth` more times), else remove + add.
 */
function align(a: readonly string[], b: readonly string[], myersLines: number, runs: Run[], depth = 2): void {
  if (a.length + b.length <= myersLines) {
    for (const c of jsdiff().diffArrays(a as string[], b as string[])) push(runs, c.added ? '+' : c.removed ? '-' : '=', c.value);
    return;
  }
  const anchors = depth > 0 ? anchorsOf(a, b) : [];
  if (!anchors.length) {
    push(runs, '-', a);
    push(runs, '+', b);
    return;
  }
  let i = 0;
  let j = 0;
  for (const [ai, bj] of anchors) {
    alignTrimmed(a.slice(i, ai), b.slice(j, bj), myersLines, runs, depth - 1);
    push(runs, '=', [a[ai]]);
    i = ai + 1;
    j = bj + 1;
  }
  alignTrimmed(a.slice(i), b.slice(j), myersLines, runs, depth - 1);
}

/** align() after setting aside the lines both stretches start and end with. */
function alignTrimmed(a: readonly string[], b: readonly string[], myersLines: number, runs: Run[], depth = 2): void {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  push(runs, '=', a.slice(0, head));
  const midA = a.slice(head, a.length - tail);
  const midB = b.slice(head, b.length - tail);
  // Nothing left on one side: a removal or an addition, no search.
  if (midA.length && midB.length) align(midA, midB, myersLines, runs, depth);
  else { push(runs, '-', midA); push(runs, '+', midB); }
  push(runs, '=', a.slice(a.length - tail));
}

/** Hunks with `context` lines around each change, joined where two changes are at most 2 * context lines apart. */
function hunksOf(runs: readonly Run[], context: number): StructuredPatch['hunks'] {
  const hunks: StructuredPatch['hunks'] = [];
  let hunk: StructuredPatch['hunks'][number] | undefined;
  let oldLine = 1;
  let newLine = 1;
  runs.forEach((run, k) => {
    if (run.op !== '=') {
      if (!hunk) {
        const before = k > 0 && context > 0 ? runs[k - 1].lines.slice(-context) : [];
        hunk = { oldStart: oldLine - before.length, newStart: newLine - before.length, oldLines: before.length, newLines: before.length, lines: before.map((l) => ` ${l}`) };
      }
      for (const l of run.lines) hunk.lines.push(`${run.op}${l}`);
      if (run.op === '-') { oldLine += run.lines.length; hunk.oldLines += run.lines.length; } else { newLine += run.lines.length; hunk.newLines += run.lines.length; }
      return;
    }
    const last = k === runs.length - 1;
    if (hunk) {
      const n = !last && run.lines.length <= 2 * context ? run.lines.length : Math.min(run.lines.length, context);
      for (const l of run.lines.slice(0, n)) hunk.lines.push(` ${l}`);
      hunk.oldLines += n;
      hunk.newLines += n;
      if (n < run.lines.length || last) { hunks.push(hunk); hunk = undefined; }
    }
    oldLine += run.lines.length;
    newLine += run.lines.length;
  });
  if (hunk) hunks.push(hunk);
  // Line endings off; a line without one (the file's last) gets git's marker.
  for (const h of hunks) {
    h.lines = h.lines.flatMap((l) => (l.endsWith('\n') ? [l.slice(0, -1)] : [l, '\\ No newline at end of file']));
  }
  return hunks;
}

/**
 * A unified diff from `oldName` to `newName` with `context` lines of context, file headers only (as
 * createTwoFilesPatch with FILE_HEADERS_ONLY): jsdiff's own output when the changed middle has at most `myersLines`
 * lines, the bounded alignment above otherwise.
 */
export function unifiedDiff(oldName: string, newName: string, before: string, after: string, context = 3, myersLines = 4000): string {
  const { createTwoFilesPatch, formatPatch, FILE_HEADERS_ONLY } = jsdiff();
  const a = linesOf(before);
  const b = linesOf(after);
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  if (a.length + b.length - 2 * (head + tail) <= myersLines) {
    return createTwoFilesPatch(oldName, newName, before, after, undefined, undefined, { context, headerOptions: FILE_HEADERS_ONLY });
  }
  const runs: Run[] = [];
  alignTrimmed(a, b, myersLines, runs);
  const patch: StructuredPatch = { oldFileName: oldName, newFileName: newName, oldHeader: undefined, newHeader: undefined, hunks: hunksOf(runs, context) };
  return formatPatch(patch, FILE_HEADERS_ONLY);
}
