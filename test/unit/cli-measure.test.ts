/**
 * `precision-lens measure` (server/src/cli/measure.ts) through the BUILT command line, with a fake Python that speaks
 * bench/benchmark.py's protocol: the copy is converted by the CLI's own --fix --unsafe-fixes before the benchmark
 * starts (the fake records what it found in it), the table is printed, the copy removed; bad inputs end with 2; the
 * benchmark's own error is passed through with its exit status; --format jsonl forwards the events. The torchao peer
 * runs compiled beside eager arms (--peer-compile on), its row says so and the verdict against it follows the table.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs, USAGE, UsageError } from '../../server/src/cli/args';
import { benchArgs, copyPythonProject, lossVerdict, MeasureInputError, measureTable } from '../../server/src/cli/measure';
import { attentionOfResult, normalizeBenchEvent, type BackendResult } from '../../common/bench-events';
import { CLI, ensureBuilt, FIXTURES } from './cli-harness';

/** A fake interpreter: records its argv and the converted copy's state to $FAKE_RECORD, prints the A/B protocol. */
const FAKE_AB = `#!/usr/bin/env node
const fs = require('fs'), path = require('path');
const argv = process.argv.slice(2);
const arg = (n) => argv[argv.indexOf(n) + 1];
const conv = arg('--converted');
const rec = { argv, cwd: process.cwd(),
  fallback: fs.existsSync(path.join(conv, 'fp8_fallback.py')),
  model: fs.readFileSync(path.join(conv, 'model.py'), 'utf8'),
  original: fs.readFileSync(path.join(arg('--workspace'), 'model.py'), 'utf8') };
fs.writeFileSync(process.env.FAKE_RECORD, JSON.stringify(rec));
const out = (o) => process.stdout.write(JSON.stringify(o) + '\\n');
out({ event: 'env', mode: 'ab', torch: '2.9.0', cuda: '12.8', gpus: [{ name: 'NVIDIA H200', capability: [9, 0] }], fp8: { available: true } });
for (const arm of ['original', 'converted', 'torchao-original']) {
  out({ event: 'progress', phase: arm, step: 1, total: 2 });
  out({ event: 'progress', phase: arm, step: 2, total: 2 });
}
process.stderr.write('measuring\\n');
out({ event: 'result', backend: 'original', tokens_per_s: 100000, peak_memory_bytes: 20 * 2 ** 30, losses: [10.9, 10.5, 10.2],
  workload_description: 'runnable fixture,   64 synthetic tokens' });
out({ event: 'result', backend: 'converted', tokens_per_s: 135000, peak_memory_bytes: 18 * 2 ** 30, losses: [10.9, 10.52, 10.21],
  fp8_gemms: { modules: 2, forwards_fp8: 6, forwards_total: 6 } });
// The peer as bench/plbench/ab.py reports it under --peer-compile on: compiled, as asked.
const peerCompiled = arg('--peer-compile') !== 'off';
out({ event: 'result', backend: 'torchao-original', tokens_per_s: 120000, peak_memory_bytes: 19 * 2 ** 30, losses: [10.9, 10.51, 10.22],
  compile: peerCompiled, compile_requested: peerCompiled });
out({ event: 'summary', mode: 'ab', ratios: { converted: { speedup: 1.35 } }, ab: { original: 'original', converted: 'converted', fallback_module: 'fp8_fallback',
  fp8_gemms: { modules: 2, forwards_fp8: 6, forwards_total: 6 }, loss_rel_final: 0.001, peak_memory_ratio: 0.9,
  converted_vs_peer: { tokens_per_s_ratio: 1.125, peer_compiled: peerCompiled, peak_memory_ratio: 18 / 19 } } });
`;

/** A fake interpreter on a machine without CUDA: the benchmark's own no-CUDA error event and exit status 4. */
const FAKE_NO_CUDA = `#!/usr/bin/env node
process.stdout.write(JSON.stringify({ event: 'env', mode: 'ab', torch: '2.9.0+cpu', gpus: [] }) + '\\n');
process.stderr.write('error [no_cuda]: no CUDA device: the benchmark needs an NVIDIA GPU; you can still use diagnostics and fixes\\n');
process.stdout.write(JSON.stringify({ event: 'error', code: 'no_cuda', message: 'no CUDA device: the benchmark needs an NVIDIA GPU; you can still use diagnostics and fixes' }) + '\\n');
process.exit(4);
`;

