/**
 * The run-state reducer and derived values (ratios, environment verdict, history entries).
 * Pure: no `vscode`, no Node APIs; the webview imports `computeRatios` for comparisons.
 */
import { baselineOf, BackendResult, BenchEvent, EnvInfo, hasCudaDevice } from '../../../common/bench-events';
import type { BackendRatio, HistoryEntry, RunOptions, RunProgress, RunState, UserError } from '../../../common/webview-messages';
import { toConversionInfo } from './ab';
import { finalLoss } from './format';

export const NO_CUDA_SUMMARY = 'No CUDA device: the benchmark needs an NVIDIA GPU; you can still use diagnostics and fixes.';

export function idleRunState(): RunState {
  return { status: 'idle', results: [], ratios: [], warnings: [] };
}

export function startedRunState(id: string, options: RunOptions, now: number): RunState {
  return {
    status: 'starting',
    id,
    options,
    startedAt: now,
    progress: { phase: 'starting' },
    results: [],
    ratios: [],
    warnings: [],
  };
}

/**
 * Ratios to the baseline for every other backend that has a result: FP8 over BF16, or, in an A/B run, each arm over
 * the project as it is (`original`). Empty without a baseline result.
 */
export function computeRatios(results: readonly BackendResult[]): BackendRatio[] {
  const baseline = baselineOf(results);
  const base = results.find((r) => r.backend === baseline && !r.skippedReason);
  if (!base) return [];
  const div = (a: number | undefined, b: number | undefined) => (a !== undefined && b !== undefined && b !== 0 ? a / b : undefined);
  const baseLoss = finalLoss(base.losses);
  return results
    .filter((r) => r.backend !== baseline && !r.skippedReason)
    .map((r) => {
      const loss = finalLoss(r.losses);
      return {
        backend: r.backend,
        speedup: div(r.tokensPerS, base.tokensPerS),
        memory: div(r.peakMemoryBytes, base.peakMemoryBytes),
        stepTime: div(r.stepTimeMedianMs, base.stepTimeMedianMs),
        finalLossDelta: loss !== undefined && baseLoss !== undefined ? loss - baseLoss : undefined,
        ...(r.inference || base.inference ? {
          prefillSpeedup: div(r.inference?.prefillTokensPerS, base.inference?.prefillTokensPerS),
          decodeSpeedup: div(r.inference?.decodeTokensPerS, base.inference?.decodeTokensPerS),
        } : {}),
      };
    });
}

function progressOf(phase: string, step?: number, total?: number, backend?: string, message?: string): RunProgress {
  const fraction = step !== undefined && total !== undefined && total > 0 ? Math.min(1, Math.max(0, step / total)) : undefined;
  return { phase, step, total, backend, message, fraction };
}

/**
 * Applies one benchmark event to a running run. A fatal error is remembered in `error` but the status stays
 * running until the process exits (`finishRun` decides the final status).
 */
export function applyRunEvent(run: RunState, event: BenchEvent): RunState {
  switch (event.event) {
    case 'progress':
      return {
        ...run,
        status: run.status === 'starting' ? 'running' : run.status,
        progress: progressOf(event.phase, event.step, event.total, event.backend, event.message),
      };
    case 'result': {
      const { event: _e, ...result } = event;
      void _e;
      const results = [...run.results.filter((r) => r.backend !== result.backend), result];
      const warnings = result.skippedReason ? [...run.warnings, `${result.backend}: ${result.skippedReason}`] : run.warnings;
      return { ...run, status: run.status === 'starting' ? 'running' : run.status, results, ratios: computeRatios(results), warnings };
    }
    case 'error':
      if (!event.fatal) {
        return { ...run, warnings: [...run.warnings, `${event.backend ?? 'benchmark'}: ${event.message}${event.hint ? ` (${event.hint})` : ''}`] };
      }
      return { ...run, error: run.error ?? toUserError(event.code, event.message, event.hint) };
    case 'cancelled':
      // SIGTERM/SIGINT reached the benchmark (from the Cancel button or from outside): it exits right after this.
      return {
        ...run,
        status: 'cancelled',
        progress: { ...progressOf('cancelled', run.progress?.step, run.progress?.total, event.backend ?? run.progress?.backend, event.message), fraction: run.progress?.fraction },
      };
    case 'unknown':
      // `precision-lens measure --format jsonl`: what the conversion of the A/B run's copy applied.
      if (event.name === 'conversion') {
        const conversion = toConversionInfo(event.raw);
        return conversion ? { ...run, conversion } : run;
      }
      return run;
    default:
      return run;
  }
}

