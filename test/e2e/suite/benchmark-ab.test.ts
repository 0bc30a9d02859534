/**
 * "Measure conversion" (journey 7) in a real VS Code on this machine, which has no GPU: the action is offered in the
 * Training tab but disabled with Run's reason; started anyway (its command, as a script or keybinding would), it copies
 * and converts the workspace's project with the bundled CLI, runs bench/benchmark.py --mode ab on Debian's python3 and
 * ends with the no-CUDA message; the workload is remembered for the workspace, the history is unchanged (a failed run
 * is not kept), no converted copy is left behind, and the view is whole (nothing cut, no broken word).
 */
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import type { BenchmarkViewState } from '../../../common/webview-messages';
import { waitFor, waitForView } from './helpers';

const getState = () => vscode.commands.executeCommand<BenchmarkViewState>('precisionLens.benchmark.getState');
const SYSTEM_PYTHON = '/usr/bin/python3';
const NO_CUDA = 'No CUDA device: the benchmark needs an NVIDIA GPU.';

async function usePython(value: string | undefined): Promise<void> {
  await vscode.workspace.getConfiguration('precisionLens').update('pythonPath', value, vscode.ConfigurationTarget.Workspace);
}

/** The converted copies `precision-lens measure` makes (and must remove) in the temp folder. */
function copiesInTmp(): string[] {
  return fs.readdirSync(os.tmpdir()).filter((n) => n.startsWith('precision-lens-measure-'));
}

describe('benchmark view: Measure conversion (the A/B of the project) without a GPU', function () {
  this.timeout(300_000);

  before(async function () {
    if (!fs.existsSync(SYSTEM_PYTHON)) this.skip();
    await vscode.commands.executeCommand('precisionLens.benchmark.focus');
    await usePython(SYSTEM_PYTHON);
    await waitFor(async () => {
      const s = await getState();
      return s.interpreter?.path === SYSTEM_PYTHON && (s.environment.status === 'ready' || s.environment.status === 'failed') ? s : undefined;
    }, 'the probe of python3', { timeoutMs: 120_000, intervalMs: 200 });
  });

  after(async () => {
    await usePython(undefined);
  });

  it('is disabled with Run\'s reason where there is no CUDA device', async () => {
    const state = await getState();
    assert.equal(state.runBlocked, NO_CUDA);
    assert.equal(state.abBlocked, NO_CUDA, 'the A/B runs the same benchmark: the same reason');
    assert.ok(state.workspaceFolder, 'a workspace folder is open');
    const view = await waitForView((s) => s.interpreter === SYSTEM_PYTHON && s.run?.disabled === true && s.mode === 'train', 'the Training tab with Run disabled');
    assert.equal(view.runReason, NO_CUDA);
    assert.deepEqual(view.problems, []);
  });

  it('run anyway, it converts a copy, ends with the no-CUDA message, keeps no history entry and no copy', async () => {
    const before = await getState();
    const copiesBefore = copiesInTmp();
    const started = await vscode.commands.executeCommand<boolean>('precisionLens.benchmark.measureConversion', {
      workload: 'bench_model:gpt', steps: 2, warmup: 1, batch: 2, seq: 32, compile: false,
    });
    assert.equal(started, true);
    let last: BenchmarkViewState | undefined;
    const done = await waitFor(async () => {
      last = await getState();
      return last.run.id !== before.run.id && ['done', 'failed', 'cancelled'].includes(last.run.status) ? last : undefined;
    }, 'the A/B run to end', { timeoutMs: 180_000, intervalMs: 250, describe: () => JSON.stringify(last?.run).slice(0, 2000) });
    assert.equal(done.run.status, 'failed', JSON.stringify(done.run));
    assert.equal(done.run.options?.ab, true, 'the run is marked as an A/B');
    assert.equal(done.run.options?.workload, 'bench_model:gpt');
    assert.deepEqual(done.run.options?.backends, ['original', 'converted', 'torchao-original']);
    assert.equal(done.run.error?.title, 'No CUDA device', JSON.stringify(done.run.error));
    assert.match(done.run.error?.message ?? '', /the benchmark needs an NVIDIA GPU/);
    // The conversion ran before the benchmark (the CLI's --fix --unsafe-fixes on the copy).
    assert.ok((done.run.conversion?.applied ?? 0) > 0, `the copy was converted: ${JSON.stringify(done.run.conversion)}`);
    assert.ok(done.run.conversion!.fixes.some((f) => /PL101/.test(f)), done.run.conversion!.fixes.join('\n'));
    assert.deepEqual(done.run.results, []);
    // State and history stay sane: nothing kept for a failed run, the action still disabled with its reason, the
    // workload remembered for this workspace, the workspace itself untouched, no copy left behind.
    assert.equal(done.history.length, before.history.length, 'a failed run is not kept');
    assert.equal(done.abBlocked, NO_CUDA);
    assert.equal(done.abWorkload, 'bench_model:gpt');
    assert.equal(fs.existsSync(path.join(done.workspaceFolder!, 'fp8_fallback.py')), false, 'the workspace is not converted');
    await waitFor(() => copiesInTmp().every((c) => copiesBefore.includes(c)) || undefined, 'the converted copy to be removed', { timeoutMs: 10_000, intervalMs: 200 });
    const view = await waitForView((s) => s.run?.disabled === true, 'the view after the failed A/B');
    assert.deepEqual(view.problems, []);
  });
});
