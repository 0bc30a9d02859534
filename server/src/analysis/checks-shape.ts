/**
 * Shape check of the verdict: the FP8 GEMM rule (in_features % 16 == 0, out_features % 16 == 0) on the
 * dims known where the layer is built. `ok`: every size it can have meets it; `fails`: every one breaks it; `guarded`:
 * a size is unknown, or some of its possible sizes break it: the conversion then goes through the fallback module's
 * factory, which checks the rule when the layer is built and keeps torch.nn otherwise.
 */
import type { Dim, DimValue, Layer } from './ir';
import type { Check } from './checks';

/**
 * The FP8 GEMM rule for training a Linear (weight [out, in]): every GEMM's reduced dimension must be a multiple of 16,
 * so in_features (forward) and out_features (the backward's input-gradient GEMM). FP8-FACTS.md's `out % 8` holds for
 * the forward alone: te.Linear(64, 24) runs forward and fails in backward with "Leading dimension requirement on A for
 * FP8 GEMM. Caller must pad" (TE 2.20.2, H200: bench/results/h200/2026-12-02-rows/).
 */
export const FP8_OUT_MULTIPLE = 16;

export function shapeRule(inF?: Dim, outF?: Dim): { ok?: boolean; failing: string[] } {
  const failing: string[] = [];
  if (inF?.value !== undefined && inF.value % 16 !== 0) failing.push(`in_features ${inF.value} is not a multiple of 16`);
  if (outF?.value !== undefined && outF.value % FP8_OUT_MULTIPLE !== 0) failing.push(`out_features ${outF.value} is not a multiple of ${FP8_OUT_MULTIPLE}`);
  if (failing.length) return { ok: false, failing };
  if (inF?.value !== undefined && outF?.value !== undefined) return { ok: true, failing };
  return { ok: undefined, failing };
}

/** The factory a guarded conversion goes through (fixes/convert.ts FACTORY). */
const FACTORY_NAME = 'fp8_linear';
const CLASS_FACTORY_NAME = 'fp8_linear_from';

function knownNote(d: Dim | undefined): string | undefined {
  if (d?.value === undefined || !d.note) return undefined;
  return `${d.text} = ${d.value} (${d.note})`;
}

/** The values a dim can take: its alternatives, or its one value; empty when unknown. */
function possible(d: Dim | undefined): DimValue[] {
  if (!d) return [];
  if (d.values?.length) return d.values;
  return d.value !== undefined ? [{ value: d.value, source: d.source ?? { kind: 'literal', detail: d.text } }] : [];
}

const MAX_PAIRS = 64;

/** The FP8 rule over every (in, out) pair of possible sizes: the failing ones, described. */
function pairs(ins: DimValue[], outs: DimValue[]): { total: number; failing: string[] } {
  const failing: string[] = [];
  let total = 0;
  for (const i of ins) {
    for (const o of outs) {
      if (++total > MAX_PAIRS) return { total: total - 1, failing };
      const bad: string[] = [];
      if (i.value % 16 !== 0) bad.push(`in_features ${i.value} (${i.source.detail}) is not a multiple of 16`);
      if (o.value % FP8_OUT_MULTIPLE !== 0) bad.push(`out_features ${o.value} (${o.source.detail}) is not a multiple of ${FP8_OUT_MULTIPLE}`);
      if (bad.length) failing.push(bad.join(' and '));
    }
  }
  return { total, failing: [...new Set(failing)] };
}