/**
 * Final state after the process ended. A cancelled run (cancelled by the user, or the benchmark reported a `cancelled`
 * event) keeps its partial results; otherwise `error` wins over everything.
 */
export function finishRun(run: RunState, outcome: { cancelled: boolean; error?: UserError }, now: number): RunState {
  const progress = run.progress ? { ...run.progress } : undefined;
  if (outcome.cancelled || run.status === 'cancelled') return { ...run, status: 'cancelled', finishedAt: now, progress: { ...(progress ?? { phase: '' }), phase: 'cancelled' } };
  const error = run.error ?? outcome.error;
  if (error) return { ...run, status: 'failed', finishedAt: now, error };
  if (run.results.filter((r) => !r.skippedReason).length === 0) {
    return {
      ...run,
      status: 'failed',
      finishedAt: now,
      error: {
        code: 'no_results',
        title: 'No results',
        message: 'The benchmark ended without a result for any backend.',
        hint: run.warnings.length > 0 ? run.warnings.join('; ') : 'Open the benchmark log for details.',
      },
    };
  }
  return { ...run, status: 'done', finishedAt: now, progress: progressOf('done', 1, 1) };
}

/** Strips a Python traceback down to its last line: users see what went wrong, not the stack. */
export function withoutTraceback(text: string): string {
  if (!/Traceback \(most recent call last\)|^\s+File ".*", line \d+/m.test(text)) return text.trim();
  const lines = text.split(/\r?\n/).map((l) => l.trim()).filter((l) => l !== '');
  return lines[lines.length - 1] ?? text.trim();
}

interface ErrorKind {
  test: RegExp;
  title: string;
  hint?: string;
}

/** Error codes (and, for unknown codes, message patterns) mapped to titles and default hints. */
const ERROR_KINDS: ErrorKind[] = [
  { test: /no[_-]?cuda|cuda[_-]?unavailable|no[_-]?gpu|no CUDA|CUDA (is )?not available|no (NVIDIA |CUDA )?(GPU|device)/i, title: 'No CUDA device', hint: NO_CUDA_SUMMARY },
  { test: /no[_-]?torch|torch[_-]?(missing|not[_-]?installed|import)|No module named '?torch'?/i, title: 'PyTorch not installed', hint: 'Install PyTorch with CUDA support in the selected interpreter, or choose another one in precisionLens.pythonPath.' },
  { test: /te[_-]?(missing|not[_-]?installed|unavailable)|transformer[_ ]engine (is )?not installed/i, title: 'Transformer Engine not installed', hint: 'The te backend needs transformer_engine; torch-fp8 measures FP8 without it.' },
  { test: /fp8[_-]?(unsupported|unavailable|not[_-]?supported)/i, title: 'FP8 not supported here', hint: 'FP8 needs compute capability 8.9 (Ada) or newer.' },
  { test: /oom|out[_ ]of[_ ]memory/i, title: 'Out of GPU memory', hint: 'Lower the batch size or the sequence length.' },
  { test: /workload|module|import/i, title: 'The workload could not be loaded', hint: 'Check the module:function name: the function must build the model (see bench/README.md).' },
  { test: /backend[_-]?failed/i, title: 'A backend failed' },
  { test: /usage|argument|invalid[_-]?option/i, title: 'Invalid benchmark options' },
  { test: /cancel/i, title: 'The benchmark was cancelled' },
  { test: /timeout/i, title: 'The benchmark timed out' },
  { test: /internal/i, title: 'The benchmark failed (internal error)', hint: 'Open the benchmark log for details.' },
];

