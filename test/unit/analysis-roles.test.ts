import { strict as assert } from 'node:assert';
import { analyze, initParser, layer, py } from './analysis-helpers';

describe('analysis: roles', () => {
  before(initParser);

  it('finds lm-heads by vocabulary size, ties in either direction, _tied_weights_keys and logits', () => {
    const ir = analyze(py`
      import torch.nn as nn
      class RNNModel(nn.Module):
          def __init__(self, ntoken, ninp, tie_weights=False):
              super().__init__()
              self.encoder = nn.Embedding(ntoken, ninp)
              self.decoder = nn.Linear(ninp, ntoken)
              if tie_weights:
                  self.decoder.weight = self.encoder.weight
      class Tiny(nn.Module):
          def __init__(self, tokenizer, d=256):
              super().__init__()
              self.tok = nn.Embedding(len(tokenizer), d)
              self.out = nn.Linear(d, self.tok.weight.shape[0])
              self.lm_head = nn.Linear(d, 999)
              self.lm_head.weight = self.tok.weight
      class ForCausalLM(nn.Module):
          _tied_weights_keys = ["lm_head.weight"]
          def __init__(self, config):
              super().__init__()
              self.lm_head = nn.Linear(config.hidden_size, config.padded_vocab_size, bias=False)
      class Scorer(nn.Module):
          def __init__(self, d):
              super().__init__()
              self.proj_out = nn.Linear(d, d)
          def forward(self, x):
              logits = self.proj_out(x)
              return logits
    `);
    const dec = layer(ir, 'self.decoder');
    assert.equal(dec.role, 'lm_head');
    assert.equal(dec.tied, true);
    assert.equal(dec.convertible, false);
    assert.match(dec.reasons[0], /PLaMo-100B/);
    assert.equal(layer(ir, 'self.encoder').role, 'embedding');
    assert.equal(layer(ir, 'self.encoder').tied, true);
    assert.equal(layer(ir, 'self.out').role, 'lm_head');
    assert.equal(layer(ir, 'self.lm_head', 0).tied, true);
    const hf = layer(ir, 'self.lm_head', 1);
    assert.equal(hf.role, 'lm_head');
    assert.equal(hf.tied, true);
    assert.equal(layer(ir, 'self.proj_out').role, 'lm_head');
    assert.ok(ir.vocabNames.includes('ntoken'));
    assert.equal(ir.weightTies.length, 2);
    assert.equal(ir.weightTies[0].leftLayer, 'decoder');
    assert.equal(ir.weightTies[0].rightLayer, 'encoder');
  });

  it('tells attention, mlp, norm, classifier and router apart', () => {
    const ir = analyze(py`
      import torch.nn as nn
      class Attention(nn.Module):
          def __init__(self, d=1024):
              super().__init__()
              self.q_proj = nn.Linear(d, d)
              self.o_proj = nn.Linear(d, d)
      class MLP(nn.Module):
          def __init__(self, d=1024):
              super().__init__()
              self.gate_proj = nn.Linear(d, 4 * d)
              self.down_proj = nn.Linear(4 * d, d)
      class SparseMoeBlock(nn.Module):
          def __init__(self, d=1024, num_experts=8):
              super().__init__()
              self.gate = nn.Linear(d, num_experts, bias=False)
      class Classifier(nn.Module):
          def __init__(self, d=768, num_labels=3):
              super().__init__()
              self.norm = nn.LayerNorm(d)
              self.classifier = nn.Linear(d, num_labels)
              self.fc2 = nn.Linear(128, 10)
    `);
    assert.equal(layer(ir, 'self.q_proj').role, 'attention');
    assert.equal(layer(ir, 'self.o_proj').role, 'attention');
    assert.equal(layer(ir, 'self.gate_proj').role, 'mlp');
    assert.equal(layer(ir, 'self.down_proj').convertible, true);
    const gate = layer(ir, 'self.gate');
    assert.equal(gate.role, 'router');
    assert.equal(gate.convertible, false);
    assert.match(gate.reasons[0], /too small to gain from FP8/);
    assert.equal(layer(ir, 'self.norm').role, 'norm');
    assert.equal(layer(ir, 'self.classifier').role, 'classifier');
    assert.equal(layer(ir, 'self.fc2').role, 'classifier');
    assert.equal(layer(ir, 'self.fc2').convertible, false);
  });

  it('judges LayerNorm options: elementwise_affine=False and bias=False are not representable', () => {
    const ir = analyze(py`
      import torch.nn as nn
      a = nn.LayerNorm(768, elementwise_affine=False)
      b = nn.LayerNorm(768, bias=False)
      c = nn.LayerNorm(768, eps=1e-6)
    `);
    assert.equal(layer(ir, 'a').convertible, false);
    assert.match(layer(ir, 'a').reasons[0], /te.LayerNorm always has both/);
    assert.equal(layer(ir, 'b').convertible, false);
    assert.equal(layer(ir, 'c').convertible, true);
    assert.deepEqual(layer(ir, 'c').teArgs, { eps: '1e-6' });
  });
});
