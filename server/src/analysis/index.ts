/**
 * The analysis engine: a web-tree-sitter tree of a Python file in, the model IR out. Pure: no LSP, no VS Code, no I/O.
 * Never throws on its input: broken or binary input gives what can be analysed soundly, with hasSyntaxErrors set (only
 * a WASM trap of the parser runtime is rethrown, for the caller to retire it).
 */
import { isWasmTrap, type Tree } from '../engine/parser';
import type { ExternalDims, ExternalSites, ModelIR } from './ir';
import { collectAutocast, collectAutocastContexts } from './autocast';
import { collectCalls, collectTies, keepFp32Modules, tiedKeys } from './calls';
import { analyzeClasses } from './classes';
import { Evaluator, type EvalScope } from './dims';
import { collectAliases, collectImports, resolveRelativeImports } from './imports';
import { calleeText, collectLayers, type LayerContext } from './layers';
import { assignRoles } from './roles';
import { decide, keepInFp32, keepTorchFallbacks } from './verdict';
import { walkNodes, type CallRec } from './walk';
import { AnalysisCache, copyOf, mirrorWalkNodes, WALK_TYPES, type SyntaxNode } from './node';
import { WRAPPER_END_MARKER, wrapperRanges } from './known';
import { spanAt, useText } from './spans';
import { collectPtq } from './ptq';
import { memoKeys } from './memo-keys';

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
  /** Places other analysed files build classes of this file (`ViT(dim=1024)` in train.py), by class name. */
  sites?: ExternalSites;
  /** The text's line table (lines.lineStartsOf) when the caller has it: not rebuilt then. */
  lineStarts?: readonly number[];
}

export function analyzeTree(tree: Tree, text: string, cache?: AnalysisCache, options: AnalysisOptions = {}): ModelIR {
  let hasErrors = false;
  try {
    // Memoised layer records hold evaluated dims: other external sizes invalidate them.
    const dimsKey = (options.dims && Object.keys(options.dims).length) || (options.sites && Object.keys(options.sites).length)
      ? JSON.stringify([options.dims ?? null, options.sites ?? null]) : '';
    if (cache && cache.dimsKey !== dimsKey) {
      cache.clear();
      cache.dimsKey = dimsKey;
    }
    hasErrors = tree.rootNode.hasError;
    let nodes: SyntaxNode[];
    if (cache) {
      useText(text, options.lineStarts);
      nodes = mirrorWalkNodes(tree, text, cache, hasErrors);
    } else nodes = tree.rootNode.descendantsOfType(WALK_TYPES);
    const ir = analyze(nodes, text, hasErrors, cache, options);
    if (hasErrors) ir.syntaxError = firstSyntaxError(tree);
    return ir;
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

/** The first ERROR or MISSING node in document order (only subtrees that hold an error are entered). */
function firstSyntaxError(tree: Tree): ModelIR['syntaxError'] {
  const cursor = tree.walk();
  try {
    for (;;) {
      const n = cursor.currentNode;
      if (n.isError || n.isMissing) return spanAt(n.startIndex, Math.max(n.endIndex, n.startIndex));
      if (n.hasError && cursor.gotoFirstChild()) continue;
      while (!cursor.gotoNextSibling()) if (!cursor.gotoParent()) return undefined;
    }
  } finally {
    cursor.delete();
  }
}

function analyze(nodes: readonly SyntaxNode[], src: string, hasSyntaxErrors: boolean, cache: AnalysisCache | undefined, options: AnalysisOptions): ModelIR {
  useText(src, options.lineStarts);
  const walk = walkNodes(nodes, src);
  const imports = collectImports(src, walk.imports);
  resolveRelativeImports(imports);
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
  const evaluator = new Evaluator(src, classes, walk.moduleAssigns, (cls) => ctorSites(cls).map((call) => ({ call, scope: scopeOf(call) })), options.dims, options.sites);

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
