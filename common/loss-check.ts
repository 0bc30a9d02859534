/**
 * The loss check of an A/B run (`precision-lens measure --loss-check`, the sidebar's "Loss check"): each arm's eval
 * loss on batches it never trained on, the BF16 arm run again (`original-repeat`) for the noise floor, and the one-line
 * verdict. Shared by the CLI (server/src/cli/measure.ts), the extension host and the webview: no `vscode` or Node
 * imports here.
 */
import type { BackendResult } from './bench-events';

/** Steps of a loss check unless more are asked for: what the H200 loss runs used. */
export const LOSS_CHECK_STEPS = 200;

/** The BF16 arm run a second time: the noise floor of the comparison. */
export const REPEAT_ARM = 'original-repeat';

/**
 * The BF16 arm once more from its initial weights rounded once to BF16 (`measure --loss-check --rounded-start`, bench
 * `--rounded-original`): how far this training moves from a change of at most 2^-8 a weight, far less than FP8's.
 */
export const ROUNDED_ARM = 'original-rounded';

/** The arms a loss check runs (the torchao peer is left out: `--peer none`). */
export const LOSS_CHECK_ARMS: readonly string[] = ['original', 'converted', REPEAT_ARM];

/** A result's eval loss (`extra.eval_loss`), or undefined. */
export function evalLossOf(r: Pick<BackendResult, 'extra'>): number | undefined {
  const v = r.extra?.eval_loss;
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

/** Whether any of these results measured an eval loss (a loss-check run). */
export function hasEvalLosses(results: ReadonlyArray<Pick<BackendResult, 'extra'>>): boolean {
  return results.some((r) => evalLossOf(r) !== undefined);
}

/**
 * The BF16 steps every arm started after (`bench --warm-start-steps N`, the results' `warm_start`), or undefined for a
 * cold start.
 */
export function warmStartSteps(results: ReadonlyArray<Pick<BackendResult, 'extra'>>): number | undefined {
  for (const r of results) {
    const w = r.extra?.warm_start as { steps?: unknown } | null | undefined;
    if (w && typeof w.steps === 'number' && w.steps > 0) return w.steps;
  }
  return undefined;
}

/** How far one step's FP8 loss may stray from BF16's (relative) before the arms count as parted: 2 %. */
export const PARTED_REL = 0.02;

/** Where a loss check's FP8 arm left BF16's curve: the step and both losses there. */
export interface Parting {
  step: number;
  converted: number;
  original: number;
}

/**
 * The step, in the first tenth of the run (at least its first 10 steps), where FP8's per-step loss first strays from
 * the original's by more than PARTED_REL while the BF16 run again stays within half of that; undefined where the arms
 * stay together there, or where BF16 itself parts as much. Measured on llama2.c (2026-12-05, held-out text): from a
 * random init its first steps spike (10.6, 8.7, 10.6, 6.3, 10.3 ...), FP8's rounding moves a spike by up to 0.5, and
 * the runs keep that distance for 200 steps, FP8 ending 2.8 % below BF16 in one seed and 2.5 % above in another, while
 * from 100 BF16 warm-start steps it ended 0.03 % from BF16. `arm` is the arm compared with the original (the converted
 * one, or ROUNDED_ARM: where BF16 from its weights rounded to BF16 parts too, the first steps are that sensitive).
 */
export function earlyParting(results: readonly BackendResult[], arm = 'converted'): Parting | undefined {
  const curve = (name: string) => results.find((x) => x.backend === name && !x.skippedReason);
  const o = curve('original');
  const c = curve(arm);
  if (!o || !c || o.losses.length === 0 || c.losses.length === 0) return undefined;
  const again = curve(REPEAT_ARM);
  const stride = o.lossStride ?? 1;
  if ((c.lossStride ?? 1) !== stride || (again && (again.lossStride ?? 1) !== stride)) return undefined;
  const n = Math.min(o.losses.length, c.losses.length);
  const window = Math.max(10, Math.ceil((n * stride) / 10));
  for (let j = 0; j < n && j * stride <= window; j++) {
    const ol = o.losses[j];
    const cl = c.losses[j];
    if (typeof ol !== 'number' || typeof cl !== 'number' || !Number.isFinite(ol) || !Number.isFinite(cl) || ol <= 0) continue;
    const d = Math.abs(cl / ol - 1);
    if (d <= PARTED_REL) continue;
    const al = again?.losses[j];
    if (typeof al === 'number' && Number.isFinite(al) && Math.abs(al / ol - 1) > d / 2) return undefined;
    return { step: j * stride, converted: cl, original: ol };
  }
  return undefined;
}

/** Whether the converted arm ran TE's DelayedScaling (its first steps scale with no amax history yet). */
function ranDelayedScaling(results: readonly BackendResult[]): boolean {
  return results.some((r) => r.backend === 'converted' && typeof r.recipe === 'string' && /DelayedScaling/.test(r.recipe));
}

/**
 * The loss comparison's verdict: FP8's eval loss against BF16's, judged against the two BF16 runs' own difference (the
 * noise floor) and the 1 % bar. A cold start whose arms parted in the first steps (earlyParting) compares two
 * trajectories, in either direction: the verdict says so and asks for a warm start or another seed instead of blaming
 * the recipe (unless it is DelayedScaling, whose first steps have no amax history: measured +8 % on llama2.c). With the
 * BF16 arm from rounded weights (ROUNDED_ARM) the verdict says how far it moved, and FP8 no farther from BF16 than it
 * is not blamed on FP8: the training is that sensitive to its start (llama2.c seed 11, H100: that arm parted at step 1
 * and ended -0.98 %). Undefined without eval losses.
 */
export function lossVerdict(results: readonly BackendResult[]): string | undefined {
  const get = (arm: string) => { const r = results.find((x) => x.backend === arm && !x.skippedReason); return r && evalLossOf(r); };
  const orig = get('original');
  const conv = get('converted');
  if (orig === undefined || conv === undefined || orig === 0) return undefined;
  const rel = conv / orig - 1;
  const again = get(REPEAT_ARM);
  const noise = again === undefined ? undefined : Math.abs(again / orig - 1);
  const pct = (x: number) => `${x >= 0 ? '+' : ''}${(100 * x).toFixed(2)} %`;
  const floor = noise === undefined ? '' : `; the BF16 run again: ${pct(again! / orig - 1)} (the noise floor)`;
  const rounded = get(ROUNDED_ARM);
  const sens = rounded === undefined ? undefined : rounded / orig - 1;
  const sensText = sens === undefined ? '' : `; BF16 from its weights rounded once to BF16: ${pct(sens)}`;
  const warm = warmStartSteps(results);
  const outside = Math.abs(rel) > 0.01 && !ranDelayedScaling(results);
  const parted = !warm && outside ? earlyParting(results) : undefined;
  // BF16 itself, from a start changed far less than FP8 changes anything, leaving its curve in the first steps.
  const roundedParted = parted && sens !== undefined ? earlyParting(results, ROUNDED_ARM) : undefined;
  const partedText = (p: Parting) => `(FP8 ${p.converted.toFixed(2)} vs BF16 ${p.original.toFixed(2)})`;
  const verdict = Math.abs(rel) <= 0.01 ? 'within 1 % of BF16'
    : noise !== undefined && Math.abs(rel) <= 2 * noise ? 'outside 1 %, but within twice the noise floor: run longer or with another --seed before deciding'
    : outside && sens !== undefined && Math.abs(rel) <= Math.abs(sens) ? 'outside 1 %, but no farther than BF16 from its weights rounded to BF16: this training is that sensitive to its start; rerun with a warm start (100 steps) to measure FP8 itself'
    : parted && roundedParted ? `outside 1 %, but the arms parted at step ${parted.step} ${partedText(parted)}, in the first steps' spikes, where BF16 from its weights rounded to BF16 parts too (step ${roundedParted.step}: ${roundedParted.converted.toFixed(2)} vs ${roundedParted.original.toFixed(2)}): rerun with a warm start (100 steps) before deciding`
    : parted ? `outside 1 %, but the arms parted at step ${parted.step} ${partedText(parted)}, in the first steps' spikes: rerun with a warm start (100 steps) or another seed before deciding`
    : rel > 0 ? 'FP8 trains worse here: try precisionLens.te.recipe = Float8CurrentScaling, or keep the layers that differ in BF16'
    : 'FP8 ends lower than BF16 by more than the noise: check that both arms train the same model';
  return `Loss check${warm ? ` from ${warm} BF16 warm-start steps` : ''}: FP8 eval loss ${pct(rel)} vs BF16 (${conv.toFixed(4)} vs ${orig.toFixed(4)})${floor}${sensText}: ${verdict}.`;
}

/**
 * The steps a loss check runs for a form's Steps: the form's value when it asks for at least LOSS_CHECK_STEPS, else
 * LOSS_CHECK_STEPS (a speed run's 30 steps say nothing about the loss).
 */
export function lossCheckSteps(steps: number | undefined): number {
  return steps !== undefined && steps >= LOSS_CHECK_STEPS ? steps : LOSS_CHECK_STEPS;
}
