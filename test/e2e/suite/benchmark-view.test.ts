/**
 * The benchmark view as a user meets it, in a real VS Code (code-server: a remote window) and its real webview,
 * whose DOM run.mjs reads for the tests (viewSnapshot): Run and each backend disabled with the reason where they
 * cannot run and enabled the moment the interpreter changes; "Choose interpreter…" as a quick pick of the
 * interpreters found; an imported or finished run selected and shown; results and comparison fitting the default
 * sidebar width. Interpreters: Debian's python3 (no GPU, as in CI), and test stand-ins in the workspace's
 * interpreters/ folder: an H200 machine's Python with and without Transformer Engine (torch.cuda answering as that
 * GPU, the benchmark's real probe), and the benchmark's CPU harness mode (so a run can finish here).
 */
import * as assert from 'assert';
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';
import type { BenchmarkViewState } from '../../../common/webview-messages';
import { viewSnapshot, waitFor, waitForView, workspaceFile } from './helpers';

const getState = () => vscode.commands.executeCommand<BenchmarkViewState>('precisionLens.benchmark.getState');
const SYSTEM_PYTHON = '/usr/bin/python3';
const interpreter = (name: string) => workspaceFile(path.join('interpreters', name)).fsPath;

async function usePython(value: string | undefined): Promise<void> {
  await vscode.workspace.getConfiguration('precisionLens').update('pythonPath', value, vscode.ConfigurationTarget.Workspace);
}

/** The host state once the probe of `python` has answered. */
function probed(python: string): Promise<BenchmarkViewState> {
  let last: BenchmarkViewState | undefined;
  return waitFor(async () => {
    last = await getState();
    return last.interpreter?.path === python && (last.environment.status === 'ready' || last.environment.status === 'failed') ? last : undefined;
  }, `the probe of ${python}`, { timeoutMs: 120_000, intervalMs: 200, describe: () => JSON.stringify({ interpreter: last?.interpreter, env: last?.environment.status }) });
}

