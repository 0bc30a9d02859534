/**
 * The analysis engine: a web-tree-sitter tree of a Python file in, the model IR out. Pure: no LSP, no VS Code, no I/O.
 * Never throws on its input: broken or binary input gives what can be analysed soundly, with hasSyntaxErrors set (only
 * a WASM trap of the parser runtime is rethrown, for the caller to retire it).
 */
import { isWasmTrap, type Tree } from '../parser';
import type { ExternalDims, ModelIR } from './ir';
import { collectAutocast, collectAutocastContexts } from './autocast';
import { collectCalls, collectTies, keepFp32Modules, tiedKeys } from './calls';
import { analyzeClasses } from './classes';
import { Evaluator, type EvalScope } from './dims';
import { collectAliases, collectImports } from './imports';
import { calleeText, collectLayers, ctorFor, type LayerContext } from './layers';
import { assignRoles } from './roles';
import { decide, keepInFp32, keepTorchFallbacks } from './verdict';
import { walkNodes, type CallRec } from './walk';
import { AnalysisCache, copyOf, mirrorWalkNodes, stmtOf, WALK_TYPES, type Stmt, type SyntaxNode } from './node';
import { WRAPPER_END_MARKER, wrapperRanges } from './known';
import { useText } from './spans';
import { presetAssigns } from './dim-sources';
import { collectPtq } from './ptq';

export type * from './ir';
export { AnalysisCache } from './node';

/** An empty IR (what a file with nothing to analyse gives). */
export function emptyIR(hasSyntaxErrors = false): ModelIR {
  return {
    importsTorch: false, importsTe: false, teImportUnguarded: false, imports: [], classes: [], layers: [],
    autocastRegions: [], autocastContexts: [], weightTies: [], fp8Conversions: [], quantization: [], recipes: [], calls: [], vocabNames: [], ptq: { quantizeCalls: [], saves: [], summaries: [] }, hasSyntaxErrors,
  };
}

/**
 * Analyses one parsed Python file. `text` must be the text the tree was parsed from. With a `cache` (one per document,
 * kept across edits), the tree is copied statement by statement into JS and only statements whose text changed since
 * the last call are copied again; the IR is the same as without.
 */
export interface AnalysisOptions {
  /** Sizes known from outside the file (declared by the user, read from config files beside it), by name. */
  dims?: ExternalDims;
}

export function analyzeTree(tree: Tree, text: string, cache?: AnalysisCache, options: AnalysisOptions = {}): ModelIR {
  let hasErrors = false;
  try {
    // Memoised layer records hold evaluated dims: other external sizes invalidate them.
    const dimsKey = options.dims && Object.keys(options.dims).length ? JSON.stringify(options.dims) : '';
    if (cache && cache.dimsKey !== dimsKey) {
      cache.clear();
      cache.dimsKey = dimsKey;
    }
    hasErrors = tree.rootNode.hasError;
    let nodes: SyntaxNode[];
    if (cache) {
      useText(text);
      nodes = mirrorWalkNodes(tree, text, cache, hasErrors);
    } else nodes = tree.rootNode.descendantsOfType(WALK_TYPES);
    return analyze(nodes, text, hasErrors, cache, options.dims);
  } catch (err) {
    cache?.clear();
    // A WASM trap is the parser runtime's failure, not this file's: the caller must retire the runtime.
    if (isWasmTrap(err)) throw err;
    // Best effort: an internal failure on odd input must not take the server down.
    const ir = emptyIR(true);
    ir.analysisError = err instanceof Error ? err.message : String(err);
    return ir;
  }
}