const linearShape: Check = {
  name: 'fp8-gemm-shape', facet: 'shape',
  run({ L }) {
    if (L.kind !== 'linear' && L.kind !== 'parallel-linear') return undefined;
    const ins = possible(L.inFeatures);
    const outs = possible(L.outFeatures);
    const multi = (L.inFeatures?.values?.length ?? 0) > 1 || (L.outFeatures?.values?.length ?? 0) > 1;
    const single = shapeRule(L.inFeatures, L.outFeatures);
    if (!multi && single.ok === false) {
      const inV = L.inFeatures?.value;
      const outV = L.outFeatures?.value;
      const pad = [inV !== undefined && inV % 16 !== 0 ? 'in_features to a multiple of 16' : '', outV !== undefined && outV % FP8_OUT_MULTIPLE !== 0 ? `out_features to a multiple of ${FP8_OUT_MULTIPLE}` : ''].filter(Boolean).join(' and ');
      return { state: 'fails', reasons: [`FP8 GEMMs need in_features % 16 == 0 and out_features % ${FP8_OUT_MULTIPLE} == 0, but ${single.failing.join(' and ')}: te.Linear would fail under FP8 autocast. Keep this layer in BF16, or pad ${pad}.`] };
    }
    if (!ins.length || !outs.length) return unknownSizes(L, ins.length > 0, outs.length > 0);
    const p = pairs(ins, outs);
    if (!p.failing.length) {
      if (!multi) {
        const reasons = [`${ins[0].value} -> ${outs[0].value} meets the FP8 rule (in_features % 16 == 0, out_features % ${FP8_OUT_MULTIPLE} == 0), so ${L.constructor} can become te.Linear.`];
        for (const n of new Set([knownNote(L.inFeatures), knownNote(L.outFeatures)])) if (n) reasons.push(`Known statically: ${n}.`);
        return { state: 'ok', reasons };
      }
      const sizes = [...new Set(ins.flatMap((i) => outs.map((o) => `${i.value} -> ${o.value}`)))];
      return { state: 'ok', reasons: [`Every size it can have (${sizes.slice(0, 6).join(', ')}${sizes.length > 6 ? ', ...' : ''}) meets the FP8 rule, so ${L.constructor} can become te.Linear.`] };
    }
    if (p.failing.length === p.total) {
      return { state: 'fails', reasons: [`FP8 GEMMs need in_features % 16 == 0 and out_features % ${FP8_OUT_MULTIPLE} == 0, but ${p.failing.slice(0, 3).join('; ')}: te.Linear would fail under FP8 autocast. Keep this layer in BF16, or pad in_features to a multiple of 16 / out_features to a multiple of ${FP8_OUT_MULTIPLE}.`] };
    }
    const via = factoryOf(L);
    return { state: 'guarded', reasons: [`Most of its possible sizes meet the FP8 rule, but ${p.failing.slice(0, 2).join('; ')}: converted through ${via.factory}, which keeps ${via.kept} for a configuration that breaks the rule (in % 16, out % ${FP8_OUT_MULTIPLE}) when the layer is built.`] };
  },
};

/** The fallback factory a Linear converts through, and what it builds where the FP8 shape rule fails. */
function factoryOf(L: Layer): { factory: string; kept: string } {
  return L.classParam ? { factory: CLASS_FACTORY_NAME, kept: 'the class as written' } : { factory: FACTORY_NAME, kept: 'nn.Linear' };
}

function unknownSizes(L: Layer, inKnown: boolean, outKnown: boolean): { state: 'guarded'; reasons: string[] } {
  const inF = L.inFeatures;
  const outF = L.outFeatures;
  const via = factoryOf(L);
  const unknown: string[] = [];
  if (!inKnown) unknown.push(inF?.text ?? 'in_features');
  if (!outKnown && outF?.text !== unknown[0]) unknown.push(outF?.text ?? 'out_features');
  const conds: string[] = [];
  if (!inKnown) conds.push(`in_features${inF ? ` (${inF.text})` : ''} % 16 == 0`);
  if (!outKnown) conds.push(`out_features${outF ? ` (${outF.text})` : ''} % ${FP8_OUT_MULTIPLE} == 0`);
  // Say why a size that looks static is not (a config field computed in __post_init__, a class of another file).
  const why = [...new Set([inF, outF].filter((d) => d !== undefined && d.value === undefined && !d.values?.length && !!d.note
    && /__post_init__|not defined in this file|different defaults/.test(d.note)).map((d) => d?.note as string))];
  return {
    state: 'guarded',
    reasons: [`Its size ${unknown.join(' / ')} is not known where it is built${why.length ? ` (${why.join('; ')})` : ''}: it converts through ${via.factory}, which builds te.Linear when ${conds.join(' and ')} and keeps ${via.kept} otherwise. Declare the size (precisionLens.dims, or [tool.precision-lens] dims in pyproject.toml) to decide it here.`],
  };
}

const normShape: Check = {
  name: 'norm-no-gemm', facet: 'shape',
  run({ L }) {
    if (L.kind !== 'layernorm' && L.kind !== 'rmsnorm') return undefined;
    return { state: 'ok', reasons: [] };
  },
};

export const SHAPE_CHECKS: readonly Check[] = [linearShape, normShape];
