/**
 * "Measure conversion" (journey 7) in a real VS Code on this machine, which has no GPU: the action is offered in the
 * Training tab but disabled with Run's reason; started anyway (its command, as a script or keybinding would), it copies
 * and converts the workspace's project with the bundled CLI, runs bench/benchmark.py --mode ab on Debian's python3 and
 * ends with the no-CUDA message; the workload is remembered for the workspace, the history is unchanged (a failed run
 * is not kept), no converted copy is left behind, and the view is whole (nothing cut, no broken word).
 * With "Loss check" ticked and a warm start of 100, on a fake H200 interpreter that replays a recorded warm-started
 * loss check (bench/results/h200/2026-12-05-h100-loss-heldout/warm-start-100), the run goes through `measure
 * --loss-check --warm-start 100` and the view shows each arm's eval loss, the BF16 arm run again, the verdict line, what
 * the workload ran on, and a history row marked "A/B · loss check, warm start 100".
 * With Compile off, on a fake H200 interpreter that replays a recorded A/B (bench/results/h200/2026-12-04-peer), the
 * torchao peer runs compiled (measure passes --peer-compile on): its row says so, and the verdict against it heads the
 * result.
 */
import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import type { BenchmarkViewState } from '../../../common/webview-messages';
import { domProbe, waitFor, waitForView, workspaceFile } from './helpers';

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

