/**
 * Verdicts: can this layer move to a te.* module, and why. The verdict is three facets (checks.ts), each the outcome of
 * a list of small named checks: structure (checks-structure.ts), role (checks-role.ts), shape (checks-shape.ts);
 * convertible follows from them. Reasons are full sentences: fact, consequence, what to do.
 */
import type { Layer, LayerFacets } from './ir';
import type { SyntaxNode } from './node';
import type { Evaluator } from './dims';
import type { LayerRec, LayerSnap } from './layers';
import { convertibleOf, facetFact, runFacet } from './checks';
import { ROLE_CHECKS } from './checks-role';
import { SHAPE_CHECKS, shapeRule } from './checks-shape';
import { STRUCTURE_CHECKS } from './checks-structure';
import { LIKE_FACTORY } from './known';

export { shapeRule } from './checks-shape';

/** A memoised verdict field, copied so that the IR never shares arrays or objects between analyses. */
function copyOut(v: unknown): unknown {
  if (Array.isArray(v)) return v.slice();
  if (v && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    // facets: one level of nested fact objects (strings inside); teArgs: flat.
    const out: Record<string, unknown> = {};
    for (const k of Object.keys(o)) { const x = o[k]; out[k] = x && typeof x === 'object' ? { ...(x as object) } : x; }
    return out;
  }
  return v;
}

/**
 * Sets facets, convertible, reasons, teEquivalent, teArgs, shapeOk, zeroCenteredGamma and convertsWhen. Besides the layer as built (its
 * statement memo, layers.ts), a verdict reads only the role fields and the facts of a local class named in the key:
 * a record reused from its memo reuses its verdict while that key is unchanged.
 */
export function decide(rec: LayerRec, ev: Evaluator): void {
  const snap = rec.snap;
  if (!snap) return decideUncached(rec, ev);
  const L = rec.layer;
  // The role fields come from snap.roleMemo (roles.ts sets or reuses it just before): the same memo object means the
  // same role, reasons and ties.
  const role = snap.roleMemo;
  const facts = ctorFacts(rec.ctor);
  const hit = snap.verdictMemo;
  if (hit && role && hit.role === role && hit.facts === facts) {
    const o = hit.out;
    // The same own keys as decideUncached leaves them (the IR is compared deep-equal), arrays and objects copied.
    for (const k of Object.keys(o) as (keyof typeof o)[]) {
      const v = o[k];
      (L as unknown as Record<string, unknown>)[k] = copyOut(v);
    }
    return;
  }
  decideUncached(rec, ev);
  const out: Record<string, unknown> = {};
  for (const k of ['shapeOk', 'convertible', 'reasons', 'teEquivalent', 'teArgs', 'zeroCenteredGamma', 'convertsWhen', 'facets'] as const) {
    if (!Object.prototype.hasOwnProperty.call(L, k)) continue;
    const v = L[k];
    out[k] = copyOut(v);
  }
  if (role) snap.verdictMemo = { role, facts, out: out as NonNullable<LayerSnap['verdictMemo']>['out'] };
}

/** What a verdict reads of the constructor and of a local layer class, as one string (once per constructor object). */
const ctorFactsCache = new WeakMap<object, string>();
function ctorFacts(c: LayerRec['ctor']): string {
  let f = ctorFactsCache.get(c);
  if (f === undefined) {
    const info = c.local?.info;
    f = `${c.kind}\u0001${c.isTe}\u0001${c.te}\u0001${c.display}\u0001${c.parallelMode}\u0001${c.transposedWeight}\u0001${c.imported}\u0001${c.importedForward?.scaleName ?? (c.importedForward ? 'weight' : '')}\u0001${!!c.importedForward?.unitOffset}\u0001${c.noTe}`
      + (info ? `\u0001${info.layerKindReason}\u0001${info.zeroCenteredGamma}\u0001${info.zeroCenteredConditional}\u0001${info.ownImplementation}\u0001${c.local?.hasBias}`
        + `\u0001${JSON.stringify(info.channelAxis ?? null)}\u0001${JSON.stringify(c.local?.normDefaults ?? null)}\u0001${c.local?.rmsBias}`
        + `\u0001${info.extraParams?.join(',')}\u0001${info.forwardExtra}\u0001${info.weightReplacedBy}\u0001${info.grouped}\u0001${info.extraInputs?.join(',')}\u0001${info.weightless}\u0001${info.weightOptional}\u0001${info.scaleName}\u0001${info.weightTransformed}` : '');
    ctorFactsCache.set(c, f);
  }
  return f;
}

