/**
 * What the benchmark view may offer, derived from what the host knows: which backends the form shows (the list the
 * environment probe reports, so new backends appear without a change here) and whether each can run, and whether
 * Run can start at all. Pure: no `vscode`; the host puts the result into the view state on every change, so the
 * view is re-enabled the moment the environment does (a new interpreter, a new probe).
 */
import { EnvInfo, hasCudaDevice, KNOWN_BACKENDS, KNOWN_INFERENCE_BACKENDS } from '../../../common/bench-events';
import type { BackendChoice, EnvironmentState, InterpreterChoice } from '../../../common/webview-messages';

export const RUN_BLOCKED = {
  untrusted: 'Trust this workspace to run the benchmark: it runs a Python interpreter and your model code.',
  probing: 'Checking the environment…',
  noCuda: 'No CUDA device: the benchmark needs an NVIDIA GPU.',
} as const;

/** Why one backend cannot run, by the older env fields (benchmarks that do not report `backends`). */
function derivedReason(id: string, env: EnvInfo): string | undefined {
  if (!env.torchVersion) return 'PyTorch is not installed in this interpreter';
  if (!hasCudaDevice(env)) return 'no CUDA device';
  if (id === 'te') {
    if (env.teError) return env.teError;
    if (!env.teVersion) return 'Transformer Engine not installed';
    if (!env.fp8Available) return env.fp8Reason ?? 'FP8 is not supported on this GPU';
  }
  if (id === 'torch-fp8' && env.torchFp8Available === false) return env.torchFp8Reason ?? 'torch._scaled_mm FP8 is not available';
  return undefined;
}

/**
 * The backends to offer: the probe's own list when it reports one; else the known ones with availability derived
 * from the probe's fields; before any probe, the known ones with availability unknown (enabled).
 */
export function backendChoices(environment: EnvironmentState): BackendChoice[] {
  const info = environment.info;
  if (info?.backends && info.backends.length > 0) {
    return info.backends.map((b) => ({ ...b, reason: b.available ? undefined : b.reason ?? 'not available here' }));
  }
  return KNOWN_BACKENDS.map((b) => {
    if (!info) return { id: b.id, label: b.label, description: b.description };
    const reason = derivedReason(b.id, info);
    return { id: b.id, label: b.label, description: b.description, available: reason === undefined, reason };
  });
}

/**
 * The inference tab's backends: the probe's `inference_backends` when it reports them; else (no probe yet, or a
 * benchmark that predates `--mode inference`) the known ones, enabled while unknown and, after a probe without the
 * list, disabled with the environment's reason (no torch, no CUDA) or as unknown to that benchmark.
 */
export function inferenceBackendChoices(environment: EnvironmentState): BackendChoice[] {
  const info = environment.info;
  if (info?.inferenceBackends && info.inferenceBackends.length > 0) {
    return info.inferenceBackends.map((b) => ({ ...b, reason: b.available ? undefined : b.reason ?? 'not available here' }));
  }
  return KNOWN_INFERENCE_BACKENDS.map((b) => {
    const choice: BackendChoice = { id: b.id, label: b.label, description: b.description, ...(b.referenceOnly ? { referenceOnly: true } : {}) };
    if (!info) return choice;
    const reason = !info.torchVersion ? 'PyTorch is not installed in this interpreter' : !hasCudaDevice(info) ? 'no CUDA device' : 'this benchmark has no --mode inference: update the extension';
    return { ...choice, available: false, reason };
  });
}

/** Why Run cannot start in this environment, or undefined when it can (a run in progress is the form's business). */
export function runBlockedReason(state: { trusted: boolean; environment: EnvironmentState; interpreter?: InterpreterChoice; backends: BackendChoice[] }): string | undefined {
  if (!state.trusted) return RUN_BLOCKED.untrusted;
  const env = state.environment;
  if (env.status === 'failed') {
    const error = env.error;
    return error ? `${error.title}: ${error.message}` : 'The environment check failed: open the benchmark log.';
  }
  if (env.status === 'probing' || env.status === 'unknown') return RUN_BLOCKED.probing;
  const info = env.info;
  if (!info) return undefined;
  if (!info.torchVersion) return `PyTorch is not installed in ${state.interpreter?.path ?? 'this interpreter'}: choose another interpreter.`;
  if (!hasCudaDevice(info)) return RUN_BLOCKED.noCuda;
  if (state.backends.length > 0 && state.backends.every((b) => b.available === false)) {
    return `No backend can run here: ${state.backends[0].reason ?? 'see the environment'}.`;
  }
  return undefined;
}

export const RUN_BLOCKED_NO_FOLDER = 'Open a folder: Measure conversion copies and converts the Python project of the workspace folder.';

/**
 * Why "Measure conversion" cannot start: Run's reasons (untrusted, no torch, no CUDA: the A/B runs the same benchmark)
 * or no workspace folder to copy and convert; undefined when it can.
 */
export function abBlockedReason(runBlocked: string | undefined, workspaceFolder: string | undefined): string | undefined {
  if (runBlocked) return runBlocked;
  return workspaceFolder ? undefined : RUN_BLOCKED_NO_FOLDER;
}

/**
 * The form's message about the backends ticked, or undefined: none is needed when no backend shown can run (each
 * disabled row says why and Run's reason says it once; "choose one" would name a choice there is not).
 */
export function backendSelectionProblem(ticked: readonly string[], shown: readonly BackendChoice[]): string | undefined {
  if (ticked.length > 0) return undefined;
  if (shown.length > 0 && shown.every((b) => b.available === false)) return undefined;
  return 'Choose at least one backend.';
}
