/**
 * What the command line reads (issue 25): only regular files, never more than the size limit whatever the file
 * system says, and a run that analysed nothing is not a pass. The BUILT CLI as a process (cli-harness.ts).
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLI, ensureBuilt } from './cli-harness';

/** The CLI with a short deadline of its own: the inputs here once made it block for good or grow without bound. */
function check(args: string[], cwd: string): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, 'check', ...args], { cwd, encoding: 'utf8', timeout: 20_000, killSignal: 'SIGKILL' });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

const MODEL = 'import torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(768, 3072)\n';

describe('CLI: what it reads (issue 25)', function () {
  this.timeout(60_000);
  let dir: string;
  before(() => { ensureBuilt(); dir = mkdtempSync(join(tmpdir(), 'pl-inputs-')); });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('refuses a character device (/dev/zero) with a clear message and exit 2', () => {
    const run = check(['/dev/zero'], dir);
    assert.equal(run.status, 2, run.stderr);
    assert.match(run.stderr, /\/dev\/zero: not a regular file \(a character device\): not read/);
  });

  it('refuses a FIFO instead of waiting for a writer', function () {
    if (process.platform === 'win32') this.skip();
    const fifo = join(dir, 'pipe.py');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0);
    const run = check(['pipe.py'], dir);
    assert.equal(run.status, 2, run.stderr);
    assert.match(run.stderr, /pipe\.py: not a regular file \(a FIFO\): not read/);
  });

  it('reads no more than the limit of a file whose size stat does not tell (/proc: 0 bytes)', function () {
    if (process.platform !== 'linux') this.skip();
    const run = check(['/proc/self/smaps', '--max-file-size', '2048'], dir);
    assert.equal(run.status, 2, run.stderr);
    assert.match(run.stderr, /smaps: file is over 2 KB, above the maximum file size \(2 KB\): not analysed/);
    assert.match(run.stderr, /no file was analysed: the input was skipped/);
  });

  it('a run where every input was skipped exits 2 and says why; one analysed file among skipped ones does not', () => {
    writeFileSync(join(dir, 'model.py'), MODEL);
    writeFileSync(join(dir, 'weights.py'), Buffer.from([0x69, 0x6d, 0x00, 0x01]));
    const skipped = check(['weights.py', 'model.py', '--max-file-size', '8'], dir);
    assert.equal(skipped.status, 2, skipped.stderr);
    assert.match(skipped.stderr, /no file was analysed: all 2 inputs were skipped \(see the notes above\)/);
    const mixed = check(['weights.py', 'model.py', '--fail-on', 'error'], dir);
    assert.equal(mixed.status, 0, mixed.stderr);
    assert.match(mixed.stderr, /weights\.py: binary file: not analysed/);
  });
});

describe('indent guard: counts what the parser nests across backslash continuations (issue 25)', function () {
  this.timeout(60_000);
  let dir: string;
  before(() => { ensureBuilt(); dir = mkdtempSync(join(tmpdir(), 'pl-indent-')); });
  after(() => rmSync(dir, { recursive: true, force: true }));

  /** `\` alone on a line before each deeper block: the scanner adds the widths up; counting physical lines reset to 0. */
  const prefixShape = (n: number): string => `import torch\nx = 1\n${Array.from({ length: n }, (_, k) => `${k ? `\\\n${' '.repeat(k)}` : ''}if x:\n`).join('')}\\\n${' '.repeat(n)}pass\n`;
  /** A continued line at column 0 inside each block: it closes nothing for the parser; counted, it popped every level. */
  const continuedShape = (n: number): string => `import torch\nx = 1\n${Array.from({ length: n }, (_, k) => `${' '.repeat(k)}if x:\n${' '.repeat(k + 1)}y = \\\n0\n`).join('')}${' '.repeat(n)}pass\n`;

  for (const [name, make] of [['a backslash line before each block', prefixShape], ['a continued line at column 0 in each block', continuedShape]] as const) {
    it(`${name}: 101 levels refused by the CLI as too deep, 100 analysed`, () => {
      writeFileSync(join(dir, 'deep.py'), make(101));
      writeFileSync(join(dir, 'ok.py'), make(100));
      const deep = check(['deep.py', '--format', 'json'], dir);
      assert.match(deep.stderr, /deep\.py: indented more than 100 levels deep, which Python refuses: not analysed/);
      const ok = check(['ok.py', '--format', 'json'], dir);
      assert.deepEqual(JSON.parse(ok.stdout).notAnalysed, [], ok.stderr);
    });
  }
});
