/**
 * The benchmark sidebar's state and the messages between the extension host and the webview.
 *
 * The host owns `BenchmarkViewState`; the webview only renders it and sends intents. A hidden webview receives no
 * messages, so on every resolve / visibility change the host sends the full state again (`{type: 'state'}`); while a
 * run is going it sends small `{type: 'progress'}` updates in between.
 * Shared by the extension bundle and the browser bundle: no `vscode` or Node imports here.
 */
import type { BackendAvailability, BackendResult, BenchErrorInfo, EnvInfo, WorkloadInfo } from './bench-events';
import { hasEvalLosses } from './loss-check';

/** The benchmark's two modes: BF16 vs FP8 training steps, or serving (prefill/decode and the accuracy cost). */
export type RunMode = 'train' | 'inference';

/** What the form submits; also what a history entry records. */
export interface RunOptions {
  /** Absent in runs recorded before inference existed: those are training runs. */
  mode?: RunMode;
  /** A preset name from `--list-workloads`, or `module:function` for the user's own model. */
  workload: string;
  backends: string[];
  steps: number;
  warmup: number;
  batch: number;
  seq: number;
  compile: boolean;
  /** Inference: prompt tokens per sequence (prefill). */
  promptLen?: number;
  /** Inference: tokens decoded per sequence. */
  newTokens?: number;
  /** Inference: timed repetitions (the median is reported). */
  repeats?: number;
  /** Inference: the backends ticked on the inference tab (each tab keeps its own). */
  inferenceBackends?: string[];
  /**
   * An A/B run ("Measure conversion", `precision-lens measure`): the workspace's own training step as it is against
   * its converted copy (and torchao on the original); `workload` is the project's module:function. A training run.
   */
  ab?: boolean;
  /**
   * An A/B run with the loss check (`measure --loss-check`): a training recipe for at least 200 steps, each arm's eval
   * loss, the BF16 arm run again for the noise floor. Only with `ab`.
   */
  lossCheck?: boolean;
  /**
   * With the loss check (`measure --loss-check --warm-start N`): every arm starts from the original's weights after N
   * BF16 steps, past the first steps' loss spikes where FP8 and BF16 from one random init part most. Only with `lossCheck`.
   */
  warmStart?: number;
  /**
   * With the loss check (`measure --loss-check --rounded-start`): the original once more from its weights rounded once
   * to BF16, how far the training moves from a change far smaller than FP8's. Only with `lossCheck`.
   */
  roundedStart?: boolean;
}

/** The A/B run's baseline arm: the project as it is, in BF16 autocast. */
export const AB_BASELINE = 'original';

/** Whether these options are an A/B run of the workspace's own project. */
export function isAbRun(options: Pick<RunOptions, 'ab'> | undefined): boolean {
  return options?.ab === true;
}

/** Whether these options are an A/B run with the loss check (or, for runs recorded without the flag, its results carry eval losses). */
export function isLossCheckRun(options: Pick<RunOptions, 'ab' | 'lossCheck'> | undefined, results: ReadonlyArray<Pick<BackendResult, 'extra'>> = []): boolean {
  return (isAbRun(options) && options?.lossCheck === true) || hasEvalLosses(results);
}

/** What the conversion of the A/B run's copy applied (the `conversion` event of `precision-lens measure --format jsonl`). */
export interface ConversionInfo {
  /** Fixes applied to the copy. */
  applied: number;
  /** Files changed. */
  files: number;
  /** The `--show-fixes` lines: "- model.py:", "    2 × PL101 Convert to te.Linear ...". */
  fixes: string[];
  fallbackModule?: string;
}

export const DEFAULT_RUN_OPTIONS: RunOptions = {
  mode: 'train',
  workload: 'gpt-125m',
  backends: ['bf16', 'te', 'torch-fp8'],
  steps: 30,
  warmup: 10,
  batch: 16,
  seq: 1024,
  compile: true,
  promptLen: 512,
  newTokens: 64,
  repeats: 5,
  inferenceBackends: ['bf16', 'torchao', 'te'],
};

/** The mode of a run (older history entries have none: training). */
export function runMode(options: Pick<RunOptions, 'mode'> | undefined): RunMode {
  return options?.mode === 'inference' ? 'inference' : 'train';
}

/** How the interpreter was chosen, in the order they are tried. */
export type InterpreterSource = 'setting' | 'python-envs' | 'python-extension' | 'default';

/** An interpreter the "Choose interpreter…" picker offers. */
export interface InterpreterCandidate {
  path: string;
  /** Where it was found: the setting, the Python Environments extension, the Python extension, PATH. */
  source: InterpreterSource | 'path';
  /** The environment's name where an extension gave one (".venv", "conda: base"). */
  name?: string;
}

export interface InterpreterChoice {
  /** The command or absolute path that is spawned. */
  path: string;
  source: InterpreterSource;
  /** One sentence for the view: "from the precisionLens.pythonPath setting", ... */
  detail: string;
}