describe('benchmark view: what can run, the interpreter picker, selection and fit', function () {
  this.timeout(300_000);

  before(async function () {
    if (!fs.existsSync(SYSTEM_PYTHON)) this.skip();
    for (const name of ['h200-python', 'h200-python-no-te', 'cpu-harness-python']) fs.chmodSync(interpreter(name), 0o755);
    await vscode.commands.executeCommand('precisionLens.benchmark.focus');
  });

  after(async () => {
    await usePython(undefined);
  });

  it('without CUDA, Run and every backend are disabled, each saying why', async () => {
    await usePython(SYSTEM_PYTHON);
    const state = await probed(SYSTEM_PYTHON);
    assert.equal(state.environment.status, 'ready', JSON.stringify(state.environment));
    assert.equal(state.runBlocked, 'No CUDA device: the benchmark needs an NVIDIA GPU.');
    const ids = state.backends.map((b) => b.id);
    assert.deepEqual(ids.slice(0, 2), ['bf16', 'te'], 'the backends the probe reports');
    assert.ok(ids.includes('torch-fp8') && ids.length >= 3, ids.join(','));
    const view = await waitForView((s) => s.interpreter === SYSTEM_PYTHON && s.run?.disabled === true && s.backends.length === ids.length, 'Run disabled');
    assert.equal(view.runReason, 'No CUDA device: the benchmark needs an NVIDIA GPU.');
    assert.equal(view.run!.title, view.runReason);
    // The reason is said once: no "Choose at least one backend." beside the disabled rows.
    assert.equal(view.validation, undefined, `validation: ${view.validation}`);
    for (const b of view.backends) {
      assert.equal(b.disabled, true, `${b.id} disabled`);
      assert.equal(b.reason, 'no CUDA device', `${b.id}: ${b.reason}`);
    }
    assert.ok(view.chooseInterpreter, 'a Choose interpreter… button');
    // At the default sidebar width: no word broken inside a code token (this torch's "has no torch.float8_e4m3fn,
    // torch.float8_e5m2, torch._scaled_mm" broke as "torch.float8_e4m 3fn"), and every workload fits the closed list.
    const torchFp8 = state.environment.info?.torchFp8Reason ?? '';
    assert.deepEqual(view.problems, [], `${view.width} px wide, torch FP8: ${torchFp8}`);
  });

  it('a failed run is logged once: the benchmark log has its reason one time, no echo in other formats', async () => {
    const started = await vscode.commands.executeCommand<boolean>('precisionLens.benchmark.run', { steps: 2, warmup: 1, backends: ['bf16', 'torch-fp8'] });
    assert.equal(started, true);
    const done = await waitFor(async () => {
      const s = await getState();
      return ['done', 'failed', 'cancelled'].includes(s.run.status) ? s : undefined;
    }, 'the run to end', { timeoutMs: 120_000, intervalMs: 200 });
    assert.equal(done.run.status, 'failed');
    // The output channel's file in this run's logs (code-server keeps them under its user data folder).
    const logs = path.join(path.dirname(workspaceFile('.').fsPath), 'cs', 'user-data', 'logs');
    const find = (dir: string): string[] => fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? find(path.join(dir, e.name)) : e.name.endsWith('Precision Lens Benchmark.log') ? [path.join(dir, e.name)] : []);
    const text = await waitFor(() => {
      const all = fs.existsSync(logs) ? find(logs).map((f) => fs.readFileSync(f, 'utf8')).join('\n') : '';
      const from = all.indexOf(`run ${done.run.id}:`);
      return from >= 0 && all.includes(`run ${done.run.id} failed`) ? all.slice(from) : undefined;
    }, 'the benchmark log of the run', { timeoutMs: 30_000, intervalMs: 250 });
    const mentions = text.split('\n').filter((l) => /the benchmark needs an NVIDIA GPU/.test(l));
    assert.equal(mentions.length, 1, `the failure is logged once:\n${mentions.join('\n')}`);
  });

  it('an interpreter with a GPU and TE enables Run and TE at once; a backend this torch lacks stays disabled with its reason', async () => {
    const h200 = interpreter('h200-python');
    await usePython(h200);
    const state = await probed(h200);
    assert.equal(state.runBlocked, undefined, JSON.stringify(state.environment.error));
    const view = await waitForView((s) => s.interpreter === h200 && s.run?.disabled === false, 'Run enabled');
    assert.equal(view.runReason, undefined);
    const by = Object.fromEntries(view.backends.map((b) => [b.id, b]));
    assert.equal(by.bf16.disabled, false);
    assert.equal(by.te.disabled, false);
    assert.equal(by.te.label, 'FP8 (Transformer Engine)');
    assert.equal(by['torch-fp8'].disabled, true);
    assert.match(by['torch-fp8'].reason ?? '', /^PyTorch 1\.13\S* has no torch\.float8_e4m3fn/);
    assert.equal(by['torch-fp8'].checked, false, 'a backend that cannot run is not ticked');
  });

  it('the same GPU without Transformer Engine: TE disabled with "Transformer Engine not installed", Run still enabled', async () => {
    const noTe = interpreter('h200-python-no-te');
    await usePython(noTe);
    await probed(noTe);
    const view = await waitForView((s) => s.interpreter === noTe && s.backends.some((b) => b.id === 'te' && b.disabled), 'TE disabled');
    const te = view.backends.find((b) => b.id === 'te')!;
    assert.equal(te.reason, 'Transformer Engine not installed');
    assert.equal(view.run?.disabled, false);
  });

  it('"Choose interpreter…" is a quick pick of the interpreters found, in this remote window; the pick is used', async () => {
    assert.ok(vscode.env.remoteName, 'code-server windows are remote windows');
    const current = interpreter('h200-python-no-te');
    const picked = vscode.commands.executeCommand<string | undefined>('precisionLens.benchmark.chooseInterpreter');
    const open = await waitFor(async () => {
      const s = await getState();
      return s.interpreters?.pickerOpen ? s : undefined;
    }, 'the interpreter picker to open', { timeoutMs: 60_000, intervalMs: 100 });
    const candidates = open.interpreters!.candidates;
    assert.deepEqual(candidates[0], { path: current, source: 'setting' }, JSON.stringify(candidates));
    const system = fs.realpathSync(SYSTEM_PYTHON);
    const index = candidates.findIndex((c) => c.source === 'path' && fs.realpathSync(c.path) === system);
    assert.ok(index > 0, `Debian's python3 is found on PATH: ${JSON.stringify(candidates)}`);
    const choice = candidates[index].path;
    // Drive the real quick pick: first item, down to the candidate, accept.
    await vscode.commands.executeCommand('quickInput.first');
    for (let i = 0; i < index; i++) await vscode.commands.executeCommand('quickInput.next');
    await vscode.commands.executeCommand('workbench.action.acceptSelectedQuickOpenItem');
    assert.equal(await picked, choice);
    const inspected = vscode.workspace.getConfiguration('precisionLens').inspect<string>('pythonPath');
    assert.equal(inspected?.workspaceValue, choice, 'written to the workspace settings');
    const state = await probed(choice);
    assert.equal(state.interpreter?.source, 'setting');
    assert.equal(state.interpreters?.pickerOpen, false);
    const view = await waitForView((s) => s.interpreter === choice && s.run?.disabled === true, 'the view showing the new interpreter');
    assert.equal(view.runReason, 'No CUDA device: the benchmark needs an NVIDIA GPU.');
  });

  it('an imported run is selected and shown, and fits the default sidebar width (no cut value, no broken word)', async () => {
    const ext = vscode.extensions.getExtension('precision-lens.precision-lens')!;
    const file = path.join(ext.extensionPath, 'bench', 'results', 'h200', 'llama-7b-slice.json');
    const [id] = await vscode.commands.executeCommand<string[]>('precisionLens.benchmark.importResults', file);
    const state = await getState();
    assert.deepEqual(state.selection?.ids, [id]);
    const view = await waitForView((s) => /^Run of .*: llama-7b-slice$/.test(s.details?.heading ?? ''), 'the imported run shown');
    assert.ok(view.width < 420, `the default sidebar is narrow (${view.width} px)`);
    const row = view.history.find((h) => h.text.includes('llama-7b-slice'));
    assert.ok(row?.checked, `the imported run is ticked in the history: ${JSON.stringify(view.history)}`);
    assert.match(view.details!.text, /tokens\/s/);
    assert.match(view.details!.text, /speed vs BF16/);
    assert.deepEqual(view.problems, []);
  });

  it('two imported runs are compared side by side, and the comparison fits too', async () => {
    const ext = vscode.extensions.getExtension('precision-lens.precision-lens')!;
    const files = ['llama-7b-slice.json', 'llama-70b-slice.json'].map((f) => path.join(ext.extensionPath, 'bench', 'results', 'h200', f));
    const ids = await vscode.commands.executeCommand<string[]>('precisionLens.benchmark.importResults', files);
    assert.equal(ids.length, 2);
    assert.deepEqual((await getState()).selection?.ids, ids);
    const view = await waitForView((s) => s.details?.heading === 'Comparison', 'the comparison');
    assert.equal(view.history.filter((h) => h.checked).length, 2);
    assert.match(view.details!.text, /B \/ A/);
    assert.deepEqual(view.problems, []);
  });

  it('a finished run is selected and shown', async () => {
    const harness = interpreter('cpu-harness-python');
    await usePython(harness);
    await probed(harness);
    const started = await vscode.commands.executeCommand<boolean>('precisionLens.benchmark.run', {
      workload: 'tiny', backends: ['bf16', 'torch-fp8'], steps: 2, warmup: 1, batch: 2, seq: 32, compile: false,
    });
    assert.equal(started, true);
    const done = await waitFor(async () => {
      const s = await getState();
      return ['done', 'failed', 'cancelled'].includes(s.run.status) ? s : undefined;
    }, 'the CPU harness run to end', { timeoutMs: 180_000, intervalMs: 250 });
    assert.equal(done.run.status, 'done', JSON.stringify(done.run.error));
    assert.deepEqual(done.selection?.ids, [done.run.id]);
    const view = await waitForView((s) => /^Run of .*: tiny$/.test(s.details?.heading ?? ''), 'the finished run shown');
    assert.ok(view.history.find((h) => h.text.includes('tiny'))?.checked);
    assert.deepEqual(view.problems, []);
    const again = await viewSnapshot();
    assert.equal(again.results, undefined, 'the run is shown once (as the selected history entry)');
  });
});
