/**
 * PL306 end to end on the CPU: one command (`check --fix --unsafe-fixes`) on a project whose training script compiles
 * its model wraps the model in fp8_for_compile, and the generated code runs: the script trains (BF16 without a GPU,
 * the reason logged), and where a GPU with FP8 is there (faked: torch.cuda answers sm_90, bench/tests/fake_torchao's
 * convert_to_float8_training swaps the layers) the model gets torchao's Float8Linear on the layers that pay, the
 * lm-head and the small layers stay torch.nn.Linear, the parameters are the same objects (the optimizer built before
 * keeps them) and the checkpoint keys do not change. Runs with PL_PYTHON (npm run test:python: torch 2.13 and 1.13).
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../temp-dirs';
import { fakeGpu, oneCommand, PYTHON, python } from './run-python';

const ROOT = join(__dirname, '..', '..');
const PROJECT = join(ROOT, 'test', 'fixtures', 'compile-project');
const FAKE_TORCHAO = join(ROOT, 'bench', 'tests', 'fake_torchao');
const hasTorch = spawnSync(PYTHON, ['-c', 'import torch'], { timeout: 120_000 }).status === 0;
/** The real torchao 0.18 (scripts/ptq-venv.sh: .venv-ptq, torch 2.13 CPU), where it is installed. */
const TORCHAO_PYTHON = process.env.PL_PTQ_PYTHON ?? join(ROOT, '.venv-ptq', 'bin', 'python');
const hasTorchao = existsSync(TORCHAO_PYTHON) && spawnSync(TORCHAO_PYTHON, ['-c', 'import torchao.float8'], { timeout: 120_000 }).status === 0;


/** torch.cuda as a GPU of this compute capability would answer it (the model stays on the CPU). */

