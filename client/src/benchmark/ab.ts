/**
 * The A/B run ("Measure conversion", `precision-lens measure`): the user's own project as it is (`original`, BF16
 * autocast) against its converted copy (`converted`), and torchao on the original (`torchao-original`); with the loss
 * check, the original again (`original-repeat`) instead of torchao, and each arm's eval loss. Pure (no `vscode`, no
 * Node): the webview, the Markdown export and the unit tests read these lines.
 */
import { attentionOfResult, fp8GemmsOfResult, workloadDescriptionOf, type BackendResult, type Fp8Gemms } from '../../../common/bench-events';
import { evalLossOf, hasEvalLosses, lossVerdict } from '../../../common/loss-check';
import { peerVerdict } from '../../../common/peer-verdict';
import { isAbRun, isLossCheckRun, type ConversionInfo, type RunOptions } from '../../../common/webview-messages';
import { formatNumber } from './format';

/** The converted arm's `fp8_gemms`, or undefined. */
export function fp8GemmsOf(results: readonly BackendResult[]): Fp8Gemms | undefined {
  for (const r of results) {
    const g = fp8GemmsOfResult(r);
    if (g) return g;
  }
  return undefined;
}

/**
 * The FP8-forwards line: "FP8 forwards: 1,440 of 1,440 GEMM forwards of the converted model ran in FP8 (48 modules)."
 * It says whether the conversion actually ran in FP8 (a guarded layer may have fallen back to BF16 at run time).
 */
export function fp8ForwardsLine(results: readonly BackendResult[]): string | undefined {
  const g = fp8GemmsOf(results);
  if (!g) return undefined;
  if (g.torchao && g.forwardsTotal === undefined) {
    return `FP8: ${formatNumber(g.modules ?? 0, 0)} torchao Float8Linear module${g.modules === 1 ? '' : 's'} under torch.compile (fp8_for_compile); each of their forwards runs in FP8.`;
  }
  const modules = g.modules !== undefined ? ` (${formatNumber(g.modules, 0)} te.* module${g.modules === 1 ? '' : 's'})` : '';
  if (g.forwardsTotal === undefined || g.forwardsFp8 === undefined) return `FP8 forwards: not counted${modules}.`;
  if (g.forwardsTotal === 0) return `FP8 forwards: the converted model ran no te.* GEMM${modules}: nothing ran in FP8.`;
  const all = g.forwardsFp8 === g.forwardsTotal;
  return `FP8 forwards: ${formatNumber(g.forwardsFp8, 0)} of ${formatNumber(g.forwardsTotal, 0)} GEMM forwards of the converted model ran in FP8${modules}${all ? '.' : ': the others fell back to BF16.'}`;
}

/** "Converted copy: 5 fixes in 2 files (fallback module fp8_fallback)." */
export function conversionLine(conversion: ConversionInfo | undefined): string | undefined {
  if (!conversion) return undefined;
  if (conversion.applied === 0) return 'Converted copy: nothing was converted, both arms ran the same code.';
  return `Converted copy: ${conversion.applied} fix${conversion.applied === 1 ? '' : 'es'} in ${conversion.files} file${conversion.files === 1 ? '' : 's'}${conversion.fallbackModule ? ` (fallback module ${conversion.fallbackModule})` : ''}.`;
}

/** The `conversion` event's fields as ConversionInfo, or undefined when it is malformed. */
export function toConversionInfo(raw: Record<string, unknown>): ConversionInfo | undefined {
  const applied = raw.applied;
  const files = raw.files;
  if (typeof applied !== 'number' || typeof files !== 'number') return undefined;
  const fixes = Array.isArray(raw.fixes) ? raw.fixes.filter((f): f is string => typeof f === 'string').slice(0, 200) : [];
  return { applied, files, fixes, ...(typeof raw.fallback_module === 'string' ? { fallbackModule: raw.fallback_module } : {}) };
}

/**
 * The lines under an A/B run's table, in order: what the conversion applied, what the workload ran on (where it
 * said), how many GEMM forwards ran in FP8, and
 * the verdicts, worded as `precision-lens measure` prints them: the conversion against torchao on the original (where
 * the peer ran) and (a loss check) the eval losses.
 */
export function abLines(results: readonly BackendResult[], conversion: ConversionInfo | undefined): string[] {
  return [conversionLine(conversion), workloadLine(results), fp8ForwardsLine(results), attentionLine(results), ...abVerdicts(results)].filter((l): l is string => l !== undefined);
}

/**
 * "Workload: llama2.c Transformer 12 x 2048, ... (10.5 MB of text to train on, 1.2 MB held out).": what the workload
 * function said the arms ran on, where it said (a dict with "description"); the evidence behind a loss check's text.
 */
export function workloadLine(results: readonly BackendResult[]): string | undefined {
  const d = results.map(workloadDescriptionOf).find((x) => x !== undefined);
  return d ? `Workload: ${d}${/[.…]$/.test(d) ? '' : '.'}` : undefined;
}

/** "Attention: te.DotProductAttention (fused, BF16), 1 shape.": what the converted copy's fp8_attention ran (PL107). */
export function attentionLine(results: readonly BackendResult[]): string | undefined {
  const a = results.map(attentionOfResult).find((x) => x !== undefined);
  return a ? `Attention: ${a}.` : undefined;
}

/** An A/B run's verdicts, in `measure`'s order: against the torchao peer, then the loss check's. */
export function abVerdicts(results: readonly BackendResult[]): string[] {
  return [peerVerdict(results), lossVerdict(results)].filter((l): l is string => l !== undefined);
}

/** Whether the results table gets the eval-loss column: some arm measured one (a loss check). */
export function showsEvalLoss(results: readonly BackendResult[]): boolean {
  return hasEvalLosses(results);
}

/** An arm's eval-loss cell: four decimals as the CLI's table prints them, "–" where the arm measured none. */
export function evalLossText(result: Pick<BackendResult, 'extra'>): string {
  const v = evalLossOf(result);
  return v === undefined ? '–' : v.toFixed(4);
}

/** The history row's badge: "A/B", "A/B · loss check" or "A/B · loss check, warm start N"; undefined for a preset run. */
export function abBadge(options: Pick<RunOptions, 'ab' | 'lossCheck' | 'warmStart'>, results: ReadonlyArray<Pick<BackendResult, 'extra'>> = []): string | undefined {
  if (!isAbRun(options)) return undefined;
  if (!isLossCheckRun(options, results)) return 'A/B';
  return options.warmStart ? `A/B · loss check, warm start ${options.warmStart}` : 'A/B · loss check';
}
