import { strict as assert } from 'node:assert';
import { analyze, initParser, layer, py } from './analysis-helpers';

describe('analysis: local layer classes', () => {
  before(initParser);

  it('recognises local subclasses of nn.Linear / nn.LayerNorm, transitively', () => {
    const ir = analyze(py`
      import torch.nn as nn
      import torch.nn.functional as F
      class Linear(nn.Linear):
          def forward(self, x):
              return F.linear(x, self.weight.to(x.dtype))
      class CastLinear(Linear):
          pass
      class LayerNorm(nn.LayerNorm):
          def forward(self, x):
              return super().forward(x.float()).type(x.dtype)
      class Block(nn.Module):
          def __init__(self, d: int = 512):
              super().__init__()
              self.q = Linear(d, d)
              self.o = CastLinear(d, d, bias=False)
              self.ln = LayerNorm(d)
    `);
    assert.equal(ir.classes.find((c) => c.name === 'CastLinear')?.layerKind, 'linear');
    const q = layer(ir, 'self.q');
    assert.equal(q.kind, 'linear');
    assert.equal(q.resolved, 'local:Linear');
    assert.equal(q.localClass, 'Linear');
    assert.equal(q.inFeatures?.value, 512);
    assert.match(q.inFeatures?.note ?? '', /default/);
    // Its forward casts the weight to the input's dtype, as te.Linear does; the fallback keeps the class.
    assert.equal(q.convertible, true);
    assert.equal(q.fallbackKeepsClass, 'Linear');
    assert.match(q.reasons.join(' '), /Linear\.forward casts its weight to the input's dtype before computing, as te\.Linear does/);
    assert.equal(layer(ir, 'self.o').kind, 'linear');
    assert.equal(layer(ir, 'self.ln').kind, 'layernorm');
    assert.equal(layer(ir, 'self.ln').normalizedShape?.value, 512);
  });

  it('recognises RMSNorm classes by name and by structure, and (1+w) variants', () => {
    const ir = analyze(py`
      import torch
      from torch import nn
      class LlamaRMSNorm(nn.Module):
          def __init__(self, hidden_size, eps=1e-6):
              super().__init__()
              self.weight = nn.Parameter(torch.ones(hidden_size))
              self.variance_epsilon = eps
          def forward(self, x):
              var = x.pow(2).mean(-1, keepdim=True)
              return self.weight * x * torch.rsqrt(var + self.variance_epsilon)
      class ScaleNormalizer(nn.Module):
          def __init__(self, dim):
              super().__init__()
              self.scale = nn.Parameter(torch.ones(dim))
          def forward(self, x):
              return x / torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + 1e-6) * self.scale
      class GemmaNorm(nn.Module):
          def __init__(self, dim, eps=1e-6):
              super().__init__()
              self.weight = nn.Parameter(torch.zeros(dim))
          def forward(self, x):
              out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
              return out * (1.0 + self.weight.float())
      class Model(nn.Module):
          def __init__(self):
              super().__init__()
              self.a = LlamaRMSNorm(4096, eps=1e-5)
              self.b = ScaleNormalizer(4096)
              self.c = GemmaNorm(3072)
              self.d = nn.RMSNorm(1024)
    `);
    const kinds = Object.fromEntries(ir.classes.map((c) => [c.name, c.layerKind]));
    assert.equal(kinds.LlamaRMSNorm, 'rmsnorm');
    assert.equal(kinds.ScaleNormalizer, 'rmsnorm');
    assert.equal(kinds.GemmaNorm, 'rmsnorm');
    const a = layer(ir, 'self.a');
    assert.equal(a.kind, 'rmsnorm');
    assert.equal(a.teEquivalent, 'te.RMSNorm');
    assert.equal(a.normalizedShape?.value, 4096);
    assert.equal(a.teArgs?.eps, '1e-5');
    assert.equal(a.convertible, true);
    const c = layer(ir, 'self.c');
    assert.equal(c.zeroCenteredGamma, true);
    assert.equal(c.teArgs?.zero_centered_gamma, 'True');
    assert.equal(layer(ir, 'self.d').kind, 'rmsnorm');
  });

  it('recognises a custom LayerNorm and maps ctor args (bias=config.bias with a known default)', () => {
    const ir = analyze(py`
      from dataclasses import dataclass
      import torch
      import torch.nn as nn
      import torch.nn.functional as F
      class LayerNorm(nn.Module):
          def __init__(self, ndim, bias):
              super().__init__()
              self.weight = nn.Parameter(torch.ones(ndim))
              self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None
          def forward(self, x):
              return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)
      @dataclass
      class Cfg:
          n_embd: int = 768
          bias: bool = False
      class Block(nn.Module):
          def __init__(self, config):
              super().__init__()
              self.ln = LayerNorm(config.n_embd, bias=config.bias)
              self.ln2 = LayerNorm(config.n_embd, bias=True)
              self.ln3 = LayerNorm(config.n_embd, bias=use_bias)
              self.ln4 = LayerNorm(config.n_embd, bias=use_bias())
    `);
    assert.equal(ir.classes.find((c) => c.name === 'LayerNorm')?.layerKind, 'layernorm');
    const ln = layer(ir, 'self.ln');
    assert.equal(ln.kind, 'layernorm');
    assert.equal(ln.normalizedShape?.value, 768);
    assert.equal(ln.options.bias, 'config.bias');
    assert.equal(ln.convertible, false);
    assert.match(ln.reasons.join(' '), /Cfg\.bias default False/);
    assert.equal(layer(ir, 'self.ln2').convertible, true);
    // A flag decided at run time converts with the check where the layer is built (when=use_bias); a call cannot be
    // evaluated a second time there, so that one stays uncertain.
    assert.equal(layer(ir, 'self.ln3').convertible, true);
    assert.equal(layer(ir, 'self.ln3').convertsWhen, 'use_bias');
    assert.equal(layer(ir, 'self.ln4').convertible, 'uncertain');
    assert.equal(layer(ir, 'self.ln4').convertsWhen, undefined);
  });

  it('collects config dataclass defaults', () => {
    const ir = analyze(py`
      from dataclasses import dataclass, field
      @dataclass
      class ModelArgs:
          dim: int = 4096
          vocab_size: int = field(default=32000)
    `);
    const c = ir.classes.find((k) => k.name === 'ModelArgs');
    assert.deepEqual(c?.fieldDefaults, { dim: '4096', vocab_size: '32000' });
  });
});