describe('precision-lens measure', function () {
  this.timeout(120_000);
  let scratch: string;
  let fakeAb: string;
  let fakeNoCuda: string;
  let record: string;

  const measure = (args: string[], cwd = scratch) => {
    const r = spawnSync(process.execPath, [CLI, 'measure', ...args], {
      cwd, encoding: 'utf8', timeout: 60_000, env: { ...process.env, FAKE_RECORD: record, TMPDIR: join(scratch, 'tmp') },
    });
    return { status: r.status, stdout: r.stdout, stderr: r.stderr };
  };
  const copiesLeft = () => spawnSync('ls', [join(scratch, 'tmp')], { encoding: 'utf8' }).stdout.split('\n').filter((l) => l.startsWith('precision-lens-measure-'));

  before(() => {
    ensureBuilt();
    scratch = mkdtempSync(join(tmpdir(), 'precision-lens-measure-test-'));
    mkdirSync(join(scratch, 'tmp'));
    fakeAb = join(scratch, 'fake-ab-python');
    fakeNoCuda = join(scratch, 'fake-nocuda-python');
    writeFileSync(fakeAb, FAKE_AB);
    writeFileSync(fakeNoCuda, FAKE_NO_CUDA);
    chmodSync(fakeAb, 0o755);
    chmodSync(fakeNoCuda, 0o755);
    record = join(scratch, 'record.json');
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  it('converts a copy with check --fix --unsafe-fixes, runs the A/B on it and prints the table; the project is untouched', () => {
    const project = join(FIXTURES, 'runnable');
    const before = readFileSync(join(project, 'model.py'), 'utf8');
    const r = measure([project, '--workload', 'model:build', '--python', fakeAb, '--steps', '2', '--warmup', '1', '--no-compile', '--peer', 'torchao', '--convert-losing-layers']);
    assert.equal(r.status, 0, r.stderr);
    const seen = JSON.parse(readFileSync(record, 'utf8')) as { argv: string[]; cwd: string; fallback: boolean; model: string; original: string };
    // The benchmark ran on the converted copy: the fallback module was created, the model's layers converted.
    assert.equal(seen.fallback, true, 'fp8_fallback.py created in the copy');
    assert.match(seen.model, /fp8_fallback/);
    assert.match(seen.model, /fp8_linear\(/);
    assert.equal(seen.original, before, 'the original is as it was');
    assert.equal(readFileSync(join(project, 'model.py'), 'utf8'), before);
    assert.ok(!existsSync(join(project, 'fp8_fallback.py')));
    const a = (n: string) => seen.argv[seen.argv.indexOf(n) + 1];
    assert.match(seen.argv[0], /bench[\\/]benchmark\.py$/);
    assert.equal(a('--mode'), 'ab');
    assert.equal(a('--workload'), 'model:build');
    assert.equal(a('--workspace'), project);
    assert.equal(a('--fallback-module'), 'fp8_fallback');
    assert.equal(a('--peer'), 'torchao');
    assert.equal(a('--peer-compile'), 'on', 'the peer compiled beside the eager arms: torchao\'s best configuration');
    assert.equal(a('--steps'), '2');
    assert.equal(a('--warmup'), '1');
    assert.ok(seen.argv.includes('--no-compile'));
    // What was applied, on stderr; progress too.
    assert.match(r.stderr, /PL101 Convert to te\.Linear/);
    assert.match(r.stderr, /converted the copy: \d+ fix(es)? in \d+ files?/);
    assert.match(r.stderr, /converted 2\/2/);
    assert.match(r.stderr, /measuring/);
    // The table: every arm, ratio to the original, memory, loss, FP8 forwards.
    const lines = r.stdout.trim().split('\n');
    assert.match(lines[0], /^arm\s+tokens\/s\s+vs original\s+peak memory\s+final loss\s+FP8 forwards$/);
    assert.match(r.stdout, /original \(BF16\)\s+100,000\s+baseline\s+20\.00 GiB\s+10\.2000/);
    assert.match(r.stdout, /converted \(FP8\)\s+135,000\s+1\.35x\s+18\.00 GiB\s+10\.2100\s+6\/6 \(2 modules\)/);
    assert.match(r.stdout, /torchao on original \(compiled\)\s+120,000\s+1\.20x/);
    // What the workload said it ran on (one line, whitespace folded), after the table.
    assert.match(r.stdout, /^workload: runnable fixture, 64 synthetic tokens$/m);
    // The verdict against the peer, after the table.
    assert.equal(lines.at(-1), 'FP8 conversion: 1.13x the tokens/s of torchao (compiled) on the original, same process: the conversion is ahead.');
    assert.deepEqual(copiesLeft(), [], 'the copy is removed');
  });

  it('a script that compiles its model is converted through fp8_for_compile (PL306); --no-compile then says the arm runs BF16', () => {
    const project = join(FIXTURES, '..', 'compile-project');
    const r = measure([project, '--workload', 'train:build', '--python', fakeAb, '--no-compile', '--convert-losing-layers']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /PL306 Compile model with torchao FP8/);
    assert.match(r.stderr, /warning: the conversion compiles the model with torchao FP8 \(PL306\), and --no-compile runs it as the script does without compiling: in BF16/);
    const compiled = measure([project, '--workload', 'train:build', '--python', fakeAb, '--convert-losing-layers']);
    assert.equal(compiled.status, 0, compiled.stderr);
    assert.doesNotMatch(compiled.stderr, /--no-compile runs it/);
  });

  it('--peer-eager keeps the peer eager: its row and the verdict say so', () => {
    const r = measure([join(FIXTURES, 'runnable'), '--workload', 'model:build', '--python', fakeAb, '--no-compile', '--peer-eager', '--convert-losing-layers']);
    assert.equal(r.status, 0, r.stderr);
    const seen = JSON.parse(readFileSync(record, 'utf8')) as { argv: string[] };
    assert.equal(seen.argv[seen.argv.indexOf('--peer-compile') + 1], 'off');
    assert.match(r.stdout, /^torchao on original \(eager\)\s+120,000\s+1\.20x/m);
    assert.match(r.stdout, /^FP8 conversion: 1\.13x the tokens\/s of torchao \(eager\) on the original, same process: the conversion is ahead\.$/m);
  });

  it('--keep keeps the converted copy and says where', () => {
    const r = measure([join(FIXTURES, 'runnable'), '--workload', 'model:build', '--python', fakeAb, '--keep', '--convert-losing-layers']);
    assert.equal(r.status, 0, r.stderr);
    const kept = /converted copy is kept in (\S+)/.exec(r.stderr)?.[1];
    assert.ok(kept && existsSync(join(kept, 'fp8_fallback.py')), r.stderr);
    rmSync(kept, { recursive: true, force: true });
  });

  it('--format jsonl forwards the benchmark events on stdout, with the conversion first', () => {
    const r = measure([join(FIXTURES, 'runnable'), '--workload', 'model:build', '--python', fakeAb, '--format', 'jsonl', '--convert-losing-layers']);
    assert.equal(r.status, 0, r.stderr);
    const events = r.stdout.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.deepEqual(events.slice(0, 2).map((e) => e.event), ['progress', 'conversion']);
    assert.equal(events[0].phase, 'convert');
    assert.ok((events[1].applied as number) > 0);
    assert.deepEqual(events.filter((e) => e.event === 'result').map((e) => e.backend), ['original', 'converted', 'torchao-original']);
    assert.equal(events.at(-1)?.event, 'summary');
    assert.doesNotMatch(r.stdout, /^arm /m, 'no table in jsonl');
  });

  it('passes the benchmark error through with its exit status (no CUDA: 4), and removes the copy', () => {
    const r = measure([join(FIXTURES, 'runnable'), '--workload', 'model:build', '--python', fakeNoCuda]);
    assert.equal(r.status, 4);
    assert.equal(r.stderr.match(/the benchmark needs an NVIDIA GPU/g)?.length, 1, r.stderr);
    assert.equal(r.stdout, '');
    assert.deepEqual(copiesLeft(), []);
  });

  it('a missing interpreter is a usage error (2)', () => {
    const r = measure([join(FIXTURES, 'runnable'), '--workload', 'model:build', '--python', join(scratch, 'no-such-python')]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /could not start .*no-such-python: no such file or command/);
  });

  it('a DIR that does not exist: 2, with the reason', () => {
    const r = measure([join(scratch, 'nowhere'), '--workload', 'model:build', '--python', fakeAb]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /nowhere: no such directory/);
    assert.ok(!existsSync(record) || JSON.parse(readFileSync(record, 'utf8')).argv, 'nothing ran');
  });

  it('a DIR without .py files: 2, with the reason, nothing copied', () => {
    const empty = join(scratch, 'empty');
    mkdirSync(join(empty, 'data'), { recursive: true });
    writeFileSync(join(empty, 'README.md'), '# nothing');
    writeFileSync(join(empty, 'data', 'skipped.py'), 'x = 1\n');
    const r = measure([empty, '--workload', 'model:build', '--python', fakeAb]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /empty: no \.py files to measure/);
    assert.deepEqual(copiesLeft(), []);
  });

  it('without --workload: 2 and the usage', () => {
    const r = measure([join(FIXTURES, 'runnable'), '--python', fakeAb]);
    assert.equal(r.status, 2);
    assert.match(r.stderr, /measure: missing --workload MODULE:FUNCTION/);
    assert.match(r.stderr, /precision-lens measure \[DIR\] --workload/);
  });

  it('parses its options; a malformed workload or count is a usage error', () => {
    const parsed = parseArgs(['measure', 'proj', '-w', 'pkg.model:build', '--batch', '4', '--seq=128', '--compile', '--peer', 'none', '--keep']);
    assert.equal(parsed.kind, 'measure');
    if (parsed.kind !== 'measure') return;
    assert.deepEqual(parsed.options, { dir: 'proj', workload: 'pkg.model:build', batch: 4, seq: 128, compile: true, peer: 'none', keep: true, format: 'text' });
    assert.equal((parseArgs(['measure', '--workload', 'm:f']) as { options: { dir: string } }).options.dir, '.');
    assert.throws(() => parseArgs(['measure', '--workload', 'model']), UsageError);
    assert.throws(() => parseArgs(['measure', '--workload', 'm:f', '--steps', '0']), UsageError);
    assert.throws(() => parseArgs(['measure', 'a', 'b', '--workload', 'm:f']), UsageError);
    assert.equal(parseArgs(['measure', '--help']).kind, 'help');
  });

  it('the torchao peer runs compiled unless --peer-eager, or as every arm with --compile; none without a peer', () => {
    const opts = (argv: string[]) => (parseArgs(['measure', '.', '--workload', 'm:f', ...argv]) as Extract<ReturnType<typeof parseArgs>, { kind: 'measure' }>).options;
    const peerCompile = (argv: string[]) => {
      const args = benchArgs('bench.py', opts(argv), '/ws', '/copy', 'fp8_fallback');
      return args.includes('--peer-compile') ? args[args.indexOf('--peer-compile') + 1] : undefined;
    };
    assert.equal(peerCompile([]), 'on', 'the benchmark\'s own compile default: the peer compiled whatever it picks');
    assert.equal(peerCompile(['--no-compile']), 'on', 'eager arms, the peer compiled');
    assert.equal(peerCompile(['--peer', 'torchao', '--no-compile']), 'on');
    assert.equal(peerCompile(['--compile']), 'same', 'every arm compiled already');
    assert.equal(peerCompile(['--peer-eager']), 'off');
    assert.equal(peerCompile(['--peer-eager', '--compile']), 'off', 'eager peer beside compiled arms, as asked');
    assert.equal(peerCompile(['--peer', 'none']), undefined, 'no peer, no flag');
    assert.equal(peerCompile(['--loss-check']), undefined, 'a loss check leaves the peer out');
    assert.equal(peerCompile(['--loss-check', '--peer', 'torchao', '--no-compile']), 'on');
    assert.equal(opts(['--peer-eager']).peerEager, true);
    // --peer-eager where no peer runs is a mistake, said as one.
    assert.throws(() => opts(['--peer', 'none', '--peer-eager']), (e: Error) => e instanceof UsageError && /--peer-eager: no torchao peer runs \(--peer none\)/.test(e.message));
    assert.throws(() => opts(['--loss-check', '--peer-eager']), (e: Error) => e instanceof UsageError && /--loss-check leaves it out unless --peer torchao/.test(e.message));
    assert.throws(() => opts(['--peer-eager=yes']), UsageError);
    assert.match(USAGE, /\[--peer-eager\]/);
    assert.match(USAGE, /--peer-eager keeps it eager/);
  });

  it('copies only the Python project, and refuses one above the bounds', () => {
    const proj = join(scratch, 'bounded');
    for (const d of ['pkg', '.git', 'node_modules', '.venv', 'data', 'pkg/__pycache__']) mkdirSync(join(proj, d), { recursive: true });
    writeFileSync(join(proj, '.venv', 'pyvenv.cfg'), '');
    for (const f of ['a.py', 'pkg/b.py', 'pyproject.toml', 'notes.txt', '.git/c.py', 'node_modules/d.py', '.venv/e.py', 'data/f.py', 'pkg/__pycache__/g.py']) {
      writeFileSync(join(proj, f), 'x = 1\n');
    }
    const copied = copyPythonProject(proj);
    try {
      const list = spawnSync('find', ['.', '-type', 'f'], { cwd: copied.copy, encoding: 'utf8' }).stdout.split('\n').filter(Boolean).sort();
      assert.deepEqual(list, ['./a.py', './pkg/b.py', './pyproject.toml']);
      assert.equal(copied.pyFiles, 2);
    } finally {
      rmSync(copied.copy, { recursive: true, force: true });
    }
    assert.throws(() => copyPythonProject(proj, { maxFiles: 1 }), (e: Error) => e instanceof MeasureInputError && /more than 1 \.py files/.test(e.message));
    assert.throws(() => copyPythonProject(proj, { maxBytes: 8 }), (e: Error) => e instanceof MeasureInputError && /more than 0 MB/.test(e.message));
  });

  it('the table formats recorded protocol lines of the three arms', () => {
    const results = [
      { event: 'result', backend: 'converted', tokens_per_s: 1500, peak_memory_bytes: 512 * 2 ** 20, losses: [2, 1.5], fp8_gemms: { modules: 4, forwards_fp8: 30, forwards_total: 40 } },
      { event: 'result', backend: 'original', tokens_per_s: 1000, peak_memory_bytes: 600 * 2 ** 20, losses: [2, 1.4] },
      { event: 'result', backend: 'torchao-original', skipped: true, reason: 'torchao not installed' },
    ].map((e) => normalizeBenchEvent(e) as BackendResult);
    assert.equal(attentionOfResult(normalizeBenchEvent({ ...(results[0].extra ?? {}), event: 'result', backend: 'converted', attention: { summary: 'te.DotProductAttention (fused, BF16), 1 shape', te_modules: 1 } }) as BackendResult),
      'te.DotProductAttention (fused, BF16), 1 shape', 'what fp8_attention ran, read from the result');
    assert.equal(attentionOfResult(results[0]), undefined, 'a result without it');
    const table = measureTable(results).split('\n');
    assert.match(table[2], /^original \(BF16\)\s+1,000\s+baseline\s+600 MiB\s+1\.4000\s+–$/);
    assert.match(table[3], /^converted \(FP8\)\s+1,500\s+1\.50x\s+512 MiB\s+1\.5000\s+30\/40 \(4 modules\)$/);
    assert.match(table[4], /^torchao on original\s+skipped: torchao not installed/);
    // The peer's row says how it ran (the result's compile flag); an older benchmark that does not say: the plain name.
    const peer = (compile?: boolean) => measureTable([results[1], normalizeBenchEvent({
      event: 'result', backend: 'torchao-original', tokens_per_s: 1600, losses: [2, 1.45], ...(compile === undefined ? {} : { compile, compile_requested: compile }),
    }) as BackendResult]).split('\n')[3];
    assert.match(peer(true), /^torchao on original \(compiled\)\s+1,600\s+1\.60x/);
    assert.match(peer(false), /^torchao on original \(eager\)\s+1,600\s+1\.60x/);
    assert.match(peer(undefined), /^torchao on original\s+1,600\s+1\.60x/);
  });
  it('--loss-check runs the loss comparison: 200 steps of a training recipe, eval losses, the BF16 run twice', () => {
    const parsed = parseArgs(['measure', '.', '--workload', 'model:build', '--loss-check']);
    assert.equal(parsed.kind, 'measure');
    const options = (parsed as Extract<typeof parsed, { kind: 'measure' }>).options;
    assert.equal(options.lossCheck, true);
    const args = benchArgs('bench.py', options, '/ws', '/copy', 'fp8_fallback');
    const a = (n: string) => args[args.indexOf(n) + 1];
    assert.deepEqual([a('--steps'), a('--lr'), a('--lr-warmup'), a('--lr-schedule'), a('--clip-grad'), a('--eval-loss-batches'), a('--peer')], ['200', 'auto', '20', 'cosine', '1.0', '8', 'none']);
    assert.ok(args.includes('--repeat-original'));
    // --steps and --peer given: kept, the warm-up a tenth of the steps.
    const mine = benchArgs('bench.py', { ...options, steps: 50, peer: 'torchao' }, '/ws', '/copy', 'fp8_fallback');
    assert.deepEqual([mine[mine.indexOf('--steps') + 1], mine[mine.indexOf('--lr-warmup') + 1], mine[mine.indexOf('--peer') + 1]], ['50', '5', 'torchao']);
    // Without it: none of the recipe.
    const plain = benchArgs('bench.py', { ...options, lossCheck: undefined }, '/ws', '/copy', 'fp8_fallback');
    assert.ok(!plain.includes('--lr-warmup') && !plain.includes('--repeat-original') && !plain.includes('--steps'));
    assert.ok(!args.includes('--warm-start-steps'));
  });

  it('--warm-start N passes the warm start to the loss check, and is refused without it', () => {
    const parsed = parseArgs(['measure', '.', '--workload', 'model:build', '--loss-check', '--warm-start', '100']);
    const options = (parsed as Extract<typeof parsed, { kind: 'measure' }>).options;
    const args = benchArgs('bench.py', options, '/ws', '/copy', 'fp8_fallback');
    assert.equal(args[args.indexOf('--warm-start-steps') + 1], '100');
    assert.throws(() => parseArgs(['measure', '.', '--workload', 'model:build', '--warm-start', '100']), (e: Error) => e instanceof UsageError && /only with --loss-check/.test(e.message));
    assert.throws(() => parseArgs(['measure', '.', '--workload', 'model:build', '--loss-check', '--warm-start', '0']), (e: Error) => e instanceof UsageError);
  });

  it('--rounded-start adds the BF16 arm from rounded weights to the loss check, and is refused without it', () => {
    const parsed = parseArgs(['measure', '.', '--workload', 'model:build', '--loss-check', '--rounded-start']);
    const options = (parsed as Extract<typeof parsed, { kind: 'measure' }>).options;
    assert.ok(benchArgs('bench.py', options, '/ws', '/copy', 'fp8_fallback').includes('--rounded-original'));
    assert.ok(!benchArgs('bench.py', { ...options, roundedStart: undefined }, '/ws', '/copy', 'fp8_fallback').includes('--rounded-original'));
    assert.throws(() => parseArgs(['measure', '.', '--workload', 'model:build', '--rounded-start']), (e: Error) => e instanceof UsageError && /only with --loss-check/.test(e.message));
    // The arm has its own row in the table, after the BF16 repeat.
    const table = measureTable([
      { event: 'result', backend: 'original-rounded', tokens_per_s: 990, losses: [2, 1.41], eval_loss: 1.98 },
      { event: 'result', backend: 'original', tokens_per_s: 1000, losses: [2, 1.4], eval_loss: 2.0 },
      { event: 'result', backend: 'original-repeat', tokens_per_s: 1001, losses: [2, 1.4], eval_loss: 2.0 },
    ].map((e) => normalizeBenchEvent(e) as BackendResult));
    assert.deepEqual(table.split('\n').slice(2, 5).map((l) => l.split('  ')[0]), ['original (BF16)', 'original again (BF16)', 'original, rounded start (BF16)']);
  });

  it('the table gets an eval loss column and the verdict judges FP8 against 1 % and the noise floor', () => {
    const arms = (conv: number, again: number) => [
      { event: 'result', backend: 'original', tokens_per_s: 1000, losses: [2, 1.4], eval_loss: 2.0 },
      { event: 'result', backend: 'converted', tokens_per_s: 1300, losses: [2, 1.41], eval_loss: conv },
      { event: 'result', backend: 'original-repeat', tokens_per_s: 1001, losses: [2, 1.4], eval_loss: again },
    ].map((e) => normalizeBenchEvent(e) as BackendResult);
    const table = measureTable(arms(2.01, 2.002)).split('\n');
    assert.match(table[0], /^arm\s+tokens\/s\s+vs original\s+peak memory\s+final loss\s+eval loss\s+FP8 forwards$/);
    assert.match(table[4], /^original again \(BF16\)\s+1,001\s+1\.00x\s+–\s+1\.4000\s+2\.0020\s+–$/);
    assert.equal(lossVerdict(arms(2.01, 2.002)), 'Loss check: FP8 eval loss +0.50 % vs BF16 (2.0100 vs 2.0000); the BF16 run again: +0.10 % (the noise floor): within 1 % of BF16.');
    assert.match(lossVerdict(arms(2.04, 1.97))!, /\+2\.00 % vs BF16.*-1\.50 % \(the noise floor\): outside 1 %, but within twice the noise floor/);
    assert.match(lossVerdict(arms(2.16, 2.002))!, /\+8\.00 % vs BF16.*FP8 trains worse here: try precisionLens\.te\.recipe = Float8CurrentScaling/);
    assert.match(lossVerdict(arms(1.8, 2.002))!, /FP8 ends lower than BF16 by more than the noise/);
    // With the BF16 arm from rounded weights: said, and FP8 no farther from BF16 than it is not blamed on FP8.
    const withRounded = (conv: number, rounded: number) => [...arms(conv, 2.002),
      normalizeBenchEvent({ event: 'result', backend: 'original-rounded', tokens_per_s: 990, losses: [2, 1.4], eval_loss: rounded }) as BackendResult];
    assert.equal(lossVerdict(withRounded(1.95, 1.94)), 'Loss check: FP8 eval loss -2.50 % vs BF16 (1.9500 vs 2.0000); the BF16 run again: +0.10 % (the noise floor); '
      + 'BF16 from its weights rounded once to BF16: -3.00 %: outside 1 %, but no farther than BF16 from its weights rounded to BF16: this training is that sensitive to its start; rerun with a warm start (100 steps) to measure FP8 itself.');
    assert.match(lossVerdict(withRounded(2.16, 1.99))!, /rounded once to BF16: -0\.50 %: FP8 trains worse here/);
    assert.match(lossVerdict(withRounded(2.01, 1.99))!, /-0\.50 %: within 1 % of BF16\.$/);
    // A run without eval losses: no column, no verdict.
    const plain = [{ event: 'result', backend: 'original', tokens_per_s: 1000, losses: [2] }].map((e) => normalizeBenchEvent(e) as BackendResult);
    assert.doesNotMatch(measureTable(plain), /eval loss/);
    assert.equal(lossVerdict(plain), undefined);
  });
});
