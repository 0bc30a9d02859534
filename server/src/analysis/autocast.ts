/**
 * FP8 autocast regions of both TE APIs (`te.fp8_autocast(...)`, `te.autocast(...)`), the calls inside them and the
 * `.backward()` calls among those.
 */
import type { SyntaxNode } from './node';
import type { AutocastApi, AutocastRegion, CallSite, Layer, ModelIR, Span } from './ir';
import { resolveName, type ImportTable } from './imports';
import { shortText, spanOf } from './spans';
import { leftOf, rightOf, argListOf, type AssignRec, type CallRec, type WithRec } from './walk';

const FALLBACK_CONTEXT = /^(\.*[A-Za-z_][\w.]*\.)?fp8_autocast_context$/;
const TE_AUTOCAST = /^transformer_engine(\.pytorch)?(\.[a-z_]\w*)*\.(fp8_autocast|autocast)$/;

/** Whether a resolved callee is a TE autocast; which API. */
export function teAutocastApi(resolved: string): AutocastApi | undefined {
  // The FP8 fallback's context (its inline block's, or imported from the project's module) is TE autocast where FP8 runs.
  if (FALLBACK_CONTEXT.test(resolved)) return 'fallback';
  const m = TE_AUTOCAST.exec(resolved);
  if (!m) return undefined;
  return m[3] === 'fp8_autocast' ? 'fp8_autocast' : 'autocast';
}

/** Finds the TE autocast call among a with statement's items (also `a if c else te.autocast(...)`). */
function autocastItem(src: string, imports: ImportTable, w: SyntaxNode, assigns: readonly AssignRec[]): { call: SyntaxNode; api: AutocastApi; partial?: boolean } | undefined {
  const clause = w.namedChildren.find((c) => c !== null && c.type === 'with_clause');
  if (!clause) return undefined;
  const candidates: SyntaxNode[] = [];
  for (const item of clause.namedChildren) {
    if (!item || item.type !== 'with_item') continue;
    let v = item.childForFieldName('value') ?? item.namedChild(0);
    if (v && v.type === 'as_pattern') v = v.namedChild(0);
    if (!v) continue;
    if (v.type === 'call') {
      candidates.push(v);
      // `fp8_ctx = functools.partial(te.autocast, enabled=True)`, then `with fp8_ctx():`.
      const f = v.childForFieldName('function');
      if (f?.type === 'identifier') {
        const bound = assignedCall(src, src.slice(f.startIndex, f.endIndex), w.startIndex, assigns);
        if (bound) candidates.push(bound);
      }
    } else if (v.type === 'identifier') {
      // `fp8_ctx = te.fp8_autocast(...)` earlier in the same function (or the module), then `with fp8_ctx:`
      // (Megatron, NeMo): the last such assignment before the block.
      const call = assignedCall(src, src.slice(v.startIndex, v.endIndex), w.startIndex, assigns);
      if (call) candidates.push(call);
    }
    else if (v.type === 'conditional_expression' || v.type === 'parenthesized_expression') {
      for (const k of v.namedChildren) if (k && k.type === 'call') candidates.push(k);
    }
  }
  for (const call of candidates) {
    const f = call.childForFieldName('function');
    if (!f) continue;
    const ft = src.slice(f.startIndex, f.endIndex).replace(/\s+/g, '');
    const api = teAutocastApi(resolveName(imports, ft));
    if (api) return { call, api };
    if (/(^|\.)partial$/.test(ft)) {
      const fn = call.childForFieldName('arguments')?.namedChild(0);
      const papi = fn ? teAutocastApi(resolveName(imports, src.slice(fn.startIndex, fn.endIndex).replace(/\s+/g, ''))) : undefined;
      if (papi) return { call, api: papi, partial: true };
    }
  }
  return undefined;
}

