/**
 * Dependency signatures of copied statements, for the per-statement memo of layer records (layers.ts): a statement's
 * records are reused while its copy and its signature are unchanged. The signature names what evaluating its layers
 * may read from outside the statement:
 *  - file-wide (versioned in AnalysisCache.memoHead): the import table, `*linear` function and class names (imported
 *    factory detection), local classes named by annotations (`config: GPTConfig`), the config-style classes, and the
 *    statements holding module-level assignments (`N = 768`) or config classes whose defaults read `self`, with their
 *    closure (below);
 *  - per statement: the closure of the statements it may evaluate in: those holding construction sites of the
 *    classes it defines (a parameter's value as passed where the class is built), those of their local base classes
 *    (`self.x` set in a base) and the other definitions of the same class names, transitively;
 *  - what each local class it constructs builds (`ctorFor`: kind, parameters, TE equivalent);
 *  - the defaults of the config fields whose names occur in the text of that closure and of the global statements
 *    (`config.n_embd`, `getattr(cfg, "n_embd")`), and of the fields those defaults name in turn.
 * Statements are named by their copy's id (a reused copy has the same text) and the number of module-level
 * assignments before them (which of several `N = ...` a use sees).
 */
import type { ClassModel } from './classes';
import { presetAssigns } from './dim-sources';
import { ctorFor, type LayerContext } from './layers';
import { stmtOf, type AnalysisCache, type Stmt } from './node';
import { leftOf, type CallRec, type WalkResult } from './walk';

