/**
 * A norm class looked up by name in torch.nn with getattr (`partial(getattr(nn, norm_layer), eps=1e-6)` where
 * `norm_layer: str = "LayerNorm"`, as configurable backbones write it; held-out set 5's Hiera final norm): reported as
 * the class the name denotes, guarded because the name (or the class) is chosen at run time, instead of nothing.
 * Fixture of its own: test/fixtures/analysis/norm_class_by_name.py.
 */
import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer } from './analysis-helpers';

describe('analysis: norm classes looked up by name (getattr(nn, name))', () => {
  before(initParser);
  const ir = () => analyze(fixture('norm_class_by_name.py'));

  it('a string-default parameter turned into a class is reported as that class, chosen at run time, not converted as is', () => {
    const n = layer(ir(), 'self.pre');
    assert.equal(n.kind, 'layernorm');
    assert.equal(n.role, 'norm');
    assert.equal(n.resolved, 'torch.nn.LayerNorm');
    assert.equal(n.convertible, 'uncertain', n.reasons.join(' '));
    assert.equal(n.facets?.structure.check, 'class-chosen-at-run-time');
    assert.match(n.reasons.join(' '), /norm_name = partial\(getattr\(nn, norm_name\), eps=1e-5\), chosen at run time/);
  });

  it('a literal name (called at once, or bound to a local first) is that torch.nn class', () => {
    const m = ir();
    const ln = layer(m, 'self.ln');
    assert.equal(ln.kind, 'layernorm');
    assert.equal(ln.resolved, 'torch.nn.LayerNorm');
    assert.notEqual(ln.convertible, true);
    const rms = layer(m, 'self.rms');
    assert.equal(rms.kind, 'rmsnorm');
    assert.equal(rms.resolved, 'torch.nn.RMSNorm');
    assert.notEqual(rms.convertible, true);
    assert.match(rms.reasons.join(' '), /rms = getattr\(torch\.nn, "RMSNorm"\)/);
    // The Linears beside them are unaffected.
    assert.equal(layer(m, 'self.proj').convertible, true);
    assert.equal(layer(m, 'self.mix').convertible, true);
  });

  it('an activation looked up by name, a name torch.nn lacks, and getattr on an object report nothing', () => {
    const m = ir();
    const owned = m.layers.filter((l) => l.ownerClass === 'NotAClass').map((l) => `${l.name}:${l.kind}`);
    assert.ok(!owned.some((s) => /norm/.test(s)), owned.join(', '));
    assert.ok(!m.layers.some((l) => l.name === 'self.mode'), owned.join(', '));
  });

  it('a parameter whose default is not a string (a class, None) keeps its own rules', () => {
    const m = analyze([
      'from functools import partial',
      'import torch.nn as nn',
      'class M(nn.Module):',
      '    def __init__(self, d=512, norm_layer=nn.LayerNorm, kind=None):',
      '        super().__init__()',
      '        self.a = norm_layer(d)',
      '        self.b = partial(getattr(nn, kind), eps=1e-6)(d)',
      '    def forward(self, x):',
      '        return self.b(self.a(x))',
      '',
    ].join('\n'));
    assert.equal(layer(m, 'self.a').convertible, true);
    assert.ok(!m.layers.some((l) => l.name === 'self.b'));
  });
});
