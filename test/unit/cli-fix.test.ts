/**
 * `check --fix` and `check --fix --diff`: only `safe` fixes, re-analysed in rounds; files replaced atomically; a
 * second run changes nothing; the diff applies and matches what --fix writes.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt, parseJson, runCli, scratchCopy, type CheckJson } from './cli-harness';

const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

function assertValidPython(text: string, what: string): void {
  const r = spawnSync(PYTHON, ['-c', 'import ast, sys; ast.parse(sys.stdin.read())'], { input: text, encoding: 'utf8' });
  assert.equal(r.status, 0, `${what} is not valid Python:\n${r.stderr}\n${text}`);
}

describe('precision-lens check --fix (built CLI)', function () {
  this.timeout(120_000);
  let dir: string;
  let dispose: () => void;
  let original: string;
  const file = () => join(dir, 'fixable/block.py');
  before(() => {
    ensureBuilt();
    ({ dir, dispose } = scratchCopy());
    original = readFileSync(file(), 'utf8');
  });
  after(() => dispose());

  it('--fix --diff prints a unified diff, exits 1, and writes nothing', () => {
    const run = runCli(['check', 'fixable', '--fix', '--diff'], dir);
    assert.equal(run.status, 1, run.stderr);
    assert.match(run.stdout, /^--- a\/fixable\/block\.py\n\+\+\+ b\/fixable\/block\.py\n@@ /);
    assert.match(run.stdout, /^-.*$/m);
    assert.match(run.stdout, /^\+.*$/m);
    assert.equal(readFileSync(file(), 'utf8'), original);
  });

  it('--fix --diff names a file given by absolute path as git does (a/tmp/x.py, no double slash)', () => {
    const abs = join(dir, 'fixable/block.py');
    const elsewhere = mkdtempSync(join(tmpdir(), 'pl-cwd-')); // the file is outside the working directory
    const run = runCli(['check', abs, '--fix', '--diff'], elsewhere);
    rmSync(elsewhere, { recursive: true, force: true });
    assert.equal(run.status, 1, run.stderr);
    const rel = abs.replace(/^\/+/, '');
    assert.ok(run.stdout.startsWith(`--- a/${rel}\n+++ b/${rel}\n@@ `), run.stdout.slice(0, 200));
  });

  it('the diff applies with patch -p1 and gives valid Python', () => {
    const copy = scratchCopy();
    try {
      const diff = runCli(['check', 'fixable', '--fix', '--diff'], copy.dir).stdout;
      const patch = spawnSync('patch', ['-p1', '--quiet'], { cwd: copy.dir, input: diff, encoding: 'utf8' });
      if (patch.error) return; // no `patch` on this machine: the next test checks the same content through --fix
      assert.equal(patch.status, 0, patch.stderr + patch.stdout);
      assertValidPython(readFileSync(join(copy.dir, 'fixable/block.py'), 'utf8'), 'patched file');
    } finally {
      copy.dispose();
    }
  });

  it('--fix applies only safe fixes, writes valid Python, and reports what is left', () => {
    const before = parseJson<CheckJson>(runCli(['check', 'fixable', '--format', 'json'], dir)).diagnostics;
    const diff = runCli(['check', 'fixable', '--fix', '--diff'], dir).stdout;
    const run = runCli(['check', 'fixable', '--fix', '--format', 'json', '--fail-on', 'none'], dir);
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stderr, /applied [1-9]\d* fix(es)? in 1 file/);
    const fixed = readFileSync(file(), 'utf8');
    assert.notEqual(fixed, original);
    assertValidPython(fixed, 'fixed file');
    // Same content as the diff promised: every + line of the diff is in the file.
    for (const l of diff.split('\n').filter((x) => x.startsWith('+') && !x.startsWith('+++'))) assert.ok(fixed.includes(l.slice(1)), l);
    const after = parseJson<CheckJson>(run).diagnostics;
    assert.ok(after.length < before.length, `${before.length} -> ${after.length}`);
    // No temp file is left next to it.
    assert.deepEqual(readdirSync(join(dir, 'fixable')), ['block.py']);
    // Lines no fix is about are untouched.
    assert.ok(fixed.includes('        return self.norm(x + self.fc2(torch.relu(self.fc1(x))))\n'));
    assert.ok(fixed.includes('        y = model(x)\n    return y\n'));
  });

  it('is idempotent: a second --fix changes nothing and --fix --diff is then empty with exit 0', () => {
    const once = readFileSync(file(), 'utf8');
    const again = runCli(['check', 'fixable', '--fix', '--fail-on', 'none'], dir);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stderr, /applied 0 fixes in 0 files/);
    assert.equal(readFileSync(file(), 'utf8'), once);
    const diff = runCli(['check', 'fixable', '--fix', '--diff'], dir);
    assert.equal(diff.stdout, '');
    assert.equal(diff.status, 0);
  });

  it('leaves files without safe fixes alone (the lm-head and backward() need a human)', () => {
    runCli(['check', 'project', '--fix', '--fail-on', 'none'], dir);
    const model2 = readFileSync(join(dir, 'project/model.py'), 'utf8');
    assert.ok(model2.includes('self.lm_head = te.Linear(n_embd, vocab_size, bias=False)'), 'lm-head untouched');
    assertValidPython(model2, 'model.py');
    assertValidPython(readFileSync(join(dir, 'project/train.py'), 'utf8'), 'train.py');
    assert.ok(readFileSync(join(dir, 'project/train.py'), 'utf8').includes('            loss.backward()\n'), 'backward() not moved by --fix');
  });

  it('fixes identical deprecated calls at two places in one run', () => {
    const file = join(dir, 'two_sites.py');
    const call = 'with te.fp8_autocast(enabled=True, fp8_recipe=fp8_recipe):\n    out = model(inp)\n';
    writeFileSync(file, `import torch\nimport transformer_engine.pytorch as te\nfrom transformer_engine.common import recipe\n\nfp8_recipe = recipe.DelayedScaling()\nmodel = te.Linear(768, 768)\ninp = torch.randn(16, 768)\n${call}${call}`);
    runCli(['check', 'two_sites.py', '--fix', '--fail-on', 'none'], dir);
    const fixed = readFileSync(file, 'utf8');
    assert.equal(fixed.match(/te\.autocast\(enabled=True, recipe=fp8_recipe\)/g)?.length, 2, fixed);
    assert.doesNotMatch(fixed, /fp8_autocast/);
    assertValidPython(fixed, 'two_sites.py');
  });

  it('keeps a byte order mark and CRLF line ends', () => {
    const crlf = join(dir, 'fixable/crlf.py');
    writeFileSync(crlf, `\ufeff${original.replace(/\n/g, '\r\n')}`);
    runCli(['check', 'fixable/crlf.py', '--fix', '--fail-on', 'none'], dir);
    const text = readFileSync(crlf, 'utf8');
    assert.ok(text.startsWith('\ufeff'));
    assert.ok(!/[^\r]\n/.test(text), 'a bare LF crept in');
    assertValidPython(text.slice(1), 'CRLF file');
  });
});
