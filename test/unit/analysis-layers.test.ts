import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer, py } from './analysis-helpers';

describe('analysis: layer placement', () => {
  before(initParser);

  it('names layers in ModuleDict(dict(...)), dict literals, ModuleList, Sequential', () => {
    const ir = analyze(fixture('gpt_small.py'));
    assert.equal(layer(ir, 'transformer.wte').kind, 'embedding');
    assert.equal(layer(ir, 'transformer.wte').container, 'ModuleDict');
    assert.equal(layer(ir, 'transformer.ln_f').kind, 'layernorm');
    assert.equal(layer(ir, 'self.lm_head').path, 'lm_head');
    const ir2 = analyze(py`
      import torch.nn as nn
      class M(nn.Module):
          def __init__(self, d=64):
              super().__init__()
              self.heads = nn.ModuleDict({"cls": nn.Linear(d, 10), "reg": nn.Linear(d, 1)})
              self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
              self.blocks = nn.ModuleList([nn.Linear(d, d) for _ in range(4)])
    `);
    assert.equal(layer(ir2, 'heads.cls').outFeatures?.value, 10);
    assert.equal(layer(ir2, 'heads.reg').container, 'ModuleDict');
    assert.equal(layer(ir2, 'mlp[*]').container, 'Sequential');
    assert.equal(layer(ir2, 'mlp[*]', 2).inFeatures?.value, 256);
    assert.equal(layer(ir2, 'blocks[*]').container, 'ModuleList');
  });

  it('names layers built in loops, comprehensions and appended', () => {
    const ir = analyze(py`
      import torch.nn as nn
      class M(nn.Module):
          def __init__(self, n=4, d=128):
              super().__init__()
              self.layers = nn.ModuleList()
              for i in range(n):
                  self.layers.append(nn.Linear(d, d))
              proj = []
              for i in range(n):
                  lin = nn.Linear(d, d)
                  proj.append(lin)
              self.proj = nn.ModuleList(proj)
              self.gen = nn.Sequential(*[nn.Linear(d, d) for _ in range(n)])
    `);
    assert.equal(layer(ir, 'layers[*]').container, 'loop');
    assert.equal(layer(ir, 'proj[*]').kind, 'linear');
    assert.equal(layer(ir, 'gen[*]').container, 'Sequential');
  });

  it('expands local factories at each call site', () => {
    const ir = analyze(py`
      import torch.nn as nn
      def make_linear(i, o, bias=True):
          return nn.Linear(i, o, bias=bias)
      def mlp(d):
          return nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
      class M(nn.Module):
          def __init__(self):
              super().__init__()
              self.x = make_linear(768, 3072)
              self.y = make_linear(100, 7)
              self.ff = mlp(512)
    `);
    const x = layer(ir, 'self.x');
    assert.equal(x.viaFactory, 'make_linear');
    assert.equal(x.constructor, 'nn.Linear');
    assert.equal(x.inFeatures?.value, 768);
    assert.equal(x.outFeatures?.value, 3072);
    assert.equal(x.convertible, true);
    assert.ok(x.constructionSpan && x.constructionSpan.startLine === 2);
    assert.equal(x.span.startLine, 8);
    assert.equal(layer(ir, 'self.y').convertible, false);
    assert.equal(layer(ir, 'ff[*]').inFeatures?.value, 512);
    assert.equal(layer(ir, 'ff[*]', 2).inFeatures?.value, 2048);
  });

  it('handles several layers on one line, tuple assignment and method chains', () => {
    const ir = analyze(py`
      import torch.nn as nn
      class M(nn.Module):
          def __init__(self):
              super().__init__()
              self.a = nn.Linear(32, 32); self.b = nn.Linear(32, 64)
              self.q, self.k = nn.Linear(64, 64), nn.Linear(64, 128)
              self.c = nn.Linear(64, 64).cuda()
              self.d = nn.Linear(64, 64) if True else nn.Identity()
    `);
    assert.equal(layer(ir, 'self.a').outFeatures?.value, 32);
    assert.equal(layer(ir, 'self.b').outFeatures?.value, 64);
    assert.equal(layer(ir, 'self.q').outFeatures?.value, 64);
    assert.equal(layer(ir, 'self.k').outFeatures?.value, 128);
    assert.equal(layer(ir, 'self.c').kind, 'linear');
    assert.equal(layer(ir, 'self.d').kind, 'linear');
  });

  it('records spans, args, options and te args', () => {
    const src = py`
      import torch
      import torch.nn as nn
      fc = nn.Linear(64, 128, bias=False, dtype=torch.bfloat16, device="cuda")
    `;
    const ir = analyze(src);
    const fc = layer(ir, 'fc');
    assert.equal(src.slice(fc.span.startOffset, fc.span.endOffset), 'nn.Linear(64, 128, bias=False, dtype=torch.bfloat16, device="cuda")');
    assert.equal(src.slice(fc.calleeSpan.startOffset, fc.calleeSpan.endOffset), 'nn.Linear');
    assert.equal(fc.args.length, 5);
    assert.equal(fc.args[3].name, 'dtype');
    assert.equal(fc.options.bias, 'False');
    assert.deepEqual(fc.teArgs, { bias: 'False', params_dtype: 'torch.bfloat16', device: '"cuda"' });
    assert.equal(fc.teEquivalent, 'te.Linear');
  });

  it('treats conv and embeddings as such, rotary embeddings as other', () => {
    const ir = analyze(py`
      import torch
      from torch import nn
      class RotaryEmbedding(nn.Module):
          def __init__(self, dim):
              super().__init__()
              self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2) / dim)))
      class M(nn.Module):
          def __init__(self):
              super().__init__()
              self.conv = nn.Conv1d(80, 512, 3)
              self.emb = nn.Embedding(32000, 512)
              self.bag = nn.EmbeddingBag(1000, 64)
              self.rope = RotaryEmbedding(64)
    `);
    assert.equal(layer(ir, 'self.conv').kind, 'conv');
    const emb = layer(ir, 'self.emb');
    assert.equal(emb.kind, 'embedding');
    assert.equal(emb.inFeatures?.value, 32000);
    assert.equal(emb.outFeatures?.value, 512);
    assert.equal(emb.role, 'embedding');
    assert.equal(emb.convertible, false);
    assert.equal(layer(ir, 'self.bag').kind, 'embedding');
    const rope = layer(ir, 'self.rope');
    assert.equal(rope.kind, 'other');
    assert.equal(rope.role, 'other');
  });
});