describe(`PL306: a compiled model converted by one command trains (${PYTHON})`, function () {
  this.timeout(600_000);
  let dir = '';

  before(function () {
    dir = tempDir('pl-compile-');
    cpSync(PROJECT, dir, { recursive: true });
    // The fixture's width (1024) is predicted to lose in FP8 at the default tokens per step: PL306 then stays quiet.
    const r = oneCommand(dir);
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    assert.match(r.stderr, /applied 1 fix in 1 file/);
  });

  it('wraps the compiled model in fp8_for_compile, leaves model.py as written and writes the fallback module', function () {
    const train = readFileSync(join(dir, 'train.py'), 'utf8');
    assert.match(train, /^from fp8_fallback import fp8_for_compile$/m);
    assert.match(train, /^ {4}model = torch\.compile\(fp8_for_compile\(model\), backend="eager"\)/m);
    assert.equal(readFileSync(join(dir, 'model.py'), 'utf8'), readFileSync(join(PROJECT, 'model.py'), 'utf8'));
    assert.match(readFileSync(join(dir, 'fp8_fallback.py'), 'utf8'), /^def fp8_for_compile\(model, keep=\(\)\):$/m);
  });

  it('the converted script trains on the CPU; under torch.compile the reason it stays BF16 is logged', function () {
    if (!hasTorch) this.skip();
    const r = spawnSync(PYTHON, ['train.py'], { encoding: 'utf8', timeout: 300_000, cwd: dir, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
    assert.equal(r.stdout.match(/^step \d: loss \d+\.\d+$/gm)?.length, 3, r.stdout);
    const compiles = python('import torch; print(hasattr(torch, "compile"))', dir).stdout.trim() === 'True';
    // torch 1.13 has no torch.compile: the script's `if compile:` never calls it, and nothing is logged.
    if (compiles) assert.match(r.stdout, /^Running in BF16 fallback \(torch\.compile\): no CUDA device$/m);
    else assert.doesNotMatch(r.stdout, /Running in/);
  });

  it('on a GPU with FP8 and torchao: Float8Linear where it pays, the lm-head and small layers kept, same parameters and keys', function () {
    if (!hasTorch) this.skip();
    const r = python([
      ...fakeGpu('(9, 0)'),
      'from model import GPT',
      'from fp8_fallback import fp8_for_compile',
      'torch.manual_seed(0)',
      'model = GPT()',
      'before = {n: id(p) for n, p in model.named_parameters()}',
      'keys = sorted(model.state_dict())',
      'opt = torch.optim.AdamW(model.parameters(), lr=1e-3)',
      'assert fp8_for_compile(model) is model',
      'print("same parameters:", {n: id(p) for n, p in model.named_parameters()} == before)',
      'print("same keys:", sorted(model.state_dict()) == keys)',
      'print("types:", " ".join("%s=%s" % (n, type(m).__name__) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)))',
      'idx = torch.randint(0, 1024, (2, 16))',
      'with torch.autocast("cpu", dtype=torch.bfloat16):',
      '    _, loss = model(idx, idx)',
      'loss.backward()',
      'opt.step()',
      'print("trained:", all(p.grad is not None for p in model.parameters()))',
    ].join('\n'), dir, [FAKE_TORCHAO]);
    assert.equal(r.status, 0, r.output);
    assert.match(r.stdout, /^Running in FP8 mode for torch\.compile: torchao float8 training \(tensorwise\), 4 of 9 Linear layers$/m);
    assert.match(r.stdout, /^FP8: 5 layer\(s\) kept in BF16: blocks\.0\.c_out \(4096 x 1024 is too small for FP8 to pay\); blocks\.0\.c_proj \(1024 x 1024 is too small for FP8 to pay\); .*; lm_head \(lm-head tied to the token embedding\)$/m);
    const types = /^types: (.*)$/m.exec(r.stdout)![1].split(' ');
    assert.deepEqual(types.filter((t) => t.endsWith('=Float8Linear')).map((t) => t.split('=')[0]).sort(), ['blocks.0.c_attn', 'blocks.0.c_fc', 'blocks.1.c_attn', 'blocks.1.c_fc']);
    assert.ok(types.includes('lm_head=Linear'), r.stdout);
    assert.match(r.stdout, /^same parameters: True$/m);
    assert.match(r.stdout, /^same keys: True$/m);
    assert.match(r.stdout, /^trained: True$/m);
  });

  it('with the real torchao 0.18 (.venv-ptq): its Float8Linear on the same layers, same parameters and keys, and a step runs', function () {
    // scripts/ptq-venv.sh creates it (CI does); once per test:python, in the run with the current torch.
    if (!hasTorchao || python('import torch; print(int(torch.__version__.split(".")[0]) >= 2)', dir).stdout.trim() !== 'True') this.skip();
    const r = python([
      ...fakeGpu('(9, 0)'),
      'from model import GPT',
      'from fp8_fallback import fp8_for_compile',
      'model = GPT()',
      'before = {n: id(p) for n, p in model.named_parameters()}',
      'keys = sorted(model.state_dict())',
      'fp8_for_compile(model)',
      'print("float8:", " ".join(sorted(n for n, m in model.named_modules() if type(m).__module__.startswith("torchao.float8"))))',
      'print("same:", {n: id(p) for n, p in model.named_parameters()} == before, sorted(model.state_dict()) == keys)',
      'idx = torch.randint(0, 1024, (2, 16))',
      'with torch.autocast("cpu", dtype=torch.bfloat16):',
      '    _, loss = model(idx, idx)',
      'loss.backward()',
      'print("loss:", loss.item() > 0)',
    ].join('\n'), dir, [], TORCHAO_PYTHON);
    assert.equal(r.status, 0, r.output);
    assert.match(r.stdout, /^Running in FP8 mode for torch\.compile: torchao float8 training \(tensorwise\), 4 of 9 Linear layers$/m);
    assert.match(r.stdout, /^float8: blocks\.0\.c_attn blocks\.0\.c_fc blocks\.1\.c_attn blocks\.1\.c_fc$/m);
    assert.match(r.stdout, /^same: True True$/m);
    assert.match(r.stdout, /^loss: True$/m);
  });

  for (const [what, code, mode] of [
    ['a GPU without FP8 (sm_80)', fakeGpu('(8, 0)'), /^Running in BF16 fallback \(torch\.compile\): Fake GPU \(sm_80\) has no FP8 GEMMs \(compute capability 8\.9 or more\)$/m],
    ['no torchao', [...fakeGpu('(9, 0)'), 'import sys', 'sys.modules["torchao"] = None'], /^Running in BF16 fallback \(torch\.compile\): torchao's float8 training is not installed \(pip install torchao\): /m],
  ] as const) {
    it(`${what}: the model as it is, the reason logged`, function () {
      if (!hasTorch) this.skip();
      const r = python([...code, 'from model import GPT', 'from fp8_fallback import fp8_for_compile', 'model = fp8_for_compile(GPT())',
        'print("linears:", sorted({type(m).__name__ for m in model.modules() if isinstance(m, torch.nn.Linear)}))'].join('\n'), dir, [FAKE_TORCHAO]);
      assert.equal(r.status, 0, r.output);
      assert.match(r.stdout, mode);
      assert.match(r.stdout, /^linears: \['Linear'\]$/m);
    });
  }
});
