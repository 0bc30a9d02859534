/**
 * The node interface the analysis reads, and a plain-JS mirror of the syntax tree, memoised per top-level statement.
 *
 * The analysis only ever reads a handful of node properties (type, offsets, parent, children, fields). A web-tree-sitter
 * `Node` satisfies this interface directly (the CLI path: one pass per file, no mirror, no cache). The language server
 * instead keeps an `AnalysisCache` per document: phase 1 copies each top-level statement's subtree once into JS objects
 * (offsets relative to the statement start, so the copy survives edits elsewhere in the file), phase 2 runs the
 * analysis on those copies without crossing into WASM. After an edit only statements whose text changed are copied
 * again; unchanged ones are reused with their start offset moved (positions come from the current line table).
 */
import type { Tree } from '../engine/parser';
import { positionAt } from './spans';

export interface Position { row: number; column: number }

/** What the analysis reads from a syntax node (a subset of web-tree-sitter's `Node`). */
export interface SyntaxNode {
  readonly type: string;
  readonly startIndex: number;
  readonly endIndex: number;
  readonly startPosition: Position;
  readonly endPosition: Position;
  readonly parent: SyntaxNode | null;
  readonly namedChildren: (SyntaxNode | null)[];
  namedChild(index: number): SyntaxNode | null;
  child(index: number): SyntaxNode | null;
  childForFieldName(name: string): SyntaxNode | null;
}

/** Node types the analysis sweeps over (walk.ts), in document order. */
export const WALK_TYPES = [
  'import_statement', 'import_from_statement', 'class_definition', 'function_definition', 'try_statement',
  'with_statement', 'for_statement', 'while_statement', 'call', 'assignment', 'return_statement',
];
const WALK_SET = new Set(WALK_TYPES);

let nextStmtId = 1;

/** One copied top-level statement: its nodes and the current absolute offset of its start. */
export class Stmt {
  /** Unique per copy: a reused statement keeps its id, so the same id means the same text (and start column). */
  readonly id = nextStmtId++;
  base = 0;
  root!: MNode;
  /** Nodes of WALK_TYPES in pre-order (what `descendantsOfType(WALK_TYPES)` gives for this subtree). */
  readonly walkNodes: MNode[] = [];
  /**
   * Phase-2 results memoised on this copy (layers.ts): valid while `memoKey` (the statement's dependency signature,
   * built by index.ts) is unchanged. `memoBase`/`memoLine`: where the statement started when they were recorded.
   */
  memoKey: string | undefined;
  memo: Map<SyntaxNode, unknown> | undefined;
  memoBase = 0;
  memoLine = 0;
  /** The names in its text (index.ts: which config fields it may read), computed once. */
  words: Set<string> | undefined;
}

/** The copied statement a node belongs to (undefined for web-tree-sitter nodes: the cache-less path). */
export function stmtOf(n: SyntaxNode): Stmt | undefined {
  return n instanceof MNode ? n.stmt : undefined;
}

/** The node as a persistent copy (undefined for web-tree-sitter nodes). */
export function copyOf(n: SyntaxNode): { callee?: string | null } | undefined {
  return n instanceof MNode ? n : undefined;
}

const NO_NODES: MNode[] = [];

/** A copied node. Offsets are relative to its statement; the getters add the statement's current start. */
class MNode implements SyntaxNode {
  parent: MNode | null = null;
  children: MNode[] = NO_NODES;
  named: MNode[] = NO_NODES;
  /** Field name of each child (parallel to children), or undefined when none has one. */
  fields: (string | null)[] | undefined;
  /** For a call: its callee text as index.ts reads it (null: none), once computed (it depends on the statement only). */
  callee?: string | null;

  /** stmt, rs and re change only when an edited statement's new copy adopts this subtree (Donor). */
  constructor(public stmt: Stmt, readonly type: string, public rs: number, public re: number) {}

  get startIndex(): number { return this.rs + this.stmt.base; }
  get endIndex(): number { return this.re + this.stmt.base; }
  get startPosition(): Position { return positionAt(this.rs + this.stmt.base); }
  get endPosition(): Position { return positionAt(this.re + this.stmt.base); }
  get namedChildren(): MNode[] { return this.named; }
  namedChild(i: number): MNode | null { return this.named[i] ?? null; }
  child(i: number): MNode | null { return this.children[i] ?? null; }
  childForFieldName(name: string): MNode | null {
    const f = this.fields;
    if (!f) return null;
    for (let i = 0; i < f.length; i++) if (f[i] === name) return this.children[i];
    return null;
  }

