/**
 * PL107 end to end on the CPU: one command converts a model whose attention is torch's scaled_dot_product_attention;
 * the call becomes the fallback's fp8_attention (a masked call stays torch's), and the generated code computes what
 * the original computed: without TE through torch's function, and where FP8 runs (faked: a GPU answering sm_90 and
 * test/python/fake_te, whose DotProductAttention writes the attention out in FP32) through te.DotProductAttention
 * with the bshd views, causal or not, grouped key/value heads; a mask, dropout and FP32 inputs go to torch's
 * function with the reason logged once. Runs with PL_PYTHON (npm run test:python: torch 2.13 and 1.13; torch before
 * 2.0 has no scaled_dot_product_attention, so those runs skip).
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { origAndConverted, PYTHON, python } from './run-python';

const ROOT = join(__dirname, '..', '..');
const PROJECT = join(ROOT, 'test', 'fixtures', 'attention-project');
const FAKE_TE = join(__dirname, 'fake_te');
const hasSdpa = spawnSync(PYTHON, ['-c', 'import torch.nn.functional as F; F.scaled_dot_product_attention'], { timeout: 120_000 }).status === 0;


describe(`PL107: attention through fp8_attention computes what torch's did (${PYTHON})`, function () {
  this.timeout(600_000);
  let dir = '';

  before(function () {
    dir = origAndConverted(PROJECT, 'pl-attention-');
  });

  it('one command: the unmasked call becomes fp8_attention, imported from the module; the masked one stays torch\'s', function () {
    const model = readFileSync(join(dir, 'conv', 'model.py'), 'utf8');
    assert.match(model, /^from fp8_fallback import fp8_attention, fp8_linear$/m);
    assert.match(model, /^ {8}y = fp8_attention\(q, k, v, attn_mask=None, dropout_p=0\.0, is_causal=True\)$/m);
    assert.match(model, /^ {8}y = torch\.nn\.functional\.scaled_dot_product_attention\(q, k, v, attn_mask=mask\)$/m);
    assert.match(readFileSync(join(dir, 'conv', 'fp8_fallback.py'), 'utf8'), /^def fp8_attention\(q, k, v, attn_mask=None, dropout_p=0\.0, is_causal=False, scale=None, \*\*kwargs\):$/m);
  });

  it('without TE: the converted model computes exactly what the original did, and trains', function () {
    if (!hasSdpa) this.skip();
    const r = python([
      'import runpy, torch',
      'conv = runpy.run_path("conv/model.py")',
      'orig = runpy.run_path("orig/model.py")',
      'torch.manual_seed(0)',
      'ref, net = orig["Net"](), conv["Net"]()',
      'net.load_state_dict(ref.state_dict())',
      'x = torch.randn(2, 16, 64)',
      'print("max diff %.2e" % (ref(x) - net(x)).abs().max().item())',
      'net(x).square().mean().backward()',
      'print("grad", net.attn.c_attn.weight.grad.abs().sum().item() > 0)',
    ].join('\n'), join(dir), [join(dir, 'conv')]);
    assert.equal(r.status, 0, r.output);
    assert.match(r.stdout, /^Running in BF16 fallback: Transformer Engine not installed$/m, r.output);
    assert.match(r.stdout, /^max diff 0\.00e\+00$/m, r.output);
    assert.match(r.stdout, /^grad True$/m, r.output);
  });

  it('where FP8 runs: te.DotProductAttention on bshd views, causal or not, grouped heads; the rest torch\'s, each reason logged once', function () {
    if (!hasSdpa) this.skip();
    const r = python([
      'import torch, torch.nn.functional as F',
      'torch.cuda.is_available = lambda: True',
      'torch.cuda.get_device_capability = lambda *a: (9, 0)',
      'torch.cuda.get_device_name = lambda *a: "Fake H100"',
      'import transformer_engine.pytorch as te',
      'import fp8_fallback as fb',
      // The tensors stay on the CPU: everything but the device check is the generated code's own.
      'check = fb._pl_attention_problem',
      'fb._pl_attention_problem = lambda q, k, v, *a: None if check(q, k, v, *a) == "tensors not on a GPU" else check(q, k, v, *a)',
      'torch.manual_seed(0)',
      'def qkv(b, t, h, d, dtype=torch.bfloat16):',
      '    return torch.randn(b, t, h, d, dtype=dtype).transpose(1, 2)',
      'q, k, v = qkv(2, 32, 4, 16), qkv(2, 32, 4, 16), qkv(2, 32, 4, 16)',
      'for causal in (True, False):',
      '    n = len(te.CALLS)',
      '    got = fb.fp8_attention(q, k, v, is_causal=causal)',
      '    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)',
      '    print("causal", causal, "te", te.CALLS[n:].count("dot_product_attention"), "shape", tuple(got.shape), "diff %.3f" % (got.float() - ref).abs().max().item())',
      'kg, vg = qkv(2, 32, 2, 16), qkv(2, 32, 2, 16)',
      'n = len(te.CALLS)',
      'got = fb.fp8_attention(q, kg, vg, is_causal=True, enable_gqa=True)',
      'ref = F.scaled_dot_product_attention(q.float(), kg.float().repeat_interleave(2, 1), vg.float().repeat_interleave(2, 1), is_causal=True)',
      'print("gqa te", te.CALLS[n:].count("dot_product_attention"), "diff %.3f" % (got.float() - ref).abs().max().item())',
      'got = fb.fp8_attention(q, k, v, is_causal=True, scale=0.5)',
      'ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True, scale=0.5) if torch.__version__ >= "2.1" else got.float()',
      'print("scale diff %.3f" % (got.float() - ref).abs().max().item())',
      'n = len(te.CALLS)',
      'mask = torch.ones(32, 32, dtype=torch.bool).tril()',
      'for _ in range(2):',
      '    got = fb.fp8_attention(q, k, v, attn_mask=mask)',
      'print("mask te", te.CALLS[n:].count("dot_product_attention"), "diff %.3f" % (got - F.scaled_dot_product_attention(q, k, v, attn_mask=mask)).abs().max().item())',
      'n = len(te.CALLS)',
      'fb.fp8_attention(q, k, v, dropout_p=0.1, is_causal=True)',
      'f = [t.float() for t in (q, k, v)]',
      'got = fb.fp8_attention(*f, is_causal=True)',
      'print("fp32 te", te.CALLS[n:].count("dot_product_attention"), "diff %.3f" % (got - F.scaled_dot_product_attention(*f, is_causal=True)).abs().max().item())',
    ].join('\n'), join(dir, 'conv'), [FAKE_TE]);
    assert.equal(r.status, 0, r.output);
    assert.match(r.stdout, /^Running in FP8 mode on Fake H100 \(sm_90\)/m, r.output);
    assert.equal(r.stdout.match(/^FP8: attention through te\.DotProductAttention \(fused, BF16\), 4 heads of 16$/gm)?.length, 1, r.output);
    for (const causal of ['True', 'False']) {
      const m = new RegExp(`^causal ${causal} te 1 shape \\(2, 4, 32, 16\\) diff (\\S+)$`, 'm').exec(r.stdout);
      assert.ok(m && Number(m[1]) < 0.02, r.output);
    }
    const gqa = /^gqa te 1 diff (\S+)$/m.exec(r.stdout);
    assert.ok(gqa && Number(gqa[1]) < 0.02, r.output);
    assert.ok(Number(/^scale diff (\S+)$/m.exec(r.stdout)?.[1]) < 0.02, r.output);
    assert.match(r.stdout, /^mask te 0 diff 0\.000$/m, r.output);
    assert.equal(r.stdout.match(/^FP8: attention stays torch's scaled_dot_product_attention here: an attention mask$/gm)?.length, 1, 'logged once for two calls');
    assert.match(r.stdout, /^FP8: attention stays torch's scaled_dot_product_attention here: attention dropout 0\.1$/m, r.output);
    assert.match(r.stdout, /^FP8: attention stays torch's scaled_dot_product_attention here: torch\.float32 inputs \(TE's kernel takes BF16 or FP16: run it under autocast\)$/m, r.output);
    assert.match(r.stdout, /^fp32 te 0 diff 0\.000$/m, r.output);
  });
});
