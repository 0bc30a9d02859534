/**
 * The fuzzer as part of the suite: a fixed seed and a fixed budget of mutants of the fixtures through the built
 * CLI's check path and --fix (server/src/cli/fuzz.ts). Deterministic inputs; the time limit per input is a hang
 * detector far above the normal cost, not a speed assertion. `npm run fuzz -- --seed N --count M` runs longer.
 */
import * as assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLI, ensureBuilt, ROOT } from './cli-harness';
import { ledgerTotals } from '../../server/src/cli/fuzz-ledger';

const ledgerLines = (path: string): string[] => (existsSync(path) ? readFileSync(path, 'utf8').split('\n').filter((l) => l.trim()) : []);

/** The run's `fuzz-summary {json}` line. */
function summaryOf(stdout: string): Record<string, number> {
  const m = /^fuzz-summary (\{.*\})$/m.exec(stdout);
  assert.ok(m, stdout);
  return JSON.parse(m[1]) as Record<string, number>;
}

describe('fuzzer (fixed seed, fixed budget)', function () {
  this.timeout(600_000);
  before(ensureBuilt);

  it('3,000 mutants of the fixtures: no internal error, bounded time and memory, valid JSON, --fix keeps code compiling', () => {
    const r = spawnSync(process.execPath, [CLI, '__fuzz', join(ROOT, 'test', 'fixtures'), '--seed', '1', '--count', '3000', '--small',
      '--time-limit-ms', '30000', '--rss-limit-mb', '1024'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20, timeout: 590_000 });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    const summary = summaryOf(r.stdout);
    assert.equal(summary.inputs, 3000);
    assert.equal(summary.failures, 0);
    assert.ok(summary.seedFiles > 50, 'the fixtures are the seeds');
    assert.ok(summary.fixRuns >= summary.compiled && summary.compiled > 20, 'some mutants went through --fix and python3 compile()');
    assert.ok(summary.peakRssMb > 20 && summary.peakRssMb < 1024, `peak RSS ${summary.peakRssMb} MB`);
  });

  it('--max-seconds ends a chunk early with its summary: the inputs done, not the count asked for', () => {
    const r = spawnSync(process.execPath, [CLI, '__fuzz', join(ROOT, 'test', 'fixtures', 'cli'), '--seed', '5', '--count', '100', '--small', '--max-seconds', '0'],
      { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    const summary = summaryOf(r.stdout);
    assert.deepEqual([summary.count, summary.inputs], [100, 0]);
    assert.match(r.stdout, /fuzz: seed 5, 0 of 100 \(--max-seconds\) inputs/);
  });

  it('an input over the time bound is re-timed as fresh CLI processes, saved with its seed and mutations, and re-timed again from the saved copy', () => {
    const out = mkdtempSync(join(tmpdir(), 'pl-fuzz-'));
    try {
      // a bound of 0 ms: every input is over it, in-process and as a fresh process, so each one is re-timed and fails
      const r = spawnSync(process.execPath, [CLI, '__fuzz', join(ROOT, 'test', 'fixtures', 'cli'), '--seed', '5', '--count', '3', '--small',
        '--time-limit-ms', '0', '--out', out, '--ledger', join(out, 'ledger.jsonl')], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
      assert.equal(r.status, 1, `${r.stdout}\n${r.stderr}`);
      const summary = summaryOf(r.stdout);
      assert.deepEqual([summary.overBound, summary.failures], [3, 3]);
      assert.ok(summary.slowestRetimedCheckMs > 0 && summary.slowestRetimedFixMs > 0);
      assert.ok(summary.retimedPeakRssMb > 20, 'the fresh processes\' peak RSS is measured');
      assert.match(r.stdout, /OVER #0 \(.+ of .+\): \d+ ms in-process; check \d+ ms \/ \d+ MB(?: \(skipped: [^)]*not analysed\))?, --fix --unsafe-fixes \d+ ms \/ \d+ MB/);
      // progress records, then the summary as the last record of the run
      const records = ledgerLines(join(out, 'ledger.jsonl')).map((l) => JSON.parse(l) as Record<string, unknown>);
      assert.deepEqual(records.at(-1), summary);
      assert.ok(records.length >= 2 && records.slice(0, -1).every((r) => r.final === false && r.run === summary.run));
      const saved = JSON.parse(readFileSync(join(out, 'fuzz-s5-0.json'), 'utf8'));
      assert.equal(saved.runSeed, 5);
      assert.ok(saved.applied.length >= 1 && saved.seedFile.endsWith('.py'));
      assert.ok(saved.retimed.check.ms > 0 && saved.retimed.fix.rssMb > 0);
      // exit 2 only for an input the CLI skips with its reason (every input skipped, issue 25.3), never a problem
      for (const f of [saved.retimed.check, saved.retimed.fix]) assert.ok(f.status !== 2 || (f.skipped && !f.problem), JSON.stringify(f));
      const again = spawnSync(process.execPath, [CLI, '__fuzz', '--retime', out, '--time-limit-ms', '60000', '--repeat', '2'], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
      assert.equal(again.status, 0, again.stdout + again.stderr);
      assert.match(again.stdout, /best of 2\)[^]*retime: 3 inputs, 0 over the bounds \(60000 ms, 1024 MB\), peak RSS \d+ MB/);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('--lsp drives the built language server too: each mutant opened and edited over JSON-RPC, the slowest reported, a step over the bound run again in a fresh server', () => {
    const out = mkdtempSync(join(tmpdir(), 'pl-fuzz-'));
    try {
      const r = spawnSync(process.execPath, [CLI, '__fuzz', join(ROOT, 'test', 'fixtures', 'cli'), '--seed', '5', '--count', '4', '--small', '--lsp', '--lsp-edits', '2'],
        { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
      assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
      const summary = summaryOf(r.stdout);
      assert.deepEqual([summary.inputs, summary.lspDocs, summary.lspOverBound, summary.failures], [4, 4, 0, 0]);
      assert.ok(summary.lspSlowestStepMs > 0);
      assert.match(r.stdout, /language server: 4 documents opened and edited 2 times each, 0 with a step over 2000 ms; the slowest:\n {2}LSP #\d+ \(.+, \d+ chars\): open \d+ ms, edits \d+\/\d+ ms, server CPU \d+ ms, \d+ diagnostics/);
      // a bound of 0 ms: every document is over it, in the run's server and in a fresh one, so each fails, saved with its edits
      const over = spawnSync(process.execPath, [CLI, '__fuzz', join(ROOT, 'test', 'fixtures', 'cli'), '--seed', '5', '--count', '2', '--small', '--lsp',
        '--lsp-time-limit-ms', '0', '--out', out], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
      assert.equal(over.status, 1, `${over.stdout}\n${over.stderr}`);
      const s2 = summaryOf(over.stdout);
      assert.deepEqual([s2.lspDocs, s2.lspOverBound, s2.failures], [2, 2, 2]);
      assert.match(over.stdout, /FAIL #0 \(.+ \+ lsp of .+\) saved as .+lsp-s5-0\.py: language server: a step took \d+ ms in a fresh server \(limit 0 ms\)/);
      const saved = JSON.parse(readFileSync(join(out, 'lsp-s5-0.json'), 'utf8'));
      assert.equal(saved.edits.length, 3);
      assert.ok(saved.figure.openMs > 0 && saved.fresh.editMs.length === 3);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('appends progress records as it goes: a run killed before its summary still counts what it did, each run once', async () => {
    const out = mkdtempSync(join(tmpdir(), 'pl-fuzz-'));
    const ledger = join(out, 'ledger.jsonl');
    try {
      // a finished run: progress after every input, then the summary; the totals count it once
      const r = spawnSync(process.execPath, [CLI, '__fuzz', join(ROOT, 'test', 'fixtures', 'cli'), '--seed', '7', '--count', '12', '--small',
        '--progress-seconds', '0', '--ledger', ledger], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
      assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
      const finished = ledgerLines(ledger).map((l) => JSON.parse(l) as Record<string, unknown>);
      assert.ok(finished.length > 12, `${finished.length} records`);
      assert.deepEqual(finished.filter((x) => x.final === false).map((x) => x.inputs).slice(0, 3), [1, 2, 3]);
      assert.match(r.stdout, /^fuzz-progress \{"run":"s7-/m);
      // a run killed in the middle (what a chunk's time slot does): its last progress record counts
      const child = spawn(process.execPath, [CLI, '__fuzz', join(ROOT, 'test', 'fixtures'), '--seed', '8', '--count', '100000', '--small',
        '--progress-seconds', '0', '--ledger', ledger], { cwd: ROOT, stdio: 'ignore' });
      const killedRun = (): Record<string, unknown>[] => ledgerLines(ledger).slice(finished.length).flatMap((l) => { try { return [JSON.parse(l)]; } catch { return []; } });
      for (let waited = 0; killedRun().filter((x) => (x.inputs as number) >= 3).length === 0; waited += 100) {
        assert.ok(waited < 110_000, 'no progress record from the second run');
        await new Promise((res) => setTimeout(res, 100));
      }
      child.kill('SIGKILL');
      await new Promise((res) => child.once('exit', res));
      const done = killedRun().filter((x) => x.run === killedRun()[0].run).at(-1)!;
      const t = ledgerTotals([...ledgerLines(ledger), '{"seed":9,"inputs":', '{"seed":9,"count":5,"inputs":5,"failures":0,"seconds":1,"peakRssMb":300}']);
      assert.deepEqual([t.runs, t.unfinished, t.seeds], [3, 1, [7, 8, 9]]);
      assert.equal(t.inputs, 12 + (done.inputs as number) + 5);
      assert.ok((done.inputs as number) >= 3 && done.final === false);
      // the same through the CLI
      const total = spawnSync(process.execPath, [CLI, '__fuzz', '--total', ledger], { cwd: ROOT, encoding: 'utf8' });
      assert.match(total.stdout, new RegExp(`^fuzz-total \\{"runs":2,"unfinished":1,"inputs":${12 + (done.inputs as number)},`));
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
