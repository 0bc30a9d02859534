/**
 * One command, FP8 on end to end (issue 21): `check DIR --fix --unsafe-fixes` on a nanoGPT-style project (model.py +
 * a train.py with its own autocast context `ctx`, gradient accumulation, a GradScaler, DDP's grad-sync flag, an
 * evaluation loop under the same ctx) converts the model through the project's fallback module and puts the FP8
 * context inside the script's `with ctx:` of the training step only. The results are golden
 * (test/fixtures/fixes/expected/project-ctx/, UPDATE_GOLDEN=1 rewrites them) and trained on the CPU by
 * test/python/test_fallback_project.py (no TE, and a fake TE on a fake Hopper GPU).
 */
import * as assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt, parseJson, ROOT, runCli, type CheckJson } from './cli-harness';

const PROJECT = join(ROOT, 'test', 'fixtures', 'fixes', 'project-ctx');
const EXPECTED = join(ROOT, 'test', 'fixtures', 'fixes', 'expected', 'project-ctx');

describe('check --fix --unsafe-fixes on a model and its training script (built CLI)', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'pl-project-ctx-'));
    cpSync(PROJECT, dir, { recursive: true });
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('before: no warning yet (nothing is te.*); one run converts model.py and nests FP8 inside train.py\'s ctx', () => {
    const before = parseJson<CheckJson>(runCli(['check', '.', '--format', 'json'], dir));
    assert.deepEqual(before.diagnostics.filter((d) => d.code === 'PL302'), []);

    const run = runCli(['check', '.', '--fix', '--unsafe-fixes', '--convert-losing-layers', '--show-fixes'], dir);
    assert.equal(run.status, 0, run.stdout + run.stderr);
    assert.match(run.stdout, /PL302 Wrap the training step in FP8 autocast inside `with ctx` \(backward\(\) stays outside; context from fp8_fallback\)/);

    const train = readFileSync(join(dir, 'train.py'), 'utf8');
    // The training step's ctx gets the FP8 context; the evaluation loop's (under no_grad) does not.
    assert.equal((train.match(/with ctx, fp8_autocast_context\(inside_autocast=True\):/g) ?? []).length, 1);
    assert.match(train, /^ {8}with ctx:\n {12}logits, loss = model\(X, Y\)\n {8}losses\[k\]/m);
    assert.match(train, /^from fp8_fallback import fp8_autocast_context$/m);
    // Gradient accumulation, the scaler and DDP's flag are untouched.
    assert.match(train, /scaler\.scale\(loss\)\.backward\(\)/);
    assert.match(train, /model\.require_backward_grad_sync = micro_step == gradient_accumulation_steps - 1/);

    for (const name of ['model.py', 'train.py', 'fp8_fallback.py']) {
      const text = readFileSync(join(dir, name), 'utf8');
      if (process.env.UPDATE_GOLDEN) { mkdirSync(EXPECTED, { recursive: true }); writeFileSync(join(EXPECTED, name), text); }
      assert.ok(existsSync(join(EXPECTED, name)), `${name} golden missing (UPDATE_GOLDEN=1 writes it)`);
      assert.equal(text, readFileSync(join(EXPECTED, name), 'utf8'), `${name} differs from its golden file`);
    }
  });

  it('after: nothing left, and a second run changes nothing', () => {
    const after = parseJson<CheckJson>(runCli(['check', '.', '--format', 'json'], dir));
    assert.deepEqual(after.diagnostics.map((d) => d.code), []);
    const snapshot = ['model.py', 'train.py', 'fp8_fallback.py'].map((n) => readFileSync(join(dir, n), 'utf8'));
    const again = runCli(['check', '.', '--fix', '--unsafe-fixes', '--convert-losing-layers'], dir);
    assert.equal(again.status, 0, again.stdout + again.stderr);
    assert.deepEqual(['model.py', 'train.py', 'fp8_fallback.py'].map((n) => readFileSync(join(dir, n), 'utf8')), snapshot);
  });

  it('PL302 is a warning on the training script when the model is converted and no FP8 autocast reaches it', () => {
    const half = mkdtempSync(join(tmpdir(), 'pl-project-half-'));
    try {
      cpSync(join(EXPECTED, 'model.py'), join(half, 'model.py'));
      cpSync(join(EXPECTED, 'fp8_fallback.py'), join(half, 'fp8_fallback.py'));
      cpSync(join(PROJECT, 'train.py'), join(half, 'train.py'));
      const run = runCli(['check', '.', '--format', 'json'], half);
      assert.equal(run.status, 1, run.stderr);
      const pl302 = parseJson<CheckJson>(run).diagnostics.filter((d) => d.code === 'PL302');
      assert.deepEqual(pl302.map((d) => [d.file, d.severity]), [['model.py', 'warning'], ['train.py', 'warning']]);
      const onTrain = pl302.find((d) => d.file === 'train.py')!;
      assert.match(onTrain.message, /FP8 is off/);
      assert.ok(onTrain.message.length <= 125, onTrain.message);
      assert.equal(onTrain.fixes.length, 1);
      assert.match(onTrain.fixes[0], /^Wrap the training step in FP8 autocast inside `with ctx` \(backward\(\) stays outside/);
    } finally {
      rmSync(half, { recursive: true, force: true });
    }
  });
});