  /**
   * Moves this subtree of a discarded copy into `stmt`, starting at `rs` there: the nodes are kept (no allocation) and
   * their offsets shifted; its walk nodes join the statement's in pre-order (document order).
   */
  adopt(stmt: Stmt, parent: MNode, rs: number): MNode {
    const shift = rs - this.rs;
    const move = (n: MNode): void => {
      n.stmt = stmt;
      n.rs += shift;
      n.re += shift;
      if (WALK_SET.has(n.type)) stmt.walkNodes.push(n);
      const cs = n.children;
      for (let i = 0; i < cs.length; i++) move(cs[i]);
    };
    move(this);
    this.parent = parent;
    return this;
  }
}

interface CacheEntry { stmt: Stmt; clean: boolean; col: number }

/**
 * Copies by text, then by start column: the same text at many columns (`x=1;` * 40,000 on one line) is found in one
 * lookup each, not by scanning a list of every column (which made an analysis quadratic).
 */
type CopiesByText = Map<string, Map<number, CacheEntry[]>>;

/**
 * Per-document memo of copied statements, keyed by the statement's text (and matched on its start column). Holds only the statements
 * of the last analysed text (older ones are dropped at each analysis).
 */
export class AnalysisCache {
  /** text -> column -> copies (several when the same statement text occurs more than once). */
  entries: CopiesByText = new Map();
  /** Statistics of the last analysis: statements copied, statements reused. */
  copied = 0;
  reused = 0;
  /** Nested statements (in a block) of the copied statements taken from their previous copy instead of the tree. */
  nestedReused = 0;
  /**
   * Lookup work of the last analysis: characters scanned for statements' columns and cached copies examined. Tests
   * compare it on N and 2N statements (it must grow linearly, statements on one line included).
   */
  steps = 0;
  /** Layer records of the last analysis taken from statements' memos, and built afresh. */
  layersReused = 0;
  layersBuilt = 0;
  /** The file-wide part of the memo keys (index.ts) and a counter bumped whenever it changes. */
  memoHead: string | undefined;
  memoVersion = 0;
  /** layers.ts ctorFor results of non-local callees, valid for `ctorMemoVersion` of the file-wide part. */
  ctorMemo = new Map<string, unknown>();
  ctorMemoVersion = -1;
  /** The external sizes (AnalysisOptions.dims) the memos were computed with. */
  dimsKey = '';
  /** Long strings that go into memo keys (config field signatures, what a local class builds), as short ids. */
  private readonly interned = new Map<string, string>();

  /** A short stand-in for `s`: equal strings get the same id for the life of the cache. */
  intern(s: string): string {
    let id = this.interned.get(s);
    if (id === undefined) {
      if (this.interned.size > 100_000) this.interned.clear(); // bounded; clearing only costs re-memoisation
      id = `#${(this.internId++).toString(36)}`;
      this.interned.set(s, id);
    }
    return id;
  }
  private internId = 0;

  /** How many copied statements the cache holds. */
  get size(): number {
    let n = 0;
    for (const byCol of this.entries.values()) for (const copies of byCol.values()) n += copies.length;
    return n;
  }

  clear(): void {
    this.entries.clear();
    this.memoHead = undefined;
    this.memoVersion++;
  }
}

/**
 * The WALK_TYPES nodes of the whole tree in document order, from copies: statements whose text is unchanged since the
 * last call come from the cache.
 */
