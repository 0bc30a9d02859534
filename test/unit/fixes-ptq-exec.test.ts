/**
 * The FP8 post-training quantization block ("Quantize to FP8 after training (with calibration)") runs: the golden
 * outputs of test/fixtures/fixes/ptq_*.py are executed on CPU
 *  - with Debian's torch 1.13 and neither library: it trains, then says which package to install, model unchanged;
 *  - in .venv-ptq (scripts/ptq-venv.sh: torch 2.13 CPU, torchao 0.18.0, nvidia-modelopt 0.47.0) or $PL_PTQ_PYTHON:
 *    once through Model Optimizer (FP8_DEFAULT_CFG, fake-quant, calibrated), once through torchao (ModelOpt hidden;
 *    on CPU torchao's float8 dynamic-activation config asserts, so the block takes float8 weight-only), each keeping
 *    the lm-head found by role in high precision and printing the logit check.
 * The re-analysed output raises no PL601/PL602: the analysis reads the block it wrote.
 * The PL6xx quick fixes' golden outputs run there too: ModelOpt's head wildcard, E4M3, the calibration bound and
 * loop, mto.save / mto.restore, torchao's E4M3 weight-only config, and PL605's capability guard (both branches).
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MECHANICS_SETTINGS } from './fixes-support';
import { applyEdits, fixOutcome } from '../../server/src/fixes';
import { analyse, FIXTURES, PYTHON } from './fixes-support';
import { tempDir } from '../temp-dirs';

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
  scratch ??= tempDir('pl-ptq-');
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

/** The golden outputs of the PL6xx quick fixes, applied one after another to one file (each on a fresh analysis). */
async function applyAll(input: string, codes: string[], settings = MECHANICS_SETTINGS): Promise<string> {
  let text = readFileSync(join(FIXTURES, input), 'utf8');
  for (const code of codes) {
    const { ir, findings } = await analyse(text, settings);
    const finding = findings.find((f) => f.code === code);
    assert.ok(finding, `${input}: no ${code} to fix`);
    const out = fixOutcome(text, ir, finding, settings);
    assert.equal(out.fixes.length, 1, `${input} ${code}: ${out.refusals.join(' ')}`);
    text = applyEdits(text, out.fixes[0].edits);
  }
  return text;
}

