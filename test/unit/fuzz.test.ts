/**
 * The fuzzer as part of the suite: a fixed seed and a fixed budget of mutants of the fixtures through the built
 * CLI's check path and --fix (server/src/cli/fuzz.ts). Deterministic inputs; the time limit per input is a hang
 * detector far above the normal cost, not a speed assertion. `npm run fuzz -- --seed N --count M` runs longer.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { CLI, ensureBuilt, ROOT } from './cli-harness';

describe('fuzzer (fixed seed, fixed budget)', function () {
  this.timeout(600_000);
  before(ensureBuilt);

  it('3,000 mutants of the fixtures: no internal error, bounded time and memory, valid JSON, --fix keeps code compiling', () => {
    const r = spawnSync(process.execPath, [CLI, '__fuzz', join(ROOT, 'test', 'fixtures'), '--seed', '1', '--count', '3000', '--small',
      '--time-limit-ms', '30000', '--rss-limit-mb', '1024'], { cwd: ROOT, encoding: 'utf8', maxBuffer: 64 << 20, timeout: 590_000 });
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    const m = /fuzz: seed 1, 3000 inputs from (\d+) files .*?, (\d+) fixed and compiled, .*, 0 failures/.exec(r.stdout);
    assert.ok(m, r.stdout);
    assert.ok(Number(m[1]) > 50, 'the fixtures are the seeds');
    assert.ok(Number(m[2]) > 20, 'some mutants went through --fix and python3 compile()');
  });
});
