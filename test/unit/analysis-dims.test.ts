import { strict as assert } from 'node:assert';
import { analyze, initParser, layer, py } from './analysis-helpers';

describe('analysis: dimensions', () => {
  before(initParser);

  it('evaluates literals, arithmetic, defaults, module constants, config defaults', () => {
    const ir = analyze(py`
      from dataclasses import dataclass
      import torch.nn as nn
      HIDDEN = 1024
      @dataclass
      class GPTConfig:
          n_embd: int = 768
          n_head: int = 12
      @dataclass
      class ModelArgs:
          dim: int = 4096
          n_heads: int = 32
      class A(nn.Module):
          def __init__(self, config, d_model=512, unknown_dim=None):
              super().__init__()
              self.head_dim = config.n_embd // config.n_head
              self.a = nn.Linear(config.n_embd, 3 * config.n_embd)
              self.b = nn.Linear(d_model, 4 * d_model)
              self.c = nn.Linear(HIDDEN, HIDDEN // 2)
              self.d = nn.Linear(config.n_head * self.head_dim, 2 ** 10)
              self.e = nn.Linear(unknown_dim, 64)
              hidden = int(2 * 4 * d_model / 3)
              hidden = 256 * ((hidden + 256 - 1) // 256)
              self.f = nn.Linear(d_model, hidden)
      class B(nn.Module):
          def __init__(self, args: ModelArgs):
              super().__init__()
              self.wq = nn.Linear(args.dim, args.n_heads * (args.dim // args.n_heads))
    `);
    const a = layer(ir, 'self.a');
    assert.equal(a.inFeatures?.value, 768);
    assert.equal(a.outFeatures?.value, 2304);
    assert.match(a.inFeatures?.note ?? '', /GPTConfig\.n_embd default 768/);
    assert.match(a.reasons[0], /768 -> 2304 meets the FP8 rule/);
    const b = layer(ir, 'self.b');
    assert.equal(b.outFeatures?.value, 2048);
    assert.match(b.inFeatures?.note ?? '', /default/);
    assert.equal(layer(ir, 'self.c').outFeatures?.value, 512);
    assert.equal(layer(ir, 'self.d').inFeatures?.value, 768);
    assert.equal(layer(ir, 'self.d').outFeatures?.value, 1024);
    const e = layer(ir, 'self.e');
    assert.equal(e.inFeatures?.value, undefined);
    assert.equal(e.inFeatures?.text, 'unknown_dim');
    assert.equal(e.convertible, true);
    assert.equal(e.facets?.shape.state, 'guarded');
    assert.match(e.reasons[0], /unknown_dim is not known where it is built/);
    assert.equal(layer(ir, 'self.f').outFeatures?.value, 1536);
    assert.equal(layer(ir, 'self.wq').outFeatures?.value, 4096);
    assert.match(layer(ir, 'self.wq').inFeatures?.note ?? '', /ModelArgs\.dim default 4096/);
  });

  it('propagates constructor arguments from the only place a class is built', () => {
    const ir = analyze(py`
      import torch.nn as nn
      class FeedForward(nn.Module):
          def __init__(self, dim, hidden_dim):
              super().__init__()
              self.w1 = nn.Linear(dim, hidden_dim)
      class Block(nn.Module):
          def __init__(self):
              super().__init__()
              self.ff = FeedForward(dim=1024, hidden_dim=4 * 1024)
    `);
    assert.equal(layer(ir, 'self.w1').inFeatures?.value, 1024);
    assert.equal(layer(ir, 'self.w1').outFeatures?.value, 4096);
  });

  it('fails the FP8 shape rule with the failing dimension', () => {
    const ir = analyze(py`
      import torch.nn as nn
      fc = nn.Linear(100, 4096)
      fc2 = nn.Linear(4096, 4100)
    `);
    const fc = layer(ir, 'fc');
    assert.equal(fc.convertible, false);
    assert.equal(fc.shapeOk, false);
    assert.match(fc.reasons[0], /in_features 100 is not a multiple of 16/);
    assert.match(layer(ir, 'fc2').reasons[0], /out_features 4100 is not a multiple of 16/);
  });

  it('out_features must be a multiple of 16 to train in FP8: the backward GEMM reduces over it', () => {
    // te.Linear(64, 24) runs its forward in FP8 and fails in backward on TE 2.20.2 (bench/results/h200/2026-12-02-rows).
    const ir = analyze(py`
      import torch.nn as nn
      narrow = nn.Linear(64, 24)
      wide = nn.Linear(64, 1024)
    `);
    assert.equal(layer(ir, 'narrow').shapeOk, false);
    assert.equal(layer(ir, 'narrow').convertible, false);
    assert.match(layer(ir, 'narrow').reasons[0], /out_features 24 is not a multiple of 16/);
    assert.equal(layer(ir, 'wide').convertible, true);
  });
});
