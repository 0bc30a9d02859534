/**
 * `check --fix` and `check --fix --diff`: only `safe` fixes (no behaviour change), re-analysed in rounds; files
 * replaced atomically; a second run changes nothing; the diff applies and matches what --fix writes. `--unsafe-fixes`
 * converts through the FP8 fallback and the result still trains without TE; [tool.precision-lens] configures it.
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
    runCli(['check', 'two_sites.py', '--fix', '--te-api', 'modern', '--fail-on', 'none'], dir);
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

  it('--fix changes nothing that changes behaviour: conversions wait for --unsafe-fixes, and the summary says how', () => {
    const project = join(dir, 'runnable');
    const before = readFileSync(join(project, 'model.py'), 'utf8');
    const hint = runCli(['check', 'runnable', '--convert-losing-layers', '--fail-on', 'none'], dir);
    assert.match(hint.stdout, /^\[\*\] No fix is behaviour-preserving; 4 fixable with --fix --unsafe-fixes/m);
    const safe = runCli(['check', 'runnable', '--fix', '--convert-losing-layers', '--fail-on', 'none'], dir);
    assert.match(safe.stderr, /applied 0 fixes in 0 files/);
    assert.match(safe.stdout, /^\[\*\] 4 more fixable with --fix --unsafe-fixes/m);
    assert.equal(readFileSync(join(project, 'model.py'), 'utf8'), before);
  });

  it('--fix --unsafe-fixes converts through the FP8 fallback: the files compile, train where they trained, and a second pass changes nothing', function () {
    const project = join(dir, 'runnable');
    const run = (what: string) => spawnSync(PYTHON, ['train.py'], { cwd: project, encoding: 'utf8', timeout: 120_000 });
    const hasTorch = spawnSync(PYTHON, ['-c', 'import torch'], { timeout: 60_000 }).status === 0;
    const original = hasTorch ? run('original') : undefined;
    if (original) assert.equal(original.status, 0, original.stderr);
    const fixed = runCli(['check', 'runnable', '--fix', '--unsafe-fixes', '--convert-losing-layers', '--show-fixes', '--fail-on', 'none'], dir);
    assert.equal(fixed.status, 0, fixed.stderr);
    // One run converts the model and, in the training script the conversion made a PL302 warning, wraps the step.
    assert.match(fixed.stdout, /^Fixed 5 problems:\n- runnable\/model\.py:\n/m);
    // The norm feeds only fc1: it is fused into te.LayerNormLinear where FP8 runs (one kernel reads the activations once).
    assert.match(fixed.stdout, /^ {4}1 × PL105 Fuse self\.norm into self\.fc1 \(te\.LayerNormLinear where FP8 runs, converting self\.fc1\)$/m);
    assert.match(fixed.stdout, /^- runnable\/train\.py:\n {4}1 × PL302 Wrap the training step in FP8 autocast \(backward\(\) stays outside; context from fp8_fallback\)$/m);
    assert.match(readFileSync(join(project, 'train.py'), 'utf8'), /^    with fp8_autocast_context\(\):\n(?: {8}.*\n)*? {8}loss = F\.cross_entropy\(model\(x\), y\)\n    optimizer\.zero_grad\(\)/m);
    assert.match(fixed.stdout, /    2 × PL101 Convert to te\.Linear \(with fallback: fp8_linear\)/);
    const model = readFileSync(join(project, 'model.py'), 'utf8');
    assertValidPython(model, 'model.py after --unsafe-fixes');
    assert.match(model, /self\.fc1 = fp8_fuse_norm\(self\.norm, fp8_linear\(dim, hidden\)\)/);
    assert.doesNotMatch(model, /^import transformer_engine/m, 'no bare TE import');
    // Through the project's one fallback module, created once beside the first file converted.
    assert.match(model, /^from fp8_fallback import fp8_fuse_norm, fp8_layernorm, fp8_linear$/m, "one import line, each name once");
    assertValidPython(readFileSync(join(project, 'fp8_fallback.py'), 'utf8'), 'fp8_fallback.py');
    if (original) {
      const after = run('fixed');
      assert.equal(after.status, 0, after.stderr);
      assert.match(after.stdout, /Running in BF16 fallback: Transformer Engine not installed/);
      // Without TE the step runs under the fallback's BF16 autocast (CPU): the loss of the FP32 original within 2 %.
      const loss = (out: string) => Number(/^loss (\S+)$/m.exec(out)?.[1]);
      assert.ok(Math.abs(loss(after.stdout) / loss(original.stdout) - 1) < 0.02, `${after.stdout} vs ${original.stdout}`);
    }
    const again = runCli(['check', 'runnable', '--fix', '--unsafe-fixes', '--convert-losing-layers', '--fail-on', 'none'], dir);
    assert.match(again.stderr, /applied 0 fixes in 0 files/);
    assert.equal(readFileSync(join(project, 'model.py'), 'utf8'), model);
  });

  it('reads [tool.precision-lens] from the nearest pyproject.toml: ignored rules, and te-api = "modern" lets --fix migrate PL303', () => {
    const proj = join(dir, 'configured');
    const sub = join(proj, 'src');
    rmSync(proj, { recursive: true, force: true });
    spawnSync('mkdir', ['-p', sub]);
    writeFileSync(join(proj, 'pyproject.toml'), '[project]\nname = "demo"\n\n[tool.precision-lens]\nte-api = "modern"\nignore = ["PL401", "linear-to-te"]\n\n[tool.precision-lens.rules]\nPL304 = "warning"\n');
    const code = 'import torch\nimport transformer_engine.pytorch as te\nfrom transformer_engine.common.recipe import DelayedScaling, Format\n\nmodel = torch.nn.Linear(1024, 1024)\nlayer = te.Linear(1024, 1024)\nrecipe = DelayedScaling(fp8_format=Format.E5M2)\nwith te.fp8_autocast(enabled=True, fp8_recipe=recipe):\n    y = layer(torch.randn(16, 1024))\n';
    writeFileSync(join(sub, 'step.py'), code);
    const out = parseJson<CheckJson>(runCli(['check', 'configured/src', '--format', 'json', '--fail-on', 'none'], dir));
    const codes = out.diagnostics.map((d) => d.code);
    assert.ok(!codes.includes('PL401') && !codes.includes('PL101'), codes.join());
    assert.equal(out.diagnostics.find((d) => d.code === 'PL304')?.severity, 'warning');
    // The flags win over the table; --isolated ignores it.
    assert.ok(parseJson<CheckJson>(runCli(['check', 'configured/src', '--format', 'json', '--isolated', '--fail-on', 'none'], dir)).diagnostics.some((d) => d.code === 'PL401'));
    runCli(['check', 'configured/src', '--fix', '--fail-on', 'none'], dir);
    const fixed = readFileSync(join(sub, 'step.py'), 'utf8');
    assert.match(fixed, /with te\.autocast\(enabled=True, recipe=recipe\):/, fixed);
    // A broken table is a warning, not a failure.
    writeFileSync(join(proj, 'pyproject.toml'), '[tool.precision-lens]\nte-api = "newest"\n');
    const warned = runCli(['check', 'configured/src', '--fail-on', 'none'], dir);
    assert.equal(warned.status, 0);
    assert.match(warned.stderr, /warning: te-api = "newest" is not one of auto, legacy, modern/);
  });

  it('applies PL303 in batch only when TE >= 2.9 is known (PRECISION_LENS_TE_VERSION)', () => {
    const file = join(dir, 'versioned.py');
    writeFileSync(file, 'import torch\nimport transformer_engine.pytorch as te\n\nlayer = te.Linear(64, 64)\nwith te.fp8_autocast(enabled=True):\n    y = layer(torch.randn(16, 64))\n');
    const cli = join(__dirname, '..', '..', 'out', 'cli.js');
    const old = spawnSync(process.execPath, [cli, 'check', 'versioned.py', '--fix', '--fail-on', 'none'], { cwd: dir, encoding: 'utf8', env: { ...process.env, PRECISION_LENS_TE_VERSION: '2.8.0' } });
    assert.match(old.stderr, /applied 0 fixes/);
    const modern = spawnSync(process.execPath, [cli, 'check', 'versioned.py', '--fix', '--fail-on', 'none'], { cwd: dir, encoding: 'utf8', env: { ...process.env, PRECISION_LENS_TE_VERSION: '2.10.0' } });
    assert.match(modern.stderr, /applied 1 fix in 1 file/);
    assert.match(readFileSync(file, 'utf8'), /with te\.autocast\(enabled=True\):/);
  });
});
