/**
 * `check` / `inspect` on worker threads (cli/parallel.ts): byte-identical output, notes and exit codes whatever the
 * number of threads (--jobs, PRECISION_LENS_JOBS), and a worker that crashes ends the run with exit code 2, not a hang.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs, UsageError, type CliOptions } from '../../server/src/cli/args';
import { mergeFacts } from '../../server/src/cli/parallel';
import { CLI, ensureBuilt, scratchCopy, type CliRun } from './cli-harness';

function runWith(args: readonly string[], cwd: string, env: Record<string, string> = {}): CliRun {
  const r = spawnSync(process.execPath, [CLI, ...args], {
    cwd, encoding: 'utf8', timeout: 60_000, maxBuffer: 64 << 20,
    env: { ...process.env, PRECISION_LENS_JOBS: '', PRECISION_LENS_TEST_WORKER_CRASH: '', ...env },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('precision-lens check on worker threads (built CLI)', function () {
  this.timeout(120_000);
  let dir: string;
  let dispose: () => void;
  before(() => {
    ensureBuilt();
    ({ dir, dispose } = scratchCopy());
    // Notes and per-file states that must come back from a worker as they are in-process.
    writeFileSync(join(dir, 'clean', 'binary.py'), Buffer.from([0x69, 0x6d, 0x00, 0x01, 0x02]));
    writeFileSync(join(dir, 'info', 'bom.py'), '\ufeffimport torch\r\nimport torch.nn as nn\r\n\r\nclass M(nn.Module):\r\n    def __init__(self):\r\n        super().__init__()\r\n        self.fc = nn.Linear(4096, 4096)\r\n');
    writeFileSync(join(dir, 'big.py'), `import torch\n${'x = 1\n'.repeat(2000)}`);
  });
  after(() => dispose());

  const cases: [string, string[]][] = [
    ['check --format json (fix titles from the workers)', ['check', '.', '--format', 'json', '--max-file-size', '10000']],
    ['check --format sarif', ['check', '.', '--format', 'sarif', '--max-file-size', '10000']],
    ['check --format text', ['check', '.', '--max-file-size', '10000']],
    ['check --fail-on none with a rule override', ['check', '.', '--format', 'json', '--fail-on', 'none', '--rule', 'PL101=error']],
    ['inspect (IRs from the workers)', ['inspect', '.']],
    ['check --fix --diff (stays in-process)', ['check', '.', '--fix', '--diff']],
  ];
  for (const [name, args] of cases) {
    it(`${name}: same stdout, stderr and exit code with 1, 2 and 4 threads`, () => {
      const one = runWith([...args, '--jobs', '1'], dir);
      assert.ok(one.stdout.length > 0, one.stderr);
      for (const jobs of ['2', '4']) {
        const many = runWith([...args, '--jobs', jobs], dir);
        assert.equal(many.stdout, one.stdout, `--jobs ${jobs}`);
        assert.equal(many.stderr, one.stderr, `--jobs ${jobs}`);
        assert.equal(many.status, one.status, `--jobs ${jobs}`);
      }
      const env = runWith(args, dir, { PRECISION_LENS_JOBS: '3' });
      assert.equal(env.stdout, one.stdout, 'PRECISION_LENS_JOBS=3');
      assert.equal(env.status, one.status);
    });
  }

  it('the JSON names every file of a multi-file directory, in path order, as in-process', () => {
    const one = JSON.parse(runWith(['check', '.', '--format', 'json', '--jobs', '1'], dir).stdout);
    const two = JSON.parse(runWith(['check', '.', '--format', 'json', '--jobs', '2'], dir).stdout);
    assert.deepEqual(two, one);
    assert.ok(one.summary.files >= 8 && one.summary.analysed >= 7, JSON.stringify(one.summary));
    assert.ok(one.diagnostics.some((d: { fixes: string[] }) => d.fixes.length > 0), 'some fix titles');
  });

  it('a worker that crashes ends the run with exit code 2 and a message', () => {
    const t = Date.now();
    const run = runWith(['check', '.', '--format', 'json', '--jobs', '2'], dir, { PRECISION_LENS_TEST_WORKER_CRASH: '1' });
    assert.equal(run.status, 2, run.stderr);
    assert.match(run.stderr, /worker thread failed: .*crash requested/);
    assert.ok(Date.now() - t < 30_000);
  });
});

describe('cli parallel: merging the workspace facts of the threads', () => {
  it('ORs the booleans and unions the modules that another stack imports (no in-process fallback)', () => {
    const merged = mergeFacts([
      { anyTraining: false, anyAutocastRegion: true },
      { anyTraining: true, anyAutocastRegion: false, stackImports: { model: 'convert_to_float8_training' } },
      { stackImports: { 'pkg.model': 'BitsAndBytesConfig' } },
    ]);
    assert.deepEqual(merged, {
      anyTraining: true, anyAutocastRegion: true,
      stackImports: { model: 'convert_to_float8_training', 'pkg.model': 'BitsAndBytesConfig' },
    });
    assert.equal(mergeFacts([{ teVersion: '2.10' } as never]), undefined);
  });
});

describe('cli args: --jobs', () => {
  const options = (argv: string[]): CliOptions => (parseArgs(argv) as { options: CliOptions }).options;
  it('takes a positive whole number; absent by default', () => {
    assert.equal(options(['check', 'src']).jobs, undefined);
    assert.equal(options(['check', 'src', '--jobs', '3']).jobs, 3);
    assert.equal(options(['check', '-j', '1', 'src']).jobs, 1);
    assert.equal(options(['inspect', '--jobs=2', 'src']).jobs, 2);
  });
  for (const bad of ['0', '-1', '1.5', 'many']) {
    it(`rejects --jobs ${bad}`, () => assert.throws(() => parseArgs(['check', 'src', `--jobs=${bad}`]), UsageError));
  }
});
