import { strict as assert } from 'node:assert';
import { analyze, initParser, layer, py } from './analysis-helpers';
import { classSelections } from '../../server/src/analysis/router-selection';

describe('analysis: roles', () => {
  before(initParser);

  it('a shared expert\'s one-output gate in an MoE block is a router (a gate), not a classifier', () => {
    const ir = analyze(py`
      import torch
      import torch.nn as nn
      import torch.nn.functional as F

      class SparseMoeBlock(nn.Module):
          def __init__(self, config):
              super().__init__()
              self.shared_expert = nn.Linear(config.hidden_size, config.hidden_size)
              self.shared_expert_gate = torch.nn.Linear(config.hidden_size, 1, bias=False)

          def forward(self, x):
              return F.sigmoid(self.shared_expert_gate(x)) * self.shared_expert(x)
    `);
    const gate = layer(ir, 'self.shared_expert_gate');
    assert.equal(gate.role, 'router', gate.roleReasons.join(' '));
    assert.equal(gate.convertible, false);
    assert.match(gate.reasons.join(' '), /^This is an MoE gate \(one output: how much of an expert to use\)/);
    assert.equal(layer(ir, 'self.shared_expert').convertible, true);
  });

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

  it('a projection whose output is picked from (topk, gumbel_softmax) is a router; LoRA adapters stay torch.nn', () => {
    const ir = analyze(py`
      import torch
      from torch import nn

      class GumbelQuantizer(nn.Module):
          def __init__(self, dim: int = 512, groups: int = 2, num_vars: int = 320):
              super().__init__()
              self.weight_proj = nn.Linear(dim, groups * num_vars)
              self.groups = groups
          def forward(self, x):
              b, t, _ = x.shape
              logits = self.weight_proj(x).view(b * t * self.groups, -1)
              return nn.functional.gumbel_softmax(logits.float(), tau=2.0, hard=True)

      class Chooser(nn.Module):
          def __init__(self, dim: int = 1024, num_choices: int = 64):
              super().__init__()
              self.score_proj = nn.Linear(dim, num_choices)
              self.fc = nn.Linear(dim, dim)
          def forward(self, x):
              probs = torch.softmax(self.score_proj(x), -1)
              w, idx = torch.topk(self.score_proj(x), 2)
              return self.fc(x).argmax(-1), idx

      class Adapter(nn.Module):
          def __init__(self, d: int = 1024, r: int = 16):
              super().__init__()
              self.lora_A = nn.Linear(d, r, bias=False)
              self.lora_B = nn.Linear(r, d, bias=False)
          def forward(self, x): return x + self.lora_B(self.lora_A(x))

    `);
    const get = (n: string) => ir.layers.find((l) => l.name === n)!;
    assert.equal(get('self.weight_proj').role, 'router');
    assert.equal(get('self.weight_proj').convertible, false);
    assert.match(get('self.weight_proj').reasons.join(' '), /makes a discrete choice \(gumbel_softmax\)/);
    assert.equal(get('self.score_proj').role, 'router');
    assert.notEqual(get('self.fc').role, 'router'); // argmax is a prediction, not a routing choice
    for (const n of ['self.lora_A', 'self.lora_B']) {
      assert.equal(get(n).role, 'other', n);
      assert.equal(get(n).convertible, false, n);
      assert.match(get(n).reasons.join(' '), /low-rank adapter/, n);
    }
  });

  it('router selections: every form the test reads, by the name assigned from the projection or by its call', () => {
    const pick = (body: string, attr = 'gate') => classSelections(`class R(nn.Module):\n    def forward(self, x):\n${body}`).pick(attr);
    assert.equal(pick('        h = self.gate(x)\n        w, i = topk(h, 2)\n'), 'topk');
    assert.equal(pick('        h = self.gate(x)\n        return h.topk(2)\n'), 'topk');
    assert.equal(pick('        h = self.gate(x)\n        return h.float().view(-1, 8).topk(2)\n'), 'topk');
    assert.equal(pick('        h = self.gate(x)\n        return torch.topk(softmax(h, -1), 2)\n'), 'topk');
    assert.equal(pick('        h = self.gate(x)\n        return torch.topk(F.softmax(h.float(), -1), 2)\n'), 'topk');
    assert.equal(pick('        h = F.silu(self.gate(x))\n        return F.gumbel_softmax(h, hard=True)\n'), 'gumbel_softmax');
    assert.equal(pick('        return topk(self.gate(h))\n'), 'topk');
    assert.equal(pick('        return torch.topk(self.gate(h), 2)\n'), 'topk');
    assert.equal(pick('        return self.gate(h).topk(2)\n'), 'topk');
    assert.equal(pick('        return self.gate(h).float().topk(2)\n'), 'topk');
    // the first selection in the text decides, whichever form it has
    assert.equal(pick('        h = self.gate(x)\n        a = gumbel_softmax(h)\n        return h.topk(2)\n'), 'gumbel_softmax');
    assert.equal(pick('        h = self.gate(x)\n        a = h.topk(2)\n        return gumbel_softmax(h)\n'), 'topk');
    // not a selection of this projection: another layer's output, a name that only starts alike, log_softmax's argument, argmax
    assert.equal(pick('        h = self.gate(x)\n        return topk(self.other(x), 2)\n'), undefined);
    assert.equal(pick('        h = self.gate(x)\n        return topk(h2, 2)\n'), undefined);
    assert.equal(pick('        h = self.gate(x)\n        return topk(log_softmax(h), 2)\n'), undefined);
    assert.equal(pick('        h = self.gate(x)\n        return h.argmax(-1), mytopk(h)\n'), undefined);
    assert.equal(pick('        h = self.gate(x)\n        return topk(x, 2)\n', 'other'), undefined);
  });
});
