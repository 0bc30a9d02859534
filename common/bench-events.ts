/**
 * The JSON-lines protocol of bench/benchmark.py, as the extension reads it.
 *
 * `Wire*` types describe what the Python side prints (snake_case, every field optional: an older or newer benchmark
 * may omit or add fields). `normalizeBenchEvent` turns one parsed line into the typed, camelCase `BenchEvent` the
 * extension and the webview use; unknown fields are kept in `extra`, unknown events come back as `UnknownEvent`.
 * No `vscode` import here: the webview bundle and the plain-Node unit tests import this file too.
 */

/** One GPU as the probe reports it. */
export interface WireGpu {
  index?: number;
  name?: string;
  /** `[9, 0]`, `"9.0"`, `"sm_90"` or `90`: all are accepted. */
  capability?: unknown;
  /** Bytes (or a human string: shown as is). */
  memory?: unknown;
  memory_bytes?: number;
  memory_total_bytes?: number;
  total_memory?: number;
  sm?: string;
}

export interface WireEnvEvent {
  event: 'env';
  python?: string;
  executable?: string;
  python_version?: string;
  torch?: string | null;
  torch_version?: string | null;
  /** CUDA runtime version string, or a boolean "is CUDA available". */
  cuda?: string | boolean | null;
  cuda_available?: boolean;
  gpus?: WireGpu[];
  te_version?: string | null;
  /** Transformer Engine import result. */
  te?: { installed?: boolean; version?: string | null; api?: string | null; error?: string | null };
  fp8?: { available?: boolean; reason?: string | null; source?: string } | boolean;
  /** The torch._scaled_mm backend's availability. */
  torch_fp8?: { available?: boolean; reason?: string | null };
  /** A list of names, or `{name: {supported, reason}}`. */
  recipes?: unknown;
  hostname?: string;
  platform?: string;
  /** Every backend the benchmark offers, and whether it can run here (bench/plbench/cli.py backend_report). */
  backends?: Array<{ id?: string; label?: string; description?: string; available?: boolean; reason?: string | null }>;
  /** The same for `--mode inference` (bench/plbench/inference_report.py); `reference_only`: accuracy, not speed. */
  inference_backends?: Array<{ id?: string; label?: string; description?: string; available?: boolean; reason?: string | null; reference_only?: boolean }>;
}

export interface WireProgressEvent {
  event: 'progress';
  phase?: string;
  step?: number;
  total?: number;
  backend?: string;
  message?: string;
}

export interface WireResultEvent {
  event: 'result';
  backend?: string;
  label?: string;
  tokens_per_s?: number | null;
  /** Step time statistics; bench/ writes `step_ms`, older drafts `step_time_ms`. */
  step_ms?: { median?: number | null; p90?: number | null; mean?: number | null } | null;
  step_time_ms?: { median?: number | null; p90?: number | null; mean?: number | null } | number | null;
  step_time_median_ms?: number | null;
  step_time_p90_ms?: number | null;
  /** Index in `losses` where the measured steps start (the earlier ones are warm-up). */
  loss_measured_from?: number;
  /** The FP8 math was emulated (no FP8 GPU): a harness test, not a benchmark. */
  emulated?: boolean;
  recipe?: string | null;
  /** Whether this run went through torch.compile (what ran: false where torch has no compile); kept in `extra`. */
  compile?: boolean;
  /** Whether it was asked to (an A/B's torchao peer under `--peer-compile on` beside eager arms); kept in `extra`. */
  compile_requested?: boolean;
  peak_memory_bytes?: number | null;
  losses?: Array<number | null>;
  status?: string;
  skipped?: boolean | string;
  reason?: string;
  error?: string | { message?: string; hint?: string; code?: string };
  /** `--mode inference` results (bench/plbench/inference.py run_one). */
  mode?: string;
  prefill_tokens_per_s?: number | null;
  decode_tokens_per_s?: number | null;
  prompt_tokens?: number;
  new_tokens?: number;
  reference_only?: boolean;
  accuracy?: { max_abs_logit_diff?: number; mean_abs_logit_diff?: number; next_token_agreement?: number } | null;
}

