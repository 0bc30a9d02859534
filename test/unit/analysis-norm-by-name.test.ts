/**
 * A norm class looked up by name in torch.nn with getattr (`partial(getattr(nn, norm_layer), eps=1e-6)` where
 * `norm_layer: str = "LayerNorm"`, as configurable backbones write it; held-out set 5's Hiera final norm): reported as
 * the class the name denotes instead of nothing; bound to a name and called by it, it converts through the fallback's
 * run-time class check (the default's class is the module's attribute, `nn.LayerNorm`), called at once it is guarded.
 * Fixture of its own: test/fixtures/analysis/norm_class_by_name.py.
 */
import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer } from './analysis-helpers';

describe('analysis: norm classes looked up by name (getattr(nn, name))', () => {
  before(initParser);
  const ir = () => analyze(fixture('norm_class_by_name.py'));

  it('a string-default parameter turned into a class is that class, chosen at run time, converted through the run-time class check', () => {
    const n = layer(ir(), 'self.pre');
    assert.equal(n.kind, 'layernorm');
    assert.equal(n.role, 'norm');
    assert.equal(n.resolved, 'torch.nn.LayerNorm');
    // getattr(nn, "LayerNorm") is nn.LayerNorm itself: the fallback's fp8_layernorm_from checks the class looked up
    // (or passed instead of a name) at run time and builds te.LayerNorm only for it (fixes-norm-name-default.test.ts).
    assert.equal(n.convertible, true, n.reasons.join(' '));
    assert.deepEqual(n.classParam, { name: 'norm_name', defaultClass: 'nn.LayerNorm' });
    assert.match(n.reasons.join(' '), /norm_name = partial\(getattr\(nn, norm_name\), eps=1e-5\), chosen at run time: the conversion checks at run time that the class is nn\.LayerNorm/);
  });

  it('a looked-up class called at once (not by a name) stays guarded: the conversion has no name to check', () => {
    const m = analyze([
      'import torch.nn as nn',
      'class M(nn.Module):',
      '    def __init__(self, d=512, norm_name: str = "LayerNorm"):',
      '        super().__init__()',
      '        self.a = getattr(nn, norm_name)(d)',
      '    def forward(self, x):',
      '        return self.a(x)',
      '',
    ].join('\n'));
    const a = layer(m, 'self.a');
    assert.equal(a.kind, 'layernorm');
    assert.equal(a.convertible, 'uncertain', a.reasons.join(' '));
    assert.equal(a.classParam, undefined);
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
