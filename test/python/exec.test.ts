/**
 * Execution tests (SCENARIOS.md journey 2): model files converted by the real fixes ("convert all", the fallback
 * wrapper, the training step under FP8 autocast) must still train where Transformer Engine is absent, on the CPU, in
 * the BF16 fallback. `npm run test:python` runs this file once per supported torch: PL_PYTHON is the interpreter
 * (a venv with a current CPU torch, and Debian's python3-torch 1.13 as the oldest supported one); without
 * PL_PYTHON it is /usr/bin/python3. The tests skip, saying why, when that interpreter has no torch.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { settingsWith } from '../unit/fixes-support';
import { convertExample, EXAMPLE_INPUT } from './convert-example';
import { tempDir } from '../temp-dirs';

const PYTHON = process.env.PL_PYTHON || '/usr/bin/python3';
const LLAMA_INPUT = join(__dirname, '..', 'fixtures', 'fixes', 'exec_llama.py');

/** The interpreter's torch version as a [major, minor] pair, undefined when torch does not import. */
function torchVersion(): [number, number] | undefined {
  const r = spawnSync(PYTHON, ['-c', 'import torch; print(torch.__version__)'], { encoding: 'utf8', timeout: 120_000 });
  const m = r.status === 0 ? /^(\d+)\.(\d+)/.exec(r.stdout.trim()) : null;
  return m ? [Number(m[1]), Number(m[2])] : undefined;
}
const TORCH = torchVersion();
const atLeast = (major: number, minor: number) => !!TORCH && (TORCH[0] > major || (TORCH[0] === major && TORCH[1] >= minor));

