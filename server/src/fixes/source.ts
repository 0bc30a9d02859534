/**
 * A small, purely textual view of Python source that the fixes need and the IR does not carry: logical lines and their
 * block nesting (to re-indent a training step, move a statement out of a `with`), and the top-level arguments of a
 * call (to rename or drop one keyword without touching comments or layout). Fixes stay synchronous functions of the
 * text this way, and never re-parse with tree-sitter on the code-action path.
 */
import type { Layer } from '../analysis/ir';
import { lineAt, lineStartsOf } from '../engine/lines';

/** One logical line: a simple statement or a block header, possibly spanning physical lines. */
export interface Statement {
  /** Offset of the first character of the physical line it starts on. */
  lineStart: number;
  /** Offset of its first non-blank character. */
  start: number;
  /** Offset just after its last significant character (before a trailing comment and the newline). */
  end: number;
  /** Offset after the newline that ends its last physical line (or text.length). */
  lineEnd: number;
  /** 0-based physical line numbers. */
  firstLine: number;
  lastLine: number;
  indent: string;
  /** Ends with a top-level ':' that opens an indented block. */
  isHeader: boolean;
  /** Statements of its block (for headers). */
  children: Statement[];
  parent?: Statement;
}

export interface SourceModel {
  text: string;
  /** Offset of the start of every physical line. */
  lineStarts: number[];
  /** Physical lines that begin inside a string literal: their leading whitespace is content, not indentation. */
  linesInString: Set<number>;
  /** Top-level statements. */
  statements: Statement[];
}

/** Offset after the string literal whose opening quote is at `i`. */
export function skipString(text: string, i: number): number {
  // Character codes, no substrings: docstrings are long and this runs over every file `check` gives fix titles for.
  const q = text.charCodeAt(i);
  const n = text.length;
  const triple = text.charCodeAt(i + 1) === q && text.charCodeAt(i + 2) === q;
  let j = i + (triple ? 3 : 1);
  while (j < n) {
    const c = text.charCodeAt(j);
    if (c === 92 /* \\ */) { j += 2; continue; }
    if (triple) {
      if (c === q && text.charCodeAt(j + 1) === q && text.charCodeAt(j + 2) === q) return j + 3;
    } else if (c === q) {
      return j + 1;
    } else if (c === 10 /* \n */) {
      return j; // unterminated: stop at the line end like the tokenizer's error recovery
    }
    j++;
  }
  return n;
}

/** The 0-based physical line containing `offset`. */
export const lineOf = lineAt;

/** Scans the whole text once into logical lines and nests them by indentation. */
export function scanSource(text: string): SourceModel {
  const lineStarts = lineStartsOf(text);
  const linesInString = new Set<number>();
  const flat: Statement[] = [];

  let i = 0;
  const n = text.length;
  while (i < n) {
    // At the start of a physical line outside any statement.
    const lineStart = i;
    let c0 = text.charCodeAt(i);
    while (i < n && (c0 === 32 || c0 === 9 || c0 === 12)) c0 = text.charCodeAt(++i);
    if (i >= n) break;
    if (c0 === 10 || c0 === 13 || c0 === 35 /* # */) {
      while (i < n && text.charCodeAt(i) !== 10) i++;
      i++;
      continue;
    }
    const start = i;
    let depth = 0;
    let lastSig = i;
    let lastSigChar = 0;
    let j = i;
    for (;;) {
      if (j >= n) break;
      const c = text.charCodeAt(j);
      if (c === 34 || c === 39) {
        const end = skipString(text, j);
        const a = lineOf(lineStarts, j);
        const b = lineOf(lineStarts, Math.max(j, end - 1));
        for (let l = a + 1; l <= b; l++) linesInString.add(l);
        j = end;
        lastSig = j;
        lastSigChar = c;
        continue;
      }
      if (c === 35) {
        while (j < n && text.charCodeAt(j) !== 10) j++;
        continue;
      }
      if (c === 92 && (text.charCodeAt(j + 1) === 10 || (text.charCodeAt(j + 1) === 13 && text.charCodeAt(j + 2) === 10))) {
        j += text.charCodeAt(j + 1) === 13 ? 3 : 2;
        continue;
      }
      if (c === 10) {
        if (depth > 0) { j++; continue; }
        break;
      }
      if (c === 40 || c === 91 || c === 123) depth++;
      else if (c === 41 || c === 93 || c === 125) depth = Math.max(0, depth - 1);
      if (c !== 32 && c !== 9 && c !== 13) { lastSig = j + 1; lastSigChar = c; }
      j++;
    }
    const lineEnd = j < n ? j + 1 : n;
    flat.push({
      lineStart, start, end: lastSig, lineEnd,
      firstLine: lineOf(lineStarts, start), lastLine: lineOf(lineStarts, Math.max(start, lastSig - 1)),
      indent: text.slice(lineStart, start), isHeader: lastSigChar === 58 /* : */ && depth === 0, children: [],
    });
    i = lineEnd;
  }

  // Nest: a statement belongs to the nearest preceding header with a shorter indentation.
  const statements: Statement[] = [];
  const stack: Statement[] = [];
  for (const s of flat) {
    while (stack.length && stack[stack.length - 1].indent.length >= s.indent.length) stack.pop();
    const parent = stack[stack.length - 1];
    if (parent) { s.parent = parent; parent.children.push(s); } else statements.push(s);
    if (s.isHeader) stack.push(s);
  }
  return { text, lineStarts, linesInString, statements };
}

