/**
 * The runner, the reducer and the error mapping against the real bench/benchmark.py (the protocol as the Python side
 * actually speaks it). Needs a Python with torch (CI: Debian's python3-torch at /usr/bin/python3, CPU only);
 * skipped when there is none. On a machine without a GPU: the probe says "no CUDA device", a run ends in that
 * explanation, and `--device cpu` (the benchmark's harness test mode) gives results the view can show.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { BenchEvent, EnvInfo } from '../../common/bench-events';
import { DEFAULT_RUN_OPTIONS, RunOptions } from '../../common/webview-messages';
import { isProcessAlive } from '../../client/src/benchmark/processTree';
import { buildProbeArgs, buildRunArgs, outcomeToUserError, startBenchmark } from '../../client/src/benchmark/runner';
import { applyRunEvent, environmentSummary, finishRun, NO_CUDA_SUMMARY, startedRunState } from '../../client/src/benchmark/state';

const SCRIPT = join(__dirname, '..', '..', 'bench', 'benchmark.py');
const PYTHON = ['/usr/bin/python3', 'python3'].find((p) => spawnSync(p, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0);

/** Runs the benchmark like the controller does; returns the final run state and the env it reported. */
async function runLikeTheView(options: RunOptions, extraArgs: string[] = [], cancelWhen?: (e: BenchEvent) => boolean) {
  let run = startedRunState('t', options, Date.now());
  let env: EnvInfo | undefined;
  const proc = startBenchmark({ command: PYTHON!, args: [...buildRunArgs(SCRIPT, options), ...extraArgs] }, {
    onEvent: (e) => {
      if (e.event === 'env') env = e;
      run = applyRunEvent(run, e);
      if (cancelWhen?.(e)) void proc.cancel();
    },
  });
  const pid = proc.pid;
  const outcome = await proc.done;
  const hasResults = run.results.some((r) => !r.skippedReason);
  run = finishRun(run, { cancelled: outcome.cancelled, error: outcomeToUserError(outcome, PYTHON!, hasResults) }, Date.now());
  return { run, env, outcome, pid };
}

describe('benchmark against bench/benchmark.py', function () {
  this.timeout(120000);
  let gpu = false;

  before(function () {
    if (!PYTHON || !existsSync(SCRIPT)) this.skip();
  });

  it('--probe reports the environment; without a GPU the verdict is "no CUDA device"', async () => {
    let env: EnvInfo | undefined;
    const outcome = await startBenchmark({ command: PYTHON!, args: buildProbeArgs(SCRIPT) }, { onEvent: (e) => { if (e.event === 'env') env = e; } }).done;
    assert.equal(outcome.exitCode, 0);
    assert.ok(env, 'an env event');
    assert.ok(env.torchVersion);
    gpu = env.gpus.length > 0;
    if (!gpu) assert.equal(environmentSummary(env), NO_CUDA_SUMMARY);
  });

  it('a run without a GPU ends in the "no CUDA" explanation, not a stack trace', async function () {
    if (gpu) this.skip();
    const { run } = await runLikeTheView({ ...DEFAULT_RUN_OPTIONS, steps: 2, warmup: 1 });
    assert.equal(run.status, 'failed');
    assert.equal(run.error?.title, 'No CUDA device');
    assert.match(run.error?.message ?? '', /no CUDA device/);
    assert.ok(run.error?.hint);
    assert.doesNotMatch(JSON.stringify(run.error), /Traceback|File "/);
  });

  it('--device cpu: results for BF16 and torch-fp8, "TE not installed" as a note, the run counts as done', async function () {
    const { run } = await runLikeTheView({ workload: 'tiny', backends: ['bf16', 'te', 'torch-fp8'], steps: 3, warmup: 1, batch: 2, seq: 32, compile: false }, ['--device', 'cpu']);
    assert.equal(run.status, 'done', JSON.stringify(run.error));
    assert.deepEqual(run.results.map((r) => r.backend).sort(), ['bf16', 'torch-fp8']);
    for (const r of run.results) {
      assert.ok(r.tokensPerS && r.tokensPerS > 0);
      assert.ok(r.stepTimeMedianMs && r.stepTimeP90Ms);
      assert.equal(r.losses.length, 4, 'warm-up + measured losses');
      assert.equal(r.lossMeasuredFrom, 1);
    }
    assert.equal(run.ratios[0].backend, 'torch-fp8');
    assert.ok(run.ratios[0].speedup && run.ratios[0].speedup > 0);
    if (!gpu) assert.ok(run.warnings.some((w) => /Transformer Engine not installed/.test(w)), run.warnings.join('; '));
  });

  it('cancel in the middle of a run stops the benchmark and leaves no process', async () => {
    const { run, outcome, pid } = await runLikeTheView(
      { workload: 'tiny', backends: ['bf16'], steps: 100000, warmup: 1, batch: 2, seq: 32, compile: false },
      ['--device', 'cpu'],
      (e) => e.event === 'progress' && e.phase === 'measure',
    );
    assert.equal(outcome.cancelled, true);
    assert.equal(run.status, 'cancelled');
    assert.ok(pid && !isProcessAlive(pid));
  });
});