function runPython(args: string[], cwd: string): { status: number | null; stdout: string; output: string } {
  const run = spawnSync(PYTHON, args, { encoding: 'utf8', timeout: 400_000, cwd, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
  return { status: run.status, stdout: run.stdout ?? '', output: `${run.stdout ?? ''}${run.stderr ?? ''}${run.error ? String(run.error) : ''}` };
}

/** Runs Python code with `dir` and the benchmark's fake Transformer Engine (bench/tests/fake_te) importable. */
function runWithFakeTe(code: string, dir: string, env: NodeJS.ProcessEnv = {}): { status: number | null; stdout: string; output: string } {
  const run = spawnSync(PYTHON, ['-c', code], {
    encoding: 'utf8', timeout: 120_000, cwd: dir,
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', ...env, PYTHONPATH: [dir, join(__dirname, '..', '..', 'bench', 'tests', 'fake_te')].join(':') },
  });
  return { status: run.status, stdout: run.stdout ?? '', output: `${run.stdout ?? ''}${run.stderr ?? ''}${run.error ? String(run.error) : ''}` };
}

function scratch(name: string, text: string): { dir: string; file: string } {
  const dir = tempDir('pl-exec-');
  const file = join(dir, name);
  writeFileSync(file, text);
  return { dir, file };
}

describe(`fixes: converted models train without Transformer Engine (${PYTHON}, torch ${TORCH ? TORCH.join('.') : 'missing'})`, function () {
  this.timeout(450_000);
  for (const apiVersion of ['modern', 'legacy'] as const) {
    it(`GPT style, ${apiVersion} TE API: converts, runs 3 steps on CPU and logs the BF16 fallback`, async function () {
      if (!TORCH) this.skip();
      const { text, applied } = await convertExample(readFileSync(EXAMPLE_INPUT, 'utf8'), settingsWith({ apiVersion }));
      // One action converts and brings in the fallback; "Insert FP8 fallback wrapper" then has nothing left to do.
      assert.equal(applied.length, 2, `applied: ${applied.join('; ')}`);
      assert.match(applied[0], /^Convert 7 layers in this file to FP8 \(with fallback; fusing 2 norms into te\.LayerNormLinear; skipped 3: 2 embedding, lm-head\)$/);
      assert.match(applied[1], /^Wrap the training step in FP8 autocast/);
      assert.doesNotMatch(text, /^import transformer_engine/m, 'no bare TE import');
      assert.match(text, apiVersion === 'modern' ? /te\.autocast\(enabled=enabled, recipe=/ : /te\.fp8_autocast\(enabled=enabled, fp8_recipe=/);
      // The lm-head and the embeddings are untouched; backward() stays outside the autocast block.
      assert.match(text, /self\.lm_head = nn\.Linear\(n_embd, vocab_size, bias=False\)/);
      assert.match(text, /self\.wte = nn\.Embedding\(/);
      assert.match(text, /\n {8}with fp8_autocast_context\(\):\n {12}logits, loss = model\(idx, targets\)\n {8}loss\.backward\(\)/);
      const dir = tempDir('pl-exec-');
      const file = join(dir, 'converted.py');
      writeFileSync(file, text);
      const run = runPython([file], dir);
      const output = run.output;
      assert.equal(run.status, 0, output);
      assert.match(run.stdout, /^Running in BF16 fallback: Transformer Engine not installed/m);
      assert.equal(run.stdout.match(/Running in /g)?.length, 1, 'the mode is logged once');
      assert.equal(run.stdout.match(/^step \d: loss \d+\.\d+$/gm)?.length, 3, output);
    });
  }

  for (const [recipe, env, mode] of [
    ['MXFP8BlockScaling', {}, /^Running in BF16 fallback: MXFP8BlockScaling is not supported here: Device compute capability 10\.0 or higher required for MXFP8 execution\.$/m],
    ['MXFP8BlockScaling', { FAKE_TE_MXFP8: '1' }, /^Running in FP8 mode on Fake GPU \(sm_100\), recipe MXFP8BlockScaling$/m],
    ['Float8BlockScaling', { FAKE_TE_FP8_BLOCK: '0' }, /^Running in BF16 fallback: Float8BlockScaling is not supported here: FP8 block scaled GEMM requires compute capability 9\.0/m],
  ] as const) {
    it(`${recipe}: the wrapper asks TE whether this GPU runs the recipe (${JSON.stringify(env)})`, async function () {
      if (!TORCH) this.skip();
      const { text } = await convertExample(readFileSync(EXAMPLE_INPUT, 'utf8'), settingsWith({ recipe }));
      const dir = tempDir('pl-exec-');
      writeFileSync(join(dir, 'converted.py'), text);
      // A GPU that has FP8 (the fake TE says so) as seen from the generated code: is TE's recipe check consulted?
      const probe = [
        'import torch',
        'torch.cuda.is_available = lambda: True',
        'torch.cuda.get_device_capability = lambda *a: (10, 0)',
        'torch.cuda.get_device_name = lambda *a: "Fake GPU"',
        'import converted',
        'converted.fp8_available()',
      ].join('\n');
      const run = runWithFakeTe(probe, dir, env);
      assert.equal(run.status, 0, run.output);
      assert.match(run.stdout, mode);
    });
  }

  it('Llama style on current torch: nn.RMSNorm stays nn.RMSNorm in the fallback, torch.compile compiles it, autocast is BF16', async function () {
    if (!atLeast(2, 4)) {
      // torch.nn.RMSNorm first shipped in torch 2.4: the fixture itself needs it.
      this.test!.title += ` (skipped: torch ${TORCH ? TORCH.join('.') : 'missing'} has no nn.RMSNorm)`;
      this.skip();
    }
    const { text, applied } = await convertExample(readFileSync(LLAMA_INPUT, 'utf8'));
    // One action converts and brings in the fallback; the training step is wrapped in its autocast context.
    assert.deepEqual(applied, [
      'Convert 10 layers in this file to FP8 (with fallback; attention through fp8_attention; skipped 2: embedding, lm-head)',
      'Wrap the training step in FP8 autocast (backward() stays outside)',
    ]);
    assert.match(text, /self\.attn_norm = fp8_rmsnorm\(dim, eps=1e-6\)/);
    assert.match(text, /self\.output = nn\.Linear\(dim, vocab_size, bias=False\)/);
    const { dir } = scratch('converted_llama.py', text);
    // Train through the file's own train() (torch.compile, the fallback autocast), then check what actually ran.
    const check = [
      'import sys, torch, torch._dynamo',
      'sys.path.insert(0, ".")',
      'import converted_llama as m',
      'seen = []',
      'orig = torch.autocast.__init__',
      'def spy(self, device_type, *a, **k):',
      '    orig(self, device_type, *a, **k); seen.append((device_type, str(self.fast_dtype)))',
      'torch.autocast.__init__ = spy',
      'm.train()',
      'model = m.Llama()',
      'print("norm:", type(model.norm).__module__ + "." + type(model.norm).__name__)',
      'print("linear:", type(model.layers[0].wq).__module__ + "." + type(model.layers[0].wq).__name__)',
      'print("graphs:", torch._dynamo.utils.counters["stats"]["unique_graphs"])',
      'print("autocast:", sorted(set(seen)))',
    ].join('\n');
    const run = runPython(['-c', check], dir);
    assert.equal(run.status, 0, run.output);
    assert.match(run.stdout, /^Running in BF16 fallback: Transformer Engine not installed$/m);
    assert.equal(run.stdout.match(/^step \d: loss \d+\.\d+$/gm)?.length, 3, run.output);
    assert.match(run.stdout, /^norm: torch\.nn\.modules\.normalization\.RMSNorm$/m);
    assert.match(run.stdout, /^linear: torch\.nn\.modules\.linear\.Linear$/m);
    const graphs = Number(/^graphs: (\d+)$/m.exec(run.stdout)?.[1] ?? 0);
    assert.ok(graphs >= 1, `torch.compile compiled no graph:\n${run.output}`);
    assert.match(run.stdout, /^autocast: \[\('cpu', 'torch\.bfloat16'\)\]$/m, run.output);
  });
});

describe('fixes: layer classes with behaviour of their own survive "convert all" on the fallback path', function () {
  this.timeout(450_000);
  const input = join(__dirname, '..', 'fixtures', 'fixes', 'exec_semantics.py');

  it('keeps a weight-casting subclass and a float32 norm subclass on the fallback path, maps the flag-switched offset, converts the Sequential, and runs on CPU', async function () {
    if (!TORCH) this.skip();
    const { text, applied } = await convertExample(readFileSync(input, 'utf8'), settingsWith({}));
    assert.match(applied[0], /^Convert 7 layers in this file to FP8 \(with fallback; fusing 1 norm into te\.LayerNormLinear; skipped 2: embedding, lm-head\)$/, applied.join('; '));
    // CastLinear casts its weight to the input's dtype, as te.Linear does: converted, with CastLinear itself kept for
    // the fallback (torch.nn.Linear would meet a BF16 input with its FP32 weight).
    // self.norm feeds only qkv: where FP8 runs the two become one te.LayerNormLinear (its zero_centered_gamma follows the flag).
    assert.match(text, /self\.qkv = fp8_fuse_norm\(self\.norm, fp8_parallel_linear\(lambda: CastLinear\(dim, 3 \* dim, bias=False\), dim, 3 \* dim, bias=False\)\)/);
    // Fp32LayerNorm computes in float32, as te.LayerNorm does inside its kernel (te.LayerNorm returns its weights' dtype): converted, with Fp32LayerNorm itself
    // kept for the fallback (the fallback's nn.LayerNorm would meet a BF16 input with its FP32 weight).
    assert.match(text, /self\.ln = fp8_layernorm_or\(lambda: Fp32LayerNorm\(dim\), dim\)/);
    // The (1 + weight) offset follows the constructor flag, as the same expression.
    assert.match(text, /self\.norm = fp8_rmsnorm\(dim, zero_centered_gamma=offset, eps=1e-6\)/);
    // Every element of the Sequential converts, the LayerNorm and both Linears beside it.
    assert.match(text, /nn\.Sequential\(fp8_layernorm\(dim\), fp8_linear\(dim, hidden\), nn\.GELU\(\), fp8_linear\(hidden, dim\)\)/);
    const dir = tempDir('pl-exec-sem-');
    const file = join(dir, 'converted.py');
    writeFileSync(file, text);
    const run = runPython([file], dir);
    const output = run.output;
    assert.equal(run.status, 0, output);
    assert.match(run.stdout, /^Running in BF16 fallback/m);
    assert.equal(run.stdout.match(/^step \d: loss \d+\.\d+$/gm)?.length, 2, output);
    // Forward outside autocast (BF16 activations, FP32 weights): the casting layers still cast.
    assert.match(run.stdout, /^eval: logits \(2, 16, 256\)$/m, output);
  });
});

/** Python lines (after `import sys, torch`) that make this process an H100 with TE: CUDA queries answer for Hopper,
 *  the fake TE (test/python/fake_te) is importable. */
const FAKE_HOPPER = [
  `sys.path.insert(0, ${JSON.stringify(join(__dirname, 'fake_te'))})`,
  'torch.cuda.is_available = lambda: True',
  'torch.cuda.get_device_capability = lambda *a: (9, 0)',
  'torch.cuda.get_device_name = lambda *a: "Fake H100"',
  'torch.cuda.is_bf16_supported = lambda: True',
];

describe('fixes: norms whose bias is decided at run time convert with the flag checked where they are built', function () {
  this.timeout(450_000);
  const input = join(__dirname, '..', 'fixtures', 'fixes', 'norm_bias_at_run_time.py');
  const fakeGpu = (file: string) => [
    'import runpy, sys, torch',
    ...FAKE_HOPPER,
    `runpy.run_path(${JSON.stringify(file)}, run_name="__main__")`,
  ].join('\n');

  it('builds te.LayerNorm only while config.bias is True, the norm as written otherwise, and computes what the original did', async function () {
    if (!TORCH) this.skip();
    const original = runPython([input], join(__dirname, '..', 'fixtures', 'fixes'));
    assert.equal(original.status, 0, original.output);
    const { text } = await convertExample(readFileSync(input, 'utf8'), settingsWith({}));
    assert.match(text, /self\.ln_1 = fp8_layernorm_or\(lambda: LayerNorm\(config\.n_embd, bias=config\.bias\), config\.n_embd, when=config\.bias\)/);
    assert.match(text, /self\.ln_2 = fp8_layernorm_or\(lambda: nn\.LayerNorm\(config\.n_embd, elementwise_affine=config\.bias\), config\.n_embd, when=config\.bias\)/);
    const { dir, file } = scratch('converted.py', text);
    // Without TE: every norm as written (ln_f, bias=True literally, becomes torch.nn.LayerNorm), the same outputs.
    const bf16 = runPython([file], dir);
    assert.equal(bf16.status, 0, bf16.output);
    assert.match(bf16.stdout, /^Running in BF16 fallback/m);
    const lines = (out: string) => out.split('\n').filter((l) => l.startsWith('bias='));
    const sums = (out: string) => lines(out).map((l) => Number(/sum (-?[\d.]+)/.exec(l)![1]));
    assert.match(bf16.stdout, /^bias=True: __main__\.LayerNorm torch\.LayerNorm torch\.LayerNorm, 384 parameters/m, bf16.output);
    assert.match(bf16.stdout, /^bias=False: __main__\.LayerNorm torch\.LayerNorm torch\.LayerNorm, 192 parameters/m, bf16.output);
    sums(bf16.stdout).forEach((v, i) => assert.ok(Math.abs(v - sums(original.stdout)[i]) < 1e-3, `${v} vs ${sums(original.stdout)[i]}`));
    // FP8 available (fake TE on a faked Hopper): te.LayerNorm for the bias=True builds only; the parameters match.
    const fp8 = runPython(['-c', fakeGpu(file)], dir);
    assert.equal(fp8.status, 0, fp8.output);
    assert.match(fp8.stdout, /^Running in FP8/m, fp8.output);
    assert.match(fp8.stdout, /^bias=True: transformer_engine\.LayerNorm transformer_engine\.LayerNorm transformer_engine\.LayerNorm, 384 parameters/m, fp8.output);
    assert.match(fp8.stdout, /^bias=False: __main__\.LayerNorm torch\.LayerNorm transformer_engine\.LayerNorm, 192 parameters/m, fp8.output);
  });
});

describe('fixes: norms built from a norm_layer parameter run on the fallback path and plan te.* only for the checked class', function () {
  this.timeout(450_000);
  const input = join(__dirname, '..', 'fixtures', 'fixes', 'norm_layer_param.py');

  it('builds the class passed in as written without FP8, and _pl_norm_from plans te.* only for a plain norm of the checked class', async function () {
    if (!TORCH) this.skip();
    const { text } = await convertExample(readFileSync(input, 'utf8'), settingsWith({}));
    assert.match(text, /self\.pre = fp8_layernorm_from\(norm_layer, nn\.LayerNorm, dim, \*\*dd\)/);
    // What the factory would build where FP8 runs: (shape, eps, te keyword arguments), or None for the class as written.
    const probe = [
      '',
      'print("plan default:", _pl_norm_from(nn.LayerNorm, (nn.LayerNorm, torch.nn.LayerNorm), (32,), {"device": None, "dtype": None}, 1e-5))',
      'print("plan partial:", _pl_norm_from(partial(nn.LayerNorm, eps=1e-6), (nn.LayerNorm,), (32,), {"dtype": torch.bfloat16}, 1e-5))',
      'print("plan no affine:", _pl_norm_from(partial(nn.LayerNorm, elementwise_affine=False), (nn.LayerNorm,), (32,), {}, 1e-5))',
      'print("plan own class:", _pl_norm_from(ScaledNorm, (nn.LayerNorm,), (32,), {}, 1e-5))',
      'print("plan own eps default:", _pl_norm_from(ScaledNorm, (ScaledNorm,), (32,), {}, 1e-5))',
      'print("is class:", fp8_is_class(partial(partial(nn.LayerNorm, eps=1e-6)), nn.LayerNorm), fp8_is_class(ScaledNorm, nn.LayerNorm, None))',
      '',
    ].join('\n');
    const { dir, file } = scratch('converted.py', `${text}${probe}`);
    const run = runPython([file], dir);
    assert.equal(run.status, 0, run.output);
    assert.match(run.stdout, /^Running in BF16 fallback/m);
    assert.match(run.stdout, /^default: LayerNorm LayerNorm$/m, run.output);
    assert.match(run.stdout, /^eps: LayerNorm LayerNorm$/m, run.output);
    assert.match(run.stdout, /^own: ScaledNorm LayerNorm$/m, run.output);
    assert.match(run.stdout, /^plan default: \(32, 1e-05, \{\}\)$/m, run.output);
    assert.match(run.stdout, /^plan partial: \(32, 1e-06, \{'params_dtype': torch\.bfloat16\}\)$/m, run.output);
    assert.match(run.stdout, /^plan no affine: None$/m, run.output);
    assert.match(run.stdout, /^plan own class: None$/m, run.output);
    assert.match(run.stdout, /^plan own eps default: \(32, 1e-05, \{\}\)$/m, run.output);
    assert.match(run.stdout, /^is class: True False$/m, run.output);
  });
});

describe('fixes: Linear layers whose class is chosen at run time run on both paths and build te.Linear only for nn.Linear', function () {
  this.timeout(450_000);
  const input = join(__dirname, '..', 'fixtures', 'fixes', 'linear_layer_choice.py');

  it('without TE the classes as written (Linear, or the 1x1 Conv2d with use_conv); with FP8 (the fake TE) te.Linear for nn.Linear only', async function () {
    if (!TORCH) this.skip();
    const { text } = await convertExample(readFileSync(input, 'utf8'), settingsWith({}));
    assert.match(text, /self\.fc1 = fp8_linear_from\(linear_layer, nn\.Linear, in_features, hidden_features, bias=bias, \*\*dd\)/);
    const { dir, file } = scratch('converted.py', text);
    const plain = runPython([file], dir);
    assert.equal(plain.status, 0, plain.output);
    assert.match(plain.stdout, /^Running in BF16 fallback/m);
    assert.match(plain.stdout, /^use_conv=False: Linear Linear Linear Linear$/m, plain.output);
    assert.match(plain.stdout, /^use_conv=True: Conv2d Conv2d Conv2d Conv2d$/m, plain.output);
    // A GPU with FP8 as the generated code sees it (the fake TE's te.Linear is a torch.nn.Linear subclass on the CPU).
    const probe = [
      'import torch',
      'from functools import partial',
      'torch.cuda.is_available = lambda: True',
      'torch.cuda.get_device_capability = lambda *a: (9, 0)',
      'torch.cuda.get_device_name = lambda *a: "Fake GPU"',
      'import converted as c',
      'def kinds(m): return " ".join("%s.%s" % (type(x).__module__.split(".")[0], type(x).__name__) for x in (m.fc1, m.fc2))',
      'print("linear:", kinds(c.Mlp(32, 64, device="cpu")))',
      'print("conv:", kinds(c.Mlp(32, 64, use_conv=True, device="cpu")))',
      'print("odd:", kinds(c.Mlp(30, 64, device="cpu")))',
      'print("own:", type(c.Head(32, 10, head_layer=partial(torch.nn.Linear, bias=False, device="cpu")).proj).__module__.split(".")[0])',
      'print("plan:", c._pl_linear_from(partial(torch.nn.Linear, bias=False), (torch.nn.Linear,), (32, 64), {"dtype": torch.bfloat16, "device": None}))',
      'print("plan keywords:", c._pl_linear_from(torch.nn.Linear, (torch.nn.Linear,), (32,), {"out_features": 64}))',
      'print("plan conv:", c._pl_linear_from(partial(torch.nn.Conv2d, kernel_size=1), (torch.nn.Linear,), (32, 64), {}))',
      'print("plan twice:", c._pl_linear_from(torch.nn.Linear, (torch.nn.Linear,), (32, 64), {"in_features": 3}))',
    ].join('\n');
    const run = runWithFakeTe(probe, dir);
    const out = run.output;
    assert.equal(run.status, 0, out);
    assert.match(run.stdout, /^Running in FP8 mode on Fake GPU \(sm_90\)/m, out);
    assert.match(run.stdout, /^linear: transformer_engine\.Linear transformer_engine\.Linear$/m, out);
    assert.match(run.stdout, /^conv: torch\.Conv2d torch\.Conv2d$/m, out);
    // 30 -> 64 and 64 -> 30 break the FP8 shape rule: the class as written, not te.Linear.
    assert.match(run.stdout, /^odd: torch\.Linear torch\.Linear$/m, out);
    assert.match(run.stdout, /^own: transformer_engine$/m, out);
    assert.match(run.stdout, /^plan: \(32, 64, False, \{'params_dtype': torch\.bfloat16\}\)$/m, out);
    assert.match(run.stdout, /^plan keywords: \(32, 64, True, \{\}\)$/m, out);
    assert.match(run.stdout, /^plan conv: None$/m, out);
    assert.match(run.stdout, /^plan twice: None$/m, out);
  });
});

describe('fixes: a norm class looked up by a string parameter runs on both paths and builds te.LayerNorm only for nn.LayerNorm', function () {
  this.timeout(450_000);
  const input = join(__dirname, '..', 'fixtures', 'fixes', 'norm_name_default.py');

  it('without TE the classes as written; with FP8 (the fake TE) te.LayerNorm for "LayerNorm" or nn.LayerNorm passed, each computing what the original computed', async function () {
    if (!TORCH) this.skip();
    const { text } = await convertExample(readFileSync(input, 'utf8'), settingsWith({}));
    assert.match(text, /self\.norm = fp8_layernorm_from\(norm_name, nn\.LayerNorm, width\)/);
    const { dir, file } = scratch('converted.py', text);
    writeFileSync(join(dir, 'orig.py'), readFileSync(input, 'utf8'));
    const plain = runPython([file], dir);
    assert.equal(plain.status, 0, plain.output);
    assert.match(plain.stdout, /^Running in BF16 fallback/m);
    assert.match(plain.stdout, /^default: LayerNorm 1e-06$/m, plain.output);
    assert.match(plain.stdout, /^class: LayerNorm 0\.001$/m, plain.output);
    assert.match(plain.stdout, /^own: OwnNorm 1e-05$/m, plain.output);
    // A GPU with FP8 as the generated code sees it; the fake TE's layers are built on the CPU. The original's
    // state_dict loads into the converted model, whose output must equal the original's.
    const cases = ['("default", "LayerNorm")', '("class", partial(torch.nn.LayerNorm, eps=1e-3))', '("own", "OwnNorm")', ...(atLeast(2, 4) ? ['("rms", "RMSNorm")'] : [])];
    const probe = [
      'import torch',
      'from functools import partial',
      'torch.cuda.is_available = lambda: True',
      'torch.cuda.get_device_capability = lambda *a: (9, 0)',
      'torch.cuda.get_device_name = lambda *a: "Fake GPU"',
      'import transformer_engine.pytorch as te',
      'for k in (te.Linear, te.LayerNorm):',
      '    k.__init__.__defaults__ = tuple("cpu" if d == "cuda" else d for d in k.__init__.__defaults__)',
      'import converted as c, orig',
      `for name, arg in [${cases.join(', ')}]:`,
      '    torch.manual_seed(0)',
      '    a = orig.Stage(norm_name=orig.OwnNorm if arg == "OwnNorm" else arg)',
      '    b = c.Stage(norm_name=c.OwnNorm if arg == "OwnNorm" else arg)',
      '    b.load_state_dict(a.state_dict())',
      '    x = torch.randn(4, 8, 32)',
      '    n = b.norm',
      '    print("%s: %s.%s %s same=%s" % (name, type(n).__module__.split(".")[0], type(n).__name__, getattr(n, "eps", None), torch.equal(a(x), b(x))))',
    ].join('\n');
    const run = runWithFakeTe(probe, dir);
    const out = run.output;
    assert.equal(run.status, 0, out);
    assert.match(run.stdout, /^Running in FP8 mode on Fake GPU \(sm_90\)/m, out);
    assert.match(run.stdout, /^default: transformer_engine\.LayerNorm 1e-06 same=True$/m, out);
    assert.match(run.stdout, /^class: transformer_engine\.LayerNorm 0\.001 same=True$/m, out);
    assert.match(run.stdout, /^own: converted\.OwnNorm 1e-05 same=True$/m, out);
    if (atLeast(2, 4)) assert.match(run.stdout, /^rms: torch\.RMSNorm 1e-06 same=True$/m, out);
  });
});

describe('fixes: a norm fused into te.LayerNormLinear or te.LayerNormMLP computes what the layers computed, keeps its checkpoint and trains', function () {
  this.timeout(450_000);
  const input = join(__dirname, '..', 'fixtures', 'fixes', 'fuse_blocks.py');

  it('without FP8 every layer as built; with FP8 (the fake TE) one te.LayerNormLinear per pair and one te.LayerNormMLP per MLP, the original state_dict loads strictly, same output and gradients, copies independent', async function () {
    if (!TORCH) this.skip();
    const { text } = await convertExample(readFileSync(input, 'utf8'), settingsWith({}));
    assert.match(text, /self\.attn = fp8_fuse_norm\(self\.ln_1, Attention\(dim, heads\), "qkv"\)/);
    assert.match(text, /self\.fc = fp8_fuse_norm\(self\.norm, fp8_linear\(dim, dim\)\)/);
    assert.match(text, /self\.norm = fp8_fuse_norm\(fp8_layernorm\(dim\), self, "fc", returns="norm"\)/);
    assert.match(text, /self\.mlp = fp8_fuse_mlp\(self\.ln_2, GatedMLP\(dim, 4 \* dim\), "gate", "down", up="up", activation="swiglu"\)/);
    assert.match(text, /self\.ffn_norm = fp8_fuse_mlp\(fp8_layernorm\(dim, eps=1e-6\), self\.feed_forward, "w1", "w2", up="w3", activation="swiglu", dropout="dropout", returns="norm"\)/);
    assert.match(text, /self\.mlp_norm = fp8_fuse_mlp\(fp8_layernorm\(dim\), self\.relu_mlp, "fc1", "fc2", activation="relu", returns="norm"\)/);
    const { dir } = scratch('converted.py', text);
    writeFileSync(join(dir, 'original.py'), readFileSync(input, 'utf8'));
    const probe = (fp8: boolean) => [
      'import copy, importlib, pickle, sys, torch',
      ...(fp8 ? FAKE_HOPPER : []),
      // Imported, not run by path: pickle finds the classes by module name.
      'conv = vars(importlib.import_module("converted"))',
      'orig = vars(importlib.import_module("original"))',
      'torch.manual_seed(0)',
      'ref = orig["Net"]()',
      'net = conv["Net"]()',
      'mlp = lambda m: type(m.__dict__.get("_pl_mlp")).__name__',
      'print("qkv:", type(net.blocks[0].attn.qkv).__name__, "fc:", type(net.proj.fc).__name__, "late:", type(net.late.fc).__name__, "shared:", type(net.shared.a).__name__)',
      'print("mlp:", mlp(net.blocks[0].mlp), "feed_forward:", mlp(net.llama.feed_forward), "relu_mlp:", mlp(net.llama.relu_mlp))',
      // The converted model's parameters are the original's, under the original's names (TE adds _extra_state).
      'missing, unexpected = net.load_state_dict(ref.state_dict(), strict=False)',
      'print("missing:", [k for k in missing if not k.endswith("_extra_state")], "unexpected:", unexpected)',
      'ref.load_state_dict({k: v for k, v in net.state_dict().items() if not k.endswith("_extra_state")}, strict=True)',
      'x = torch.randn(2, 16, 64)',
      'import contextlib',
      `region = lambda: ${fp8 ? '__import__("transformer_engine.pytorch", fromlist=["autocast"]).autocast()' : 'contextlib.nullcontext()'}`,
      'a = ref(x)',
      'with region():',
      '    b = net(x)',
      'print("max diff %.2e" % (a - b).abs().max().item())',
      'a.square().mean().backward()',
      'b.square().mean().backward()',
      'grads = dict(ref.named_parameters())',
      'worst = max(((p.grad - grads[n].grad).abs().max().item(), n) for n, p in net.named_parameters())',
      'print("grad diff %.2e" % worst[0], worst[1])',
      'print("no grad:", [n for n, p in net.named_parameters() if p.grad is None])',
      'print("parameters:", sum(p.numel() for p in net.parameters()), sum(p.numel() for p in ref.parameters()))',
      // A deep copy (an EMA model) computes with its own weights; a pickled model computes what the original does.
      'twin = copy.deepcopy(net)',
      'with torch.no_grad():',
      '    twin.llama.feed_forward.w2.weight.zero_()',
      'with region():',
      '    c, d, e = net(x), twin(x), pickle.loads(pickle.dumps(net))(x)',
      'print("copy independent:", bool((c - d).abs().max() > 0), "pickled diff %.2e" % (c - e).abs().max().item())',
      ...(fp8 ? ['import transformer_engine.pytorch as te', 'print("fused calls:", te.CALLS.count("layernorm_mlp"), te.CALLS.count("layernorm_linear"))'] : []),
      // A Linear of a fused MLP replaced afterwards (an adapter, a swapped layer): the MLP runs as written, with it.
      'with torch.no_grad():',
      '    ref.llama.feed_forward.w2 = torch.nn.Linear(96, 64, bias=False)',
      '    net.llama.feed_forward.w2 = conv["fp8_linear"](96, 64, bias=False)',
      '    net.llama.feed_forward.w2.weight.copy_(ref.llama.feed_forward.w2.weight)',
      '    with region():',
      '        print("replaced w2 diff %.2e" % (ref(x) - net(x)).abs().max().item())',
      // Asked to return the norm with no attribute to put the fused layer in, nothing is fused (the norm still normalises).
      'ln = conv["fp8_layernorm"](64)',
      'print("unplaced:", conv["fp8_fuse_norm"](ln, conv["fp8_linear"](64, 64), returns="norm") is ln, "forward" in vars(ln))',
    ].join('\n');
    const bf16 = runPython(['-c', probe(false)], dir);
    assert.equal(bf16.status, 0, bf16.output);
    assert.match(bf16.stdout, /^Running in BF16 fallback/m);
    assert.match(bf16.stdout, /^qkv: Linear fc: Linear late: Linear shared: Linear$/m, bf16.output);
    assert.match(bf16.stdout, /^mlp: NoneType feed_forward: NoneType relu_mlp: NoneType$/m, bf16.output);
    assert.match(bf16.stdout, /^missing: \[\] unexpected: \[\]$/m, bf16.output);
    assert.match(bf16.stdout, /^max diff 0\.00e\+00$/m, bf16.output);
    assert.match(bf16.stdout, /^grad diff 0\.00e\+00/m, bf16.output);
    const fp8 = runPython(['-c', probe(true)], dir);
    assert.equal(fp8.status, 0, fp8.output);
    assert.match(fp8.stdout, /^Running in FP8 mode on Fake H100/m, fp8.output);
    // The fused pairs are one te.LayerNormLinear; Shared (its norm feeds two Linears) stays te.Linear.
    assert.match(fp8.stdout, /^qkv: _PLNormLinear fc: _PLNormLinear late: _PLNormLinear shared: Linear$/m, fp8.output);
    assert.match(fp8.stdout, /^mlp: _PLNormMLP feed_forward: _PLNormMLP relu_mlp: _PLNormMLP$/m, fp8.output);
    assert.match(fp8.stdout, /^missing: \[\] unexpected: \[\]$/m, fp8.output);
    assert.ok(Number(/^max diff (\S+)$/m.exec(fp8.stdout)?.[1]) < 1e-5, fp8.output);
    // Gradients reach every parameter where it lives (the norms, w1 and w3 through the stacked fc1, w2), as the original's.
    assert.ok(Number(/^grad diff (\S+)/m.exec(fp8.stdout)?.[1]) < 1e-5, fp8.output);
    assert.match(fp8.stdout, /^no grad: \[\]$/m, fp8.output);
    const [n, m] = /^parameters: (\d+) (\d+)$/m.exec(fp8.stdout)!.slice(1).map(Number);
    assert.equal(n, m, 'the fused layers hold no parameter twice');
    assert.match(fp8.stdout, /^copy independent: True pickled diff 0\.00e\+00$/m, fp8.output);
    // Per forward four MLPs (two blocks' mlp, feed_forward, relu_mlp) and four LayerNormLinears (two blocks' qkv,
    // proj.fc, late.fc); four forwards (the model, its copy, the model again, the unpickled one).
    assert.match(fp8.stdout, /^fused calls: 16 16$/m, fp8.output);
    assert.match(fp8.stdout, /^unplaced: True False$/m, fp8.output);
    assert.ok(Number(/^replaced w2 diff (\S+)$/m.exec(fp8.stdout)?.[1]) < 1e-5, fp8.output);
  });
});

describe('fixes: a Hugging Face MLP whose activation the config chooses is fused where TE computes the same function', function () {
  this.timeout(450_000);
  const input = join(__dirname, '..', 'fixtures', 'fixes', 'fuse_hf_mlp.py');

  it('SiLU and tanh GELU become one te.LayerNormMLP (swiglu, geglu) computing what the layer computed; the exact GELU stays as built', async function () {
    if (!TORCH) this.skip();
    const { text } = await convertExample(readFileSync(input, 'utf8'), settingsWith({}));
    assert.match(text, /self\.post_attention_layernorm = fp8_fuse_mlp\(fp8_rmsnorm\(config\.hidden_size, eps=config\.rms_norm_eps\), self\.mlp, "gate_proj", "down_proj", up="up_proj", activation_from="act_fn", returns="norm"\)/);
    const { dir } = scratch('converted.py', text);
    writeFileSync(join(dir, 'original.py'), readFileSync(input, 'utf8'));
    const probe = [
      'import importlib, sys, torch',
      ...FAKE_HOPPER,
      'import transformer_engine.pytorch as te',
      'conv, orig = importlib.import_module("converted"), importlib.import_module("original")',
      'for act in ("silu", "gelu_pytorch_tanh", "quick_gelu", "gelu"):',
      '    torch.manual_seed(0)',
      '    ref = orig.DecoderLayer(orig.Config(hidden_act=act))',
      '    net = conv.DecoderLayer(conv.Config(hidden_act=act))',
      '    net.load_state_dict(ref.state_dict(), strict=False)',
      '    fused = net.mlp.__dict__.get("_pl_mlp")',
      '    x = torch.randn(2, 16, 64)',
      '    with te.autocast():',
      '        y = net(x)',
      '    print(act, type(fused).__name__, getattr(fused, "activation", None), "max diff %.2e" % (ref(x) - y).abs().max().item())',
    ].join('\n');
    const out = runPython(['-c', probe], dir);
    assert.equal(out.status, 0, out.output);
    assert.match(out.stdout, /^silu _PLNormMLP swiglu max diff (\S+)$/m, out.output);
    assert.match(out.stdout, /^gelu_pytorch_tanh _PLNormMLP geglu max diff (\S+)$/m, out.output);
    assert.match(out.stdout, /^quick_gelu _PLNormMLP qgeglu max diff (\S+)$/m, out.output);
    assert.match(out.stdout, /^gelu NoneType None max diff (\S+)$/m, out.output);
    for (const m of out.stdout.matchAll(/max diff (\S+)$/gm)) assert.ok(Number(m[1]) < 1e-5, out.output);
  });
});

/** Python lines that make the generated code see a GPU with FP8 and build the fake TE's layers on the CPU. */
const FAKE_GPU = [
  'import pickle',
  'import torch',
  'torch.cuda.is_available = lambda: True',
  'torch.cuda.get_device_capability = lambda *a: (9, 0)',
  'torch.cuda.get_device_name = lambda *a: "Fake GPU"',
  'import transformer_engine.pytorch as te',
  'for k in (te.Linear, te.LayerNorm, te.RMSNorm):',
  '    k.__init__.__defaults__ = tuple("cpu" if d == "cuda" else d for d in k.__init__.__defaults__)',
];

describe('fixes: norms that call their weight `scale` keep that checkpoint key on both paths', function () {
  this.timeout(450_000);
  const input = join(__dirname, '..', 'fixtures', 'fixes', 'norm_weight_name.py');

  it('without TE the classes as written; with FP8 (the fake TE) te.RMSNorm saving and loading .scale: the original\'s state_dict loads strictly, the output is the original\'s, and it loads back', async function () {
    if (!TORCH) this.skip();
    const source = readFileSync(input, 'utf8');
    const { text } = await convertExample(source, settingsWith({}));
    assert.match(text, /self\.sa_norm = fp8_rmsnorm_or\(lambda: RMSNorm\(dim=embed_dim, eps=norm_eps\), normalized_shape=embed_dim, eps=norm_eps, weight_name="scale"\)/);
    assert.match(text, /self\.out_norm = fp8_rmsnorm_or\(lambda: KRMSNorm\(embed_dim\), embed_dim, eps=1e-6, weight_name="scale"\)/);
    const { dir, file } = scratch('converted.py', text);
    writeFileSync(join(dir, 'original.py'), source);
    const plain = runPython([file], dir);
    assert.equal(plain.status, 0, plain.output);
    assert.match(plain.stdout, /^Running in BF16 fallback/m, plain.output);
    assert.match(plain.stdout, /^keys: mlp_norm\.scale out_norm\.scale sa_norm\.scale$/m, plain.output);
    const probe = [
      ...FAKE_GPU,
      'import original as o, converted as c',
      'torch.manual_seed(0)',
      'ref = o.Layer()',
      'with torch.no_grad():',
      '    for n in (ref.sa_norm, ref.mlp_norm, ref.out_norm): n.scale.uniform_(0.5, 2.0)',
      'new = c.Layer()',
      'print("types:", " ".join("%s.%s" % (type(n).__module__.split(".")[0], type(n).__name__) for n in (new.sa_norm, new.mlp_norm, new.out_norm)))',
      'print("keys:", " ".join(sorted(k for k in new.state_dict() if "norm" in k)))',
      'print("strict load:", new.load_state_dict(ref.state_dict(), strict=True))',
      'x = torch.randn(2, 16, 64)',
      'print("same output:", torch.allclose(ref(x), new(x), rtol=0, atol=1e-6))',
      'print("alias:", new.sa_norm.scale is new.sa_norm.weight, torch.equal(new.out_norm.scale, ref.out_norm.scale))',
      'back = o.Layer()',
      'print("round trip:", back.load_state_dict(new.state_dict(), strict=True), torch.equal(back(x), ref(x)))',
      'sd = ref.state_dict(); del sd["mlp_norm.scale"]',
      'print("missing:", new.load_state_dict(sd, strict=False).missing_keys)',
      // A loader that sets parameters by name, bypassing load_state_dict, finds none of the checkpoint's norm keys.
      'params = dict(new.named_parameters())',
      'print("by name, not found:", sorted(k for k in ref.state_dict() if k not in params))',
      'if hasattr(torch.nn.Module, "register_state_dict_post_hook"):  # torch >= 2.1 has assign=True',
      '    n2 = c.Layer(); n2.load_state_dict(ref.state_dict(), assign=True)',
      '    print("assign:", n2.sa_norm.scale is n2.sa_norm.weight, torch.allclose(n2(x), ref(x), rtol=0, atol=1e-6))',
      'p = pickle.loads(pickle.dumps(new))',
      'print("pickled:", " ".join(sorted(k for k in p.state_dict() if "norm" in k)))',
      'new(x).sum().backward()',
      'print("grad:", new.sa_norm.scale.grad is not None)',
    ].join('\n');
    const run = runWithFakeTe(probe, dir);
    const out = run.output;
    assert.equal(run.status, 0, out);
    assert.match(run.stdout, /^types: transformer_engine\.RMSNorm transformer_engine\.RMSNorm transformer_engine\.RMSNorm$/m, out);
    assert.match(run.stdout, /^keys: mlp_norm\.scale out_norm\.scale sa_norm\.scale$/m, out);
    assert.match(run.stdout, /^strict load: <All keys matched successfully>$/m, out);
    assert.match(run.stdout, /^same output: True$/m, out);
    assert.match(run.stdout, /^alias: True True$/m, out);
    assert.match(run.stdout, /^round trip: <All keys matched successfully> True$/m, out);
    assert.match(run.stdout, /^missing: \['mlp_norm\.scale'\]$/m, out);
    assert.match(run.stdout, /^by name, not found: \['mlp_norm\.scale', 'out_norm\.scale', 'sa_norm\.scale'\]$/m, out);
    if (atLeast(2, 1)) assert.match(run.stdout, /^assign: True True$/m, out);
    assert.match(run.stdout, /^pickled: mlp_norm\.scale out_norm\.scale sa_norm\.scale$/m, out);
    assert.match(run.stdout, /^grad: True$/m, out);
  });
});

describe("fixes: torchtune's GemmaRMSNorm (1 + scale) converts to te.RMSNorm(zero_centered_gamma=True) on both paths", function () {
  this.timeout(450_000);
  const input = join(__dirname, '..', 'fixtures', 'fixes', 'gemma_norm_imported.py');
  // torchtune itself is not installed here: a stand-in package with its GemmaRMSNorm's computation.
  const stub = join(__dirname, '..', 'fixtures', 'fixes', 'torchtune_stub');

  it('without TE the class as written; with FP8 (the fake TE) te.RMSNorm with zero_centered_gamma: the original\'s state_dict loads strictly, the output is the original\'s, a fresh norm starts at zeros, and it loads back', async function () {
    if (!TORCH) this.skip();
    const source = readFileSync(input, 'utf8');
    const { text } = await convertExample(source, { ...settingsWith({}), convertLosingLayers: true });
    // The Linear too (convertLosingLayers), with sa_norm fused into it: te.LayerNormLinear carries zero_centered_gamma.
    assert.match(text, /self\.proj = fp8_fuse_norm\(self\.sa_norm, fp8_linear\(embed_dim, embed_dim\)\)/);
    assert.match(text, /self\.sa_norm = fp8_rmsnorm_or\(lambda: GemmaRMSNorm\(embed_dim, eps=norm_eps\), embed_dim, eps=norm_eps, zero_centered_gamma=True, weight_name="scale"\)/);
    assert.match(text, /self\.mlp_norm = fp8_rmsnorm_or\(lambda: GemmaRMSNorm\(embed_dim\), embed_dim, eps=1e-6, zero_centered_gamma=True, weight_name="scale"\)/);
    const { dir, file } = scratch('converted.py', text);
    writeFileSync(join(dir, 'original.py'), source);
    cpSync(join(stub, 'torchtune'), join(dir, 'torchtune'), { recursive: true });
    const plain = runPython([file], dir);
    assert.equal(plain.status, 0, plain.output);
    assert.match(plain.stdout, /^Running in BF16 fallback/m, plain.output);
    assert.match(plain.stdout, /^keys: mlp_norm\.scale sa_norm\.scale$/m, plain.output);
    const probe = [
      ...FAKE_GPU,
      'import original as o, converted as c',
      'torch.manual_seed(0)',
      'ref = o.Block()',
      'with torch.no_grad():',
      '    for n in (ref.sa_norm, ref.mlp_norm): n.scale.uniform_(-0.5, 0.5)',
      'new = c.Block()',
      'print("types:", " ".join("%s.%s" % (type(n).__module__.split(".")[0], type(n).__name__) for n in (new.sa_norm, new.mlp_norm)))',
      'print("fresh:", all(bool((n.weight == 0).all()) and n.zero_centered_gamma for n in (new.sa_norm, new.mlp_norm)))',
      'print("strict load:", new.load_state_dict(ref.state_dict(), strict=True))',
      'x = torch.randn(2, 16, 64)',
      'print("same output:", torch.allclose(ref(x), new(x), rtol=0, atol=1e-5))',
      // mlp_norm stands alone (sa_norm runs inside the fused proj): the same (1 + scale) on its own too.
      'print("same norm:", torch.allclose(ref.mlp_norm(x), new.mlp_norm(x), rtol=0, atol=1e-6))',
      'back = o.Block()',
      'print("round trip:", back.load_state_dict(new.state_dict(), strict=True), torch.allclose(back(x), ref(x), rtol=0, atol=1e-6))',
    ].join('\n');
    const run = runWithFakeTe(probe, dir);
    const out = run.output;
    assert.equal(run.status, 0, out);
    assert.match(run.stdout, /^types: transformer_engine\.RMSNorm transformer_engine\.RMSNorm$/m, out);
    assert.match(run.stdout, /^fresh: True$/m, out);
    assert.match(run.stdout, /^strict load: <All keys matched successfully>$/m, out);
    assert.match(run.stdout, /^same output: True$/m, out);
    assert.match(run.stdout, /^same norm: True$/m, out);
    assert.match(run.stdout, /^round trip: <All keys matched successfully> True$/m, out);
  });
});

describe('fixes: a Linear passed **kwargs of unknown names converts through fp8_linear_from, checked when built', function () {
  this.timeout(450_000);
  const input = join(__dirname, '..', 'fixtures', 'fixes', 'linear_kwargs_passthrough.py');

  it('without TE torch.nn.Linear as written; with FP8 (the fake TE) te.Linear taking the names passed (bias=False), the original\'s state_dict loads strictly and the output is the original\'s', async function () {
    if (!TORCH) this.skip();
    const source = readFileSync(input, 'utf8');
    const { text } = await convertExample(source, settingsWith({}));
    assert.match(text, /self\.linear = fp8_linear_from\(torch\.nn\.Linear, torch\.nn\.Linear, in_features, out_features, \*\*kwargs\)/);
    const { dir, file } = scratch('converted.py', text);
    writeFileSync(join(dir, 'original.py'), source);
    const plain = runPython([file], dir);
    assert.equal(plain.status, 0, plain.output);
    assert.match(plain.stdout, /^Running in BF16 fallback/m, plain.output);
    assert.match(plain.stdout, /^bias: None$/m, plain.output);
    const probe = [
      ...FAKE_GPU,
      'import original as o, converted as c',
      'torch.manual_seed(0)',
      'ref = o.Block()',
      'new = c.Block()',
      'print("type:", type(new.attn.linear).__module__.split(".")[0], type(new.attn.linear).__name__, new.attn.linear.bias)',
      'print("strict load:", new.load_state_dict(ref.state_dict(), strict=True))',
      'x = torch.randn(2, 16, 2048)',
      'print("same output:", torch.allclose(ref(x), new(x), rtol=0, atol=1e-4))',
      // Arguments it cannot read as a Linear's own (a fourth positional, the device): built as written, and said.
      'import sys',
      'fallback = sys.modules[c.fp8_linear_from.__module__]',
      'kept = c.fp8_linear_from(torch.nn.Linear, torch.nn.Linear, 2048, 2048, True, "cpu")',
      'print("kept:", type(kept).__module__.split(".")[0], fallback._PL_KEPT[-1].split(": ", 1)[1])',
    ].join('\n');
    const run = runWithFakeTe(probe, dir);
    const out = run.output;
    assert.equal(run.status, 0, out);
    assert.match(run.stdout, /^kept: torch built as written, with arguments te\.Linear is not given here \(positional\)$/m, out);
    assert.match(run.stdout, /^type: transformer_engine Linear None$/m, out);
    assert.match(run.stdout, /^strict load: <All keys matched successfully>$/m, out);
    assert.match(run.stdout, /^same output: True$/m, out);
  });
});

describe("fixes: GPT-2's Conv1D converts through fp8_conv1d_or and keeps Conv1D's checkpoint on both paths", function () {
  this.timeout(450_000);
  const input = join(__dirname, '..', 'fixtures', 'fixes', 'conv1d_gpt2.py');
  // transformers itself is not installed here: a stand-in package with its Conv1D, as transformers defines it.
  const stub = join(__dirname, '..', 'fixtures', 'fixes', 'transformers_stub');

  it('without TE the Conv1D as written; with FP8 (the fake TE) te.Linear under .linear: the original\'s state_dict loads strictly (transposed), the output is the original\'s, it loads back, and a loader that bypasses the hooks finds no weight', async function () {
    if (!TORCH) this.skip();
    const source = readFileSync(input, 'utf8');
    const { text } = await convertExample(source, { ...settingsWith({}), convertLosingLayers: true });
    assert.match(text, /self\.c_attn = fp8_conv1d_or\(lambda: Conv1D\(3 \* self\.embed_dim, self\.embed_dim\), 3 \* self\.embed_dim, self\.embed_dim\)/);
    assert.match(text, /self\.q_attn = fp8_conv1d_or\(lambda: Conv1D\(self\.embed_dim, self\.embed_dim\), self\.embed_dim, self\.embed_dim\)/);
    assert.match(text, /self\.c_fc = fp8_conv1d_or\(lambda: Conv1D\(intermediate_size, embed_dim\), intermediate_size, embed_dim\)/);
    assert.match(text, /isinstance\(module, \(Conv1D, TE_LINEAR\)\)/);
    const { dir, file } = scratch('converted.py', text);
    writeFileSync(join(dir, 'original.py'), source);
    const run0 = spawnSync(PYTHON, [file], { encoding: 'utf8', timeout: 120_000, cwd: dir, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', PYTHONPATH: stub } });
    const plain = `${run0.stdout}${run0.stderr}`;
    assert.equal(run0.status, 0, plain);
    assert.match(run0.stdout, /^Running in BF16 fallback/m, plain);
    assert.match(run0.stdout, /^types: Conv1D Conv1D$/m, plain);
    assert.match(run0.stdout, /^keys: attn\.c_attn\.weight\[64, 192\] attn\.c_attn\.bias\[192\] attn\.c_proj\.weight\[64, 64\] attn\.c_proj\.bias\[64\]$/m, plain);
    const probe = [
      ...FAKE_GPU,
      'import original as o, converted as c',
      'from transformers.pytorch_utils import Conv1D',
      'torch.manual_seed(0)',
      'ref, new = o.Block(), c.Block()',
      'a = new.attn.c_attn',
      'print("type:", type(a).__name__, "%s.%s" % (type(a.linear).__module__.split(".")[0], type(a.linear).__name__), tuple(a.linear.weight.shape))',
      'print("same keys and shapes:", {k: v.shape for k, v in ref.state_dict().items()} == {k: v.shape for k, v in new.state_dict().items()})',
      'print("strict load:", new.load_state_dict(ref.state_dict(), strict=True))',
      'x = torch.randn(2, 16, 64)',
      'with torch.no_grad(): y, z = ref(x), new(x)',
      'print("same output:", torch.allclose(y, z, rtol=0, atol=1e-5))',
      'print("conv1d view:", tuple(new.attn.c_proj.weight.shape), torch.equal(new.mlp.c_fc.weight, ref.mlp.c_fc.weight), torch.equal(new.mlp.c_fc.bias, ref.mlp.c_fc.bias))',
      'back = o.Block()',
      'print("round trip:", back.load_state_dict(new.state_dict(), strict=True), torch.equal(back(x), ref(x)))',
      'sd = ref.state_dict(); del sd["attn.c_proj.weight"]',
      'print("missing:", new.load_state_dict(sd, strict=False).missing_keys)',
      // A loader that sets parameters by name, bypassing load_state_dict: no square weight loads untransposed.
      'params = dict(new.named_parameters())',
      'print("by name, not found:", sorted(k for k in ref.state_dict() if k not in params)[:4])',
      'try:',
      '    new.get_parameter("attn.c_proj.weight"); print("get_parameter: found")',
      'except AttributeError:',
      '    print("get_parameter: AttributeError")',
      'try:',
      '    new.attn.c_proj.weight = torch.nn.Parameter(torch.zeros(64, 64)); print("assigned: yes")',
      'except (KeyError, AttributeError) as e:',
      '    print("assigned:", type(e).__name__)',
      'print("odd:", type(c.fp8_conv1d_or(lambda: Conv1D(24, 64), 24, 64)).__name__)',
      'if hasattr(torch.nn.Module, "register_state_dict_post_hook"):  # torch >= 2.1 has assign=True',
      '    n2 = c.Block(); n2.load_state_dict(ref.state_dict(), assign=True)',
      '    print("assign:", torch.allclose(n2(x), y, rtol=0, atol=1e-5), n2.attn.c_attn.linear.weight.is_contiguous())',
      'p = pickle.loads(pickle.dumps(new))',
      'print("pickled:", torch.equal(p(x), new(x)))',
      'new(x).sum().backward()',
      'print("grad:", new.attn.c_proj.linear.weight.grad is not None)',
      // TE's _extra_state (the fake TE has none: give its Linear one) goes under Conv1D's prefix, as any te.Linear conversion.
      'te.Linear.get_extra_state = lambda self: torch.tensor([7.0])',
      'te.Linear.set_extra_state = lambda self, s: setattr(self, "got", float(s[0]))',
      'print("extra keys:", [k for k in new.state_dict() if k.startswith("attn.c_attn")])',
      'print("extra missing:", [k for k in new.load_state_dict(ref.state_dict(), strict=False).missing_keys if "c_attn" in k])',
      'new.load_state_dict(new.state_dict())',
      'print("extra loaded:", new.attn.c_attn.linear.got)',
    ].join('\n');
    const run = spawnSync(PYTHON, ['-c', probe], {
      encoding: 'utf8', timeout: 120_000, cwd: dir,
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', PYTHONPATH: [dir, stub, join(__dirname, '..', '..', 'bench', 'tests', 'fake_te')].join(':') },
    });
    const out = `${run.stdout}${run.stderr}`;
    assert.equal(run.status, 0, out);
    assert.match(run.stdout, /^Running in FP8 mode on Fake GPU \(sm_90\)/m, out);
    assert.match(run.stdout, /^type: _PLConv1D transformer_engine\.Linear \(192, 64\)$/m, out);
    assert.match(run.stdout, /^same keys and shapes: True$/m, out);
    assert.match(run.stdout, /^strict load: <All keys matched successfully>$/m, out);
    assert.match(run.stdout, /^same output: True$/m, out);
    assert.match(run.stdout, /^conv1d view: \(64, 64\) True True$/m, out);
    assert.match(run.stdout, /^round trip: <All keys matched successfully> True$/m, out);
    assert.match(run.stdout, /^missing: \['attn\.c_proj\.weight'\]$/m, out);
    assert.match(run.stdout, /^by name, not found: \['attn\.c_attn\.bias', 'attn\.c_attn\.weight', 'attn\.c_proj\.bias', 'attn\.c_proj\.weight'\]$/m, out);
    assert.match(run.stdout, /^get_parameter: AttributeError$/m, out);
    assert.match(run.stdout, /^assigned: KeyError$/m, out);
    assert.match(run.stdout, /^odd: Conv1D$/m, out);
    if (atLeast(2, 1)) assert.match(run.stdout, /^assign: True True$/m, out);
    assert.match(run.stdout, /^pickled: True$/m, out);
    assert.match(run.stdout, /^grad: True$/m, out);
    assert.match(run.stdout, /^extra keys: \['attn\.c_attn\.weight', 'attn\.c_attn\.bias', 'attn\.c_attn\._extra_state'\]$/m, out);
    assert.match(run.stdout, /^extra missing: \['attn\.c_attn\._extra_state'\]$/m, out);
    assert.match(run.stdout, /^extra loaded: 7\.0$/m, out);
  });
});

describe('fixes: held-out set 11\'s run-time conversions run on both paths (quant_noise, a class-returning function)', function () {
  this.timeout(450_000);
  // A stand-in for fairseq's quant_noise with its contract (fairseq/modules/quant_noise.py, 0.12.2): the module as it is
  // for p <= 0; otherwise it asserts a torch.nn.Linear / Embedding / Conv2d and hooks the weight. Written here.
  const FAKE_FAIRSEQ = [
    'import torch.nn as nn',
    'def quant_noise(module, p, block_size):',
    '    if p <= 0:',
    '        return module',
    '    assert type(module) in (nn.Linear, nn.Embedding, nn.Conv2d), type(module)',
    '    module.register_forward_pre_hook(lambda mod, inp: None)',
    '    return module',
  ].join('\n');
  const LOW_RANK = [
    'import torch.nn as nn',
    'class LowRankLinear(nn.Module):',
    '    def __init__(self, in_features, out_features, bias=False, rank=4):',
    '        super().__init__()',
    '        self.base = nn.Linear(in_features, out_features, bias=bias)',
    '        self.down = nn.Linear(in_features, rank, bias=False)',
    '        self.up = nn.Linear(rank, out_features, bias=False)',
    '    def forward(self, x):',
    '        return self.base(x) + self.up(self.down(x))',
  ].join('\n');

  it('without TE the layers as written; with FP8 (the fake TE) te.Linear only where quant_noise is off or the function returned nn.Linear', async function () {
    if (!TORCH) this.skip();
    const dir = tempDir('pl-exec-');
    for (const [name, deps] of [['quant_noise_ffn.py', { 'fairseq/__init__.py': '', 'fairseq/modules/__init__.py': '', 'fairseq/modules/quant_noise.py': FAKE_FAIRSEQ }],
      ['maybe_low_rank.py', { 'low_rank_layers.py': LOW_RANK }]] as const) {
      const { text } = await convertExample(readFileSync(join(__dirname, '..', 'fixtures', 'fixes', name), 'utf8'), settingsWith({}));
      assert.match(text, / if q_noise <= 0 else |fp8_linear_from\(Lin, nn\.Linear, /, name);
      writeFileSync(join(dir, name), text);
      for (const [file, body] of Object.entries(deps)) {
        mkdirSync(dirname(join(dir, file)), { recursive: true });
        writeFileSync(join(dir, file), body);
      }
    }
    for (const [file, lines] of [['quant_noise_ffn.py', [/^q_noise=0\.0: Linear Linear$/m, /^q_noise=0\.1: Linear Linear$/m]],
      ['maybe_low_rank.py', [/^rank=None: Linear Linear$/m, /^rank=4: LowRankLinear LowRankLinear$/m]]] as const) {
      const plain = runPython([file], dir);
      assert.equal(plain.status, 0, plain.output);
      assert.match(plain.stdout, /^Running in BF16 fallback/m, plain.output);
      for (const l of lines) assert.match(plain.stdout, l, plain.output);
    }
    const probe = [
      ...FAKE_GPU,
      'import quant_noise_ffn as q, maybe_low_rank as r',
      'def kinds(a, b): return " ".join("%s.%s" % (type(x).__module__.split(".")[0], type(x).__name__) for x in (a, b))',
      'for p in (0.0, 0.1):',
      '    m = q.FeedForward(32, 64, q_noise=p)',
      '    print("q_noise=%s:" % p, kinds(m.fc1, m.fc2))',
      'for rank in (None, 4):',
      '    m = r.FeedForward(32, 64, rank)',
      '    print("rank=%s:" % rank, kinds(m.w1, m.w2))',
      'x = torch.randn(2, 16, 32)',
      'print("trains:", q.FeedForward(32, 64)(x).sum().backward() is None, r.FeedForward(32, 64, 4)(x).shape)',
    ].join('\n');
    const run = runWithFakeTe(probe, dir);
    const out = run.output;
    assert.equal(run.status, 0, out);
    assert.match(run.stdout, /^Running in FP8 mode on Fake GPU \(sm_90\)/m, out);
    assert.match(run.stdout, /^q_noise=0\.0: transformer_engine\.Linear transformer_engine\.Linear$/m, out);
    // With noise on, quant_noise gets the torch.nn.Linear it asserts (te.Linear would fail its assert).
    assert.match(run.stdout, /^q_noise=0\.1: torch\.Linear torch\.Linear$/m, out);
    assert.match(run.stdout, /^rank=None: transformer_engine\.Linear transformer_engine\.Linear$/m, out);
    assert.match(run.stdout, /^rank=4: low_rank_layers\.LowRankLinear low_rank_layers\.LowRankLinear$/m, out);
    assert.match(run.stdout, /^trains: True torch\.Size\(\[2, 16, 32\]\)$/m, out);
  });
});

describe('fixes: a Linear built by an imported function goes through fp8_linear_like and keeps what the function did', function () {
  this.timeout(450_000);
  // The imported module the fixture names, written here: make_linear initialises its own way (uniform, zero bias, as
  // GluonTS's make_linear_layer does); make_low_rank_linear returns a LoRA-style subclass.
  const FACTORIES = [
    'import torch, torch.nn as nn',
    'def make_linear(i, o):',
    '    layer = nn.Linear(i, o)',
    '    nn.init.uniform_(layer.weight, -0.07, 0.07)',
    '    nn.init.zeros_(layer.bias)',
    '    return layer',
    'class LowRankLinear(nn.Linear):',
    '    def __init__(self, i, o, rank):',
    '        super().__init__(i, o)',
    '        self.down = nn.Linear(i, rank, bias=False)',
    '        self.up = nn.Linear(rank, o, bias=False)',
    '    def forward(self, x):',
    '        return super().forward(x) + self.up(self.down(x))',
    'def make_low_rank_linear(i, o, rank):',
    '    return LowRankLinear(i, o, rank)',
  ].join('\n');

  it('without TE the layers as the functions built them; with FP8 (the fake TE) a te.Linear with the same weights for a plain Linear, the LoRA subclass kept', async function () {
    if (!TORCH) this.skip();
    const { text } = await convertExample(readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'imported_linear_factory.py'), 'utf8'), settingsWith({}));
    assert.match(text, /self\.proj = fp8_linear_like\(make_linear\(dim, dim\)\)/);
    const { dir, file } = scratch('converted.py', text);
    writeFileSync(join(dir, 'linear_factories.py'), FACTORIES);
    const plain = runPython([file], dir);
    assert.equal(plain.status, 0, plain.output);
    assert.match(plain.stdout, /^Running in BF16 fallback/m, plain.output);
    assert.match(plain.stdout, /^rank=0: Linear Linear$/m, plain.output);
    assert.match(plain.stdout, /^rank=4: Linear LowRankLinear$/m, plain.output);
    const probe = [
      ...FAKE_GPU,
      'import converted as c, linear_factories as f',
      'def kind(x): return "%s.%s" % (type(x).__module__.split(".")[0], type(x).__name__)',
      'torch.manual_seed(0)',
      'ref = f.make_linear(32, 32)',
      'torch.manual_seed(0)',
      'new = c.fp8_linear_like(f.make_linear(32, 32))',
      'x = torch.randn(4, 32)',
      'print("like:", kind(new), torch.equal(new.weight, ref.weight), torch.equal(new.bias, ref.bias), torch.allclose(new(x), ref(x), atol=1e-6))',
      'print("init kept:", bool(new.weight.abs().max() <= 0.07))',
      'm = c.Head(32, 64, 4)',
      'print("head:", kind(m.proj), kind(m.out))',
      'hooked = f.make_linear(32, 32); hooked.register_forward_hook(lambda *a: None)',
      'print("hooked:", kind(c.fp8_linear_like(hooked)))',
      'print("odd:", kind(c.fp8_linear_like(f.make_linear(30, 64))))',
    ].join('\n');
    const run = runWithFakeTe(probe, dir);
    const out = run.output;
    assert.equal(run.status, 0, out);
    assert.match(run.stdout, /^like: transformer_engine\.Linear True True True$/m, out);
    assert.match(run.stdout, /^init kept: True$/m, out);
    assert.match(run.stdout, /^head: transformer_engine\.Linear linear_factories\.LowRankLinear$/m, out);
    assert.match(run.stdout, /^hooked: torch\.Linear$/m, out);
    assert.match(run.stdout, /^odd: torch\.Linear$/m, out);
  });
});