export type EnvStatus = 'unknown' | 'probing' | 'ready' | 'failed';

export interface EnvironmentState {
  status: EnvStatus;
  info?: EnvInfo;
  /** Why the probe failed (interpreter missing, torch missing, ...). */
  error?: UserError;
  /** One-line verdict for the card: "No CUDA device: ...", "FP8 available on NVIDIA H100 (9.0)". */
  summary?: string;
}

/** An error as the user sees it: a title, what happened, what to do. Never a stack trace. */
export interface UserError extends BenchErrorInfo {
  title: string;
  /** The last lines of stderr when the process died without saying why. */
  details?: string;
}

export type RunStatus = 'idle' | 'starting' | 'running' | 'cancelling' | 'done' | 'failed' | 'cancelled';

export interface RunProgress {
  phase: string;
  step?: number;
  total?: number;
  backend?: string;
  message?: string;
  /** 0..1 when step/total are known. */
  fraction?: number;
}

/** FP8 backend over BF16. */
export interface BackendRatio {
  backend: string;
  /** tokens/s of the backend divided by BF16's (>1 is faster). */
  speedup?: number;
  /** peak memory of the backend divided by BF16's (<1 uses less). */
  memory?: number;
  /** median step time over BF16's. */
  stepTime?: number;
  /** final loss minus BF16's final loss. */
  finalLossDelta?: number;
  /** Inference: prefill tokens/s over BF16's. */
  prefillSpeedup?: number;
  /** Inference: decode tokens/s over BF16's. */
  decodeSpeedup?: number;
}

export interface RunState {
  status: RunStatus;
  id?: string;
  options?: RunOptions;
  startedAt?: number;
  finishedAt?: number;
  progress?: RunProgress;
  results: BackendResult[];
  ratios: BackendRatio[];
  /** Backend-level problems that did not stop the run (e.g. TE not installed). */
  warnings: string[];
  error?: UserError;
  /** An A/B run: what the conversion of the copy applied. */
  conversion?: ConversionInfo;
}

/** A finished run, kept on disk. */
export interface HistoryEntry {
  id: string;
  /** ms since epoch. */
  startedAt: number;
  finishedAt: number;
  options: RunOptions;
  interpreter?: string;
  gpu?: string;
  capability?: string;
  teVersion?: string;
  torchVersion?: string;
  hostname?: string;
  remoteName?: string;
  results: BackendResult[];
  ratios: BackendRatio[];
  /** The benchmark's own JSON output file, when it wrote one. */
  jsonOut?: string;
  /** An A/B run: what the conversion of the copy applied. */
  conversion?: ConversionInfo;
}

export interface RemoteInfo {
  /** `vscode.env.remoteName`: ssh-remote, wsl, dev-container, ... */
  name: string;
  /** The hostname the probe reported (the machine that runs the benchmark). */
  hostname?: string;
}

/** A backend the form offers: what the environment reports (data-driven), with whether it can run here. */
export interface BackendChoice extends Omit<BackendAvailability, 'available'> {
  /** undefined: not known yet (no environment report). */
  available?: boolean;
}

export interface BenchmarkViewState {
  /** The workspace is trusted; false: the benchmark is disabled. */
  trusted: boolean;
  interpreter?: InterpreterChoice;
  /** What the last "Choose interpreter…" found, and whether its picker is open now. */
  interpreters?: { candidates: InterpreterCandidate[]; pickerOpen: boolean };
  /** The backends to offer, each enabled or disabled with the reason (derived from `environment`). */
  backends: BackendChoice[];
  /** The same for the inference tab (`--mode inference`). */
  inferenceBackends: BackendChoice[];
  /** Why Run cannot start in this environment (untrusted, no torch, no CUDA...); undefined when it can. */
  runBlocked?: string;
  /** Why "Measure conversion" cannot start (Run's reasons, or no workspace folder); undefined when it can. */
  abBlocked?: string;
  /** The A/B workload last used in this workspace (module:function). */
  abWorkload?: string;
  /** History runs the view should select and show (an import, a finished run); a new serial each time. */
  selection?: { ids: string[]; serial: number };
  remote?: RemoteInfo;
  environment: EnvironmentState;
  workloads: WorkloadInfo[];
  /** The form's last submitted values. */
  lastOptions: RunOptions;
  /** The workspace folder runs use (cwd and --workspace), if any. */
  workspaceFolder?: string;
  run: RunState;
  history: HistoryEntry[];
  /** Shown above the history when it could not be read (corrupt file, ...). */
  historyMessage?: string;
}

// ---------------------------------------------------------------------------------------------------------------
// Messages

export type HostToWebviewMessage =
  | { type: 'state'; state: BenchmarkViewState }
  | { type: 'progress'; runId: string | undefined; status: RunStatus; progress: RunProgress }
  | { type: 'notice'; text: string; level: 'info' | 'warning' };