/** Offset after a statement and its whole block. */
export function blockEnd(s: Statement): number {
  let last = s;
  while (last.children.length) last = last.children[last.children.length - 1];
  return last.lineEnd;
}

/** Every statement, depth first in source order. */
export function allStatements(model: SourceModel): Statement[] {
  const out: Statement[] = [];
  const walk = (list: Statement[]) => { for (const s of list) { out.push(s); walk(s.children); } };
  walk(model.statements);
  return out;
}

/** The innermost statement whose own logical line contains `offset`. */
export function statementAt(model: SourceModel, offset: number): Statement | undefined {
  let list = model.statements;
  let found: Statement | undefined;
  for (;;) {
    const s = firstEndingAfter(list, offset);
    if (!s || s.lineStart > offset) return found;
    if (offset < s.lineEnd || !s.children.length) return s;
    found = s;
    list = s.children;
  }
}

/**
 * The first of `list` (siblings, in source order: their block ends never decrease) whose block ends after `offset`:
 * a binary search, since the fixes of a 10,000-layer class look up one statement per layer.
 */
function firstEndingAfter(list: readonly Statement[], offset: number): Statement | undefined {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (blockEnd(list[mid]) > offset) hi = mid;
    else lo = mid + 1;
  }
  return list[lo];
}

/** The sibling list a statement lives in. */
export function siblingsOf(model: SourceModel, s: Statement): Statement[] {
  return s.parent ? s.parent.children : model.statements;
}

/** The source text of a statement's own logical line (no block). */
export function statementText(model: SourceModel, s: Statement): string {
  return model.text.slice(s.start, s.end);
}

/** One top-level argument of a call. */
export interface CallArg {
  start: number;
  end: number;
  /** Keyword name, if `name=value`. */
  name?: string;
  nameStart?: number;
  nameEnd?: number;
  valueStart: number;
  value: string;
}

export interface CallArgs {
  open: number;
  close: number;
  args: CallArg[];
  /** A comma follows the last argument. */
  trailingComma: boolean;
}

/**
 * `name=` at the start of an argument. Python identifiers are Unicode (XID_Start / XID_Continue): an ASCII-only pattern
 * took `biaℕs=False` for a positional argument and the conversion wrote `bias=biaℕs=False` (the fuzzer's find).
 */
const KEYWORD_ARG = /^([\p{XID_Start}_]\p{XID_Continue}*)\s*=(?!=)\s*/u;

/**
 * Splits the argument list that opens with the '(' at `open`; undefined when it does not close within `limit`
 * characters (default: the rest of the text).
 */
export function splitCallArgs(text: string, open: number, limit = Infinity): CallArgs | undefined {
  if (text[open] !== '(') return undefined;
  const args: CallArg[] = [];
  let depth = 0;
  let argStart = -1;
  let lastSig = -1;
  let trailingComma = false;
  const finish = () => {
    if (argStart < 0) return;
    const raw = text.slice(argStart, lastSig);
    const kw = KEYWORD_ARG.exec(raw);
    args.push(kw
      ? { start: argStart, end: lastSig, name: kw[1], nameStart: argStart, nameEnd: argStart + kw[1].length, valueStart: argStart + kw[0].length, value: raw.slice(kw[0].length) }
      : { start: argStart, end: lastSig, valueStart: argStart, value: raw });
    argStart = -1;
  };
  const end = Math.min(text.length, open + limit);
  for (let j = open + 1; j < end;) {
    const c = text[j];
    if (c === '"' || c === "'") {
      if (argStart < 0) argStart = j;
      j = skipString(text, j);
      lastSig = j;
      trailingComma = false;
      continue;
    }
    if (c === '#') { while (j < text.length && text[j] !== '\n') j++; continue; }
    if (depth === 0 && c === ')') { finish(); return { open, close: j, args, trailingComma }; }
    if (depth === 0 && c === ',') { finish(); trailingComma = true; j++; continue; }
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') depth--;
    if (!/\s/.test(c) && !(c === '\\' && text[j + 1] === '\n')) {
      if (argStart < 0) argStart = j;
      lastSig = j + 1;
      trailingComma = false;
    }
    j++;
  }
  return undefined;
}

/**
 * Where the constructor call is written: for a layer built through a local helper the IR's spans point at the helper's
 * call site, and `constructionSpan` at the `nn.Linear(...)` inside the helper, which is what gets converted.
 */
export function constructorSite(text: string, layer: Layer): { calleeStart: number; calleeEnd: number; open: number } {
  if (!layer.constructionSpan) return { calleeStart: layer.calleeSpan.startOffset, calleeEnd: layer.calleeSpan.endOffset, open: layer.argsSpan.startOffset };
  const start = layer.constructionSpan.startOffset;
  const open = text.indexOf('(', start);
  return { calleeStart: start, calleeEnd: start + text.slice(start, open).trimEnd().length, open };
}
