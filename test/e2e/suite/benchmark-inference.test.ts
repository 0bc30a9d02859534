/**
 * The benchmark view's Inference tab in a real VS Code (code-server) and its real webview: the tab (clicked in the
 * DOM) shows the inference backends, each disabled with its reason where it cannot run, and the inference fields;
 * the tab's choice is what the next run launches (`--mode inference`), here on the benchmark's CPU harness with the
 * tiny preset; the finished run is shown with prefill/decode tokens/s and the accuracy cost, fitting the default
 * sidebar width, and kept in the history as an inference run.
 */
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import type { BenchmarkViewState } from '../../../common/webview-messages';
import { domProbe, waitFor, waitForView, workspaceFile } from './helpers';

const getState = () => vscode.commands.executeCommand<BenchmarkViewState>('precisionLens.benchmark.getState');
const harness = () => workspaceFile(path.join('interpreters', 'cpu-harness-python')).fsPath;

async function usePython(value: string | undefined): Promise<void> {
  await vscode.workspace.getConfiguration('precisionLens').update('pythonPath', value, vscode.ConfigurationTarget.Workspace);
}

function hostState(ok: (s: BenchmarkViewState) => boolean, what: string, timeoutMs = 120_000): Promise<BenchmarkViewState> {
  return waitFor(async () => {
    const s = await getState();
    return ok(s) ? s : undefined;
  }, what, { timeoutMs, intervalMs: 200 });
}

describe('benchmark view: the Inference tab launches --mode inference and shows its results', function () {
  this.timeout(300_000);

  before(async function () {
    if (!fs.existsSync('/usr/bin/python3')) this.skip();
    fs.chmodSync(harness(), 0o755);
    await vscode.commands.executeCommand('precisionLens.benchmark.focus');
    await usePython(harness());
    await hostState((s) => s.interpreter?.path === harness() && s.environment.status === 'ready', 'the probe of the CPU harness interpreter');
  });

  after(async () => {
    // Leave the view as the other suites expect it: the Training tab, the default interpreter.
    await domProbe<boolean>('clickTrainingTab');
    await hostState((s) => s.lastOptions.mode === 'train', 'the Training tab remembered', 30_000);
    await usePython(undefined);
  });

  it('the tab shows the inference backends, each disabled with its reason here, and the inference fields', async () => {
    assert.equal(await domProbe<boolean>('clickInferenceTab'), true);
    const view = await waitForView((s) => s.mode === 'inference' && s.backends.some((b) => b.id === 'modelopt'), 'the Inference tab');
    assert.deepEqual(view.backends.map((b) => b.id), ['bf16', 'torchao', 'te', 'torch-fp8', 'modelopt']);
    for (const b of view.backends) assert.equal(b.reason, 'no CUDA device', `${b.id}: ${b.reason}`);
    assert.match(view.backends.find((b) => b.id === 'modelopt')!.label, /accuracy only/);
    assert.deepEqual(view.fields, ['batch', 'prompt-len', 'new-tokens', 'repeats']);
    assert.deepEqual(view.problems, []);
    const state = await hostState((s) => s.lastOptions.mode === 'inference', 'the tab remembered by the host', 30_000);
    assert.deepEqual(state.inferenceBackends.map((b) => b.id), view.backends.map((b) => b.id));
  });

  it('on an H200 with Transformer Engine (torch 1.13, no torchao, no ModelOpt) the tab enables BF16 and TE, and says why not the others', async () => {
    const h200 = workspaceFile(path.join('interpreters', 'h200-python')).fsPath;
    fs.chmodSync(h200, 0o755);
    await usePython(h200);
    await hostState((s) => s.interpreter?.path === h200 && s.environment.status === 'ready', 'the probe of the H200 interpreter');
    const view = await waitForView((s) => s.mode === 'inference' && s.interpreter === h200 && s.backends.some((b) => b.id === 'bf16' && !b.disabled)
      && s.backends.some((b) => b.id === 'torchao' && b.disabled), 'the H200 inference backends');
    const by = Object.fromEntries(view.backends.map((b) => [b.id, b]));
    assert.equal(by.te.disabled, false);
    assert.equal(by.torchao.reason, 'torchao not installed');
    assert.equal(by.modelopt.reason, 'nvidia-modelopt not installed');
    assert.match(by['torch-fp8'].reason ?? '', /^PyTorch 1\.13\S* has no torch\.float8_e4m3fn/);
    assert.equal(view.run?.disabled, false, 'Run enabled');
    assert.deepEqual(view.problems, []);
    await usePython(harness());
    await hostState((s) => s.interpreter?.path === harness() && s.environment.status === 'ready', 'the CPU harness interpreter again');
  });

  it('a run from the tab is an inference run: prefill and decode tokens/s, the accuracy cost, in the history', async () => {
    // No mode given: the tab chosen in the view decides (the host's last options).
    const started = await vscode.commands.executeCommand<boolean>('precisionLens.benchmark.run', {
      workload: 'tiny', inferenceBackends: ['bf16', 'torch-fp8'], batch: 2, promptLen: 16, newTokens: 4, repeats: 1,
    });
    assert.equal(started, true);
    const done = await hostState((s) => ['done', 'failed', 'cancelled'].includes(s.run.status), 'the inference run to end', 180_000);
    assert.equal(done.run.status, 'done', JSON.stringify(done.run.error));
    assert.equal(done.run.options?.mode, 'inference');
    assert.deepEqual(done.run.results.map((r) => r.backend), ['bf16', 'torch-fp8']);
    assert.ok(done.run.results.every((r) => (r.inference?.decodeTokensPerS ?? 0) > 0), JSON.stringify(done.run.results));
    const view = await waitForView((s) => /^Run of .*: tiny$/.test(s.details?.heading ?? '') && /decode tokens\/s/.test(s.details?.text ?? ''), 'the inference run shown');
    assert.match(view.details!.text, /Decode \(tokens\/s\)/);
    assert.match(view.details!.text, /next-token agreement/);
    assert.match(view.details!.text, /emulated/);
    assert.ok(view.width < 420, `the default sidebar is narrow (${view.width} px)`);
    assert.deepEqual(view.problems, []);
    const row = view.history.find((h) => h.checked);
    assert.match(row?.text ?? '', /tiny · inference b2×16\+4/);
  });
});