export interface WireSummaryEvent {
  event: 'summary';
  ratios?: unknown;
}

export interface WireErrorEvent {
  event: 'error';
  code?: string;
  message?: string;
  hint?: string;
  backend?: string;
  /** Whether the benchmark stops after this error; absent: fatal unless `backend` names one backend. */
  fatal?: boolean;
}

/** SIGTERM or SIGINT reached the benchmark: it prints this, then exits at once with status 130. */
export interface WireCancelledEvent {
  event: 'cancelled';
  code?: string;
  /** "SIGTERM" or "SIGINT". */
  signal?: string;
  /** The phase and backend the run was in. */
  phase?: string | null;
  backend?: string | null;
  exit_code?: number;
  message?: string;
}

export interface WireWorkloadsEvent {
  event: 'workloads';
  workloads?: unknown;
}

// ---------------------------------------------------------------------------------------------------------------
// Normalized events

export interface GpuInfo {
  name: string;
  /** "9.0" form, or undefined when not reported. */
  capability?: string;
  /** Total memory in bytes when known. */
  memoryBytes?: number;
  /** Memory as reported when it was not a number. */
  memoryText?: string;
}

/** One backend the benchmark offers, as the env event reports it. */
export interface BackendAvailability {
  id: string;
  label: string;
  description?: string;
  /** Whether it can run in this environment (the benchmark's own gate). */
  available: boolean;
  /** Why not, when it cannot. */
  reason?: string;
  /** Its figures are an accuracy reference only (ModelOpt fake-quant: its speed is not FP8 speed). */
  referenceOnly?: boolean;
}

export interface EnvInfo {
  pythonExecutable?: string;
  pythonVersion?: string;
  /** torch version, or undefined when torch is not importable. */
  torchVersion?: string;
  cudaVersion?: string;
  gpus: GpuInfo[];
  /** Transformer Engine version, undefined when not installed. */
  teVersion?: string;
  /** TE is installed but failed to import: why. */
  teError?: string;
  /** TE's autocast API: 'autocast' (>= 2.9) or 'fp8_autocast'. */
  teApi?: string;
  fp8Available: boolean;
  fp8Reason?: string;
  /** The torch._scaled_mm FP8 backend (used where TE is missing). */
  torchFp8Available?: boolean;
  torchFp8Reason?: string;
  /** Recipes this GPU supports. */
  recipes: string[];
  cudaAvailable?: boolean;
  hostname?: string;
  platform?: string;
  /** The backends the benchmark offers here (newer benchmarks report them; older ones leave this undefined). */
  backends?: BackendAvailability[];
  /** The `--mode inference` backends, the same way (undefined from benchmarks that predate inference). */
  inferenceBackends?: BackendAvailability[];
}

export interface EnvEvent extends EnvInfo {
  event: 'env';
  extra: Record<string, unknown>;
}

export interface ProgressEvent {
  event: 'progress';
  phase: string;
  step?: number;
  total?: number;
  backend?: string;
  message?: string;
}

export interface BackendResult {
  backend: string;
  label?: string;
  tokensPerS?: number;
  stepTimeMedianMs?: number;
  stepTimeP90Ms?: number;
  peakMemoryBytes?: number;
  /** Loss per recorded step; null where the benchmark reported a non-finite value. */
  losses: Array<number | null>;
  /** Every `losses[i]` is the loss at step `i * lossStride` (1 unless downsampled for storage). */
  lossStride?: number;
  /** Index in `losses` where the measured steps start (earlier values are warm-up). */
  lossMeasuredFrom?: number;
  /** FP8 emulated in higher precision: not a real measurement. */
  emulated?: boolean;
  /** The FP8 recipe the backend used, as the benchmark describes it. */
  recipe?: string;
  /** The backend did not run (e.g. TE not installed): why. */
  skippedReason?: string;
  /** `--mode inference` figures; undefined for a training result. */
  inference?: InferenceFigures;
  /** Fields the extension does not know, shown in the details. */
  extra?: Record<string, unknown>;
}