/** A te.* layer already: nothing to convert; its shape still matters under FP8 autocast. */
function decideTe(L: Layer): void {
  const gemm = L.kind === 'linear' || L.kind === 'parallel-linear' || /(Linear|LayerNormMLP|MultiheadAttention|TransformerLayer)$/.test(L.resolved);
  const norm = L.kind === 'layernorm' || L.kind === 'rmsnorm';
  const reasons = [gemm
    ? `${L.constructor} is already a Transformer Engine layer: its GEMMs run in FP8 inside an FP8 autocast region, so there is nothing to convert.`
    : norm
      ? `${L.constructor} is already a Transformer Engine norm: it computes in high precision and can hand FP8 to the next TE layer, so there is nothing to convert.`
      : `${L.constructor} is already a Transformer Engine module, so there is nothing to convert.`];
  const s = shapeRule(L.inFeatures, L.outFeatures);
  if (L.shapeOk === false) {
    reasons.push(`Its shape breaks the FP8 GEMM rule (${s.failing.join('; ')}): under FP8 autocast TE raises an error for it; pad the dimension or keep this layer out of the FP8 region.`);
  }
  if (L.role === 'lm_head') reasons.push('It is the lm-head: run it outside FP8 autocast (or under te.autocast(enabled=False)) to keep the logits in BF16.');
  L.convertible = false;
  L.reasons = reasons;
  L.facets = {
    structure: { state: 'fails', reason: reasons[0], check: 'already-te' },
    role: { role: L.role, state: L.role === 'lm_head' ? 'fails' : 'ok', reason: L.role === 'lm_head' ? reasons[reasons.length - 1] : `Its role (${L.role}) does not keep it in high precision.`, check: L.role === 'lm_head' ? 'lm-head' : 'none' },
    shape: { state: s.ok === false ? 'fails' : s.ok ? 'ok' : 'guarded', reason: s.failing.join('; ') || (s.ok ? 'Its dims meet the FP8 rule.' : 'Its dims are not known statically.'), check: 'fp8-gemm-shape' },
  };
}

function teTarget(rec: LayerRec): void {
  const L = rec.layer;
  if (L.kind === 'linear' || L.kind === 'parallel-linear') {
    L.teEquivalent = 'te.Linear';
    L.teArgs = teArgsLinear(rec);
  } else if (L.kind === 'layernorm' || L.kind === 'rmsnorm') {
    L.teEquivalent = L.kind === 'layernorm' ? 'te.LayerNorm' : 'te.RMSNorm';
    L.teArgs = teArgsNorm(rec);
  }
}

function decideUncached(rec: LayerRec, ev: Evaluator): void {
  const L = rec.layer;
  if (L.kind === 'linear' || L.kind === 'parallel-linear') L.shapeOk = shapeRule(L.inFeatures, L.outFeatures).ok;
  if (L.isTe) return decideTe(L);
  teTarget(rec);
  const role = runFacet(ROLE_CHECKS, rec, ev, true);
  const structure = runFacet(STRUCTURE_CHECKS, rec, ev);
  const shape = runFacet(SHAPE_CHECKS, rec, ev);
  if (L.kind === 'linear' || L.kind === 'parallel-linear') L.shapeOk = shape.state === 'ok' ? true : shape.state === 'fails' ? false : undefined;
  const facets: LayerFacets = {
    structure: facetFact(structure, L.teEquivalent ? `${L.teEquivalent} represents this construction exactly.` : 'No te.* class to compare with.'),
    role: { role: L.role, ...facetFact(role, `Its role (${L.role}) does not keep it in high precision.`) },
    shape: facetFact(shape, L.kind === 'layernorm' || L.kind === 'rmsnorm' ? 'A norm runs no GEMM: the FP8 shape rule does not apply.' : 'No FP8 GEMM shape rule applies.'),
  };
  L.facets = facets;
  L.convertible = convertibleOf(facets);
  // The role, when it protects the layer, is the whole story; otherwise the shape (for a GEMM) and then the structure.
  if (role.state === 'fails') L.reasons = role.reasons;
  else if (structure.exclusive) L.reasons = structure.reasons;
  else L.reasons = [...shape.reasons, ...structure.reasons];
}