describe('benchmark view: Measure conversion with the loss check (a recorded GPU run replayed)', function () {
  this.timeout(300_000);
  const replayer = () => workspaceFile(path.join('interpreters', 'h200-loss-check-python')).fsPath;

  before(async function () {
    if (!fs.existsSync(SYSTEM_PYTHON)) this.skip();
    fs.chmodSync(replayer(), 0o755);
    await vscode.commands.executeCommand('precisionLens.benchmark.focus');
    await usePython(replayer());
    await waitFor(async () => {
      const s = await getState();
      return s.interpreter?.path === replayer() && s.environment.status === 'ready' && s.abBlocked === undefined ? s : undefined;
    }, 'the probe of the fake H200 interpreter', { timeoutMs: 120_000, intervalMs: 200 });
  });

  /** Sends what the Measure conversion button sends with these loss-check options and waits for the run to end. */
  async function measureLossCheck(options: Record<string, unknown>): Promise<BenchmarkViewState> {
    const before = await getState();
    const started = await vscode.commands.executeCommand<boolean>('precisionLens.benchmark.measureConversion', {
      workload: 'bench_model:gpt', steps: 30, warmup: 5, batch: 8, seq: 2048, compile: false, lossCheck: true, ...options,
    });
    assert.equal(started, true);
    let last: BenchmarkViewState | undefined;
    const done = await waitFor(async () => {
      last = await getState();
      return last.run.id !== before.run.id && ['done', 'failed', 'cancelled'].includes(last.run.status) ? last : undefined;
    }, 'the loss check to end', { timeoutMs: 180_000, intervalMs: 250, describe: () => JSON.stringify(last?.run).slice(0, 2000) });
    assert.equal(done.run.status, 'done', JSON.stringify(done.run.error));
    assert.equal(done.history.length, before.history.length + 1);
    return done;
  }

  after(async () => {
    // Leave the box as the other suites expect it: unticked.
    const view = await waitForView((s) => s.lossCheck !== undefined, 'the Loss check box');
    if (view.lossCheck?.checked) await domProbe<boolean>('clickLossCheck');
    await usePython(undefined);
  });

  it('the "Loss check" box sits next to Measure conversion; ticked, it says what the loss check runs and the host remembers it', async () => {
    const before = await waitForView((s) => s.lossCheck?.visible === true && s.lossCheck.disabled === false && s.mode === 'train', 'the Loss check box enabled');
    assert.equal(before.lossCheck!.checked, false);
    assert.equal(before.lossCheck!.help, undefined, 'the help line shows only when ticked');
    assert.equal(await domProbe<boolean>('clickLossCheck'), true);
    const view = await waitForView((s) => s.lossCheck?.checked === true && s.lossCheck.help !== undefined, 'the box ticked with its help line');
    assert.match(view.lossCheck!.help!, /200 training steps .*eval loss .*BF16 run again for the noise floor/);
    assert.deepEqual(view.lossCheck!.warmStart, { value: '0', disabled: false }, 'the Warm start field shows with the box: 0, a cold start');
    assert.equal(before.lossCheck!.warmStart, undefined, 'and hides without it');
    assert.deepEqual(view.problems, []);
    await waitFor(async () => ((await getState()).lastOptions.lossCheck === true) || undefined, 'the host to remember the ticked box', { timeoutMs: 10_000, intervalMs: 200 });
    // A warm start that is no step count: Measure conversion refused, with the reason.
    assert.equal(await domProbe<boolean>('typeBadWarmStart'), true);
    const bad = await waitForView((s) => s.lossCheck?.abReason !== undefined, 'Measure conversion refused with a reason');
    assert.match(bad.lossCheck!.abReason!, /^Warm start must be a whole number of BF16 steps/);
    assert.equal(await domProbe<boolean>('typeWarmStart'), true);
    const warm = await waitForView((s) => s.lossCheck?.warmStart?.value === '100' && s.lossCheck.abReason === undefined, 'Warm start 100 accepted');
    assert.deepEqual(warm.problems, []);
    await waitFor(async () => ((await getState()).lastOptions.warmStart === 100) || undefined, 'the host to remember the warm start', { timeoutMs: 10_000, intervalMs: 200 });
    // "Rounded start" beside it: off by default; ticked, the host has it (the run below sends it itself).
    assert.deepEqual(warm.lossCheck!.roundedStart, { checked: false, disabled: false });
    assert.equal(before.lossCheck!.roundedStart, undefined, 'hidden without the loss check');
    assert.equal(await domProbe<boolean>('clickRoundedStart'), true);
    await waitFor(async () => ((await getState()).lastOptions.roundedStart === true) || undefined, 'the host to remember the rounded start', { timeoutMs: 10_000, intervalMs: 200 });
    assert.equal(await domProbe<boolean>('clickRoundedStart'), true);
    await waitFor(async () => ((await getState()).lastOptions.roundedStart === undefined) || undefined, 'the rounded start off again', { timeoutMs: 10_000, intervalMs: 200 });
  });

  it('runs measure --loss-check and shows the eval loss per arm, the BF16 arm again, the verdict, and a history row marked loss check', async () => {
    // As the button sends it: the form's values with the box ticked (its Steps, 30, are a speed run's: 200 apply).
    // The fake interpreter fails any command line but a loss check's (--steps 200 --peer none --repeat-original
    // --warm-start-steps 100 ...): the form's warm start reached the benchmark.
    const done = await measureLossCheck({ warmStart: 100 });
    assert.equal(done.run.options?.lossCheck, true);
    assert.equal(done.run.options?.warmStart, 100);
    assert.equal(done.run.options?.steps, 200, 'the steps that ran are recorded');
    assert.deepEqual(done.run.options?.backends, ['original', 'converted', 'original-repeat']);
    assert.deepEqual(done.run.results.map((r) => [r.backend, r.extra?.eval_loss]), [
      ['original', 1.287140965461731], ['converted', 1.2867414951324463], ['original-repeat', 1.289900302886963]]);
    assert.equal(done.history[0].results.find((r) => r.backend === 'converted')?.extra?.eval_loss, 1.2867414951324463, 'the history keeps the eval loss');

    const view = await waitForView((s) => /^A\/B run of .*: bench_model:gpt$/.test(s.details?.heading ?? '') && (s.details?.evalLoss.length ?? 0) > 0, 'the loss check shown');
    assert.deepEqual(view.details!.evalLoss, [
      { arm: 'Original (BF16)', value: '1.2871' }, { arm: 'Converted (FP8)', value: '1.2867' }, { arm: 'Original again (BF16)', value: '1.2899' }]);
    assert.equal(view.details!.verdict, 'Loss check from 100 BF16 warm-start steps: FP8 eval loss -0.03 % vs BF16 (1.2867 vs 1.2871); '
      + 'the BF16 run again: +0.21 % (the noise floor): within 1 % of BF16.');
    // What the workload said it ran on, under the table: the held-out text the eval loss is over.
    assert.match(view.details!.text, /Workload: llama2\.c Transformer 12 x 2048, 8 x 2048 byte tokens of real text \(9\.5 MB of text to train on \(482 files\), 1\.1 MB held out \(69 files\)\)\./);
    const row = view.history.find((h) => h.checked);
    assert.match(row?.text ?? '', /A\/B · loss check, warm start 100 bench_model:gpt/);
    assert.deepEqual(view.problems, [], 'the table with its eval-loss column and the verdict fit the sidebar');
  });

  it('with "Rounded start" from a cold start: the BF16 arm from rounded weights runs, and the verdict weighs it', async () => {
    // The fake interpreter replays llama2.c seed 11 (H100) only for --rounded-original without a warm start.
    const done = await measureLossCheck({ roundedStart: true });
    assert.deepEqual([done.run.options?.roundedStart, done.run.options?.warmStart], [true, undefined]);
    assert.deepEqual(done.run.options?.backends, ['original', 'converted', 'original-repeat', 'original-rounded']);
    const view = await waitForView((s) => (s.details?.evalLoss.length ?? 0) === 4 && s.details?.verdict !== undefined, 'the loss check with four arms shown');
    assert.deepEqual(view.details!.evalLoss.map((r) => r.arm), ['Original (BF16)', 'Converted (FP8)', 'Original again (BF16)', 'Original, rounded start (BF16)']);
    assert.equal(view.details!.evalLoss[3].value, '1.7264');
    assert.match(view.details!.verdict!, /BF16 from its weights rounded once to BF16: -0\.98 %: outside 1 %, but the arms parted at step 5 .*where BF16 from its weights rounded to BF16 parts too \(step 1: 7\.54 vs 8\.34\)/);
    assert.deepEqual(view.problems, []);
  });
});