/** One inference backend's figures: throughput of the two phases, and its accuracy cost against BF16. */
export interface InferenceFigures {
  /** Prompt tokens per second (batch x prompt tokens per forward). */
  prefillTokensPerS?: number;
  /** Generated tokens per second (one per sequence per decode step). */
  decodeTokensPerS?: number;
  promptTokens?: number;
  newTokens?: number;
  /** Against the BF16 logits on held-out batches; undefined for BF16 itself. */
  maxAbsLogitDiff?: number;
  meanAbsLogitDiff?: number;
  /** 0..1: how often the predicted next token is BF16's. */
  nextTokenAgreement?: number;
  /** Fake-quant (ModelOpt): the accuracy is meaningful, the speed is not FP8 speed. */
  referenceOnly?: boolean;
}

export interface ResultEvent extends BackendResult {
  event: 'result';
}

export interface SummaryEvent {
  event: 'summary';
  ratios: unknown;
  extra: Record<string, unknown>;
}

export interface BenchErrorInfo {
  code: string;
  message: string;
  hint?: string;
}

export interface ErrorEvent extends BenchErrorInfo {
  event: 'error';
  backend?: string;
  fatal: boolean;
}

export interface WorkloadInfo {
  name: string;
  description?: string;
  /** The preset's own batch size and sequence length (the form fills them in when the preset is picked). */
  batch?: number;
  seq?: number;
  params?: number;
}

export interface WorkloadsEvent {
  event: 'workloads';
  workloads: WorkloadInfo[];
}

export interface CancelledEvent {
  event: 'cancelled';
  code: string;
  signal?: string;
  /** Where the run was when it was stopped. */
  phase?: string;
  backend?: string;
  message: string;
}

export interface UnknownEvent {
  event: 'unknown';
  name: string;
  raw: Record<string, unknown>;
}

export type BenchEvent = EnvEvent | ProgressEvent | ResultEvent | SummaryEvent | ErrorEvent | WorkloadsEvent | CancelledEvent | UnknownEvent;

// ---------------------------------------------------------------------------------------------------------------
// Normalization helpers

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function str(value: unknown): string | undefined {
  if (typeof value === 'string') return value.length > 0 ? value : undefined;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return undefined;
}

function num(value: unknown): number | undefined {
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
  return undefined;
}

function omit(raw: Record<string, unknown>, known: readonly string[]): Record<string, unknown> {
  const extra: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(raw)) if (!known.includes(k)) extra[k] = v;
  return extra;
}

/** Capability in "major.minor" form from `[9, 0]`, `(9, 0)` as a list, `"9.0"`, `"sm_90"`, `90` or `{major, minor}`. */
export function formatCapability(value: unknown): string | undefined {
  if (Array.isArray(value) && value.length >= 2 && value.every((v) => typeof v === 'number')) return `${value[0]}.${value[1]}`;
  if (isRecord(value) && typeof value.major === 'number') return `${value.major}.${typeof value.minor === 'number' ? value.minor : 0}`;
  if (typeof value === 'number' && Number.isFinite(value)) {
    return Number.isInteger(value) && value >= 10 ? `${Math.floor(value / 10)}.${value % 10}` : String(value);
  }
  if (typeof value === 'string') {
    const sm = /^sm_?(\d+)(\d)[a-z]?$/i.exec(value.trim());
    if (sm) return `${sm[1]}.${sm[2]}`;
    const pair = /^\(?\s*(\d+)\s*[.,]\s*(\d+)\s*\)?$/.exec(value.trim());
    if (pair) return `${pair[1]}.${pair[2]}`;
    return value || undefined;
  }
  return undefined;
}

function normalizeGpu(raw: unknown): GpuInfo | undefined {
  if (typeof raw === 'string') return { name: raw };
  if (!isRecord(raw)) return undefined;
  const memory = raw.memory ?? raw.memory_bytes ?? raw.memory_total_bytes ?? raw.total_memory;
  const memoryBytes = num(memory);
  return {
    name: str(raw.name) ?? 'unknown GPU',
    capability: formatCapability(raw.capability ?? raw.compute_capability ?? raw.sm),
    memoryBytes,
    memoryText: memoryBytes === undefined ? str(memory) : undefined,
  };
}

