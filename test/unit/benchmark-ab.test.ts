/**
 * The sidebar's A/B run ("Measure conversion") without VS Code: recorded protocol lines of the three arms through the
 * run-state reducer (ratios against `original`, the conversion, the FP8-forwards line, the history entry marked A/B,
 * its Markdown), the availability of the action, and the real process the controller starts (the bundled CLI's
 * `measure --format jsonl` on a fake interpreter) through the same runner a normal run uses.
 */
import * as assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { armLabel, BenchEvent, normalizeBenchEvent, backendLabel } from '../../common/bench-events';
import * as lossCheck from '../../common/loss-check';
import { LOSS_CHECK_ARMS, LOSS_CHECK_STEPS, lossCheckSteps, lossVerdict } from '../../common/loss-check';
import { DEFAULT_RUN_OPTIONS, isAbRun, isLossCheckRun, MAX_WARM_START, sanitizeRunOptions, type RunOptions } from '../../common/webview-messages';
import * as measure from '../../server/src/cli/measure';
import { measureTable } from '../../server/src/cli/measure';
import { abBadge, abLines, abVerdicts, conversionLine, evalLossText, fp8ForwardsLine, showsEvalLoss } from '../../client/src/benchmark/ab';
import { parseArgs } from '../../server/src/cli/args';
import { abBlockedReason, RUN_BLOCKED, RUN_BLOCKED_NO_FOLDER } from '../../client/src/benchmark/availability';
import { runToMarkdown } from '../../client/src/benchmark/markdown';
import { buildMeasureArgs, outcomeToUserError, startBenchmark } from '../../client/src/benchmark/runner';
import { applyRunEvent, finishRun, startedRunState, toHistoryEntry } from '../../client/src/benchmark/state';
import { CLI, ensureBuilt, FIXTURES, ROOT } from './cli-harness';

/** What `precision-lens measure --format jsonl` printed for an A/B on an H200 (conversion, then bench --mode ab). */
const RECORDED = [
  '{"event":"progress","phase":"convert","message":"copying 2 .py files and converting the copy"}',
  '{"event":"conversion","applied":5,"files":2,"fixes":["Fixed 5 problems:","- model.py:","    2 × PL101 Convert to te.Linear (with fallback: fp8_linear)"],"copy":"/tmp/precision-lens-measure-x","kept":false,"fallback_module":"fp8_fallback"}',
  '{"event":"env","mode":"ab","torch":"2.9.0","cuda":"12.8","gpus":[{"name":"NVIDIA H200","capability":[9,0]}],"fp8":{"available":true},"te":{"installed":true,"version":"2.20.2"}}',
  '{"event":"progress","phase":"original","step":1,"total":30}',
  '{"event":"result","backend":"original","tokens_per_s":210000,"step_ms":{"median":78.0,"p90":80.1},"peak_memory_bytes":42949672960,"losses":[10.9,10.4,9.8,9.51]}',
  '{"event":"progress","phase":"converted","step":30,"total":30}',
  '{"event":"result","backend":"converted","tokens_per_s":273000,"step_ms":{"median":60.0,"p90":61.5},"peak_memory_bytes":38654705664,"losses":[10.9,10.41,9.82,9.52],"fp8_gemms":{"modules":48,"forwards_fp8":1440,"forwards_total":1440}}',
  '{"event":"progress","phase":"torchao-original","step":30,"total":30}',
  '{"event":"result","backend":"torchao-original","tokens_per_s":241500,"step_ms":{"median":68.0,"p90":70.0},"peak_memory_bytes":40802189312,"losses":[10.9,10.42,9.83,9.53]}',
  '{"event":"summary","mode":"ab","ratios":{"converted":{"speedup":1.3}},"ab":{"original":"original","converted":"converted","fallback_module":"fp8_fallback","fp8_gemms":{"modules":48,"forwards_fp8":1440,"forwards_total":1440},"loss_rel_final":0.001,"peak_memory_ratio":0.9}}',
];

const AB_OPTIONS: RunOptions = { ...DEFAULT_RUN_OPTIONS, workload: 'mypkg.model:build', ab: true, backends: ['original', 'converted', 'torchao-original'], steps: 30, compile: false };

/**
 * What `bench/benchmark.py --mode ab` printed for `measure --loss-check` on the H200 (llama2.c, DelayedScaling: FP8's
 * eval loss 8 % above BF16's, the BF16 run again within 1 %): env, progress, the three arms' results, the summary.
 */
