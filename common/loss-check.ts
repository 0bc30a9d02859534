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

/**
 * The loss comparison's verdict: FP8's eval loss against BF16's, judged against the two BF16 runs' own difference (the
 * noise floor) and the 1 % bar. Undefined without eval losses.
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
  const verdict = Math.abs(rel) <= 0.01 ? 'within 1 % of BF16'
    : noise !== undefined && Math.abs(rel) <= 2 * noise ? 'outside 1 %, but within twice the noise floor: run longer or with another --seed before deciding'
    : rel > 0 ? 'FP8 trains worse here: try precisionLens.te.recipe = Float8CurrentScaling, or keep the layers that differ in BF16'
    : 'FP8 ends lower than BF16 by more than the noise: check that both arms train the same model';
  const warm = warmStartSteps(results);
  return `Loss check${warm ? ` from ${warm} BF16 warm-start steps` : ''}: FP8 eval loss ${pct(rel)} vs BF16 (${conv.toFixed(4)} vs ${orig.toFixed(4)})${floor}: ${verdict}.`;
}

/**
 * The steps a loss check runs for a form's Steps: the form's value when it asks for at least LOSS_CHECK_STEPS, else
 * LOSS_CHECK_STEPS (a speed run's 30 steps say nothing about the loss).
 */
export function lossCheckSteps(steps: number | undefined): number {
  return steps !== undefined && steps >= LOSS_CHECK_STEPS ? steps : LOSS_CHECK_STEPS;
}