export function mirrorWalkNodes(tree: Tree, src: string, cache: AnalysisCache, hasError: boolean): SyntaxNode[] {
  const language = tree.language;
  const types = language.types;
  const fieldNames = language.fields;
  const next: CopiesByText = new Map();
  const old = cache.entries;
  // Old copies reused or lent in this pass (left in their lists, skipped when met: removing them would be linear).
  const taken = new Set<CacheEntry>();
  const out: SyntaxNode[] = [];
  let copied = 0;
  let reused = 0;
  cache.nestedReused = 0;
  cache.steps = 0;
  // The previous copies by start offset: an edited statement (it starts where it did) lends its unchanged nested
  // statements to the new copy (only in an error-free tree; see Donor).
  let byStart: Map<number, { key: string; entry: CacheEntry }> | undefined;
  const cursor = tree.walk();
  // Top-level statements come in document order: the start of the current line is found by scanning forward from the
  // previous statement's start, so the whole pass reads each character once (scanning back to the line start for every
  // statement was quadratic on many statements on one line: `x=1;` * 40,000).
  let scanned = 0;
  let lineStart = 0;
  try {
    if (cursor.gotoFirstChild()) {
      do {
        const start = cursor.startIndex;
        const end = cursor.endIndex;
        cache.steps += start - scanned;
        for (; scanned < start; scanned++) if (src.charCodeAt(scanned) === 10) lineStart = scanned + 1;
        const col = start - lineStart;
        // Keyed by the text alone (a slice shares the document's characters; a `${col}...` concatenation would copy
        // the whole file at every analysis); the start column must match too.
        const key = src.slice(start, end);
        let entry: CacheEntry | undefined;
        const list = old.get(key)?.get(col);
        while (list?.length) {
          const cand = list.pop()!;
          cache.steps++;
          if (taken.has(cand)) continue;
          taken.add(cand);
          // An unchanged statement parses the same at the top level; when the tree has errors, reuse only copies of
          // statements without any (their recovery could depend on what surrounds them).
          if (cand.clean && !(hasError && cursor.currentNode.hasError)) entry = cand;
          break;
        }
        if (entry) reused++;
        else {
          const prev = hasError ? undefined : (byStart ??= startsOf(old)).get(start);
          const donor = prev && prev.entry.clean && prev.entry.col === col && prev.entry.stmt.base === start && release(taken, prev.entry)
            ? new Donor(prev.key, prev.entry, cache) : undefined;
          entry = copyStatement(cursor, start, col, types, fieldNames, src, donor);
          copied++;
          cache.nestedReused += donor?.lent ?? 0;
        }
        entry.stmt.base = start;
        let byCol = next.get(key);
        if (!byCol) next.set(key, byCol = new Map());
        const nl = byCol.get(col);
        if (nl) nl.push(entry); else byCol.set(col, [entry]);
        const wn = entry.stmt.walkNodes;
        for (let i = 0; i < wn.length; i++) out.push(wn[i]);
      } while (cursor.gotoNextSibling());
    }
  } finally {
    cursor.delete();
  }
  cache.entries = next;
  cache.copied = copied;
  cache.reused = reused;
  return out;
}

type Cursor = ReturnType<Tree['walk']>;

/**
 * Takes an old copy out of the cache for a Donor (its subtrees are moved into the new copy): false when it was already
 * reused or lent in this pass.
 */
function release(taken: Set<CacheEntry>, entry: CacheEntry): boolean {
  if (taken.has(entry)) return false;
  taken.add(entry);
  return true;
}

/** The previous copies by the offset they were last placed at, with their text. */
function startsOf(entries: CopiesByText): Map<number, { key: string; entry: CacheEntry }> {
  const out = new Map<number, { key: string; entry: CacheEntry }>();
  for (const [key, byCol] of entries) for (const list of byCol.values()) for (const entry of list) out.set(entry.stmt.base, { key, entry });
  return out;
}

/**
 * The previous copy of an edited statement, lending its nested statements (the children of its blocks: methods, the
 * lines of a method) whose text and column are unchanged, so that a keystroke in one method of a large class walks
 * the WASM tree of that method only. Used only when the old copy had no error and the new tree has none: a statement
 * of an error-free tree parses the same wherever it stands at the same column, as the top-level reuse relies on.
 * The old copy is the donor's alone (mirrorWalkNodes takes it out of the cache first): a lent subtree is moved into
 * the new copy, not cloned, so a subtree is lent at most once and never one inside or around a lent one.
 */
class Donor {
  /**
   * Nested statements by text and column, in document order; `head` skips those lent or no longer free (a node that
   * is not free stays so: lent subtrees only accumulate).
   */
  private byText?: Map<string, Map<number, { nodes: MNode[]; head: number }>>;
  /** Lent subtrees, and the old nodes with a lent subtree below them. */
  private readonly lentNodes = new Set<MNode>();
  private readonly aboveLent = new Set<MNode>();
  /** Columns in the new text, asked in document order (copyStatement's pre-order). */
  private newColumns?: (at: number) => number;
  lent = 0;

  constructor(private readonly text: string, private readonly entry: CacheEntry, private readonly stats: { steps: number }) {}

  take(src: string, start: number, end: number, base: number): MNode | undefined {
    if (end - start < MIN_LENT_CHARS) return undefined;
    const byCol = this.index().get(src.slice(start, end));
    if (!byCol) return undefined;
    const col = (this.newColumns ??= columnsFrom(src, base, this.entry.col, this.stats))(start);
    const list = byCol.get(col);
    if (!list) return undefined;
    while (list.head < list.nodes.length) {
      const node = list.nodes[list.head++];
      this.stats.steps++;
      if (!this.free(node)) continue;
      this.lentNodes.add(node);
      for (let up = node.parent; up; up = up.parent) this.aboveLent.add(up);
      this.lent++;
      return node;
    }
    return undefined;
  }

  /** Whether nothing inside, at or above `node` in the old copy has been lent (it is still where it was). */
  private free(node: MNode): boolean {
    if (this.lent === 0) return true;
    if (this.aboveLent.has(node)) return false;
    for (let n: MNode | null = node; n; n = n.parent) if (this.lentNodes.has(n)) return false;
    return true;
  }