const LOSS_CHECK_RECORDED = readFileSync(join(ROOT, 'bench', 'results', 'h200', '2026-12-04-loss', 'loss-llama2c-12x2048-8x2048-eager-200-out.txt'), 'utf8')
  .split('\n').filter((l) => l.startsWith('{'));

const LOSS_OPTIONS: RunOptions = { ...AB_OPTIONS, lossCheck: true, steps: 200, backends: [...LOSS_CHECK_ARMS] };

function replay(lines: readonly string[], options: RunOptions = AB_OPTIONS) {
  let run = startedRunState('ab-1', options, 1000);
  for (const line of lines) run = applyRunEvent(run, normalizeBenchEvent(JSON.parse(line)) as BenchEvent);
  return run;
}

describe('benchmark A/B run (Measure conversion)', function () {
  this.timeout(60_000);

  it('the three arms: ratios against the original, the conversion kept, progress per arm', () => {
    const partial = replay(RECORDED.slice(0, 4));
    assert.equal(partial.status, 'running');
    assert.equal(partial.progress?.phase, 'original');
    assert.equal(partial.conversion?.applied, 5);
    const run = finishRun(replay(RECORDED), { cancelled: false }, 2000);
    assert.equal(run.status, 'done');
    assert.deepEqual(run.results.map((r) => r.backend), ['original', 'converted', 'torchao-original']);
    assert.deepEqual(run.ratios.map((r) => r.backend), ['converted', 'torchao-original'], 'ratios are taken against the original');
    const converted = run.ratios[0];
    assert.equal(converted.speedup?.toFixed(2), '1.30');
    assert.equal(converted.memory?.toFixed(2), '0.90');
    assert.equal(converted.finalLossDelta?.toFixed(2), '0.01');
    assert.equal(run.ratios[1].speedup?.toFixed(2), '1.15');
    assert.deepEqual(run.conversion, { applied: 5, files: 2, fixes: ['Fixed 5 problems:', '- model.py:', '    2 × PL101 Convert to te.Linear (with fallback: fp8_linear)'], fallbackModule: 'fp8_fallback' });
  });

  it('the FP8-forwards and conversion lines', () => {
    const run = replay(RECORDED);
    assert.equal(fp8ForwardsLine(run.results), 'FP8 forwards: 1,440 of 1,440 GEMM forwards of the converted model ran in FP8 (48 te.* modules).');
    assert.equal(conversionLine(run.conversion), 'Converted copy: 5 fixes in 2 files (fallback module fp8_fallback).');
    const partly = replay([RECORDED[6].replace('"forwards_fp8":1440', '"forwards_fp8":1000')]);
    assert.match(fp8ForwardsLine(partly.results)!, /1,000 of 1,440 .*: the others fell back to BF16\.$/);
    const none = replay([RECORDED[6].replace('"forwards_fp8":1440,"forwards_total":1440', '"forwards_fp8":0,"forwards_total":0')]);
    assert.match(fp8ForwardsLine(none.results)!, /nothing ran in FP8/);
    assert.equal(fp8ForwardsLine(replay([RECORDED[4]]).results), undefined, 'no line without fp8_gemms');
    assert.equal(conversionLine({ applied: 0, files: 0, fixes: [] }), 'Converted copy: nothing was converted, both arms ran the same code.');
    assert.equal(backendLabel('original'), 'Original (BF16)');
    assert.equal(backendLabel('torchao-original'), 'torchao on original');
  });

  it('the compile path (PL306, fp8_for_compile): the recorded H200 run says torchao modules, in the sidebar and the CLI table', () => {
    const lines = readFileSync(join(ROOT, 'bench', 'results', 'h200', '2026-12-04-compiled-path', 'ab-llama2c-ao-6x4096-6x4096-compiled-out.txt'), 'utf8')
      .split('\n').filter((l) => l.startsWith('{'));
    const run = replay(lines);
    assert.equal(fp8ForwardsLine(run.results), 'FP8: 42 torchao Float8Linear modules under torch.compile (fp8_for_compile); each of their forwards runs in FP8.');
    const table = measureTable(run.results);
    assert.match(table, /all \(42 Float8Linear\)/);
    const converted = run.results.find((r) => r.backend === 'converted')!;
    const original = run.results.find((r) => r.backend === 'original')!;
    assert.ok(Math.abs(converted.tokensPerS! / original.tokensPerS! - 1.337) < 0.001, String(converted.tokensPerS! / original.tokensPerS!));
  });

  it('lands in the history marked as an A/B run, with fp8_gemms and the conversion; Markdown says so', () => {
    const run = finishRun(replay(RECORDED), { cancelled: false }, 2000);
    const entry = toHistoryEntry(run, { interpreter: '/usr/bin/python3' })!;
    assert.equal(isAbRun(entry.options), true);
    assert.equal(entry.options.workload, 'mypkg.model:build');
    assert.equal(entry.conversion?.applied, 5);
    assert.deepEqual(entry.results.find((r) => r.backend === 'converted')?.extra?.fp8_gemms, { modules: 48, forwards_fp8: 1440, forwards_total: 1440 });
    // A history file round-trips the A/B mark through the options' sanitizer.
    assert.equal(sanitizeRunOptions(JSON.parse(JSON.stringify(entry.options))).ab, true);
    assert.equal(sanitizeRunOptions({ workload: 'gpt-125m' }).ab, undefined);
    const md = runToMarkdown(entry);
    assert.match(md, /^\*\*A\/B: the project as it is vs converted to FP8\*\*/);
    assert.match(md, /\| Original \(BF16\) +\| +210,000 .*\| baseline +\|/);
    assert.match(md, /\| Converted \(FP8\) +\| +273,000 .*\| 1\.30x speed, 0\.90x memory \|/);
    assert.match(md, /vs original/);
    assert.match(md, /FP8 forwards: 1,440 of 1,440/);
  });

  it('fails with the no-CUDA message and no history entry on a machine without a GPU', () => {
    const lines = [RECORDED[0], RECORDED[1],
      '{"event":"env","mode":"ab","torch":"2.9.0+cpu","gpus":[]}',
      '{"event":"error","code":"no_cuda","message":"no CUDA device: the benchmark needs an NVIDIA GPU; you can still use diagnostics and fixes"}'];
    const run = finishRun(replay(lines), { cancelled: false }, 2000);
    assert.equal(run.status, 'failed');
    assert.equal(run.error?.title, 'No CUDA device');
    assert.match(run.error!.message, /the benchmark needs an NVIDIA GPU/);
    assert.equal(toHistoryEntry(run, {}), undefined);
  });

  it('the action is blocked for Run\'s reasons and without a workspace folder', () => {
    assert.equal(abBlockedReason(RUN_BLOCKED.noCuda, '/ws'), RUN_BLOCKED.noCuda);
    assert.equal(abBlockedReason(RUN_BLOCKED.untrusted, '/ws'), RUN_BLOCKED.untrusted);
    assert.equal(abBlockedReason(undefined, undefined), RUN_BLOCKED_NO_FOLDER);
    assert.equal(abBlockedReason(undefined, '/ws'), undefined);
  });

  it('runs the bundled CLI through the benchmark runner: events, conversion and result arrive typed', async function () {
    if (process.platform === 'win32') this.skip();
    ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'precision-lens-ab-'));
    try {
      const fake = join(dir, 'python');
      writeFileSync(fake, `#!/usr/bin/env node
const fs = require('fs'), path = require('path');
const argv = process.argv.slice(2);
const conv = argv[argv.indexOf('--converted') + 1];
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
out({ event: 'env', mode: 'ab', torch: '2.9.0', gpus: [{ name: 'NVIDIA H200', capability: [9, 0] }] });
out({ event: 'result', backend: 'original', tokens_per_s: 100, losses: [2, 1] });
out({ event: 'result', backend: 'converted', tokens_per_s: 125, losses: [2, 1.01], fp8_gemms: { modules: 3, forwards_fp8: 6, forwards_total: 6 },
  converted_has_fallback: fs.existsSync(path.join(conv, 'fp8_fallback.py')), args: argv });
`);
      chmodSync(fake, 0o755);
      const options: RunOptions = { ...AB_OPTIONS, steps: 3, warmup: 1, batch: 2, seq: 16 };
      // The fixture is a 64-wide toy the gain table predicts to lose: converted anyway, as the setting would.
      const args = buildMeasureArgs(CLI, join(FIXTURES, 'runnable'), options, { python: fake, peer: 'none', convertLosingLayers: true });
      let run = startedRunState('ab-2', options, 0);
      const child = startBenchmark({ command: process.execPath, args, cwd: dir, env: { ELECTRON_RUN_AS_NODE: '1' } }, {
        onEvent: (e) => { run = applyRunEvent(run, e); },
      });
      const outcome = await child.done;
      assert.equal(outcome.exitCode, 0, outcome.stderrTail.join('\n'));
      assert.equal(outcomeToUserError(outcome, fake, true), undefined);
      run = finishRun(run, { cancelled: false }, 1);
      assert.equal(run.status, 'done');
      assert.ok((run.conversion?.applied ?? 0) > 0, JSON.stringify(run.conversion));
      const converted = run.results.find((r) => r.backend === 'converted')!;
      assert.equal(converted.extra?.converted_has_fallback, true, 'the benchmark ran on the converted copy');
      const benchArgs = converted.extra?.args as string[];
      for (const [flag, value] of [['--mode', 'ab'], ['--steps', '3'], ['--warmup', '1'], ['--batch', '2'], ['--seq', '16'], ['--peer', 'none'], ['--workload', 'mypkg.model:build']]) {
        assert.equal(benchArgs[benchArgs.indexOf(flag) + 1], value, flag);
      }
      assert.ok(benchArgs.includes('--no-compile'));
      assert.equal(run.ratios[0].speedup, 1.25);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('Cancel stops the A/B like a run: the benchmark reports cancelled, the converted copy is removed', async function () {
    if (process.platform === 'win32') this.skip();
    ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'precision-lens-ab-cancel-'));
    try {
      const fake = join(dir, 'python');
      writeFileSync(fake, `#!/usr/bin/env node
const argv = process.argv.slice(2);
process.on('SIGTERM', () => { process.stdout.write(JSON.stringify({ event: 'cancelled', code: 'cancelled', signal: 'SIGTERM', phase: 'original' }) + '\\n'); process.exit(130); });
process.stdout.write(JSON.stringify({ event: 'progress', phase: 'original', step: 1, total: 9, copy: argv[argv.indexOf('--converted') + 1] }) + '\\n');
setInterval(() => {}, 1000);
`);
      chmodSync(fake, 0o755);
      const args = buildMeasureArgs(CLI, join(FIXTURES, 'runnable'), AB_OPTIONS, { python: fake });
      let run = startedRunState('ab-3', AB_OPTIONS, 0);
      let copy: string | undefined;
      let running!: () => void;
      const started = new Promise<void>((resolve) => { running = resolve; });
      const child = startBenchmark({ command: process.execPath, args, cwd: dir }, {
        onEvent: (e) => {
          run = applyRunEvent(run, e);
          if (e.event === 'unknown' && e.name === 'conversion') copy = e.raw.copy as string;
          if (e.event === 'progress' && e.phase === 'original') running();
        },
      }, { killGraceMs: 3000 });
      await started;
      assert.ok(copy && existsSync(copy), 'the copy exists while the benchmark runs');
      await child.cancel();
      const outcome = await child.done;
      assert.equal(outcome.cancelled, true);
      run = finishRun(run, { cancelled: outcome.cancelled }, 1);
      assert.equal(run.status, 'cancelled');
      assert.equal(existsSync(copy!), false, 'the copy is removed on cancel');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  /** The benchmark's arguments `measure` makes from the sidebar's command line (what the bundled CLI runs). */
  const benchFromSidebar = (options: RunOptions, extra: Partial<Parameters<typeof buildMeasureArgs>[3]> = {}) => {
    const cli = buildMeasureArgs('cli.js', '/ws', options, { python: 'py', ...extra });
    const parsed = parseArgs(cli.slice(1));
    assert.equal(parsed.kind, 'measure');
    return measure.benchArgs('bench.py', (parsed as Extract<typeof parsed, { kind: 'measure' }>).options, '/ws', '/copy', 'fp8_fallback');
  };
  const flag = (args: string[], name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
  describe('against torchao on the original, compiled (measure --peer-compile on)', () => {
    /** RECORDED with the peer's result as the benchmark now reports it: compiled (as asked), or eager. */
    const withPeer = (compile: boolean, tokensPerS = 241500) => RECORDED.map((l) => l.includes('"backend":"torchao-original"')
      ? l.replace('"tokens_per_s":241500', `"tokens_per_s":${tokensPerS}`).replace(/}$/, `,"compile":${compile},"compile_requested":${compile}}`) : l);

    it('"Measure conversion" runs the peer compiled beside eager arms, as every arm with Compile on, eager when asked', () => {
      assert.equal(flag(benchFromSidebar({ ...AB_OPTIONS, compile: false }), '--peer-compile'), 'on');
      assert.equal(flag(benchFromSidebar({ ...AB_OPTIONS, compile: true }), '--peer-compile'), 'same');
      const eager = buildMeasureArgs('cli.js', '/ws', { ...AB_OPTIONS, compile: false }, { python: 'py', peerEager: true });
      assert.ok(eager.includes('--peer-eager'));
      assert.equal(flag(benchFromSidebar({ ...AB_OPTIONS, compile: false }, { peerEager: true }), '--peer-compile'), 'off');
      assert.ok(!buildMeasureArgs('cli.js', '/ws', AB_OPTIONS, { python: 'py' }).includes('--peer-eager'));
      // No peer, no --peer-eager (measure would refuse it): --peer none, or a loss check without --peer torchao.
      assert.ok(!buildMeasureArgs('cli.js', '/ws', AB_OPTIONS, { python: 'py', peer: 'none', peerEager: true }).includes('--peer-eager'));
      assert.equal(flag(benchFromSidebar({ ...LOSS_OPTIONS }, { peerEager: true }), '--peer-compile'), undefined);
      assert.equal(flag(benchFromSidebar({ ...LOSS_OPTIONS, compile: false }, { peer: 'torchao', peerEager: true }), '--peer-compile'), 'off');
    });

    it('the peer\'s row says compiled or eager, and the verdict ends the lines, in the history and its Markdown', () => {
      const run = finishRun(replay(withPeer(true, 258000)), { cancelled: false }, 2000);
      const peer = run.results.find((r) => r.backend === 'torchao-original')!;
      assert.equal(armLabel(peer), 'torchao on original (compiled)');
      const verdict = 'FP8 conversion: 1.06x the tokens/s of torchao (compiled) on the original, same process: the conversion is ahead.';
      assert.deepEqual(abVerdicts(run.results), [verdict]);
      assert.equal(abLines(run.results, run.conversion).at(-1), verdict);
      const entry = toHistoryEntry(run, {})!;
      assert.equal(entry.results.find((r) => r.backend === 'torchao-original')?.extra?.compile, true, 'the history keeps the flag');
      const md = runToMarkdown(JSON.parse(JSON.stringify(entry)));
      assert.match(md, /\| torchao on original \(compiled\) +\| +258,000 /);
      assert.match(md, /^FP8 conversion: 1\.06x the tokens\/s of torchao \(compiled\) on the original/m);
      // llama2.c 6 x 4096 on the H200: torchao compiled ahead by 19 %.
      assert.equal(abVerdicts(replay(withPeer(true, 325800)).results)[0], 'torchao (compiled) on the original is 1.19x faster than this conversion: '
        + 'for this model, torch.compile with torchao\'s convert_to_float8_training trains faster.');
      const eager = replay(withPeer(false)).results;
      assert.equal(armLabel(eager.find((r) => r.backend === 'torchao-original')!), 'torchao on original (eager)');
      assert.match(abVerdicts(eager)[0], /of torchao \(eager\) on the original/);
      assert.deepEqual(abVerdicts(replay(LOSS_CHECK_RECORDED, LOSS_OPTIONS).results).length, 1, 'a loss check without the peer: its own verdict only');
    });
  });

  describe('the loss check (measure --loss-check)', () => {
    it('"Loss check" passes --loss-check and lets measure\'s 200 steps apply unless Steps asks for more', () => {
      const plain = buildMeasureArgs('cli.js', '/ws', { ...AB_OPTIONS, steps: 30 }, { python: 'py' });
      assert.ok(!plain.includes('--loss-check'));
      assert.equal(plain[plain.indexOf('--steps') + 1], '30', 'a plain A/B runs the form\'s steps');
      const checked = buildMeasureArgs('cli.js', '/ws', { ...AB_OPTIONS, steps: 30, lossCheck: true }, { python: 'py' });
      assert.ok(checked.includes('--loss-check'));
      assert.ok(!checked.includes('--steps'), 'the speed run\'s 30 steps are not a loss check: measure\'s own 200 apply');
      for (const flag of ['--warmup', '--batch', '--seq', '--python', '--workload']) assert.ok(checked.includes(flag), flag);
      const longer = buildMeasureArgs('cli.js', '/ws', { ...AB_OPTIONS, steps: 500, lossCheck: true }, { python: 'py' });
      assert.equal(longer[longer.indexOf('--steps') + 1], '500', 'Steps above 200 is a longer loss check');
      assert.equal(buildMeasureArgs('cli.js', '/ws', { ...AB_OPTIONS, steps: 200, lossCheck: true }, { python: 'py' }).includes('--steps'), true);
      assert.equal(lossCheckSteps(30), LOSS_CHECK_STEPS);
      assert.equal(lossCheckSteps(undefined), 200);
      assert.equal(lossCheckSteps(1000), 1000);
    });

    it('"Rounded start" reaches the benchmark as --rounded-original, through measure; only with the loss check', () => {
      assert.ok(buildMeasureArgs('cli.js', '/ws', { ...LOSS_OPTIONS, roundedStart: true }, { python: 'py' }).includes('--rounded-start'));
      assert.ok(benchFromSidebar({ ...LOSS_OPTIONS, roundedStart: true }).includes('--rounded-original'));
      assert.ok(!benchFromSidebar(LOSS_OPTIONS).includes('--rounded-original'), 'off by default');
      // Without the loss check it is left out (measure refuses --rounded-start alone), and the webview cannot force it.
      assert.ok(!buildMeasureArgs('cli.js', '/ws', { ...AB_OPTIONS, roundedStart: true }, { python: 'py' }).includes('--rounded-start'));
      assert.equal(sanitizeRunOptions({ ...AB_OPTIONS, lossCheck: true, roundedStart: true }).roundedStart, true);
      assert.equal(sanitizeRunOptions({ ...AB_OPTIONS, lossCheck: true, roundedStart: 'yes' }).roundedStart, undefined);
      assert.equal(sanitizeRunOptions({ ...AB_OPTIONS, roundedStart: true }).roundedStart, undefined, 'no loss check, no rounded start');
      const run = finishRun(replay(LOSS_CHECK_RECORDED, { ...LOSS_OPTIONS, roundedStart: true }), { cancelled: false }, 2000);
      assert.match(runToMarkdown(JSON.parse(JSON.stringify(toHistoryEntry(run, {})!))), /loss check \(training recipe, eval loss, BF16 run twice and from its weights rounded to BF16\)/);
    });

    it('"Warm start" N reaches the benchmark as --warm-start-steps N, through measure; 0, blank or no loss check: none', () => {
      const warm = buildMeasureArgs('cli.js', '/ws', { ...LOSS_OPTIONS, warmStart: 100 }, { python: 'py' });
      assert.equal(flag(warm, '--warm-start'), '100');
      assert.equal(flag(benchFromSidebar({ ...LOSS_OPTIONS, warmStart: 100 }), '--warm-start-steps'), '100');
      assert.equal(flag(benchFromSidebar(LOSS_OPTIONS), '--warm-start-steps'), undefined, 'a cold start by default');
      // Without the loss check the box's warm start is left out (measure refuses --warm-start alone).
      assert.ok(!buildMeasureArgs('cli.js', '/ws', { ...AB_OPTIONS, warmStart: 100 }, { python: 'py' }).includes('--warm-start'));
      // From the webview (a trust boundary): whole positive steps only, kept only with the box.
      assert.equal(sanitizeRunOptions({ ...AB_OPTIONS, lossCheck: true, warmStart: '250' }).warmStart, 250);
      assert.equal(sanitizeRunOptions({ ...AB_OPTIONS, lossCheck: true, warmStart: 0 }).warmStart, undefined);
      assert.equal(sanitizeRunOptions({ ...AB_OPTIONS, lossCheck: true, warmStart: -5 }).warmStart, undefined);
      assert.equal(sanitizeRunOptions({ ...AB_OPTIONS, lossCheck: true, warmStart: 1e9 }).warmStart, MAX_WARM_START);
      assert.equal(sanitizeRunOptions({ ...AB_OPTIONS, warmStart: 100 }).warmStart, undefined, 'no loss check, no warm start');
      // Said where the run is shown: the history badge and the Markdown's run line.
      assert.equal(abBadge({ ...LOSS_OPTIONS, warmStart: 100 }), 'A/B · loss check, warm start 100');
      const run = finishRun(replay(LOSS_CHECK_RECORDED, { ...LOSS_OPTIONS, warmStart: 100 }), { cancelled: false }, 2000);
      const md = runToMarkdown(JSON.parse(JSON.stringify(toHistoryEntry(run, {})!)));
      assert.match(md, /loss check \(training recipe, eval loss, BF16 run twice, every arm from 100 BF16 warm-start steps\)/);
    });

    it('one implementation: the CLI\'s lossVerdict and steps are the shared ones', () => {
      assert.equal(measure.lossVerdict, lossCheck.lossVerdict);
      assert.equal(measure.LOSS_CHECK_STEPS, lossCheck.LOSS_CHECK_STEPS);
    });

    it('the options keep the box: sanitized, remembered, recognised (or by the results\' eval losses)', () => {
      assert.equal(sanitizeRunOptions({ ...AB_OPTIONS, lossCheck: true }).lossCheck, true);
      assert.equal(sanitizeRunOptions({ ...AB_OPTIONS, lossCheck: 'yes' }).lossCheck, undefined);
      assert.equal(sanitizeRunOptions({ workload: 'gpt-125m' }).lossCheck, undefined);
      assert.equal(isLossCheckRun(LOSS_OPTIONS), true);
      assert.equal(isLossCheckRun(AB_OPTIONS), false);
      assert.equal(isLossCheckRun({ lossCheck: true }), false, 'only an A/B is a loss check');
      assert.equal(isLossCheckRun(AB_OPTIONS, replay(LOSS_CHECK_RECORDED).results), true, 'a run recorded with eval losses');
      assert.equal(abBadge(LOSS_OPTIONS), 'A/B · loss check');
      assert.equal(abBadge(AB_OPTIONS, replay(RECORDED).results), 'A/B');
      assert.equal(abBadge({ ...DEFAULT_RUN_OPTIONS }), undefined);
    });

    it('the recorded H200 loss check through the reducer: eval loss per arm, the BF16 arm again, the verdict line', () => {
      const run = finishRun(replay(LOSS_CHECK_RECORDED, LOSS_OPTIONS), { cancelled: false }, 2000);
      assert.equal(run.status, 'done');
      assert.deepEqual(run.results.map((r) => r.backend), ['original', 'converted', 'original-repeat']);
      assert.deepEqual(run.ratios.map((r) => r.backend), ['converted', 'original-repeat'], 'both against the original');
      assert.equal(showsEvalLoss(run.results), true);
      assert.equal(showsEvalLoss(replay(RECORDED).results), false, 'no eval-loss column without eval losses');
      assert.deepEqual(run.results.map((r) => [backendLabel(r.backend), evalLossText(r)]), [
        ['Original (BF16)', '1.8757'], ['Converted (FP8)', '2.0248'], ['Original again (BF16)', '1.8936']]);
      assert.equal(evalLossText({ extra: {} }), '–');
      const verdict = 'Loss check: FP8 eval loss +7.95 % vs BF16 (2.0248 vs 1.8757); the BF16 run again: +0.96 % (the noise floor): '
        + 'FP8 trains worse here: try precisionLens.te.recipe = Float8CurrentScaling, or keep the layers that differ in BF16.';
      assert.equal(lossVerdict(run.results), verdict);
      assert.deepEqual(abLines(run.results, { applied: 5, files: 1, fixes: [] }), [
        'Converted copy: 5 fixes in 1 file.',
        'FP8 forwards: 17,892 of 17,892 GEMM forwards of the converted model ran in FP8 (84 te.* modules).',
        verdict,
      ]);
      assert.deepEqual(abLines(replay(RECORDED).results, undefined), [
        'FP8 forwards: 1,440 of 1,440 GEMM forwards of the converted model ran in FP8 (48 te.* modules).',
        'FP8 conversion: 1.13x the tokens/s of torchao on the original, same process: the conversion is ahead.',
      ], 'a plain A/B: no loss verdict; the verdict against the peer (which does not say how it ran)');
      const withAttention = replay(RECORDED).results.map((r) => (r.backend === 'converted'
        ? { ...r, extra: { ...r.extra, attention: { summary: "te.DotProductAttention (fused, BF16), 1 shape; torch's for: an attention mask", te_modules: 1 } } } : r));
      assert.equal(abLines(withAttention, undefined)[1], "Attention: te.DotProductAttention (fused, BF16), 1 shape; torch's for: an attention mask.", 'what fp8_attention ran, after the FP8 forwards');
    });

    it('what the workload said it ran on is a line after the conversion, kept by the history, bounded', () => {
      const said = 'llama2.c Transformer 12 x 2048, 8 x 2048 byte tokens of real text (10.5 MB of text to train on (610 files), 1.2 MB held out (87 files))';
      const run = finishRun(replay(LOSS_CHECK_RECORDED, LOSS_OPTIONS), { cancelled: false }, 2000);
      const results = run.results.map((r) => ({ ...r, extra: { ...r.extra, workload_description: said } }));
      const lines = abLines(results, { applied: 5, files: 1, fixes: [] });
      assert.deepEqual(lines.slice(0, 2), ['Converted copy: 5 fixes in 1 file.', `Workload: ${said}.`]);
      assert.equal(abLines(run.results, undefined).some((l) => l.startsWith('Workload:')), false, 'no line where the workload said nothing');
      const entry = toHistoryEntry({ ...run, results }, { interpreter: '/usr/bin/python3' })!;
      assert.equal(abLines(JSON.parse(JSON.stringify(entry)).results, undefined)[0], `Workload: ${said}.`, 'read back from the history');
      const long = results.map((r) => ({ ...r, extra: { ...r.extra, workload_description: `x\n${'y'.repeat(400)}` } }));
      const line = abLines(long, undefined)[0];
      assert.equal(line.length, 'Workload: '.length + 240);
      assert.ok(line.startsWith('Workload: x y') && line.endsWith('…'), line.slice(0, 20));
    });

    it('the history keeps the eval losses and the mark; Markdown has the eval-loss column and the verdict', () => {
      const run = finishRun(replay(LOSS_CHECK_RECORDED, LOSS_OPTIONS), { cancelled: false }, 2000);
      const entry = toHistoryEntry(run, { interpreter: '/usr/bin/python3' })!;
      assert.equal(entry.options.lossCheck, true);
      assert.equal(entry.options.steps, 200);
      assert.equal(entry.results.find((r) => r.backend === 'original-repeat')?.extra?.eval_loss, 1.8936045169830322);
      const saved = JSON.parse(JSON.stringify(entry));
      assert.equal(sanitizeRunOptions(saved.options).lossCheck, true);
      assert.equal(abBadge(saved.options, saved.results), 'A/B · loss check');
      const md = runToMarkdown(entry);
      assert.match(md, /\| Backend +\| tokens\/s .*\| final loss \| eval loss \| vs original \|/);
      assert.match(md, /\| Original again \(BF16\) .*\| 1\.8936 \| 1\.00x speed, 1\.00x memory \|/);
      assert.match(md, /200 steps \(10 warm-up\), torch\.compile off, loss check/);
      assert.match(md, /^Loss check: FP8 eval loss \+7\.95 % vs BF16/m);
      assert.doesNotMatch(runToMarkdown(toHistoryEntry(finishRun(replay(RECORDED), { cancelled: false }, 2000), {})!), /eval loss|Loss check/);
    });

    it('through the bundled CLI: the benchmark gets the recipe, 200 steps, no peer and the BF16 arm again', async function () {
      if (process.platform === 'win32') this.skip();
      ensureBuilt();
      const dir = mkdtempSync(join(tmpdir(), 'precision-lens-ab-loss-'));
      try {
        const fake = join(dir, 'python');
        writeFileSync(fake, `#!/usr/bin/env node
const argv = process.argv.slice(2);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
out({ event: 'result', backend: 'original', tokens_per_s: 100, losses: [2, 1], eval_loss: 2.0 });
out({ event: 'result', backend: 'converted', tokens_per_s: 125, losses: [2, 1.01], eval_loss: 2.01, args: argv });
out({ event: 'result', backend: 'original-repeat', tokens_per_s: 100, losses: [2, 1], eval_loss: 2.002 });
`);
        chmodSync(fake, 0o755);
        const options: RunOptions = { ...LOSS_OPTIONS, steps: 30, warmup: 1, batch: 2, seq: 16 };
        const args = buildMeasureArgs(CLI, join(FIXTURES, 'runnable'), options, { python: fake, convertLosingLayers: true });
        let run = startedRunState('ab-4', options, 0);
        const child = startBenchmark({ command: process.execPath, args, cwd: dir }, { onEvent: (e) => { run = applyRunEvent(run, e); } });
        const outcome = await child.done;
        assert.equal(outcome.exitCode, 0, outcome.stderrTail.join('\n'));
        run = finishRun(run, { cancelled: false }, 1);
        const benchArgs = run.results.find((r) => r.backend === 'converted')?.extra?.args as string[];
        for (const [flag, value] of [['--mode', 'ab'], ['--steps', '200'], ['--peer', 'none'], ['--lr-warmup', '20'], ['--lr-schedule', 'cosine'], ['--eval-loss-batches', '8']]) {
          assert.equal(benchArgs[benchArgs.indexOf(flag) + 1], value, flag);
        }
        assert.ok(benchArgs.includes('--repeat-original'));
        assert.equal(lossVerdict(run.results), 'Loss check: FP8 eval loss +0.50 % vs BF16 (2.0100 vs 2.0000); the BF16 run again: +0.10 % (the noise floor): within 1 % of BF16.');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
