/**
 * PL701 end to end on the CPU: one command converts a model that checkpoints its blocks with torch's activation
 * checkpoint; once its layers run through TE the call becomes the fallback's fp8_checkpoint. Without TE the converted
 * model computes what the original did, gradients included (torch's checkpoint, as written). Where FP8 runs (faked: a
 * GPU answering sm_90 and test/python/fake_te, whose te.distributed.checkpoint re-enters the forward's FP8 state for
 * the recompute, as TE's does), the backward's recompute runs the te.* layers in FP8 again, where torch's checkpoint
 * recomputes them outside the FP8 autocast: the mistake PL701 reports, shown on the same model. The same for blocks
 * wrapped with torch's checkpoint_wrapper, given checkpoint_fn=fp8_checkpoint, for FSDP's
 * apply_activation_checkpointing given that wrapper, and for a Hugging Face model's gradient_checkpointing_enable()
 * with the model handed through fp8_gradient_checkpointing.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fakeGpu, origAndConverted, PYTHON, python } from './run-python';

const ROOT = join(__dirname, '..', '..');
const PROJECT = join(ROOT, 'test', 'fixtures', 'checkpoint-project');
const FAKE_TE = join(__dirname, 'fake_te');
const torch2 = spawnSync(PYTHON, ['-c', 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)'], { timeout: 120_000 }).status === 0;


describe(`PL701: checkpointed blocks recompute in FP8 through fp8_checkpoint (${PYTHON})`, function () {
  this.timeout(600_000);
  let dir = '';

  before(function () {
    dir = origAndConverted(PROJECT, 'pl-checkpoint-');
  });

  it('one command: the layers convert and torch\'s checkpoint call becomes fp8_checkpoint, imported from the module', function () {
    const model = readFileSync(join(dir, 'conv', 'model.py'), 'utf8');
    assert.match(model, /^from fp8_fallback import fp8_checkpoint, /m);
    assert.match(model, /^ {16}x = fp8_checkpoint\(block, x, use_reentrant=False\)$/m);
    assert.match(readFileSync(join(dir, 'conv', 'fp8_fallback.py'), 'utf8'), /^def fp8_checkpoint\(function, \*args, \*\*kwargs\):$/m);
  });

  it('without TE: the converted model computes what the original did, gradients included', function () {
    const r = python([
      'import runpy, torch',
      'conv = runpy.run_path("conv/model.py")',
      'orig = runpy.run_path("orig/model.py")',
      'torch.manual_seed(0)',
      'ref, net = orig["Net"](), conv["Net"]()',
      'net.load_state_dict(ref.state_dict())',
      'x = torch.randn(2, 16, 64)',
      'ref(x).square().mean().backward()',
      'net(x).square().mean().backward()',
      'print("max diff %.2e" % (ref(x) - net(x)).abs().max().item())',
      'print("grad diff %.2e" % (ref.blocks[0].fc1.weight.grad - net.blocks[0].fc1.weight.grad).abs().max().item())',
    ].join('\n'), dir, [join(dir, 'conv')]);
    assert.equal(r.status, 0, r.output);
    assert.match(r.stdout, /^Running in BF16 fallback: Transformer Engine not installed$/m, r.output);
    assert.match(r.stdout, /^max diff 0\.00e\+00$/m, r.output);
    assert.match(r.stdout, /^grad diff 0\.00e\+00$/m, r.output);
  });

  it('where FP8 runs: the recompute runs the te.* layers in FP8 again; torch\'s checkpoint recomputed them outside it', function () {
    const r = python([
      ...fakeGpu('(9, 0)', 'Fake H100'),
      'import transformer_engine.pytorch as te',
      'import torch.utils.checkpoint',
      'import model as m',
      'x = torch.randn(2, 16, 64)',
      'def step(label):',
      '    torch.manual_seed(0)',
      '    net = m.Net()',
      '    n = len(te.CALLS)',
      '    with te.autocast(enabled=True):',
      '        loss = net(x).square().mean()',
      '    forward = te.CALLS[n:].count("linear")',
      '    loss.backward()',
      '    print(label, "fp8 GEMMs forward", forward, "recompute", te.CALLS[n:].count("linear") - forward,',
      '          "checkpoint", [c for c in te.CALLS[n:] if isinstance(c, tuple) and c[0] == "checkpoint"])',
      'step("fp8_checkpoint")',
      'm.fp8_checkpoint = torch.utils.checkpoint.checkpoint  # the call as it was before the fix',
      'step("torch")',
    ].join('\n'), join(dir, 'conv'), [FAKE_TE]);
    assert.equal(r.status, 0, r.output);
    assert.match(r.stdout, /^Running in FP8 mode on Fake H100 \(sm_90\)/m, r.output);
    // Two blocks of two te.* GEMMs (fc1 fused with its norm, fc2): four FP8 forwards, and four again in the recompute.
    assert.match(r.stdout, /^fp8_checkpoint fp8 GEMMs forward 4 recompute 4 checkpoint \[\('checkpoint', True\), \('checkpoint', True\)\]$/m, r.output);
    assert.match(r.stdout, /^torch fp8 GEMMs forward 4 recompute 0 checkpoint \[\]$/m, r.output);
  });

  // Each form on the fixture's blocks of two Linears: the file, its model, the converted call, and the te.* GEMMs run
  // forward and in the backward's recompute where FP8 runs (all blocks checkpointed, or all segments but the last).
  const forms: [string, string, string, RegExp, number, number][] = [
    ['checkpoint_sequential: fp8_checkpoint_sequential', 'sequential', 'Segmented', /^ {8}return fp8_checkpoint_sequential\(self\.blocks, 3, x, use_reentrant=False\)$/m, 6, 4],
    ['checkpoint_wrapper (FSDP\'s activation checkpointing), given checkpoint_fn=fp8_checkpoint', 'wrapped', 'Wrapped', /checkpoint_wrapper\(Block\(d\), checkpoint_fn=fp8_checkpoint, use_reentrant=False\)/, 4, 4],
    ['apply_activation_checkpointing with its default wrapper, given one with checkpoint_fn=fp8_checkpoint', 'applied', 'Applied', /apply_activation_checkpointing\(model, check_fn=lambda m: isinstance\(m, Block\), checkpoint_wrapper_fn=partial\(checkpoint_wrapper, checkpoint_fn=fp8_checkpoint, use_reentrant=False\)\)/, 4, 4],
    ['Hugging Face\'s gradient_checkpointing_enable, the model handed through fp8_gradient_checkpointing', 'hf', 'Checkpointed', /^ {8}fp8_gradient_checkpointing\(self\)\.gradient_checkpointing_enable\(gradient_checkpointing_kwargs=\{"use_reentrant": False\}\)$/m, 4, 4],
  ];
  for (const [what, file, cls, fixed, forward, recompute] of forms) {
    it(`${what}: the same outputs and gradients without TE; where FP8 runs, ${recompute} of ${forward} te.* GEMMs recompute in FP8`, function () {
      // torch 1.13's checkpoint_wrapper hands any checkpoint_fn its own argument tuple and dict as the first arguments
      // and its checkpoint_sequential takes no use_reentrant (both torch 2.0); Transformer Engine 2.x needs torch >= 2.1.
      if (!torch2) this.skip();
      assert.match(readFileSync(join(dir, 'conv', `${file}.py`), 'utf8'), fixed);
      const plain = python([
        'import runpy, sys, torch',
        'def load(side):',
        '    sys.path.insert(0, side)',
        '    sys.modules.pop("wrapped", None)  # each side its own blocks',
        '    try:',
        `        return runpy.run_path("%s/${file}.py" % side)["${cls}"]`,
        '    finally:',
        '        sys.path.pop(0)',
        'Orig, Conv = load("orig"), load("conv")',
        'torch.manual_seed(0)',
        'ref, net = Orig(), Conv()',
        'net.load_state_dict(ref.state_dict())',
        // An input that requires grad: torch 1.13's wrapper defaulted to the reentrant checkpoint, which needs one.
        'x = torch.randn(2, 16, 64, requires_grad=True)',
        'ref(x).square().mean().backward()',
        'net(x).square().mean().backward()',
        'print("max diff %.2e" % (ref(x) - net(x)).abs().max().item())',
        'print("grad diff %.2e" % max((a.grad - b.grad).abs().max().item() for a, b in zip(ref.parameters(), net.parameters())))',
      ].join('\n'), dir, []);
      assert.equal(plain.status, 0, plain.output);
      assert.match(plain.stdout, /^max diff 0\.00e\+00$/m, plain.output);
      assert.match(plain.stdout, /^grad diff 0\.00e\+00$/m, plain.output);
      const fp8 = python([
        ...fakeGpu('(9, 0)', 'Fake H100'),
        'import transformer_engine.pytorch as te',
        `from ${file} import ${cls}`,
        'torch.manual_seed(0)',
        `net = ${cls}()`,
        'x = torch.randn(2, 16, 64)',
        'with te.autocast(enabled=True):',
        '    loss = net(x).square().mean()',
        'forward = te.CALLS.count("linear")',
        'loss.backward()',
        'print("fp8 GEMMs forward", forward, "recompute", te.CALLS.count("linear") - forward)',
      ].join('\n'), join(dir, 'conv'), [FAKE_TE]);
      assert.equal(fp8.status, 0, fp8.output);
      assert.match(fp8.stdout, new RegExp(`^fp8 GEMMs forward ${forward} recompute ${recompute}$`, 'm'), fp8.output);
    });
  }
});