function normalizeBackends(value: unknown): BackendAvailability[] | undefined {
  if (!Array.isArray(value)) return undefined;
  const out: BackendAvailability[] = [];
  for (const b of value) {
    const id = isRecord(b) ? str(b.id) : undefined;
    if (!isRecord(b) || !id || out.some((o) => o.id === id)) continue;
    out.push({
      id, label: str(b.label) ?? id, description: str(b.description), available: b.available === true, reason: str(b.reason),
      ...(b.reference_only === true ? { referenceOnly: true } : {}),
    });
  }
  return out;
}

function normalizeEnv(raw: Record<string, unknown>): EnvEvent {
  const gpus = Array.isArray(raw.gpus) ? raw.gpus.map(normalizeGpu).filter((g): g is GpuInfo => g !== undefined) : [];
  const fp8 = raw.fp8;
  let fp8Available = false;
  let fp8Reason: string | undefined;
  if (typeof fp8 === 'boolean') fp8Available = fp8;
  else if (isRecord(fp8)) {
    fp8Available = fp8.available === true;
    fp8Reason = str(fp8.reason);
  }
  const cuda = raw.cuda;
  const recipes = Array.isArray(raw.recipes)
    ? raw.recipes.map((r) => (isRecord(r) ? str(r.name) : str(r))).filter((r): r is string => r !== undefined)
    : isRecord(raw.recipes)
      ? Object.entries(raw.recipes).filter(([, v]) => v === true || (isRecord(v) && (v.supported === true || v.available === true))).map(([k]) => k)
      : [];
  const te = isRecord(raw.te) ? raw.te : {};
  const torchFp8 = isRecord(raw.torch_fp8) ? raw.torch_fp8 : undefined;
  return {
    event: 'env',
    pythonExecutable: str(raw.executable) ?? str(raw.python_executable),
    pythonVersion: str(raw.python_version) ?? str(raw.python),
    torchVersion: str(raw.torch) ?? str(raw.torch_version),
    cudaVersion: typeof cuda === 'string' ? str(cuda) : str(raw.cuda_version),
    gpus,
    teVersion: str(raw.te_version) ?? str(te.version) ?? str(raw.transformer_engine),
    teError: str(te.error) !== undefined && te.installed === true ? str(te.error) : undefined,
    teApi: str(te.api),
    fp8Available,
    fp8Reason,
    torchFp8Available: torchFp8 ? torchFp8.available === true : undefined,
    torchFp8Reason: torchFp8 ? str(torchFp8.reason) : undefined,
    recipes,
    cudaAvailable: typeof raw.cuda_available === 'boolean' ? raw.cuda_available : typeof cuda === 'boolean' ? cuda : undefined,
    hostname: str(raw.hostname) ?? str(raw.host),
    platform: str(raw.platform),
    backends: normalizeBackends(raw.backends),
    inferenceBackends: normalizeBackends(raw.inference_backends),
    extra: omit(raw, ['event', 'backends', 'inference_backends', 'executable', 'python_executable', 'python_version', 'python', 'torch', 'torch_version', 'cuda',
      'cuda_version', 'cuda_available', 'gpus', 'te_version', 'te', 'transformer_engine', 'fp8', 'torch_fp8', 'recipes', 'hostname', 'host', 'platform']),
  };
}