/** The call last assigned to `name` before `before`, in the function holding that offset or at module level. */
function assignedCall(src: string, name: string, before: number, assigns: readonly AssignRec[]): SyntaxNode | undefined {
  let hit: SyntaxNode | undefined;
  for (const a of assigns) {
    if (a.start >= before) break;
    const fn = a.scope.fn;
    if (fn && (before < fn.start || before >= fn.end)) continue;
    if (!src.startsWith(name, a.start) || /[\w.[]/.test(src.charAt(a.start + name.length))) continue;
    const left = leftOf(a);
    const right = rightOf(a);
    if (left?.type === 'identifier' && right?.type === 'call') hit = right;
  }
  return hit;
}

/** Builds regions; calls are assigned to every enclosing region through their scope's with stack. */
export function collectAutocast(src: string, imports: ImportTable, withs: WithRec[], calls: CallRec[], assigns: readonly AssignRec[]): AutocastRegion[] {
  const regions: AutocastRegion[] = [];
  const byWith = new Map<number, { region: AutocastRegion; bodyStart: number }>();
  for (const w of withs) {
    const hit = autocastItem(src, imports, w.node, assigns);
    if (!hit) continue;
    const body = w.node.childForFieldName('body') ?? w.node;
    const args: Record<string, string> = {};
    const argsNode = hit.call.childForFieldName('arguments');
    let pos = 0;
    let skip = hit.partial ? 1 : 0; // partial(te.autocast, ...): its first argument is the function
    for (const a of argsNode?.namedChildren ?? []) {
      if (!a || a.type === 'comment') continue;
      if (skip > 0) { skip--; continue; }
      if (a.type === 'keyword_argument') {
        const n = a.childForFieldName('name');
        const v = a.childForFieldName('value');
        if (n && v) args[src.slice(n.startIndex, n.endIndex)] = src.slice(v.startIndex, v.endIndex).replace(/\s+/g, ' ');
      } else if (a.type === 'list_splat' || a.type === 'dictionary_splat') {
        // `**kwargs`: the arguments are not known statically; positions after it mean nothing either.
        args[a.type === 'list_splat' ? '*' : '**'] = src.slice(a.startIndex, a.endIndex).replace(/\s+/g, ' ');
        pos = Infinity;
      } else {
        // fp8_autocast(enabled, calibrating, fp8_recipe, ...) / autocast(enabled, calibrating, recipe, ...)
        const names = hit.api === 'fp8_autocast' ? ['enabled', 'calibrating', 'fp8_recipe', 'fp8_group']
          : hit.api === 'fallback' ? ['enabled', 'recipe'] : ['enabled', 'calibrating', 'recipe', 'amax_reduction_group'];
        const name = names[pos++];
        if (name) args[name] = src.slice(a.startIndex, a.endIndex).replace(/\s+/g, ' ');
      }
    }
    const region: AutocastRegion = {
      span: spanOf(w.node),
      callSpan: spanOf(hit.call),
      bodySpan: spanOf(body),
      api: hit.api,
      disabled: args.enabled !== undefined && /^(False|0|None)$/.test(args.enabled.trim()),
      args,
      calls: [],
      backwardInside: [],
    };
    if (w.fnName) region.ownerFunction = w.fnName;
    regions.push(region);
    byWith.set(w.id, { region, bodyStart: body.startIndex });
  }
  if (!regions.length) return regions;
  for (const c of calls) {
    if (!c.scope.withs.length) continue;
    // One walk up per call (not one per enclosing region): where the innermost lambda holding it starts.
    let lambdaStart: number | undefined;
    let site: CallSite | undefined;
    for (const w of c.scope.withs) {
      const r = byWith.get(w.id);
      if (!r || c.start < r.bodyStart) continue;
      // A function defined inside the block runs when it is called, not here (`def closure(): loss.backward()`
      // handed to optimizer.step).
      if (c.scope.fn && c.scope.fn.start > w.start) continue;
      lambdaStart ??= innermostLambdaStart(c.node, c.scope.withs[0].start);
      if (lambdaStart >= w.start) continue;
      site ??= callSite(src, c.node);
      r.region.calls.push(site);
      if (/(^|\.)backward$/.test(site.callee)) r.region.backwardInside.push(site);
    }
  }
  return regions;
}

/**
 * TE autocast calls that are no `with` item of this file and not disabled: a context factory (`def fp8_ctx(): return
 * te.autocast(...)`, Megatron, composer), an ExitStack (`stack.enter_context(te.fp8_autocast(...))`, Lightning).
 */
export function collectAutocastContexts(
  src: string, imports: ImportTable, calls: readonly CallRec[], callees: readonly (string | undefined)[], regions: readonly AutocastRegion[],
): Span[] {
  const out: Span[] = [];
  const inWith = new Set(regions.map((r) => r.callSpan.startOffset));
  for (let i = 0; i < calls.length; i++) {
    const callee = callees[i];
    if (!callee || inWith.has(calls[i].start)) continue;
    const partial = /(^|\.)partial$/.test(callee);
    // Most calls are neither: their arguments are not read from the tree.
    if (!partial && !/autocast$/.test(callee)) continue;
    const a = argListOf(calls[i]);
    let args = a ? src.slice(a.startIndex, a.endIndex) : '';
    if (partial) {
      // `fp8_ctx = functools.partial(te.autocast, enabled=True)`: the arguments after the function.
      const f = a?.namedChild(0);
      if (!f || !teAutocastApi(resolveName(imports, src.slice(f.startIndex, f.endIndex).replace(/\s+/g, '')))) continue;
      args = `(${args.slice(1).slice(f.endIndex - a!.startIndex - 1).replace(/^\s*,\s*/, '')}`;
    } else if (!teAutocastApi(resolveName(imports, callee))) continue;
    if (/^\(\s*(enabled\s*=\s*)?(False|0|None)\s*[,)]/.test(args)) continue;
    out.push(spanOf(calls[i].node));
  }
  return out;
}

/** Where the innermost lambda holding the node starts, looking no further up than `stop`; -1 when none. */
function innermostLambdaStart(n: SyntaxNode, stop: number): number {
  for (let p = n.parent; p && p.startIndex >= stop; p = p.parent) if (p.type === 'lambda') return p.startIndex;
  return -1;
}

/** A call as a CallSite. */
export function callSite(src: string, call: SyntaxNode): CallSite {
  const f = call.childForFieldName('function');
  const callee = f ? src.slice(f.startIndex, f.endIndex).replace(/\s+/g, '') : '';
  const site: CallSite = { span: spanOf(call), callee, text: shortText(src.slice(call.startIndex, call.endIndex)) };
  if (f && f.type === 'attribute') {
    const o = f.childForFieldName('object');
    if (o) site.receiver = src.slice(o.startIndex, o.endIndex).replace(/\s+/g, '');
  }
  return site;
}

/** The te.* layers FP8 autocast changes: GEMMs and norms (not rotary embeddings or helper modules). */
const TE_FP8_MODULE = /(LayerNormMLP|MultiheadAttention|TransformerLayer|GroupedLinear|LayerNormLinear|DotProductAttention)$/;
export function fp8Layers(ir: ModelIR): Layer[] {
  return ir.layers.filter((l) => l.isTe && (l.kind !== 'other' || TE_FP8_MODULE.test(l.resolved)));
}