/** bench/plbench/protocol.py's exit statuses, for a process that exits without an error event. */
export const BENCH_EXIT_CODES: Readonly<Record<number, string>> = {
  1: 'internal',
  2: 'usage',
  3: 'no_torch',
  4: 'no_cuda',
  5: 'fp8_unsupported',
  6: 'te_missing',
  7: 'oom',
  8: 'bad_workload',
  9: 'backend_failed',
  130: 'cancelled',
};

/** A benchmark error event as the user sees it. */
export function toUserError(code: string, message: string, hint?: string): UserError {
  const cleanMessage = withoutTraceback(message);
  const kind = ERROR_KINDS.find((k) => k.test.test(code)) ?? (code === 'error' || code === '' ? ERROR_KINDS.find((k) => k.test.test(cleanMessage)) : undefined);
  return {
    code,
    title: kind?.title ?? 'The benchmark failed',
    message: cleanMessage || 'The benchmark reported an error.',
    hint: hint ? withoutTraceback(hint) : kind?.hint,
  };
}

/** The environment card's one-line verdict. */
export function environmentSummary(env: EnvInfo): string {
  if (!env.torchVersion) return `${NO_CUDA_SUMMARY} (PyTorch is not installed in this interpreter.)`;
  if (!hasCudaDevice(env)) return NO_CUDA_SUMMARY;
  const gpu = env.gpus[0];
  const where = `${gpu.name}${gpu.capability ? ` (compute capability ${gpu.capability})` : ''}`;
  return env.fp8Available ? `FP8 available on ${where}.` : `FP8 not available on ${where}${env.fp8Reason ? `: ${env.fp8Reason}` : ''}. BF16 only.`;
}

/** Fields of a result's `extra` worth keeping in the history (the rest, e.g. conversion reports, stays in --json-out). */
const EXTRA_KEPT = ['workload', 'batch', 'seq', 'layers', 'params', 'tokens_per_step', 'compile', 'first_step_s', 'model_tflops_per_s', 'te_version', 'te_api', 'mode', 'device', 'repeats', 'fp8_gemms', 'eval_loss',
  // An A/B's lines read these back from the history: what fp8_attention ran, a loss check's warm start, and what the
  // workload said it ran on.
  'attention', 'warm_start', 'workload_description'];

/**
 * The history's copy of a result: at most `maxPoints` loss values (every k-th) and only small extra fields,
 * so the history file stays small.
 */
export function compactResult(result: BackendResult, maxPoints = 500): BackendResult {
  const extra: Record<string, unknown> = {};
  for (const k of EXTRA_KEPT) if (result.extra && k in result.extra) extra[k] = result.extra[k];
  const compact: BackendResult = { ...result, extra };
  const stride0 = result.lossStride ?? 1;
  if (result.losses.length <= maxPoints) return compact;
  const k = Math.ceil(result.losses.length / maxPoints);
  return {
    ...compact,
    losses: result.losses.filter((_, i) => i % k === 0),
    lossStride: stride0 * k,
  };
}

/** The history record of a finished run. */
export function toHistoryEntry(
  run: RunState,
  context: { env?: EnvInfo; interpreter?: string; remoteName?: string; jsonOut?: string },
): HistoryEntry | undefined {
  if (run.status !== 'done' || !run.id || !run.options || run.startedAt === undefined) return undefined;
  const gpu = context.env?.gpus[0];
  return {
    id: run.id,
    startedAt: run.startedAt,
    finishedAt: run.finishedAt ?? run.startedAt,
    options: run.options,
    interpreter: context.interpreter,
    gpu: gpu?.name,
    capability: gpu?.capability,
    teVersion: context.env?.teVersion,
    torchVersion: context.env?.torchVersion,
    hostname: context.env?.hostname,
    remoteName: context.remoteName,
    results: run.results.map((r) => compactResult(r)),
    ratios: run.ratios,
    jsonOut: context.jsonOut,
    ...(run.conversion ? { conversion: run.conversion } : {}),
  };
}