/**
 * Sets the role facet of a layer that a file-wide pass protects after the per-layer verdict (the model's
 * _keep_in_fp32_modules, a deliberate torch.nn fallback of a te.* twin).
 */
function protect(L: Layer, check: string, reason: string): void {
  L.convertible = false;
  L.reasons = [reason];
  if (L.facets) L.facets = { ...L.facets, role: { role: L.role, state: 'fails', reason, check } };
}

function teArgsLinear(rec: LayerRec): Record<string, string> {
  const o = rec.layer.options;
  const a: Record<string, string> = {};
  if (o.bias !== undefined) a.bias = o.bias;
  if (o.dtype !== undefined) a.params_dtype = o.dtype;
  if (o.device !== undefined) a.device = o.device;
  if (rec.ctor.parallelMode) a.parallel_mode = `"${rec.ctor.parallelMode}"`;
  return a;
}

function teArgsNorm(rec: LayerRec): Record<string, string> {
  const o = rec.layer.options;
  const a: Record<string, string> = {};
  if (o.eps !== undefined) a.eps = o.eps;
  if (o.dtype !== undefined) a.params_dtype = o.dtype;
  if (o.device !== undefined) a.device = o.device;
  if (rec.ctor.local?.info.zeroCenteredGamma || rec.ctor.importedForward?.unitOffset) a.zero_centered_gamma = 'True';
  return a;
}

/**
 * Hugging Face's `_keep_in_fp32_modules`: the model author keeps these modules in float32 even when the rest of the
 * model runs in half precision (T5 keeps its `wo` projections there because their activations overflow FP16), so
 * moving them to FP8 goes against the model's own precision contract. Applies to the Linear layers of the file whose
 * attribute or any component of the module path is listed, as Hugging Face matches names.
 */
export function keepInFp32(recs: LayerRec[], lists: Map<string, string[]>): void {
  if (!lists.size) return;
  const byName = new Map<string, string>();
  for (const [cls, names] of lists) for (const n of names) if (!byName.has(n)) byName.set(n, cls);
  for (const r of recs) {
    const L = r.layer;
    if (L.isTe || (L.kind !== 'linear' && L.kind !== 'parallel-linear') || L.convertible === false) continue;
    const segs = [L.attr ?? '', ...(L.path ?? '').split(/[.[\]*]+/)].filter(Boolean);
    const hit = segs.find((s) => byName.has(s));
    if (hit === undefined) continue;
    protect(L, 'keep-in-fp32-modules', `${byName.get(hit)}._keep_in_fp32_modules lists "${hit}": the model keeps this layer in float32 even when the rest runs in half precision (typically because its activations overflow in lower precision), so keep it out of FP8 and in high precision.`);
  }
}

/**
 * A torch.nn layer assigned to the same attribute of the same class as a te.* layer (`if use_te and te is not None:
 * self.norm = te.LayerNorm(d) else: self.norm = nn.LayerNorm(d)`, llm-foundry): the deliberate fallback for when
 * Transformer Engine is off or missing. Converting it would make the fallback need TE too, so it stays.
 */