describe('fixes: the PL6xx quick fixes run with ModelOpt 0.47 / torchao 0.18 on CPU', function () {
  this.timeout(600_000);
  before(function () {
    if (!venv) { console.log(`      (skipped: no ${VENV_PYTHON}; run scripts/ptq-venv.sh)`); this.skip(); }
  });

  it('ModelOpt, all four fixes on one file: head disabled by its wildcard, E4M3 weights, 512 samples, mto.save restores', async () => {
    const text = await applyAll('ptq_modelopt.py', ['PL601', 'PL603', 'PL604', 'PL606']);
    assert.deepEqual((await analyse(text)).findings.filter((f) => f.code.startsWith('PL6')).map((f) => f.message), []);
    const check = [
      'print("decoder:", model.decoder.weight_quantizer.is_enabled, model.decoder.input_quantizer.is_enabled)',
      'print("fc:", model.fc.weight_quantizer.is_enabled, tuple(model.fc.weight_quantizer.num_bits))',
      'restored = mto.restore(TinyLM(), "quantized.pt")',
      'print("restored:", type(restored.fc).__name__, restored.decoder.weight_quantizer.is_enabled)', '',
    ].join('\n');
    const r = run(VENV_PYTHON, write('ptq_modelopt_all.py', `${text}\n${check}`));
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /^decoder: False False$/m);
    assert.match(r.out, /^fc: True \(4, 3\)$/m);
    assert.match(r.out, /^restored: QuantLinear False$/m, 'mto.restore rebuilds the quantized model, head excluded');
  });

  it('PL605 (target Ampere): the guarded quantize runs where the GPU has FP8 and leaves the model in BF16 elsewhere', async () => {
    const ampere = { ...MECHANICS_SETTINGS, targetGpu: 'ampere' as const };
    const text = await applyAll('ptq_modelopt.py', ['PL601', 'PL603', 'PL604', 'PL606', 'PL605'], ampere);
    assert.deepEqual((await analyse(text, ampere)).findings.filter((f) => f.code.startsWith('PL6')).map((f) => f.message), []);
    const check = 'print("fc:", type(model.fc).__name__)\n';
    // This CPU: no CUDA device, so the else branch: one line, the model unquantized.
    const cpu = run(VENV_PYTHON, write('ptq_guard_cpu.py', `${text}\n${check}`));
    assert.equal(cpu.status, 0, cpu.out);
    assert.match(cpu.out, /^PTQ: FP8 per-tensor needs SM >= 8\.9, which this GPU lacks: the model stays in BF16/m);
    assert.match(cpu.out, /^fc: Linear$/m);
    // An SM 9.0 device as torch reports it: the guarded branch quantizes (ModelOpt's fake-quant runs on the CPU).
    const sm90 = 'import torch\ntorch.cuda.is_available = lambda: True\ntorch.cuda.get_device_capability = lambda *a, **k: (9, 0)\n';
    const hopper = run(VENV_PYTHON, write('ptq_guard_sm90.py', `${sm90}${text}\n${check}`));
    assert.equal(hopper.status, 0, hopper.out);
    assert.doesNotMatch(hopper.out, /^PTQ: /m);
    assert.match(hopper.out, /^fc: QuantLinear$/m);
    // torchao's FP8 dynamic config: the same guard, BF16 on this CPU.
    const ao = run(VENV_PYTHON, write('ptq_guard_torchao.py', `${expected('ptq_torchao.gpu-guard.py')}\nprint("fc weight:", type(model.fc.weight).__name__)\n`), ['modelopt']);
    assert.equal(ao.status, 0, ao.out);
    assert.match(ao.out, /^PTQ: FP8 dynamic activation \+ weight needs SM >= 8\.9/m);
    assert.match(ao.out, /^fc weight: Parameter$/m);
  });

  it('ModelOpt literal quant_cfg list: the head\'s entry switches its quantizers off, the other layer stays quantized', () => {
    const check = 'print("output:", model.output.weight_quantizer.is_enabled, "fc:", model.fc.weight_quantizer.is_enabled)\n';
    const before = run(VENV_PYTHON, write('ptq_literal_before.py', `${readFileSync(join(FIXTURES, 'ptq_modelopt_literal.py'), 'utf8')}\n${check}`));
    assert.match(before.out, /^output: True fc: True$/m, before.out);
    const after = run(VENV_PYTHON, write('ptq_literal_after.py', `${expected('ptq_modelopt_literal.disable-head.py')}\n${check}`));
    assert.equal(after.status, 0, after.out);
    assert.match(after.out, /^output: False fc: True$/m);
  });

  it('ModelOpt without forward_loop: the inserted loop calibrates the static scales on the validation loader', () => {
    const check = 'print("amax calibrated:", model[1].input_quantizer.amax is not None, model[3].weight_quantizer.amax is not None)\n';
    const r = run(VENV_PYTHON, write('ptq_nocalib.py', `${expected('ptq_modelopt_nocalib.forward-loop.py')}\n${check}`));
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /^amax calibrated: True True$/m);
  });

  it('torchao: the E4M3 weight-only config quantizes on CPU', () => {
    const check = 'print("fc weight:", type(model.fc.weight).__name__, "lm_head weight:", type(model.lm_head.weight).__name__)\n';
    const r = run(VENV_PYTHON, write('ptq_torchao_e4m3.py', `${expected('ptq_torchao_e5m2.e4m3.py')}\n${check}`), ['modelopt']);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /^fc weight: Float8Tensor lm_head weight: Parameter$/m, r.out);
  });
});