function normalizeResult(raw: Record<string, unknown>): ResultEvent {
  const stepTime = raw.step_ms ?? raw.step_time_ms;
  const median = num(raw.step_time_median_ms) ?? (isRecord(stepTime) ? num(stepTime.median) ?? num(stepTime.mean) : num(stepTime));
  const p90 = num(raw.step_time_p90_ms) ?? (isRecord(stepTime) ? num(stepTime.p90) : undefined);
  const losses = Array.isArray(raw.losses) ? raw.losses.map((l) => num(l) ?? null) : [];
  let skippedReason: string | undefined;
  const status = str(raw.status);
  const error = raw.error;
  if (error !== undefined && error !== null && error !== false) {
    skippedReason = isRecord(error) ? str(error.message) ?? 'failed' : str(error) ?? 'failed';
  } else if (raw.skipped === true || typeof raw.skipped === 'string' || (status && /^(skipped|unavailable|failed|error)$/i.test(status))) {
    skippedReason = str(raw.reason) ?? (typeof raw.skipped === 'string' ? raw.skipped : undefined) ?? status ?? 'skipped';
  }
  return {
    event: 'result',
    backend: str(raw.backend) ?? 'unknown',
    label: str(raw.label),
    tokensPerS: num(raw.tokens_per_s),
    stepTimeMedianMs: median,
    stepTimeP90Ms: p90,
    peakMemoryBytes: num(raw.peak_memory_bytes),
    losses,
    lossMeasuredFrom: num(raw.loss_measured_from),
    emulated: raw.emulated === true || (isRecord(raw.notes) && raw.notes.emulated === true) ? true : undefined,
    recipe: str(raw.recipe),
    skippedReason,
    inference: raw.mode === 'inference' ? normalizeInference(raw) : undefined,
    extra: omit(raw, ['event', 'backend', 'label', 'tokens_per_s', 'step_ms', 'step_time_ms', 'step_time_median_ms', 'step_time_p90_ms',
      'peak_memory_bytes', 'losses', 'loss_measured_from', 'emulated', 'recipe', 'status', 'skipped', 'reason', 'error',
      ...(raw.mode === 'inference' ? INFERENCE_FIELDS : [])]),
  };
}

const INFERENCE_FIELDS = ['prefill_tokens_per_s', 'decode_tokens_per_s', 'prompt_tokens', 'new_tokens', 'reference_only', 'accuracy'];

function normalizeInference(raw: Record<string, unknown>): InferenceFigures {
  const acc = isRecord(raw.accuracy) ? raw.accuracy : {};
  const figures: InferenceFigures = {
    prefillTokensPerS: num(raw.prefill_tokens_per_s),
    decodeTokensPerS: num(raw.decode_tokens_per_s),
    promptTokens: num(raw.prompt_tokens),
    newTokens: num(raw.new_tokens),
    maxAbsLogitDiff: num(acc.max_abs_logit_diff),
    meanAbsLogitDiff: num(acc.mean_abs_logit_diff),
    nextTokenAgreement: num(acc.next_token_agreement),
    referenceOnly: raw.reference_only === true ? true : undefined,
  };
  return Object.fromEntries(Object.entries(figures).filter(([, v]) => v !== undefined)) as InferenceFigures;
}

function normalizeWorkloads(value: unknown): WorkloadInfo[] {
  const list: WorkloadInfo[] = [];
  if (Array.isArray(value)) {
    for (const w of value) {
      if (typeof w === 'string') list.push({ name: w });
      else if (isRecord(w) && str(w.name) && w.hidden_test !== true) {
        list.push({ name: str(w.name)!, description: str(w.description) ?? str(w.summary), batch: num(w.batch), seq: num(w.seq), params: num(w.params) });
      }
    }
  } else if (isRecord(value)) {
    for (const [name, d] of Object.entries(value)) {
      list.push({ name, description: isRecord(d) ? str(d.description) ?? str(d.summary) : str(d) });
    }
  }
  return list;
}

/**
 * Turns one parsed JSON line into a typed event; undefined when the value is not an event object
 * (not an object, or no string `event` field).
 */
export function normalizeBenchEvent(value: unknown): BenchEvent | undefined {
  if (!isRecord(value) || typeof value.event !== 'string') return undefined;
  switch (value.event) {
    case 'env':
      return normalizeEnv(value);
    case 'progress':
      return {
        event: 'progress',
        phase: str(value.phase) ?? 'running',
        step: num(value.step),
        total: num(value.total),
        backend: str(value.backend),
        message: str(value.message),
      };
    case 'result':
      return normalizeResult(value);
    case 'summary':
      return { event: 'summary', ratios: value.ratios, extra: omit(value, ['event', 'ratios']) };
    case 'error': {
      const backend = str(value.backend);
      return {
        event: 'error',
        code: str(value.code) ?? 'error',
        message: str(value.message) ?? 'The benchmark reported an error.',
        hint: str(value.hint),
        backend,
        fatal: typeof value.fatal === 'boolean' ? value.fatal : backend === undefined,
      };
    }
    case 'workloads':
      return { event: 'workloads', workloads: normalizeWorkloads(value.workloads) };
    case 'cancelled': {
      const signal = str(value.signal);
      return {
        event: 'cancelled',
        code: str(value.code) ?? 'cancelled',
        signal,
        phase: str(value.phase),
        backend: str(value.backend),
        message: str(value.message) ?? `The benchmark was cancelled${signal ? ` (${signal})` : ''}.`,
      };
    }
    default:
      return { event: 'unknown', name: value.event, raw: value };
  }
}