describe('benchmark view: Measure conversion against torchao compiled (a recorded H200 A/B replayed)', function () {
  this.timeout(300_000);
  const fakeAb = () => workspaceFile(path.join('interpreters', 'h200-ab-python')).fsPath;

  before(async function () {
    if (!fs.existsSync(SYSTEM_PYTHON)) this.skip();
    fs.chmodSync(fakeAb(), 0o755);
    await vscode.commands.executeCommand('precisionLens.benchmark.focus');
    await usePython(fakeAb());
    await waitFor(async () => {
      const s = await getState();
      return s.interpreter?.path === fakeAb() && s.environment.status === 'ready' && s.abBlocked === undefined ? s : undefined;
    }, 'the probe of the fake H200 interpreter', { timeoutMs: 120_000, intervalMs: 200 });
  });

  after(async () => {
    await usePython(undefined);
  });

  it('eager arms run the peer compiled: its row says so and the verdict against it heads the result', async () => {
    const before = await getState();
    // The fake replays llama2.c's run at 6 x 4096 for an eager A/B whose peer is compiled (--no-compile --peer-compile
    // on: what measure makes of the form with Compile off) and refuses any other command line.
    const started = await vscode.commands.executeCommand<boolean>('precisionLens.benchmark.measureConversion', {
      workload: 'bench_model:gpt', steps: 20, warmup: 5, batch: 6, seq: 4096, compile: false,
    });
    assert.equal(started, true);
    let last: BenchmarkViewState | undefined;
    const done = await waitFor(async () => {
      last = await getState();
      return last.run.id !== before.run.id && ['done', 'failed', 'cancelled'].includes(last.run.status) ? last : undefined;
    }, 'the A/B to end', { timeoutMs: 180_000, intervalMs: 250, describe: () => JSON.stringify(last?.run).slice(0, 2000) });
    assert.equal(done.run.status, 'done', JSON.stringify(done.run.error));
    assert.deepEqual(done.run.results.map((r) => [r.backend, r.extra?.compile]), [['original', false], ['converted', false], ['torchao-original', true]]);
    assert.equal(done.history[0].results.find((r) => r.backend === 'torchao-original')?.extra?.compile, true, 'the history keeps the flag');

    const view = await waitForView((s) => /^A\/B run of .*: bench_model:gpt$/.test(s.details?.heading ?? '') && s.details?.peerVerdict !== undefined, 'the A/B shown with its verdict');
    assert.deepEqual(view.details!.arms, ['Original (BF16)', 'Converted (FP8)', 'torchao on original (compiled)']);
    assert.equal(view.details!.peerVerdict, 'torchao (compiled) on the original is 1.19x faster than this conversion: '
      + 'for this model, torch.compile with torchao\'s convert_to_float8_training trains faster.');
    assert.equal(view.details!.verdict, undefined, 'no loss check, no loss verdict');
    assert.deepEqual(view.problems, [], 'the longer row name and the verdict fit the sidebar');
  });
});