const WORD = /[A-Za-z_]\w*/g;
const ANNOTATED = /:\s*["']?\s*(?:Optional\s*\[\s*["']?\s*)?([A-Za-z_]\w*)/g;

/** Module-level assignments to one name, in document order, with the statements holding them. */
type ModuleAssigns = Map<string, { start: number; stmt: Stmt }[]>;

/** The memo key of each statement, or undefined when a node has no copied statement (no memo then). */
export function memoKeys(ctx: LayerContext, byCallee: Map<string, CallRec[]>, cache: AnalysisCache): ((stmt: Stmt) => string) | undefined {
  const modByName = moduleAssignsByName(ctx.src, ctx.walk);
  const deps = modByName && StmtClosure.of(ctx, byCallee);
  const globalRoots = deps && globalReadRoots(ctx);
  const fields = globalRoots && configFields(ctx, modByName as ModuleAssigns, globalRoots);
  if (!modByName || !deps || !globalRoots || !fields) return undefined;
  const readByName = nameReader(ctx.src, cache, modByName, fields);
  const factsOf = ctorFactsReader(ctx, cache);
  const calledIn = classesCalledIn(byCallee);
  const globalSet = new Set<Stmt>();
  deps.close(globalRoots, globalSet);
  const head = fileWideHead(ctx, fields.parts, globalSet);
  // Keys carry a version of the file-wide part rather than the part itself (short keys, cheap to compare).
  if (head !== cache.memoHead) { cache.memoHead = head; cache.memoVersion++; }
  const version = cache.memoVersion;
  if (cache.ctorMemoVersion !== version) { cache.ctorMemo = new Map(); cache.ctorMemoVersion = version; }
  const keys = new Map<Stmt, string>();
  return (stmt) => {
    let k = keys.get(stmt);
    if (k === undefined) {
      const set = new Set<Stmt>();
      deps.close([stmt], set, globalSet);
      for (const g of globalSet) set.add(g);
      const fieldPart = readByName(set);
      const called = calledIn.get(stmt);
      // The global statements are in the head (its version): only the statement's own closure is spelled out.
      k = `${version}\u0004${stmtSig(set, globalSet)}\u0004${called ? [...called].map(factsOf).join(',') : ''}\u0004${fieldPart}`;
      keys.set(stmt, k);
    }
    return k;
  };
}

/** Module-level assignments by name (what the evaluator reads: identifier targets), in document order. */
function moduleAssignsByName(src: string, walk: WalkResult): ModuleAssigns | undefined {
  const modByName: ModuleAssigns = new Map();
  for (const a of walk.moduleAssigns) {
    const left = leftOf(a);
    const st = stmtOf(a.node);
    if (!st) return undefined;
    if (!left || left.type !== 'identifier') continue;
    const name = src.slice(left.startIndex, left.endIndex);
    const l = modByName.get(name);
    if (l) l.push({ start: a.start, stmt: st }); else modByName.set(name, [{ start: a.start, stmt: st }]);
  }
  return modByName;
}

/** How many assignments to `name` come before an offset (which one a use there sees). */
function assignsBefore(modByName: ModuleAssigns, name: string, offset: number): number {
  let n = 0;
  for (const a of modByName.get(name) ?? []) if (a.start < offset) n++;
  return n;
}

/**
 * The statements a statement may evaluate in: those holding construction sites of the classes it defines, those of
 * their local base classes and the other definitions of the same class names, transitively.
 */
class StmtClosure {
  private readonly depsCache = new Map<Stmt, Stmt[]>();

  private constructor(
    private readonly classStmts: Map<string, Stmt[]>,
    private readonly classesIn: Map<Stmt, string[]>,
    private readonly byCallee: Map<string, CallRec[]>,
    private readonly classes: Map<string, ClassModel>,
  ) {}

  /** The closure over a file's classes; undefined when a class has no copied statement. */
  static of(ctx: LayerContext, byCallee: Map<string, CallRec[]>): StmtClosure | undefined {
    const classStmts = new Map<string, Stmt[]>();
    const classesIn = new Map<Stmt, string[]>();
    for (const c of ctx.walk.classes) {
      const st = stmtOf(c.node);
      if (!st) return undefined;
      const l = classStmts.get(c.name);
      if (l) l.push(st); else classStmts.set(c.name, [st]);
      const n = classesIn.get(st);
      if (n) n.push(c.name); else classesIn.set(st, [c.name]);
    }
    return new StmtClosure(classStmts, classesIn, byCallee, ctx.classes);
  }

  /** The statements one statement depends on directly. */
  private directDeps(st: Stmt): Stmt[] {
    let d = this.depsCache.get(st);
    if (d) return d;
    d = [];
    for (const name of this.classesIn.get(st) ?? []) {
      for (const s of this.classStmts.get(name) ?? []) d.push(s);
      for (const call of this.byCallee.get(name) ?? []) { const s = stmtOf(call.node); if (s) d.push(s); }
      const m = this.classes.get(name);
      for (const rb of m?.info.resolvedBases ?? []) {
        if (rb.startsWith('local:')) for (const s of this.classStmts.get(rb.slice(6)) ?? []) d.push(s);
      }
    }
    this.depsCache.set(st, d);
    return d;
  }

  /** Adds to `into` the roots and what they depend on, transitively, leaving out (and not following) `skip`. */
  close(roots: Iterable<Stmt>, into: Set<Stmt>, skip?: Set<Stmt>): void {
    const stack = [...roots];
    while (stack.length) {
      const st = stack.pop() as Stmt;
      if (into.has(st) || skip?.has(st)) continue;
      into.add(st);
      for (const d of this.directDeps(st)) stack.push(d);
    }
  }
}

/**
 * Ids in document order: also tells, for each module-level name read, which of its assignments precede which statement.
 * With `skip` (the global statements, named in the head), each statement left carries how many of the skipped ones
 * precede it, so the key still tells its position among them.
 */
function stmtSig(set: Set<Stmt>, skip?: Set<Stmt>): string {
  const list: Stmt[] = [];
  for (const s of set) if (!skip?.has(s)) list.push(s);
  list.sort((a, b) => a.base - b.base);
  if (!skip?.size) return list.map((s) => s.id).join(',');
  const bases = [...skip].map((s) => s.base).sort((a, b) => a - b);
  return list.map((s) => {
    let n = 0;
    while (n < bases.length && bases[n] < s.base) n++;
    return `${s.id}.${n}`;
  }).join(',');
}

/**
 * What the evaluator reads file-wide besides names (dim-sources.ts): config presets (module-level lists / dicts of
 * configurations) and argparse defaults; undefined when a preset has no copied statement.
 */
function globalReadRoots(ctx: LayerContext): Stmt[] | undefined {
  const globalRoots: Stmt[] = [];
  for (const a of presetAssigns(ctx.src, ctx.walk.moduleAssigns, ctx.classes)) {
    const st = stmtOf(a.node);
    if (!st) return undefined;
    globalRoots.push(st);
  }
  ctx.walk.calls.forEach((c, i) => {
    if (!ctx.callees[i]?.endsWith('.add_argument')) return;
    const st = stmtOf(c.node);
    if (st) globalRoots.push(st);
  });
  return globalRoots;
}

/** The config-style classes' fields: the head's part, each field's default signatures and the words they use. */
interface ConfigFields {
  parts: string[];
  fieldSigs: Map<string, string[]>;
  defaultWords: Map<string, string[]>;
}

/**
 * Config-style classes (what `config.x` reads), field by field: a statement depends on a field's defaults when the
 * field's name occurs in the text it may evaluate (its closure and the global statements), and on the fields those
 * defaults name in turn. A config class whose defaults read `self` is global as a whole (pushed on `globalRoots`).
 * What a constructor call of a local class builds is part of the key of the statements that call it (memoKeys).
 */
function configFields(ctx: LayerContext, modByName: ModuleAssigns, globalRoots: Stmt[]): ConfigFields | undefined {
  const { src } = ctx;
  const parts: string[] = [];
  const fieldSigs = new Map<string, string[]>();
  const defaultWords = new Map<string, string[]>();
  for (const m of ctx.classes.values()) {
    if (m.fieldNodes.size === 0) continue;
    parts.push(`${m.info.name}:${m.isConfig}`);
    const st = stmtOf(m.rec.node);
    if (!st) return undefined;
    const texts: string[] = [];
    for (const n of m.fieldNodes.values()) texts.push(src.slice(n.startIndex, n.endIndex));
    // __post_init__ arithmetic (dim-sources.ts) reads the whole class: global as a whole too.
    if (m.postInit || texts.some((t) => /\bself\b/.test(t))) { globalRoots.push(st); continue; }
    let i = 0;
    for (const f of m.fieldNodes.keys()) {
      const t = texts[i++];
      const w = t.match(WORD) ?? [];
      // A default evaluates where the class starts: which assignment of a module-level name it sees.
      const before = w.filter((x) => modByName.has(x)).map((x) => `${x}@${assignsBefore(modByName, x, m.rec.start)}`).join(',');
      const e = `${m.info.name}:${before}:${t}`;
      const l = fieldSigs.get(f);
      if (l) l.push(e); else fieldSigs.set(f, [e]);
      const dw = defaultWords.get(f);
      if (dw) dw.push(...w); else defaultWords.set(f, w);
    }
  }
  return { parts, fieldSigs, defaultWords };
}

/**
 * What evaluation in a set of statements may read by name, to a fixpoint: config fields (and the names their
 * defaults use) and module-level names (the statements assigning them join the set). The reader returns the config
 * part of the key; its argument grows.
 */
function nameReader(src: string, cache: AnalysisCache, modByName: ModuleAssigns, cf: ConfigFields): (stmts: Set<Stmt>) => string {
  const { fieldSigs, defaultWords } = cf;
  const wordsOf = (st: Stmt): Set<string> => (st.words ??= new Set(src.slice(st.base, st.base + st.root.re).match(WORD) ?? []));
  const fieldSigStr = new Map<string, string>();
  const fieldSigOf = (f: string): string => {
    let t = fieldSigStr.get(f);
    if (t === undefined) { t = cache.intern(`${f}=${(fieldSigs.get(f) as string[]).join('|')}`); fieldSigStr.set(f, t); }
    return t;
  };
  const hitsCache = new Map<Stmt, string[]>();
  const hitsOf = (st: Stmt): string[] => {
    let h = hitsCache.get(st);
    if (!h) {
      h = [];
      for (const w of wordsOf(st)) if (fieldSigs.has(w) || modByName.has(w)) h.push(w);
      hitsCache.set(st, h);
    }
    return h;
  };
  return (stmts) => {
    const fields = new Set<string>();
    const names = new Set<string>();
    const queue: string[] = [];
    const visit = (w: string): void => {
      if (fieldSigs.has(w) && !fields.has(w)) { fields.add(w); queue.push(w); }
      if (!names.has(w) && modByName.has(w)) {
        names.add(w);
        for (const a of modByName.get(w) as { stmt: Stmt }[]) {
          if (!stmts.has(a.stmt)) { stmts.add(a.stmt); for (const x of hitsOf(a.stmt)) visit(x); }
        }
      }
    };
    for (const st of [...stmts]) for (const w of hitsOf(st)) visit(w);
    while (queue.length) for (const w of defaultWords.get(queue.pop() as string) ?? []) visit(w);
    return [...fields].sort().map(fieldSigOf).join(',');
  };
}

/** What a constructor call of a name builds (`ctorFor`: kind, parameters, TE equivalent), interned, per name. */
function ctorFactsReader(ctx: LayerContext, cache: AnalysisCache): (name: string) => string {
  const ctorFacts = new Map<string, string>();
  return (name) => {
    let f = ctorFacts.get(name);
    if (f === undefined) {
      const c = ctorFor(ctx, name);
      // What makeLayer reads of the class beyond its signature: the forward's extra step and the weight's name (the
      // class kept for the fallback, weight_name), the transposed weight (Conv1D's wrapper).
      const li = c?.ctor.local?.info;
      f = c ? cache.intern([c.resolved, c.ctor.kind, c.ctor.isTe, c.ctor.params.join('+'), c.ctor.te, c.ctor.parallelMode, li?.name, c.ctor.display, c.ctor.factory,
        li?.forwardExtra, li?.scaleName, !!li?.channelAxis, c.ctor.transposedWeight, c.ctor.importedForward?.scaleName, !!c.ctor.importedForward?.unitOffset].join('\u0001')) : '-';
      ctorFacts.set(name, f);
    }
    return f;
  };
}

/** Local classes called in each statement. */
function classesCalledIn(byCallee: Map<string, CallRec[]>): Map<Stmt, Set<string>> {
  const calledIn = new Map<Stmt, Set<string>>();
  for (const [name, calls] of byCallee) {
    for (const call of calls) {
      const st = stmtOf(call.node);
      if (!st) continue;
      const set = calledIn.get(st);
      if (set) set.add(name); else calledIn.set(st, new Set([name]));
    }
  }
  return calledIn;
}

/**
 * The file-wide part of every key. Class names whose mere existence other statements read: `X(...)` calls are keyed
 * per statement (calledIn) and local bases through the statements closure; what is left: an imported `*linear`
 * factory is one only when no local class has its name, and a parameter annotation names a local class (`config:
 * GPTConfig`). Annotation texts are over-approximated by a scan of the text: any name after a `:` (optionally quoted
 * or in Optional[...]).
 */
function fileWideHead(ctx: LayerContext, configParts: string[], globalSet: Set<Stmt>): string {
  const { walk, imports } = ctx;
  const annotated = new Set<string>();
  for (const m of ctx.src.matchAll(ANNOTATED)) annotated.add(m[1]);
  const namesRead = walk.classes.map((c) => c.name).filter((n) => annotated.has(n) || /linear$/i.test(n));
  return [
    [...imports.map].map(([k, v]) => `${k}=${v}`).join(';'), imports.starModules.join(';'),
    walk.functions.filter((f) => /linear$/i.test(f.name)).map((f) => f.name).join(';'), namesRead.join(';'),
    configParts.join(';'), stmtSig(globalSet),
  ].join('\u0003');
}
