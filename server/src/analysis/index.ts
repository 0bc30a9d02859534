/**
 * The analysis engine: a web-tree-sitter tree of a Python file in, the model IR out. Pure: no LSP, no VS Code, no I/O.
 * Never throws: broken or binary input gives what can be analysed soundly, with hasSyntaxErrors set.
 */
import type { Tree } from '../parser';
import type { ModelIR } from './ir';
import { collectAutocast } from './autocast';
import { collectCalls, collectTies, tiedKeys } from './calls';
import { analyzeClasses } from './classes';
import { Evaluator, type EvalScope } from './dims';
import { collectAliases, collectImports } from './imports';
import { calleeText, collectLayers } from './layers';
import { assignRoles } from './roles';
import { decide } from './verdict';
import { walkNodes, type CallRec } from './walk';
import { AnalysisCache, mirrorWalkNodes, WALK_TYPES, type SyntaxNode } from './node';
import { useText } from './spans';

export type * from './ir';
export { AnalysisCache } from './node';

/** An empty IR (what a file with nothing to analyse gives). */
export function emptyIR(hasSyntaxErrors = false): ModelIR {
  return {
    importsTorch: false, importsTe: false, teImportUnguarded: false, imports: [], classes: [], layers: [],
    autocastRegions: [], weightTies: [], fp8Conversions: [], recipes: [], calls: [], vocabNames: [], hasSyntaxErrors,
  };
}

/**
 * Analyses one parsed Python file. `text` must be the text the tree was parsed from. With a `cache` (one per document,
 * kept across edits), the tree is copied statement by statement into JS and only statements whose text changed since
 * the last call are copied again; the IR is the same as without.
 */
export function analyzeTree(tree: Tree, text: string, cache?: AnalysisCache): ModelIR {
  let hasErrors = false;
  try {
    hasErrors = tree.rootNode.hasError;
    let nodes: SyntaxNode[];
    if (cache) {
      useText(text);
      nodes = mirrorWalkNodes(tree, text, cache, hasErrors);
    } else nodes = tree.rootNode.descendantsOfType(WALK_TYPES);
    return analyze(nodes, text, hasErrors);
  } catch (err) {
    cache?.clear();
    // Best effort: an internal failure on odd input must not take the server down.
    const ir = emptyIR(true);
    ir.analysisError = err instanceof Error ? err.message : String(err);
    return ir;
  }
}

function analyze(nodes: readonly SyntaxNode[], src: string, hasSyntaxErrors: boolean): ModelIR {
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
    if (i + 1 < calls.length && calls[i + 1].start === start) {
      text = calleeText(src, calls[i].node)?.text;
    } else {
      simpleCallee.lastIndex = start;
      const m = simpleCallee.exec(src);
      if (m) {
        const t = m[0];
        text = t.indexOf(' ') < 0 && t.indexOf('\t') < 0 ? t : t.replace(/[ \t]+/g, '');
      } else text = calleeText(src, calls[i].node)?.text;
    }
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
  const evaluator = new Evaluator(src, classes, walk.moduleAssigns, (cls) => ctorSites(cls).map((call) => ({ call, scope: scopeOf(call) })));

  const recs = collectLayers({ src, imports, classes, walk, evaluator, callees });
  const ties = collectTies(src, walk.assigns, walk.calls, callees);
  const vocabNames = new Set<string>();
  assignRoles({ src, classes, ties, tiedKeys: tiedKeys(src, walk.classes), ctorSites, vocabNames }, recs);
  for (const r of recs) decide(r, evaluator);

  const facts = collectCalls(src, imports, walk.calls, walk.functions, callees);
  const autocastRegions = collectAutocast(src, imports, walk.withs, walk.calls);

  const teBindings = imports.bindings.filter((b) => b.target.startsWith('transformer_engine'));
  return {
    importsTorch: imports.bindings.some((b) => /^torch(\.|$)/.test(b.target)),
    importsTe: teBindings.length > 0,
    teImportUnguarded: teBindings.some((b) => !b.guarded),
    imports: imports.bindings,
    classes: [...classes.values()].map((c) => c.info),
    layers: recs.map((r) => r.layer),
    autocastRegions,
    weightTies: ties,
    fp8Conversions: facts.conversions,
    recipes: facts.recipes,
    calls: facts.calls,
    vocabNames: [...vocabNames],
    hasSyntaxErrors,
  };
}