  private index(): Map<string, Map<number, { nodes: MNode[]; head: number }>> {
    if (this.byText) return this.byText;
    const map = new Map<string, Map<number, { nodes: MNode[]; head: number }>>();
    const text = this.text;
    const columnOf = columnsFrom(text, 0, this.entry.col, this.stats);
    const visit = (n: MNode): void => {
      for (const c of n.children) {
        if (n.type === 'block' && c.re - c.rs >= MIN_LENT_CHARS) {
          const key = text.slice(c.rs, c.re);
          const col = columnOf(c.rs);
          let byCol = map.get(key);
          if (!byCol) map.set(key, byCol = new Map());
          const l = byCol.get(col);
          if (l) l.nodes.push(c); else byCol.set(col, { nodes: [c], head: 0 });
        }
        if (c.children !== NO_NODES) visit(c);
      }
    };
    visit(this.entry.stmt.root);
    this.byText = map;
    return map;
  }
}

/** Statements shorter than this are walked in WASM (a `pass`, `x = 1`): the lookup would cost about as much. */
const MIN_LENT_CHARS = 8;

/**
 * The column of an offset in `text`, where `base` starts a line part at column `baseCol` (a statement's first line).
 * Offsets asked in increasing order cost one forward scan in all (scanning back to the line start for each was
 * quadratic on many statements on one line); an earlier offset starts the scan over.
 */
function columnsFrom(text: string, base: number, baseCol: number, stats: { steps: number }): (at: number) => number {
  let scanned = base;
  let lineStart = -1;
  return (at) => {
    if (at < scanned) { scanned = base; lineStart = -1; }
    stats.steps += at - scanned;
    for (; scanned < at; scanned++) if (text.charCodeAt(scanned) === 10) lineStart = scanned + 1;
    return lineStart < 0 ? baseCol + (at - base) : at - lineStart;
  };
}

/** Copies the subtree under the cursor (left where it was found). */
function copyStatement(cursor: Cursor, base: number, col: number, types: string[], fieldNames: (string | null)[], src: string, donor?: Donor): CacheEntry {
  const stmt = new Stmt();
  let clean = true;
  const make = (parent: MNode | null): MNode => {
    const typeId = cursor.nodeTypeId;
    const type = types[typeId] || 'ERROR';
    const rs = cursor.startIndex - base;
    const re = cursor.endIndex - base;
    const n = new MNode(stmt, type, rs, re);
    n.parent = parent;
    if (type === 'ERROR' || rs === re) clean = false;
    if (WALK_SET.has(type)) stmt.walkNodes.push(n);
    return n;
  };
  const root = make(null);
  stmt.root = root;
  // Iterative pre-order copy: `stack` holds the copies of the cursor's ancestors.
  const stack: MNode[] = [root];
  let depth = 0;
  const named = namedOf(types);
  if (cursor.gotoFirstChild()) {
    depth = 1;
    for (;;) {
      const parent = stack[depth - 1];
      const fid = cursor.currentFieldId;
      // A statement of a block whose text and column are those of one in the previous copy: moved over from that copy
      // (no walk of its subtree in WASM, no allocation), and the cursor moves on to its next sibling.
      const lent = donor && parent.type === 'block' ? donor.take(src, cursor.startIndex, cursor.endIndex, base) : undefined;
      const n = lent ? lent.adopt(stmt, parent, cursor.startIndex - base) : make(parent);
      if (parent.children === NO_NODES) parent.children = [];
      const idx = parent.children.length;
      parent.children.push(n);
      if (fid) {
        if (!parent.fields) parent.fields = [];
        parent.fields[idx] = fieldNames[fid];
      }
      if (named(cursor.nodeTypeId, cursor)) {
        if (parent.named === NO_NODES) parent.named = [];
        parent.named.push(n);
      }
      if (!lent && cursor.gotoFirstChild()) {
        stack[depth] = n;
        depth++;
        continue;
      }
      while (!cursor.gotoNextSibling()) {
        cursor.gotoParent();
        depth--;
        if (depth === 0) break;
      }
      if (depth === 0) break;
    }
  }
  return { stmt, clean, col };
}

/** Whether a node type id is named, read from WASM once per id. */
const namedCache = new WeakMap<string[], Map<number, boolean>>();
function namedOf(types: string[]): (id: number, cursor: Cursor) => boolean {
  let m = namedCache.get(types);
  if (!m) { m = new Map(); namedCache.set(types, m); }
  const map = m;
  return (id, cursor) => {
    let v = map.get(id);
    if (v === undefined) { v = cursor.nodeIsNamed; map.set(id, v); }
    return v;
  };
}