export function keepTorchFallbacks(recs: LayerRec[]): void {
  const te = new Map<string, LayerRec[]>();
  for (const r of recs) {
    const L = r.layer;
    if (!L.isTe || !L.ownerClass || !L.name) continue;
    const key = `${L.ownerClass}\u0001${L.name}`;
    const list = te.get(key);
    if (list) list.push(r); else te.set(key, [r]);
  }
  // te.* layers built around other constructions: the fallback's factories (`fp8_parallel_linear(lambda: X(...))`).
  const factories = recs.filter((r) => r.layer.isTe && (r.layer.viaFallback || r.layer.viaFactory));
  if (!te.size && !factories.length) return;
  const index = factories.length ? factoryIndex(factories) : undefined;
  for (const r of recs) {
    const L = r.layer;
    if (L.isTe || L.convertible === false) continue;
    const factory = index ? factoryAround(L, index) : undefined;
    if (factory) {
      L.fallbackFor = `${factory} (line ${L.span.startLine + 1})`;
      protect(L, 'built-by-fallback-factory', `This ${L.constructor} is what ${factory} builds where FP8 does not run (its fallback), so it stays as it is.`);
      continue;
    }
    if (L.alternativeOf) {
      L.fallbackFor = `${L.alternativeOf} (line ${L.span.startLine + 1})`;
      protect(L, 'torch-fallback-of-te', L.alternativeOf === LIKE_FACTORY
        ? `This ${L.constructor}(...) is passed to ${L.alternativeOf}(...), which converts what it returns where FP8 runs: it stays as it is.`
        : `This ${L.constructor} is the other branch of a conditional whose first choice is ${L.alternativeOf}(...): the layer built where that branch is not taken, so it stays as it is.`);
      continue;
    }
    if (!L.ownerClass || !L.name) continue;
    // Elements of one container (`nn.Sequential(te.LayerNorm(d), nn.Linear(d, h))`) share their path but are
    // siblings, not alternatives; and a fallback is the same kind of layer as its te.* twin.
    const twin = te.get(`${L.ownerClass}\u0001${L.name}`)?.find((t) => !sameContainer(r, t) && twinKind(t.layer.kind, L.kind));
    if (!twin) continue;
    L.fallbackFor = `${twin.layer.constructor} (line ${twin.layer.span.startLine + 1})`;
    protect(L, 'torch-fallback-of-te', `${L.name} is also built as ${twin.layer.constructor} (line ${twin.layer.span.startLine + 1}) in ${L.ownerClass}: this ${L.constructor} is the fallback for when Transformer Engine is off or missing, so it stays as it is.`);
  }
}

/**
 * The te.* factory calls by start, with the furthest end reached so far: the first factory that encloses a layer is
 * found by two binary searches (a file converted through the fallback has a factory per layer).
 */
interface FactoryIndex { byStart: LayerRec[]; maxEnd: number[] }

function factoryIndex(factories: LayerRec[]): FactoryIndex {
  const byStart = [...factories].sort((a, b) => a.layer.span.startOffset - b.layer.span.startOffset);
  const maxEnd: number[] = [];
  for (const f of byStart) maxEnd.push(Math.max(maxEnd[maxEnd.length - 1] ?? -1, f.layer.span.endOffset));
  return { byStart, maxEnd };
}

/** The te.* factory call whose arguments build this layer (`fp8_parallel_linear(lambda: X(...), ...)`), if any. */
function factoryAround(L: LayerRec['layer'], index: FactoryIndex): string | undefined {
  const { byStart, maxEnd } = index;
  // Factories starting before the layer: [0, before).
  let lo = 0;
  let hi = byStart.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (byStart[mid].layer.span.startOffset < L.span.startOffset) lo = mid + 1; else hi = mid; }
  const before = lo;
  // The first of them whose end (the furthest so far) reaches the layer's end encloses it.
  lo = 0;
  hi = before;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (maxEnd[mid] >= L.span.endOffset) hi = mid; else lo = mid + 1; }
  return lo < before ? byStart[lo].layer.constructor : undefined;
}

/** Whether two layers are elements of the same container call (nn.Sequential / nn.ModuleList / a list literal). */
function sameContainer(a: LayerRec, b: LayerRec): boolean {
  // Instances of one factory call (te.* where FP8 runs, torch.nn elsewhere) are alternatives, not siblings.
  if (!a.layer.container || !b.layer.container || a.call.node === b.call.node) return false;
  for (let p = a.call.node.parent, i = 0; p && i < 12; p = p.parent, i++) {
    if (p.type === 'assignment' || p.type === 'expression_statement' || p.type === 'return_statement') break;
    if ((p.type === 'call' || p.type === 'list' || p.type === 'tuple') && p.startIndex <= b.call.node.startIndex && b.call.node.endIndex <= p.endIndex) {
      // A conditional that picks one of the two is a choice, not a container.
      return !hasConditionalBetween(p, a.call.node, b.call.node);
    }
  }
  return false;
}

function hasConditionalBetween(top: SyntaxNode, a: SyntaxNode, b: SyntaxNode): boolean {
  for (const n of [a, b]) for (let p = n.parent; p && p !== top; p = p.parent) if (p.type === 'conditional_expression') return true;
  return false;
}

/** A torch.nn fallback has the kind of its te.* twin (te.LayerNormLinear and whole blocks accept any). */
function twinKind(te: string, torch: string): boolean {
  const norm = (k: string): string => (k === 'layernorm' || k === 'rmsnorm' ? 'norm' : k === 'parallel-linear' ? 'linear' : k);
  return te === 'other' || norm(te) === norm(torch);
}
