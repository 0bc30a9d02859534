/**
 * Journey 3 of SCENARIOS.md in a real VS Code (no GPU here, as in CI): the benchmark sidebar opens, the host reports
 * the environment and explains "no CUDA device", and Run ends in that explanation, never a stack trace. The tests
 * read the host-side state through the internal command precisionLens.benchmark.getState (the view renders exactly
 * that state; the host re-sends it whenever the view becomes visible).
 */
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import type { BenchmarkViewState } from '../../../common/webview-messages';
import { waitFor } from './helpers';

const getState = () => vscode.commands.executeCommand<BenchmarkViewState>('precisionLens.benchmark.getState');

/** Python with torch on CI (Debian python3-torch), so the probe gets past "torch missing" to "no CUDA". */
const SYSTEM_PYTHON = '/usr/bin/python3';

describe('benchmark sidebar (no GPU)', function () {
  this.timeout(180_000);
  let state: BenchmarkViewState;
  let changedSetting = false;

  before(async function () {
    // Prefer the interpreter that has torch when the default one has none; restore the setting afterwards.
    const config = vscode.workspace.getConfiguration('precisionLens');
    if (!config.get<string>('pythonPath') && fs.existsSync(SYSTEM_PYTHON)) {
      await config.update('pythonPath', SYSTEM_PYTHON, vscode.ConfigurationTarget.Global);
      changedSetting = true;
    }
  });

  after(async () => {
    if (changedSetting) await vscode.workspace.getConfiguration('precisionLens').update('pythonPath', undefined, vscode.ConfigurationTarget.Global);
  });

  it('opens the view and registers the commands', async () => {
    await vscode.commands.executeCommand('precisionLens.benchmark.focus');
    // Opening the view activates the extension (onView); activation may still be under way.
    const wanted = ['precisionLens.benchmark.run', 'precisionLens.benchmark.cancel', 'precisionLens.benchmark.getState'];
    await waitFor(async () => {
      const commands = await vscode.commands.getCommands(true);
      return wanted.every((c) => commands.includes(c));
    }, `the commands ${wanted.join(', ')}`, { timeoutMs: 60_000, intervalMs: 100 });
    state = await waitFor(async () => {
      const s = await getState();
      return s && (s.environment.status === 'ready' || s.environment.status === 'failed') && s.interpreter ? s : undefined;
    }, 'the environment probe to finish', { timeoutMs: 120_000, intervalMs: 200, describe: () => JSON.stringify(state?.environment) });
  });

  it('shows the interpreter and how it was chosen', () => {
    assert.ok(state.trusted, 'the e2e workspace is trusted');
    assert.ok(state.interpreter?.path);
    assert.ok(['setting', 'python-envs', 'python-extension', 'default'].includes(state.interpreter!.source));
    assert.ok(state.interpreter!.detail.length > 0);
    if (changedSetting) assert.equal(state.interpreter!.source, 'setting');
  });

  it('explains that there is no CUDA device', function () {
    const info = state.environment.info;
    if (info && info.gpus.length > 0) this.skip(); // a GPU machine: nothing to explain
    const text = `${state.environment.summary ?? ''} ${state.environment.error?.title ?? ''} ${state.environment.error?.message ?? ''}`;
    assert.match(text, /no CUDA device/i, text);
    assert.match(state.environment.summary ?? '', /needs an NVIDIA GPU; you can still use diagnostics and fixes/);
    if (info) {
      assert.equal(info.fp8Available, false);
      assert.ok(!/Traceback/.test(JSON.stringify(state.environment)));
    }
  });

  it('reports the remote host when VS Code runs remotely', () => {
    if (vscode.env.remoteName) {
      assert.equal(state.remote?.name, vscode.env.remoteName);
      if (state.environment.info?.hostname) assert.equal(state.remote?.hostname, state.environment.info.hostname);
    } else {
      assert.equal(state.remote, undefined);
    }
  });

  it('Run ends in the "no CUDA" explanation, not a stack trace; a second run meanwhile is refused', async function () {
    if (state.environment.info && state.environment.info.gpus.length > 0) this.skip();
    const started = await vscode.commands.executeCommand<boolean>('precisionLens.benchmark.run', { steps: 2, warmup: 1, backends: ['bf16', 'torch-fp8'] });
    assert.equal(started, true);
    // Still starting or running: a second run is refused (the host shows a warning).
    const second = await vscode.commands.executeCommand<boolean>('precisionLens.benchmark.run');
    const afterSecond = await getState();
    if (['starting', 'running'].includes(afterSecond.run.status)) assert.equal(second, false);

    const done = await waitFor(async () => {
      const s = await getState();
      return ['done', 'failed', 'cancelled'].includes(s.run.status) ? s : undefined;
    }, 'the run to end', { timeoutMs: 120_000, intervalMs: 200 });
    assert.equal(done.run.status, 'failed');
    const error = done.run.error!;
    assert.ok(error, 'an explanation');
    assert.match(`${error.title} ${error.message}`, /no CUDA device|PyTorch not installed/i);
    assert.ok(error.hint, 'with a hint');
    assert.doesNotMatch(`${error.title}\n${error.message}\n${error.hint}`, /Traceback|File "/);
    assert.equal(done.history.filter((h) => h.id === done.run.id).length, 0, 'a failed run is not kept in the history');
  });

  it('closing and reopening the view keeps the state (the host owns it)', async () => {
    const before = await getState();
    await vscode.commands.executeCommand('workbench.action.closeSidebar');
    await vscode.commands.executeCommand('precisionLens.benchmark.focus');
    const after = await getState();
    assert.equal(after.run.id, before.run.id);
    assert.equal(after.run.status, before.run.status);
    assert.deepEqual(after.environment.summary, before.environment.summary);
  });

  it('cancel with nothing running is harmless', async () => {
    await vscode.commands.executeCommand('precisionLens.benchmark.cancel');
    const s = await getState();
    assert.ok(!['starting', 'running', 'cancelling'].includes(s.run.status));
  });

  it('imports the H200 --json-out results into the history (Import Benchmark Results)', async () => {
    const ext = vscode.extensions.getExtension('precision-lens.precision-lens');
    assert.ok(ext, 'the extension under test');
    const file = path.join(ext.extensionPath, 'bench', 'results', 'h200', 'llama-7b-slice.json');
    const commands = await vscode.commands.getCommands(true);
    assert.ok(commands.includes('precisionLens.benchmark.importResults'));
    const ids = await vscode.commands.executeCommand<string[]>('precisionLens.benchmark.importResults', file);
    assert.equal(ids.length, 1);
    const s = await getState();
    const entry = s.history.find((h) => h.id === ids[0]);
    assert.ok(entry, 'the imported run is in the host state');
    assert.equal(entry.options.workload, 'llama-7b-slice');
    assert.equal(entry.gpu, 'NVIDIA H200');
    assert.equal(entry.jsonOut, file);
    const ran = entry.results.filter((r) => !r.skippedReason).map((r) => r.backend);
    assert.deepEqual(ran, ['bf16', 'torch-fp8']);
    const speedup = entry.ratios.find((r) => r.backend === 'torch-fp8')?.speedup;
    assert.ok(speedup !== undefined && speedup > 1.3, `torch-fp8 tokens/s ratio ${speedup}`);
    const bf16 = entry.results.find((r) => r.backend === 'bf16')!;
    const fp8 = entry.results.find((r) => r.backend === 'torch-fp8')!;
    assert.ok(fp8.tokensPerS! / bf16.tokensPerS! > 1.3);

    // The same file again replaces the entry; a file that is not --json-out output adds nothing.
    const again = await vscode.commands.executeCommand<string[]>('precisionLens.benchmark.importResults', vscode.Uri.file(file));
    assert.deepEqual(again, ids);
    const notResults = await vscode.commands.executeCommand<string[]>('precisionLens.benchmark.importResults', path.join(ext.extensionPath, 'package.json'));
    assert.deepEqual(notResults, []);
    const after = await getState();
    assert.equal(after.history.filter((h) => h.id === ids[0]).length, 1);
    assert.equal(after.history.length, s.history.length);
  });
});
