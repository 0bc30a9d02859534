/**
 * The run-state reducer and what the view derives from it: progress, results and ratios, fatal and non-fatal
 * errors, the final status, the environment verdict, the history record, and the interpreter order.
 */
import * as assert from 'node:assert/strict';
import { normalizeBenchEvent, BenchEvent, EnvInfo } from '../../common/bench-events';
import { DEFAULT_RUN_OPTIONS, isWebviewToHostMessage, sanitizeRunOptions } from '../../common/webview-messages';
import { chooseInterpreter, expandPathVariables } from '../../client/src/benchmark/interpreterChain';
import {
  applyRunEvent, compactResult, computeRatios, environmentSummary, finishRun, NO_CUDA_SUMMARY, startedRunState, toHistoryEntry, toUserError, withoutTraceback,
} from '../../client/src/benchmark/state';

const ev = (raw: Record<string, unknown>): BenchEvent => normalizeBenchEvent(raw)!;

function env(overrides: Partial<EnvInfo> = {}): EnvInfo {
  return { gpus: [], fp8Available: false, recipes: [], torchVersion: '2.11.0', ...overrides };
}

describe('benchmark run state', () => {
  const options = { ...DEFAULT_RUN_OPTIONS, backends: ['bf16', 'te', 'torch-fp8'] };

  it('progress, results, ratios, non-fatal errors, then done', () => {
    let run = startedRunState('r1', options, 1000);
    assert.equal(run.status, 'starting');
    run = applyRunEvent(run, ev({ event: 'progress', phase: 'measure', step: 5, total: 20, backend: 'bf16' }));
    assert.equal(run.status, 'running');
    assert.equal(run.progress?.fraction, 0.25);
    run = applyRunEvent(run, ev({ event: 'error', code: 'te_missing', message: 'Transformer Engine not installed', hint: 'pip install', fatal: false, backend: 'te' }));
    assert.deepEqual(run.warnings, ['te: Transformer Engine not installed (pip install)']);
    run = applyRunEvent(run, ev({ event: 'result', backend: 'bf16', tokens_per_s: 1000, step_ms: { median: 10 }, peak_memory_bytes: 200, losses: [3, 2] }));
    run = applyRunEvent(run, ev({ event: 'result', backend: 'torch-fp8', tokens_per_s: 1400, step_ms: { median: 7.5 }, peak_memory_bytes: 150, losses: [3, 2.1] }));
    assert.equal(run.ratios.length, 1);
    assert.equal(run.ratios[0].speedup, 1.4);
    assert.equal(run.ratios[0].memory, 0.75);
    assert.equal(run.ratios[0].stepTime, 0.75);
    assert.ok(Math.abs((run.ratios[0].finalLossDelta ?? 0) - 0.1) < 1e-9);
    run = applyRunEvent(run, ev({ event: 'summary', ratios: {} }));
    const done = finishRun(run, { cancelled: false }, 5000);
    assert.equal(done.status, 'done');
    assert.equal(done.finishedAt, 5000);
    assert.equal(done.error, undefined);

    const entry = toHistoryEntry(done, { env: env({ gpus: [{ name: 'NVIDIA H200', capability: '9.0' }], hostname: 'box' }), interpreter: '/usr/bin/python3', remoteName: 'ssh-remote' });
    assert.ok(entry);
    assert.equal(entry.gpu, 'NVIDIA H200');
    assert.equal(entry.hostname, 'box');
    assert.equal(entry.remoteName, 'ssh-remote');
    assert.equal(entry.results.length, 2);
    assert.equal(toHistoryEntry(finishRun(run, { cancelled: true }, 1), {}), undefined, 'cancelled runs are not kept');
  });

  it('a fatal error event fails the run with its explanation', () => {
    let run = startedRunState('r', options, 0);
    run = applyRunEvent(run, ev({ event: 'error', code: 'no_cuda', message: 'no CUDA device: the benchmark needs an NVIDIA GPU; you can still use diagnostics and fixes', hint: 'use a GPU box' }));
    const failed = finishRun(run, { cancelled: false, error: { code: 'exit', title: 'x', message: 'benchmark exited with code 4' } }, 1);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error?.title, 'No CUDA device');
    assert.equal(failed.error?.hint, 'use a GPU box');
  });

  it('cancel keeps the partial results; a run with no result at all fails with the notes', () => {
    let run = startedRunState('r', options, 0);
    run = applyRunEvent(run, ev({ event: 'result', backend: 'bf16', tokens_per_s: 1, losses: [] }));
    const cancelled = finishRun(run, { cancelled: true }, 1);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal(cancelled.results.length, 1);
    const empty = finishRun(applyRunEvent(startedRunState('r', options, 0), ev({ event: 'error', code: 'backend_failed', message: 'te crashed', backend: 'te' })), { cancelled: false }, 1);
    assert.equal(empty.status, 'failed');
    assert.equal(empty.error?.title, 'No results');
    assert.match(empty.error?.hint ?? '', /te crashed/);
  });

  it('ratios need a BF16 baseline; skipped backends have none', () => {
    assert.deepEqual(computeRatios([{ backend: 'te', tokensPerS: 1, losses: [] }]), []);
    const ratios = computeRatios([
      { backend: 'bf16', tokensPerS: 100, losses: [] },
      { backend: 'te', losses: [], skippedReason: 'TE missing' },
      { backend: 'torch-fp8', tokensPerS: 150, losses: [] },
    ]);
    assert.deepEqual(ratios.map((r) => [r.backend, r.speedup]), [['torch-fp8', 1.5]]);
  });

  it('user errors: titles by code or message, tracebacks reduced to their last line', () => {
    assert.equal(toUserError('oom', 'CUDA out of memory').title, 'Out of GPU memory');
    assert.match(toUserError('oom', 'x').hint ?? '', /batch size/);
    assert.equal(toUserError('bad_workload', 'no module named mypkg').title, 'The workload could not be loaded');
    assert.equal(toUserError('error', 'RuntimeError: CUDA is not available').title, 'No CUDA device');
    const tb = 'Traceback (most recent call last):\n  File "a.py", line 3, in <module>\n    f()\nValueError: bad shape';
    assert.equal(withoutTraceback(tb), 'ValueError: bad shape');
    assert.equal(toUserError('internal', tb).message, 'ValueError: bad shape');
  });

  it('environment verdict: no CUDA device, no torch, FP8 yes/no', () => {
    assert.equal(environmentSummary(env()), NO_CUDA_SUMMARY);
    assert.match(environmentSummary(env({ torchVersion: undefined })), /^No CUDA device: .*PyTorch is not installed/);
    assert.equal(environmentSummary(env({ gpus: [{ name: 'NVIDIA H100', capability: '9.0' }], fp8Available: true })), 'FP8 available on NVIDIA H100 (compute capability 9.0).');
    assert.match(environmentSummary(env({ gpus: [{ name: 'NVIDIA A100', capability: '8.0' }], fp8Reason: 'needs 8.9' })), /FP8 not available on NVIDIA A100 .*needs 8\.9\. BF16 only\./);
  });

  it('history copies of results are compact: losses downsampled, large extras dropped', () => {
    const losses = Array.from({ length: 2001 }, (_, i) => i);
    const c = compactResult({ backend: 'bf16', losses, extra: { conversion: { big: true }, batch: 4 } }, 500);
    assert.ok(c.losses.length <= 500);
    assert.equal(c.lossStride, 5);
    assert.equal(c.losses[3], 15, 'losses[i] is the loss at step i * lossStride');
    assert.deepEqual(c.extra, { batch: 4 });
  });
});

