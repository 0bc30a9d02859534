import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer, py } from './analysis-helpers';
import type { ModelIR } from '../../server/src/analysis/ir';

function owned(ir: ModelIR, owner: string, name: string) {
  const hits = ir.layers.filter((l) => l.ownerClass === owner && l.name === name);
  assert.equal(hits.length, 1, `${owner}.${name}: ${ir.layers.map((l) => `${l.ownerClass}.${l.name}`).join(', ')}`);
  return hits[0];
}

describe('analysis: lm-head evidence', () => {
  before(initParser);

  it('never calls an ordinary block projection the lm-head because of its position', () => {
    const ir = analyze(fixture('lm_head_negatives.py'));
    for (const l of ir.layers) assert.notEqual(l.role, 'lm_head', `${l.ownerClass}.${l.name}: ${l.roleReasons.join('; ')}`);
    // c_attn is not even the outermost call of Block.forward.
    assert.equal(owned(ir, 'Block', 'self.c_attn').role, 'attention');
    assert.equal(owned(ir, 'Net', 'self.fc1').role, 'mlp');
    assert.equal(owned(ir, 'Projector', 'self.proj').role, 'other');
    assert.equal(owned(ir, 'Adapter', 'self.proj').role, 'other');
    assert.equal(owned(ir, 'Encoder', 'self.out').convertible, true);
  });

  it('finds heads named output, decoder, output_projection, proj_out, lm_head and head by what they do', () => {
    const ir = analyze(fixture('lm_head_positives.py'));
    const out = owned(ir, 'Transformer', 'self.output');
    assert.equal(out.role, 'lm_head');
    assert.ok(out.roleReasons.some((r) => /vocabulary-sized/.test(r)));
    assert.ok(out.roleReasons.some((r) => /returns/.test(r)), out.roleReasons.join('; '));
    assert.equal(owned(ir, 'RNNModel', 'self.decoder').role, 'lm_head');
    assert.equal(owned(ir, 'FairseqDecoder', 'self.output_projection').role, 'lm_head');
    const po = owned(ir, 'TextDecoder', 'self.proj_out');
    assert.equal(po.role, 'lm_head', po.roleReasons.join('; '));
    assert.ok(po.roleReasons.some((r) => /returns/.test(r)));
    assert.equal(owned(ir, 'CausalLM', 'self.lm_head').role, 'lm_head');
    assert.equal(owned(ir, 'GPT', 'self.head').role, 'lm_head');
    const vit = owned(ir, 'VisionTransformer', 'self.head');
    assert.equal(vit.role, 'classifier');
    for (const l of ir.layers.filter((x) => x.role === 'lm_head')) assert.equal(l.convertible, false, l.name);
  });

  it('keeps the logits evidence for a top-level scorer whose size is unknown', () => {
    const ir = analyze([
      'import torch.nn as nn',
      'class Scorer(nn.Module):',
      '    def __init__(self, d):',
      '        super().__init__()',
      '        self.proj_out = nn.Linear(d, d)',
      '    def forward(self, x):',
      '        logits = self.proj_out(x)',
      '        return logits',
      '',
    ].join('\n'));
    assert.equal(layer(ir, 'self.proj_out').role, 'lm_head');
  });
});

