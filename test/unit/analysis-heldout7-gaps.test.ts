/**
 * Norm gaps held-out set 7 left (docs/realcode.md): nn.RMSNorm built without eps, a norm whose weight is named
 * `scale`, and a norm whose forward transforms its weight (a per-head gain in log space). Fixture of its own:
 * test/fixtures/analysis/norm_scale_and_default_eps.py.
 */
import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer } from './analysis-helpers';

describe('analysis: norm gaps from held-out set 7', () => {
  before(initParser);
  const ir = () => analyze(fixture('norm_scale_and_default_eps.py'));

  it('nn.RMSNorm without eps (or eps=None) converts with float32\'s epsilon passed explicitly, and says why', () => {
    const m = ir();
    for (const name of ['self.torch_norm', 'self.torch_norm_none']) {
      const n = layer(m, name);
      assert.equal(n.kind, 'rmsnorm');
      assert.equal(n.convertible, true, `${name}: ${n.reasons.join(' ')}`);
      assert.equal(n.facets?.structure.check, 'rmsnorm-args');
      // The eps difference is stated: torch's default against te.RMSNorm's 1e-5, and the eps the conversion passes.
      assert.equal(n.teArgs?.eps, '1.1920928955078125e-07');
      assert.match(n.reasons.join(' '), /te\.RMSNorm defaults to eps=1e-5: the conversion passes eps=1\.1920928955078125e-07 explicitly, which is exact/);
    }
    const given = layer(m, 'self.torch_norm_eps');
    assert.equal(given.convertible, true);
    assert.equal(given.teArgs?.eps, '1e-6');
  });

  it('nn.RMSNorm(d, None) (eps by position) stays uncertain: the conversion cannot pass eps there', () => {
    const m = analyze([
      'import torch.nn as nn',
      'class M(nn.Module):',
      '    def __init__(self, d=1024):',
      '        super().__init__()',
      '        self.n = nn.RMSNorm(d, None)',
      '    def forward(self, x):',
      '        return self.n(x)',
      '',
    ].join('\n'));
    const n = layer(m, 'self.n');
    assert.equal(n.convertible, 'uncertain');
    assert.match(n.reasons.join(' '), /does not let the conversion pass eps.*eps=torch\.finfo\(torch\.float32\)\.eps keeps today's/);
  });

  it('an RMSNorm whose weight is named scale converts, and the reason says the conversion keeps the key', () => {
    const n = layer(ir(), 'self.pre_norm');
    assert.equal(n.kind, 'rmsnorm');
    assert.equal(n.teEquivalent, 'te.RMSNorm');
    assert.equal(n.convertible, true, n.reasons.join(' '));
    assert.equal(n.weightName, 'scale');
    assert.match(n.reasons.join(' '), /names its weight parameter scale, te\.RMSNorm names it weight: the conversion keeps the checkpoint key pre_norm\.scale/);
  });

  it('a norm whose forward transforms its weight (exp of a log-gain broadcast per head, a clamp) is kept, with the line', () => {
    const m = ir();
    const head = layer(m, 'self.head_norm');
    assert.equal(head.kind, 'rmsnorm');
    assert.equal(head.convertible, false);
    assert.equal(head.facets?.structure.check, 'norm-weight-transformed');
    assert.match(head.reasons.join(' '), /transforms its weight before scaling by it \(`gain = torch\.exp\(0\.5 \* self\.scale\)\[:, None, None\]`\)/);
    assert.ok(!head.reasons.some((r) => / can become te\./.test(r)), head.reasons.join(' '));
    const clamped = layer(m, 'self.clamped_norm');
    assert.equal(clamped.convertible, false);
    assert.equal(clamped.facets?.structure.check, 'norm-weight-transformed');
  });
});

describe('analysis: a norm class parameter defaulting to None that no caller in the file fills', () => {
  before(initParser);
  const ir = () => analyze(fixture('norm_param_unfilled.py'));

  it('is reported as a norm of unknown class, not converted, with the reason and where to convert', () => {
    const m = ir();
    const merger = m.layers.find((l) => l.ownerClass === 'PatchMerger' && l.name === 'self.norm' && l.constructor === 'norm_layer');
    assert.ok(merger, m.layers.map((l) => `${l.ownerClass}.${l.name}:${l.constructor}`).join(', '));
    assert.equal(merger.kind, 'layernorm');
    assert.equal(merger.role, 'norm');
    assert.equal(merger.convertible, false);
    assert.equal(merger.facets?.structure.check, 'catalogue-no-te');
    assert.match(merger.reasons.join(' '), /^Unknown class: norm_layer is None by default; no call of PatchMerger\(\.\.\.\) in this file passes a class for it/);
    assert.match(merger.reasons.join(' '), /convert where the class is chosen \(norm_layer=nn\.LayerNorm or nn\.RMSNorm passed in this file/);
    const stem = m.layers.find((l) => l.ownerClass === 'Stem' && l.constructor === 'rms_norm_cls');
    assert.equal(stem?.kind, 'rmsnorm');
    assert.equal(stem?.convertible, false);
    // Assigned in the function from something the analysis does not resolve: reported, and the reason quotes it.
    const head = m.layers.find((l) => l.ownerClass === 'Head' && l.constructor === 'norm_layer');
    assert.equal(head?.convertible, false);
    assert.match(head?.reasons.join(' ') ?? '', /__init__\(\) assigns it \(`norm_layer = norm_layer or nn\.LayerNorm`, line \d+\)/);
    // An activation class parameter builds no parameters: still not reported.
    assert.ok(!m.layers.some((l) => l.constructor === 'act_layer'));
  });

  it('a function applied to a tensor (norm=None, norm_fn=None) is no class: nothing is reported for it', () => {
    const m = analyze([
      'def apply(x, norm=None, norm_fn=None):',
      '    x = norm(x) if norm is not None else x',
      '    return norm_fn(x) if norm_fn else x',
      '',
    ].join('\n'));
    assert.deepEqual(m.layers.map((l) => l.constructor), []);
  });

  it('a caller in the file that passes the class still decides it (converts through the run-time class check)', () => {
    const n = ir().layers.find((l) => l.ownerClass === 'Layer' && l.name === 'self.norm')!;
    assert.equal(n.convertible, true, n.reasons.join(' '));
    assert.deepEqual(n.classParam, { name: 'norm_layer', defaultClass: 'nn.LayerNorm' });
  });
});
