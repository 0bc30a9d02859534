/**
 * Held-out set 7's fifth round (docs/realcode.md): layers built in a builder class's factory methods are reported
 * where they are built, not where the methods are called, when no call site says more (a place in a module, a size);
 * a projection built on an embedding's weight is tied to it; a class's alternate constructor (`X.from_linear(m)`) is
 * no new construction. Fixture of its own: test/fixtures/analysis/builder_class_factories.py.
 */
import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer, py } from './analysis-helpers';
import type { Layer, ModelIR } from '../../server/src/analysis/ir';

const at = (ir: ModelIR, src: string, needle: string): Layer[] => {
  const line = src.split('\n').findIndex((l) => l.includes(needle));
  assert.ok(line >= 0, `no line with ${needle}`);
  return ir.layers.filter((l) => l.span.startLine === line);
};

describe('analysis: factory methods of a builder class', () => {
  before(initParser);
  const src = () => fixture('builder_class_factories.py');

  it('reports each layer once where the method builds it, not at the method\'s call sites', () => {
    const s = src();
    const ir = analyze(s);
    // Nothing at the call sites (locals passed on, no size bound).
    for (const site of ['tok = self.create_embedding()', 'final_norm = self.create_norm()', 'head = self.create_head(tok)', 'attn_norm = self.create_norm()', 'mlp_norm = self.create_norm()']) {
      assert.deepEqual(at(ir, s, site).map((l) => l.constructor), [], site);
    }
    const [emb] = at(ir, s, 'table = VocabEmbedding(');
    assert.equal(emb.kind, 'embedding');
    assert.equal(emb.role, 'embedding');
    assert.equal(emb.name, 'table');
    assert.equal(emb.viaFactory, 'create_embedding');
    // One norm for the three calls of create_norm (their locals disagree, so it has no name of its own).
    const norms = ir.layers.filter((l) => l.constructor === 'WordRMSNorm');
    assert.equal(norms.length, 1);
    assert.equal(norms[0].viaFactory, 'create_norm');
    assert.ok(at(ir, s, 'return WordRMSNorm(').includes(norms[0]));
  });

  it('the head keeps its lm-head role where it is built: by its vocabulary size, or tied to the embedding it is built on', () => {
    const s = src();
    const ir = analyze(s);
    const [linear] = at(ir, s, 'head = nn.Linear(self.cfg.dim, self.cfg.vocab_size');
    assert.equal(linear.role, 'lm_head');
    assert.equal(linear.convertible, false);
    assert.equal(linear.name, 'head');
    const [tied] = at(ir, s, 'return TiedProjection(tok.weight');
    assert.equal(tied.role, 'lm_head');
    assert.equal(tied.tied, true);
    assert.equal(tied.convertible, false);
    assert.match(tied.roleReasons.join(' '), /weights tied to the embedding tok/);
  });

  it('X.from_linear(m, ...) is no new Linear sized by its arguments', () => {
    const s = src();
    const ir = analyze(s);
    assert.deepEqual(at(ir, s, 'ShardedLinear.from_linear(head'), []);
    assert.ok(!ir.layers.some((l) => /from_linear/.test(l.constructor)));
  });

  it('a call site that stores the layer under an attribute and binds its sizes keeps it there', () => {
    const s = src();
    const ir = analyze(s);
    const fc = layer(ir, 'self.fc');
    assert.equal(fc.viaFactory, 'make_proj');
    assert.equal(fc.inFeatures?.value, 1024);
    assert.equal(fc.outFeatures?.value, 4096);
    assert.equal(fc.convertible, true);
    assert.equal(at(ir, s, 'self.fc = make_proj(')[0], fc);
  });

  it('a local call site that binds a known size keeps the layer at the call (the size is known only there)', () => {
    const ir = analyze(py`
      import torch.nn as nn
      def make_proj(d_in, d_out):
          return nn.Linear(d_in, d_out)
      def build():
          proj = make_proj(1024, 4096)
          return nn.Sequential(proj, nn.GELU())
    `);
    const p = ir.layers.filter((l) => l.constructor === 'nn.Linear');
    assert.equal(p.length, 1);
    assert.equal(p[0].span.startLine, 4);
    assert.equal(p[0].outFeatures?.value, 4096);
  });

  it('a module passed to a class\'s alternate constructor is guarded: that constructor may need a torch.nn.Linear', () => {
    const ir = analyze(py`
      import torch.nn as nn
      from mylib.nn import ShardedLinear
      class M(nn.Module):
          def __init__(self, tp):
              super().__init__()
              fc = nn.Linear(1024, 1024)
              self.fc = ShardedLinear.from_linear(fc, tp)
    `);
    assert.equal(ir.layers.length, 1);
    const fc = ir.layers[0];
    assert.equal(fc.constructor, 'nn.Linear');
    assert.equal(fc.convertible, 'uncertain');
    assert.equal(fc.facets?.structure.check, 'reparametrising-wrapper');
    assert.match(fc.reasons.join(' '), /passed to ShardedLinear\.from_linear\(\), which builds another module from it/);
  });
});