export type WebviewToHostMessage =
  | { type: 'ready' }
  | { type: 'run'; options: RunOptions }
  | { type: 'cancel' }
  | { type: 'refreshEnvironment' }
  | { type: 'copyMarkdown'; runIds: string[] }
  | { type: 'copyCurrentMarkdown' }
  | { type: 'deleteRun'; id: string }
  | { type: 'openLog' }
  | { type: 'chooseInterpreter' }
  | { type: 'manageTrust' }
  | { type: 'formChanged'; options: RunOptions }
  | { type: 'measureConversion'; options: RunOptions };

const WEBVIEW_MESSAGE_TYPES: ReadonlyArray<WebviewToHostMessage['type']> = [
  'ready', 'run', 'cancel', 'refreshEnvironment', 'copyMarkdown', 'copyCurrentMarkdown', 'deleteRun', 'openLog', 'chooseInterpreter', 'manageTrust', 'formChanged', 'measureConversion',
];

/** Guards messages coming from the webview (they cross a trust boundary: check the shape before use). */
export function isWebviewToHostMessage(value: unknown): value is WebviewToHostMessage {
  if (typeof value !== 'object' || value === null) return false;
  const m = value as Record<string, unknown>;
  if (!WEBVIEW_MESSAGE_TYPES.includes(m.type as WebviewToHostMessage['type'])) return false;
  switch (m.type) {
    case 'run':
    case 'formChanged':
    case 'measureConversion':
      return typeof m.options === 'object' && m.options !== null;
    case 'copyMarkdown':
      return Array.isArray(m.runIds) && m.runIds.every((id) => typeof id === 'string');
    case 'deleteRun':
      return typeof m.id === 'string';
    default:
      return true;
  }
}

/** The most warm-start steps the form and a command argument take. */
export const MAX_WARM_START = 100000;

/** Clamps and fills a (possibly malformed) options object from the webview or a command argument. */
export function sanitizeRunOptions(raw: unknown, fallback: RunOptions = DEFAULT_RUN_OPTIONS): RunOptions {
  const r = (typeof raw === 'object' && raw !== null ? raw : {}) as Record<string, unknown>;
  const int = (v: unknown, d: number, min: number, max: number): number => {
    const n = typeof v === 'number' ? v : typeof v === 'string' ? Number(v) : NaN;
    return Number.isFinite(n) ? Math.min(max, Math.max(min, Math.round(n))) : d;
  };
  const ids = (v: unknown, d: string[]) => {
    const list = Array.isArray(v) ? [...new Set(v.filter((b): b is string => typeof b === 'string' && /^[A-Za-z0-9_.-]+$/.test(b)))] : d;
    return list.length > 0 ? list : d;
  };
  // The loss check's warm start: a positive whole number of BF16 steps, else none (0 and blanks mean a cold start).
  const warmStart = (v: unknown): { warmStart?: number } => {
    const n = int(v, 0, 0, MAX_WARM_START);
    return n > 0 ? { warmStart: n } : {};
  };
  const workload = typeof r.workload === 'string' && r.workload.trim() !== '' ? r.workload.trim() : fallback.workload;
  const mode = r.mode === 'inference' || r.mode === 'train' ? r.mode : runMode(fallback);
  const inferenceFallback = fallback.inferenceBackends ?? DEFAULT_RUN_OPTIONS.inferenceBackends!;
  return {
    mode,
    workload,
    backends: ids(r.backends, fallback.backends),
    steps: int(r.steps, fallback.steps, 1, 100000),
    warmup: int(r.warmup, fallback.warmup, 0, 100000),
    batch: int(r.batch, fallback.batch, 1, 65536),
    seq: int(r.seq, fallback.seq, 1, 1048576),
    compile: typeof r.compile === 'boolean' ? r.compile : fallback.compile,
    promptLen: int(r.promptLen, fallback.promptLen ?? DEFAULT_RUN_OPTIONS.promptLen!, 1, 1048576),
    newTokens: int(r.newTokens, fallback.newTokens ?? DEFAULT_RUN_OPTIONS.newTokens!, 0, 1048576),
    repeats: int(r.repeats, fallback.repeats ?? DEFAULT_RUN_OPTIONS.repeats!, 1, 1000),
    inferenceBackends: ids(r.inferenceBackends, inferenceFallback),
    ...(r.ab === true ? { ab: true } : {}),
    ...(r.lossCheck === true ? { lossCheck: true, ...warmStart(r.warmStart), ...(r.roundedStart === true ? { roundedStart: true } : {}) } : {}),
  };
}

/** The backends a run of these options launches: the ticked ones of its mode's tab. */
export function runBackends(options: RunOptions): string[] {
  return runMode(options) === 'inference' ? options.inferenceBackends ?? DEFAULT_RUN_OPTIONS.inferenceBackends! : options.backends;
}