/**
 * One line of the benchmark's stdout as an event. Blank (or whitespace-only) lines are skipped, as the protocol
 * asks, and so is a line that is not a JSON event object: both give undefined.
 */
export function parseBenchEventLine(line: string): BenchEvent | undefined {
  const trimmed = line.trim();
  if (trimmed === '' || trimmed[0] !== '{') return undefined;
  try {
    return normalizeBenchEvent(JSON.parse(trimmed));
  } catch {
    return undefined;
  }
}

/** Whether an environment can run the benchmark at all (a CUDA device is visible). */
export function hasCudaDevice(env: EnvInfo | undefined): boolean {
  return !!env && env.gpus.length > 0;
}

/** The baseline every ratio is taken against. */
export const BASELINE_BACKEND = 'bf16';

/** The baseline of these results: an A/B run's `original` arm, else BF16. */
export function baselineOf(results: ReadonlyArray<{ backend: string }>): string {
  return results.some((r) => r.backend === 'original') ? 'original' : BASELINE_BACKEND;
}

/** Backends the benchmark knows; the form offers these. */
export const KNOWN_BACKENDS: ReadonlyArray<{ id: string; label: string; description: string }> = [
  { id: 'bf16', label: 'BF16', description: 'baseline: torch.nn in bfloat16' },
  { id: 'te', label: 'FP8 (Transformer Engine)', description: 'te.* layers under TE autocast; lm-head and embedding stay BF16' },
  { id: 'torch-fp8', label: 'FP8 (torch._scaled_mm)', description: 'per-tensor scaled FP8 matmul, compiled; where TE is missing' },
];

/** The `--mode inference` backends (bench/plbench/inference_report.py), offered before the probe answers. */
export const KNOWN_INFERENCE_BACKENDS: ReadonlyArray<{ id: string; label: string; description: string; referenceOnly?: boolean }> = [
  { id: 'bf16', label: 'BF16 (eval)', description: 'baseline: the model in bfloat16, eval, no grad' },
  { id: 'torchao', label: 'FP8 (torchao dynamic act + weight)', description: 'torchao Float8DynamicActivationFloat8WeightConfig: E4M3, dynamic per-tensor scales' },
  { id: 'te', label: 'FP8 (TE, eval)', description: 'te.* layers under TE autocast in eval' },
  { id: 'torch-fp8', label: 'FP8 (torch._scaled_mm, fallback)', description: 'per-tensor scaled FP8 linear; where TE and torchao are missing' },
  { id: 'modelopt', label: 'ModelOpt fake-quant (accuracy only)', description: 'Model Optimizer FP8_DEFAULT_CFG fake-quant: an accuracy reference, its speed is not FP8 speed', referenceOnly: true },
];

/** The A/B arm of torchao float8 training on the original model (`--peer torchao`). */
export const PEER_ARM = 'torchao-original';

/** The arms of an A/B run of the user's own project (`--mode ab`, `precision-lens measure`). */
export const AB_ARMS: ReadonlyArray<{ id: string; label: string; short: string }> = [
  { id: 'original', label: 'Original (BF16)', short: 'original' },
  { id: 'converted', label: 'Converted (FP8)', short: 'converted' },
  { id: PEER_ARM, label: 'torchao on original', short: 'torchao' },
  // The loss check's second BF16 run (`--repeat-original`): the noise floor of the eval-loss comparison.
  { id: 'original-repeat', label: 'Original again (BF16)', short: 'BF16 again' },
  // The loss check's BF16 run from the original's weights rounded once to BF16 (`--rounded-original`): how far the
  // training moves from a change far smaller than FP8's.
  { id: 'original-rounded', label: 'Original, rounded start (BF16)', short: 'BF16 rounded' },
];