function analyze(nodes: readonly SyntaxNode[], src: string, hasSyntaxErrors: boolean, cache?: AnalysisCache, dims?: ExternalDims): ModelIR {
  useText(src);
  const walk = walkNodes(nodes, src);
  const imports = collectImports(src, walk.imports);
  collectAliases(src, imports, walk.moduleAssigns);
  const classes = analyzeClasses(src, walk.classes, imports);

  // Callee text of every call, computed once.
  const callees: (string | undefined)[] = new Array(walk.calls.length);
  const byCallee = new Map<string, CallRec[]>();
  const calls = walk.calls;
  const simpleCallee = /[A-Za-z_]\w*(?:[ \t]*\.[ \t]*[A-Za-z_]\w*)*(?=[ \t]*\()/y;
  for (let i = 0; i < calls.length; i++) {
    const start = calls[i].start;
    // A call whose callee holds another call starting at the same offset (`f(x).g(y)`) has no simple callee: in
    // document order that inner call comes next. Otherwise the callee is read from the text with a sticky regex (no
    // `^`: with the y flag it would pin the match to offset 0 and send every call through the tree), without
    // touching the tree.
    let text: string | undefined;
    const copy = cache ? copyOf(calls[i].node) : undefined;
    if (copy && copy.callee !== undefined) text = copy.callee ?? undefined;
    else if (i + 1 < calls.length && calls[i + 1].start === start) {
      text = calleeText(src, calls[i].node)?.text;
    } else {
      simpleCallee.lastIndex = start;
      const m = simpleCallee.exec(src);
      if (m) {
        const t = m[0];
        text = t.indexOf(' ') < 0 && t.indexOf('\t') < 0 ? t : t.replace(/[ \t]+/g, '');
      } else text = calleeText(src, calls[i].node)?.text;
    }
    if (copy) copy.callee = text ?? null;
    callees[i] = text;
    if (text && classes.has(text)) {
      const list = byCallee.get(text) ?? [];
      list.push(calls[i]);
      byCallee.set(text, list);
    }
  }
  const scopeOf = (call: CallRec): EvalScope => ({
    fn: call.scope.fn, cls: call.scope.cls ? classes.get(call.scope.cls.name) : undefined, pos: call.start,
  });
  const ctorSites = (cls: string): CallRec[] => byCallee.get(cls) ?? [];
  const evaluator = new Evaluator(src, classes, walk.moduleAssigns, (cls) => ctorSites(cls).map((call) => ({ call, scope: scopeOf(call) })), dims);

  const layerCtx: LayerContext = { src, imports, classes, walk, evaluator, callees, stats: cache };
  if (cache) {
    layerCtx.memoKey = memoKeys(layerCtx, byCallee, cache);
    if (layerCtx.memoKey) layerCtx.ctorMemo = cache.ctorMemo as LayerContext['ctorMemo'];
  }
  const recs = collectLayers(layerCtx);
  const ties = collectTies(src, walk.assigns, walk.calls, callees);
  const vocabNames = new Set<string>();
  assignRoles({ src, classes, ties, tiedKeys: tiedKeys(src, walk.classes), ctorSites, vocabNames }, recs);
  for (const r of recs) decide(r, evaluator);
  keepInFp32(recs, keepFp32Modules(src, walk.classes));
  keepTorchFallbacks(recs);

  const facts = collectCalls(src, imports, walk.calls, walk.functions, callees, (n) => classes.get(n)?.isModule === true);
  const autocastRegions = collectAutocast(src, imports, walk.withs, walk.calls, walk.assigns);
  const autocastContexts = collectAutocastContexts(src, imports, walk.calls, callees, autocastRegions);

  // The inserted FP8 fallback wrapper is the project's own code: its te.* and torch.nn layers, its autocast and its
  // checks are not the user's model (routing or converting them would make the wrapper call itself).
  const skip = src.includes(WRAPPER_END_MARKER) ? wrapperRanges(src) : [];
  const outside = (span: { startOffset: number }): boolean => !skip.some(([a, b]) => span.startOffset >= a && span.startOffset < b);
  const layers = skip.length ? recs.filter((r) => outside(r.layer.span)).map((r) => r.layer) : recs.map((r) => r.layer);
  const teBindings = imports.bindings.filter((b) => b.target.startsWith('transformer_engine'));
  const incomplete = evaluator.exhausted
    ? 'analysis stopped at its work budget (dimensions left unevaluated): some findings may be missing'
    : undefined;
  return {
    ...(incomplete ? { incomplete } : {}),
    importsTorch: imports.bindings.some((b) => /^torch(\.|$)/.test(b.target)),
    importsTe: teBindings.length > 0,
    teImportUnguarded: teBindings.some((b) => !b.guarded),
    imports: imports.bindings,
    classes: [...classes.values()].map((c) => c.info),
    layers,
    autocastRegions: skip.length ? autocastRegions.filter((r) => outside(r.span)) : autocastRegions,
    autocastContexts: skip.length ? autocastContexts.filter(outside) : autocastContexts,
    weightTies: ties,
    fp8Conversions: facts.conversions,
    quantization: facts.quantization,
    recipes: skip.length ? facts.recipes.filter((r) => outside(r.span)) : facts.recipes,
    calls: skip.length ? facts.calls.filter((c) => outside(c.span) || c.kind === 'fp8_check' || c.kind === 'log_precision') : facts.calls,
    vocabNames: [...vocabNames],
    ptq: collectPtq({ src, imports, walk, callees, layers }),
    hasSyntaxErrors,
  };
}

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
const WORD = /[A-Za-z_]\w*/g;
const ANNOTATED = /:\s*["']?\s*(?:Optional\s*\[\s*["']?\s*)?([A-Za-z_]\w*)/g;

function memoKeys(ctx: LayerContext, byCallee: Map<string, CallRec[]>, cache: AnalysisCache): ((stmt: Stmt) => string) | undefined {
  const { src, walk, imports, classes } = ctx;
  // Module-level assignments by name (what the evaluator reads: identifier targets), in document order.
  const modByName = new Map<string, { start: number; stmt: Stmt }[]>();
  for (const a of walk.moduleAssigns) {
    const left = a.node.childForFieldName('left');
    const st = stmtOf(a.node);
    if (!st) return undefined;
    if (!left || left.type !== 'identifier') continue;
    const name = src.slice(left.startIndex, left.endIndex);
    const l = modByName.get(name);
    if (l) l.push({ start: a.start, stmt: st }); else modByName.set(name, [{ start: a.start, stmt: st }]);
  }
  /** How many assignments to `name` come before an offset (which one a use there sees). */
  const assignsBefore = (name: string, offset: number): number => {
    let n = 0;
    for (const a of modByName.get(name) ?? []) if (a.start < offset) n++;
    return n;
  };
  const classStmts = new Map<string, Stmt[]>();
  const classesIn = new Map<Stmt, string[]>();
  for (const c of walk.classes) {
    const st = stmtOf(c.node);
    if (!st) return undefined;
    const l = classStmts.get(c.name);
    if (l) l.push(st); else classStmts.set(c.name, [st]);
    const n = classesIn.get(st);
    if (n) n.push(c.name); else classesIn.set(st, [c.name]);
  }
  const depsCache = new Map<Stmt, Stmt[]>();
  const directDeps = (st: Stmt): Stmt[] => {
    let d = depsCache.get(st);
    if (d) return d;
    d = [];
    for (const name of classesIn.get(st) ?? []) {
      for (const s of classStmts.get(name) ?? []) d.push(s);
      for (const call of byCallee.get(name) ?? []) { const s = stmtOf(call.node); if (s) d.push(s); }
      const m = classes.get(name);
      for (const rb of m?.info.resolvedBases ?? []) {
        if (rb.startsWith('local:')) for (const s of classStmts.get(rb.slice(6)) ?? []) d.push(s);
      }
    }
    depsCache.set(st, d);
    return d;
  };
  const close = (roots: Iterable<Stmt>, into: Set<Stmt>, skip?: Set<Stmt>): void => {
    const stack = [...roots];
    while (stack.length) {
      const st = stack.pop() as Stmt;
      if (into.has(st) || skip?.has(st)) continue;
      into.add(st);
      for (const d of directDeps(st)) stack.push(d);
    }
  };
  // Ids in document order: also tells, for each module-level name read, which of its assignments precede which statement.
  // With `skip` (the global statements, named in the head), each statement left carries how many of the skipped ones
  // precede it, so the key still tells its position among them.
  const sig = (set: Set<Stmt>, skip?: Set<Stmt>): string => {
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
  };

  // File-wide part.
  const globalRoots: Stmt[] = [];
  // What the evaluator reads file-wide besides names (dim-sources.ts): config presets (module-level lists / dicts of
  // configurations) and argparse defaults.
  for (const a of presetAssigns(src, walk.moduleAssigns, classes)) {
    const st = stmtOf(a.node);
    if (!st) return undefined;
    globalRoots.push(st);
  }
  walk.calls.forEach((c, i) => {
    if (!ctx.callees[i]?.endsWith('.add_argument')) return;
    const st = stmtOf(c.node);
    if (st) globalRoots.push(st);
  });
  // Config-style classes (what `config.x` reads), field by field: a statement depends on a field's defaults when the
  // field's name occurs in the text it may evaluate (its closure and the global statements), and on the fields those
  // defaults name in turn. A config class whose defaults read `self` is global as a whole. What a constructor call of
  // a local class builds is part of the key of the statements that call it (below).
  const parts: string[] = [];
  const fieldSigs = new Map<string, string[]>();
  const defaultWords = new Map<string, string[]>();
  for (const m of classes.values()) {
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
      const before = w.filter((x) => modByName.has(x)).map((x) => `${x}@${assignsBefore(x, m.rec.start)}`).join(',');
      const e = `${m.info.name}:${before}:${t}`;
      const l = fieldSigs.get(f);
      if (l) l.push(e); else fieldSigs.set(f, [e]);
      const dw = defaultWords.get(f);
      if (dw) dw.push(...w); else defaultWords.set(f, w);
    }
  }
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
  /**
   * What evaluation in `stmts` may read by name, to a fixpoint: config fields (and the names their defaults use) and
   * module-level names (the statements assigning them join the set). Returns the config part of the key; `stmts` grows.
   */
  const readByName = (stmts: Set<Stmt>): string => {
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
  const ctorFacts = new Map<string, string>();
  const factsOf = (name: string): string => {
    let f = ctorFacts.get(name);
    if (f === undefined) {
      const c = ctorFor(ctx, name);
      f = c ? cache.intern([c.resolved, c.ctor.kind, c.ctor.isTe, c.ctor.params.join('+'), c.ctor.te, c.ctor.parallelMode, c.ctor.local?.info.name, c.ctor.display, c.ctor.factory].join('\u0001')) : '-';
      ctorFacts.set(name, f);
    }
    return f;
  };
  // Local classes called in each statement.
  const calledIn = new Map<Stmt, Set<string>>();
  for (const [name, calls] of byCallee) {
    for (const call of calls) {
      const st = stmtOf(call.node);
      if (!st) continue;
      const set = calledIn.get(st);
      if (set) set.add(name); else calledIn.set(st, new Set([name]));
    }
  }
  // Class names whose mere existence other statements read: `X(...)` calls are keyed per statement (calledIn) and
  // local bases through the statements closure; what is left: an imported `*linear` factory is one only when no local
  // class has its name, and a parameter annotation names a local class (`config: GPTConfig`). Annotation texts are
  // over-approximated by a scan of the text: any name after a `:` (optionally quoted or in Optional[...]).
  const annotated = new Set<string>();
  for (const m of ctx.src.matchAll(ANNOTATED)) annotated.add(m[1]);
  const namesRead = walk.classes.map((c) => c.name).filter((n) => annotated.has(n) || /linear$/i.test(n));
  const globalSet = new Set<Stmt>();
  close(globalRoots, globalSet);
  const head = [
    [...imports.map].map(([k, v]) => `${k}=${v}`).join(';'), imports.starModules.join(';'),
    walk.functions.filter((f) => /linear$/i.test(f.name)).map((f) => f.name).join(';'), namesRead.join(';'),
    parts.join(';'), sig(globalSet),
  ].join('\u0003');
  // Keys carry a version of the file-wide part rather than the part itself (short keys, cheap to compare).
  if (head !== cache.memoHead) { cache.memoHead = head; cache.memoVersion++; }
  const version = cache.memoVersion;
  if (cache.ctorMemoVersion !== version) { cache.ctorMemo = new Map(); cache.ctorMemoVersion = version; }
  const keys = new Map<Stmt, string>();
  return (stmt) => {
    let k = keys.get(stmt);
    if (k === undefined) {
      const set = new Set<Stmt>();
      close([stmt], set, globalSet);
      for (const g of globalSet) set.add(g);
      const fields = readByName(set);
      const called = calledIn.get(stmt);
      // The global statements are in the head (its version): only the statement's own closure is spelled out.
      k = `${version}\u0004${sig(set, globalSet)}\u0004${called ? [...called].map(factsOf).join(',') : ''}\u0004${fields}`;
      keys.set(stmt, k);
    }
    return k;
  };
}