describe('analysis: lm-head evidence, fifth survey', () => {
  before(initParser);

  it('finds the head of a model whose methods name the instance otherwise (RWKV: s), not a top-level block out_proj', () => {
    const ir = analyze([
      'import torch.nn as nn',
      'class MODEL(nn.Module):',
      '    def __init__(s, V, C):',
      '        super().__init__()',
      '        s.emb = nn.Embedding(V, C)',
      '        s.o = nn.Linear(C, V, bias=False)',
      '    def forward(s, idx):',
      '        x = s.emb(idx)',
      '        return s.o(x)',
      '',
      'class Mamba(nn.Module):',
      '    def __init__(self, d_model, d_inner):',
      '        super().__init__()',
      '        self.in_proj = nn.Linear(d_model, 2 * d_inner)',
      '        self.out_proj = nn.Linear(d_inner, d_model)',
      '    def forward(self, x):',
      '        y = self.in_proj(x)',
      '        out = self.out_proj(y)',
      '        return out',
      '',
    ].join('\n'));
    assert.equal(ir.layers.find((l) => l.name === 's.o')?.role, 'lm_head', ir.layers.map((l) => `${l.name}:${l.role}`).join(', '));
    assert.notEqual(ir.layers.find((l) => l.name === 'self.out_proj')?.role, 'lm_head');
  });

  it('an output that forward returns through (log_)softmax or first in a tuple is the head; a router or classifier stays one', () => {
    const ir = analyze([
      'import torch',
      'import torch.nn as nn',
      'import torch.nn.functional as F',
      '',
      'class CharModel(nn.Module):',
      '    def __init__(self, d=512, n_out=96):',
      '        super().__init__()',
      '        self.inp = nn.Linear(n_out, d)',
      '        self.rnn = nn.LSTM(d, d)',
      '        self.out = nn.Linear(d, n_out)',
      '    def forward(self, x):',
      '        h, _ = self.rnn(self.inp(x))',
      '        return torch.log_softmax(self.out(h), -1), h',
      '',
      'class CharModel2(nn.Module):',
      '    def __init__(self, d=512, n_chars=96):',
      '        super().__init__()',
      '        self.proj = nn.Linear(d, n_chars)',
      '    def forward(self, h):',
      '        return self.proj(h)',
      '',
      'class TopKRouter(nn.Module):',
      '    def __init__(self, d=1024, n_exp=64):',
      '        super().__init__()',
      '        self.gate = nn.Linear(d, n_exp, bias=False)',
      '    def forward(self, x):',
      '        return F.softmax(self.gate(x), dim=-1)',
      '',
      'class Clf(nn.Module):',
      '    def __init__(self, d=768, num_classes=1000):',
      '        super().__init__()',
      '        self.fc = nn.Linear(d, d)',
      '        self.head = nn.Linear(d, num_classes)',
      '    def forward(self, x):',
      '        return self.head(self.fc(x)).softmax(-1)',
      '',
      'class Block(nn.Module):',
      '    def __init__(self, d=1024):',
      '        super().__init__()',
      '        self.fc1 = nn.Linear(d, 4 * d)',
      '        self.fc2 = nn.Linear(4 * d, d)',
      '    def forward(self, x):',
      '        return self.fc2(self.fc1(x)), x',
    ].join('\n'));
    const out = owned(ir, 'CharModel', 'self.out');
    assert.equal(out.role, 'lm_head', out.roleReasons.join('; '));
    assert.ok(out.roleReasons.some((r) => /returns, through torch\.log_softmax/.test(r)), out.roleReasons.join('; '));
    assert.equal(out.convertible, false);
    assert.equal(owned(ir, 'CharModel', 'self.inp').role, 'other');
    assert.equal(owned(ir, 'CharModel2', 'self.proj').role, 'lm_head'); // n_chars: a character vocabulary
    assert.equal(owned(ir, 'TopKRouter', 'self.gate').role, 'router');
    assert.equal(owned(ir, 'Clf', 'self.head').role, 'classifier');
    // A block's returned projection (first in a tuple) with no vocabulary or distribution stays a block layer.
    assert.notEqual(owned(ir, 'Block', 'self.fc2').role, 'lm_head');
    assert.equal(owned(ir, 'Block', 'self.fc2').convertible, true);
  });

  it('a tie made on self in one class does not tie a same-named layer of another class', () => {
    const ir = analyze(py`
      import torch.nn as nn

      class MLP(nn.Module):
          def __init__(self, dim: int = 1024):
              super().__init__()
              self.fc = nn.Linear(dim, 4 * dim)
              self.proj = nn.Linear(4 * dim, dim)
          def forward(self, x):
              return self.proj(self.fc(x).relu())

      class TinyLM(nn.Module):
          def __init__(self, vocab: int = 32000, dim: int = 1024):
              super().__init__()
              self.emb = nn.Embedding(vocab, dim)
              self.mlp = MLP(dim)
              self.proj = nn.Linear(dim, vocab, bias=False)
              self.proj.weight = self.emb.weight
          def forward(self, idx):
              return self.proj(self.mlp(self.emb(idx)))

    `);
    assert.equal(owned(ir, 'MLP', 'self.proj').role, 'mlp');
    assert.equal(owned(ir, 'MLP', 'self.proj').tied, false);
    assert.equal(owned(ir, 'MLP', 'self.proj').convertible, true);
    assert.equal(owned(ir, 'TinyLM', 'self.proj').role, 'lm_head');
    assert.equal(owned(ir, 'TinyLM', 'self.proj').tied, true);
  });

  it('several heads in a ModuleList whose outputs are stacked into the logits are lm-heads (MusicGen codebooks)', () => {
    const ir = analyze(py`
      import torch
      from torch import nn
      class MultiCodebookLM(nn.Module):
          def __init__(self, n_q: int = 4, card: int = 2048, dim: int = 1024):
              super().__init__()
              self.emb = nn.ModuleList([nn.Embedding(card + 1, dim) for _ in range(n_q)])
              self.body = nn.Linear(dim, dim)
              self.linears = nn.ModuleList([nn.Linear(dim, card) for _ in range(n_q)])
          def forward(self, codes):
              out = self.body(sum(self.emb[k](codes[:, k]) for k in range(codes.shape[1])))
              logits = torch.stack([self.linears[k](out) for k in range(codes.shape[1])], dim=1)
              return logits

    `);
    const heads = ir.layers.find((l) => l.name === 'linears[*]')!;
    assert.equal(heads.role, 'lm_head', heads.roleReasons.join('; '));
    assert.equal(heads.convertible, false);
    assert.equal(ir.layers.find((l) => l.name === 'self.body')!.role, 'other');
  });
});