const SHORT_LABELS: Readonly<Record<string, string>> = {
  bf16: 'BF16', te: 'TE FP8', 'torch-fp8': 'torch FP8', torchao: 'torchao FP8', modelopt: 'ModelOpt ref',
  ...Object.fromEntries(AB_ARMS.map((a) => [a.id, a.short])),
};

/** Whether a result ran under torch.compile (its `compile` flag, kept in `extra`); undefined where it does not say. */
export function compiledOf(r: Pick<BackendResult, 'extra'>): boolean | undefined {
  const v = r.extra?.compile;
  return typeof v === 'boolean' ? v : undefined;
}

/**
 * `fp8_gemms` of an A/B run's converted arm: how many FP8 GEMM modules it had and how many of their forwards ran with
 * FP8 on (te.* modules, hooked), or, on the compile path (fp8_for_compile), torchao's Float8Linear modules, whose
 * forwards are all FP8 and not counted.
 */
export interface Fp8Gemms {
  modules?: number;
  forwardsFp8?: number;
  forwardsTotal?: number;
  /** The modules are torchao's Float8Linear (the compile path, fp8_for_compile): FP8 on every forward, none hooked. */
  torchao?: boolean;
}

/** A result's `fp8_gemms` (kept in `extra`), or undefined where it has none: one reader for the sidebar and `measure`. */
export function fp8GemmsOfResult(r: Pick<BackendResult, 'extra'>): Fp8Gemms | undefined {
  const g = r.extra?.fp8_gemms;
  if (typeof g !== 'object' || g === null) return undefined;
  const o = g as Record<string, unknown>;
  const n = (v: unknown) => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
  const types = o.module_types;
  const torchao = typeof types === 'object' && types !== null && 'Float8Linear' in types;
  return { modules: n(o.modules), forwardsFp8: n(o.forwards_fp8), forwardsTotal: n(o.forwards_total), ...(torchao ? { torchao } : {}) };
}

/** What a converted arm's fp8_attention ran (PL107; the A/B's `attention`, kept in `extra`), as one line, or undefined. */
export function attentionOfResult(r: Pick<BackendResult, 'extra'>): string | undefined {
  const a = r.extra?.attention;
  if (typeof a !== 'object' || a === null) return undefined;
  const summary = (a as Record<string, unknown>).summary;
  return typeof summary === 'string' && summary ? summary : undefined;
}

/**
 * What the workload said it is (the result's `workload_description`: a user workload's "description", for the real
 * projects how much text is trained on and what is held out), one line of at most 240 characters, or undefined.
 */
export function workloadDescriptionOf(r: Pick<BackendResult, 'extra'>): string | undefined {
  const d = r.extra?.workload_description;
  if (typeof d !== 'string') return undefined;
  const line = d.replace(/\s+/g, ' ').trim();
  if (!line) return undefined;
  return line.length > 240 ? `${line.slice(0, 239)}…` : line;
}

/**
 * An arm's name in a results table: `label` (the backend's name by default), and for the torchao peer of an A/B run
 * whether it ran compiled or eager ("torchao on original (compiled)"): `measure` compiles it beside eager arms.
 */
export function armLabel(r: Pick<BackendResult, 'backend' | 'extra'>, label: string = backendLabel(r.backend)): string {
  const compiled = r.backend === PEER_ARM ? compiledOf(r) : undefined;
  return compiled === undefined ? label : `${label} (${compiled ? 'compiled' : 'eager'})`;
}

/** A short name for a backend id (chart labels in a narrow sidebar). */
export function shortBackendLabel(id: string): string {
  return SHORT_LABELS[id] ?? id;
}

/** A readable name for a backend id. */
export function backendLabel(id: string): string {
  return KNOWN_BACKENDS.find((b) => b.id === id)?.label ?? KNOWN_INFERENCE_BACKENDS.find((b) => b.id === id)?.label ?? AB_ARMS.find((b) => b.id === id)?.label ?? id;
}
