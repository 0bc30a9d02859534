/**
 * The FP8 post-training quantization block ("Quantize to FP8 after training (with calibration)") runs: the golden
 * outputs of test/fixtures/fixes/ptq_*.py are executed on CPU
 *  - with Debian's torch 1.13 and neither library: it trains, then says which package to install, model unchanged;
 *  - in .venv-ptq (scripts/ptq-venv.sh: torch 2.13 CPU, torchao 0.18.0, nvidia-modelopt 0.47.0) or $PL_PTQ_PYTHON:
 *    once through Model Optimizer (FP8_DEFAULT_CFG, fake-quant, calibrated), once through torchao (ModelOpt hidden;
 *    on CPU torchao's float8 dynamic-activation config asserts, so the block takes float8 weight-only), each keeping
 *    the lm-head found by role in high precision and printing the logit check.
 * The re-analysed output raises no PL601/PL602: the analysis reads the block it wrote.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { analyse, FIXTURES, PYTHON } from './fixes-support';

const ROOT = join(__dirname, '..', '..');
const VENV_PYTHON = process.env.PL_PTQ_PYTHON ?? join(ROOT, '.venv-ptq', 'bin', 'python');
const expected = (name: string): string => readFileSync(join(FIXTURES, 'expected', name), 'utf8');

function works(python: string, code: string): boolean {
  return existsSync(python) && spawnSync(python, ['-c', code], { timeout: 120_000 }).status === 0;
}
const debianTorch = works(PYTHON, 'import torch');
const venv = works(VENV_PYTHON, 'import torch, torchao, modelopt.torch.quantization');

/** Runs a file as __main__ with some top-level packages made unimportable (`modelopt`). */
function run(python: string, file: string, hidden: string[] = []): { status: number | null; out: string } {
  const boot = 'import runpy, sys\nfor m in sys.argv[2:]:\n    sys.modules[m] = None\nsys.argv = sys.argv[:2]\nrunpy.run_path(sys.argv[1], run_name="__main__")';
  const r = spawnSync(python, ['-c', boot, file, ...hidden], { encoding: 'utf8', timeout: 300_000, cwd: join(file, '..') });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

let scratch: string | undefined;
function write(name: string, text: string): string {
  scratch ??= mkdtempSync(join(tmpdir(), 'pl-ptq-'));
  const file = join(scratch, name);
  writeFileSync(file, text);
  return file;
}

/** The model file and a driver that builds the model and quantizes it on random token batches. */
function modelDriver(): string {
  write('ptq_model.py', expected('ptq_model.ptq.py'));
  return write('drive_model.py', [
    'import torch', 'from ptq_model import GPT, quantize_fp8_for_inference', '',
    'torch.manual_seed(0)', 'model = GPT()', 'batches = [torch.randint(0, 256, (4, 16)) for _ in range(8)]',
    'quantize_fp8_for_inference(model, batches)', '',
  ].join('\n'));
}

const CHECK = /FP8 post-training quantization with (.+?): calibrated on (\d+) batches, kept in high precision: ([^;]+); logits max \|diff\| ([\d.e+-]+), mean ([\d.e+-]+), next-token agreement ([\d.]+)%/;

function assertQuantized(out: string, how: RegExp, kept: string): void {
  const m = CHECK.exec(out);
  assert.ok(m, `no quantization report:\n${out.slice(-3000)}`);
  assert.match(m[1], how);
  assert.equal(m[3], kept);
  const [max, mean, agree] = [Number(m[4]), Number(m[5]), Number(m[6])];
  // Quantization changed the logits (a no-op would give 0), by a finite amount that keeps the next token.
  assert.ok(max > 0 && Number.isFinite(max) && mean <= max, `logit difference ${max} / ${mean}`);
  assert.ok(agree >= 80, `next-token agreement ${agree}%`);
}

describe('fixes: the FP8 post-training quantization block runs', function () {
  this.timeout(600_000);

  it('the analysis reads the inserted block: no PL601 / PL602 on the output', async () => {
    for (const name of ['ptq_train.ptq.py', 'ptq_model.ptq.py']) {
      const { ir, findings } = await analyse(expected(name));
      assert.equal(ir.ptq.quantizeCalls.length, 2, `${name}: ModelOpt and torchao calls`);
      assert.deepEqual(findings.filter((f) => f.code.startsWith('PL6')).map((f) => `${f.code}: ${f.message}`), [], name);
    }
  });

  it('torch 1.13 without ModelOpt or torchao: trains, then names the package to install', function () {
    if (!debianTorch) this.skip();
    const train = run(PYTHON, write('ptq_train.py', expected('ptq_train.ptq.py')));
    assert.equal(train.status, 0, train.out);
    assert.equal(train.out.match(/^step \d: loss \d+\.\d+$/gm)?.length, 3, train.out);
    assert.match(train.out, /FP8 post-training quantization skipped: install nvidia-modelopt or torchao/);
    const model = run(PYTHON, modelDriver());
    assert.equal(model.status, 0, model.out);
    assert.match(model.out, /skipped: install nvidia-modelopt or torchao/);
  });

  it('Model Optimizer: calibrates FP8_DEFAULT_CFG on the validation batches, the lm-head stays high precision', function () {
    if (!venv) { console.log(`      (skipped: no ${VENV_PYTHON}; run scripts/ptq-venv.sh)`); this.skip(); }
    const train = run(VENV_PYTHON, write('ptq_train.py', expected('ptq_train.ptq.py')));
    assert.equal(train.status, 0, train.out);
    assertQuantized(train.out, /^Model Optimizer FP8_DEFAULT_CFG/, 'decoder');
    assert.match(train.out, /calibrated on 4 batches/);
    const model = run(VENV_PYTHON, modelDriver());
    assert.equal(model.status, 0, model.out);
    assertQuantized(model.out, /^Model Optimizer/, 'lm_head');
  });

  it('torchao (ModelOpt absent): float8 weight-only on CPU, the tied lm-head left out by the filter', function () {
    if (!venv) this.skip();
    const train = run(VENV_PYTHON, write('ptq_train.py', expected('ptq_train.ptq.py')), ['modelopt']);
    assert.equal(train.status, 0, train.out);
    assertQuantized(train.out, /^torchao Float8WeightOnlyConfig \(no FP8 GEMMs on this device/, 'decoder');
    const model = run(VENV_PYTHON, modelDriver(), ['modelopt']);
    assert.equal(model.status, 0, model.out);
    assertQuantized(model.out, /^torchao Float8WeightOnlyConfig/, 'lm_head');
  });
});