describe('webview messages', () => {
  it('guards messages from the webview', () => {
    assert.ok(isWebviewToHostMessage({ type: 'ready' }));
    assert.ok(isWebviewToHostMessage({ type: 'copyMarkdown', runIds: ['a', 'b'] }));
    assert.ok(!isWebviewToHostMessage({ type: 'copyMarkdown', runIds: [1] }));
    assert.ok(!isWebviewToHostMessage({ type: 'run' }));
    assert.ok(!isWebviewToHostMessage({ type: 'rm -rf' }));
    assert.ok(!isWebviewToHostMessage('ready'));
  });

  it('sanitizes run options (clamps numbers, drops odd backends, keeps module:function)', () => {
    const o = sanitizeRunOptions({ workload: ' pkg.m:build ', backends: ['bf16', 'te', 'te', '; rm', 3], steps: '12', warmup: -4, batch: 0, seq: 1e9, compile: 'yes' });
    const { promptLen, newTokens, repeats, inferenceBackends } = DEFAULT_RUN_OPTIONS;
    assert.deepEqual(o, { mode: 'train', workload: 'pkg.m:build', backends: ['bf16', 'te'], steps: 12, warmup: 0, batch: 1, seq: 1048576, compile: DEFAULT_RUN_OPTIONS.compile, promptLen, newTokens, repeats, inferenceBackends });
    assert.deepEqual(sanitizeRunOptions(undefined), DEFAULT_RUN_OPTIONS);
  });
});

describe('benchmark interpreter order', () => {
  const none = async () => undefined;
  it('setting, then Python Environments, then the Python extension, then python3', async () => {
    assert.deepEqual(await chooseInterpreter({ setting: () => '/opt/py/bin/python', pythonEnvs: async () => '/envs', pythonExtension: async () => '/ext' }),
      { path: '/opt/py/bin/python', source: 'setting', detail: 'from the precisionLens.pythonPath setting' });
    assert.equal((await chooseInterpreter({ setting: () => '  ', pythonEnvs: async () => '/envs/bin/python', pythonExtension: async () => '/ext' })).source, 'python-envs');
    assert.equal((await chooseInterpreter({ setting: () => undefined, pythonEnvs: none, pythonExtension: async () => '/ext/bin/python' })).path, '/ext/bin/python');
    const fallback = await chooseInterpreter({ setting: () => '', pythonEnvs: none, pythonExtension: none, platform: 'linux' });
    assert.equal(fallback.path, 'python3');
    assert.equal(fallback.source, 'default');
    assert.equal((await chooseInterpreter({ setting: () => '', pythonEnvs: none, pythonExtension: none, platform: 'win32' })).path, 'python');
  });

  it('a throwing extension API falls through and is logged', async () => {
    const logged: string[] = [];
    const choice = await chooseInterpreter({
      setting: () => undefined,
      pythonEnvs: async () => { throw new Error('API changed'); },
      pythonExtension: async () => '/ext/python',
      log: (m) => logged.push(m),
    });
    assert.equal(choice.source, 'python-extension');
    assert.match(logged.join('\n'), /Python Environments extension failed: API changed/);
  });

  it('expands ${workspaceFolder} and ~ in the setting', () => {
    assert.equal(expandPathVariables('${workspaceFolder}/.venv/bin/python', '/ws'), '/ws/.venv/bin/python');
    assert.ok(!expandPathVariables('~/py/bin/python').startsWith('~'));
  });
});
