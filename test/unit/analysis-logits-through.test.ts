/**
 * Held-out set 7's fifth round (docs/realcode.md): a Linear that writes the logits a holder's forward names (through
 * an nn.Sequential's last element or a local module class's returned result) is the model's prediction layer, kept in
 * BF16. Fixture of its own: test/fixtures/analysis/logits_through_holders.py.
 */
import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer } from './analysis-helpers';
import type { Layer, ModelIR } from '../../server/src/analysis/ir';

const at = (ir: ModelIR, src: string, needle: string): Layer[] => {
  const line = src.split('\n').findIndex((l) => l.includes(needle));
  assert.ok(line >= 0, `no line with ${needle}`);
  return ir.layers.filter((l) => l.span.startLine === line);
};

describe('analysis: the Linear that writes the logits a holder names', () => {
  before(initParser);
  const src = () => fixture('logits_through_holders.py');

  it('the last Linear of the over-arch whose result the model names logits is kept as the prediction layer', () => {
    const s = src();
    const ir = analyze(s);
    const [out] = at(ir, s, 'nn.Linear(layer_sizes[-2], layer_sizes[-1]');
    assert.equal(out.role, 'classifier');
    assert.equal(out.convertible, false);
    assert.equal(out.facets?.role.check, 'classifier-or-router');
    assert.match(out.roleReasons[0], /^its output is logits in Recommender\.forward \(through Recommender\.top -> TopArch\.model\)$/);
    const reason = out.reasons.join(' ');
    assert.match(reason, /writes the model's prediction/);
    assert.ok(reason.length <= 130, reason);
  });

  it('a held class whose forward returns its Linear\'s result gives that Linear the logits; attention scores do not', () => {
    const ir = analyze(src());
    const fc = layer(ir, 'self.fc');
    assert.equal(fc.role, 'classifier');
    assert.equal(fc.convertible, false);
    assert.match(fc.roleReasons[0], /through Ranker\.head -> ScoreHead\.fc/);
    const out = layer(ir, 'self.out_proj');
    assert.equal(out.role, 'attention');
  });

  it('Linears that end a stack nobody names logits, and the stack\'s own layers, keep their verdicts', () => {
    const s = src();
    const ir = analyze(s);
    const [enc] = at(ir, s, 'nn.Linear(d_model, d_model)');
    assert.notEqual(enc.role, 'classifier');
    assert.equal(enc.convertible, true);
    const inner = layer(ir, 'layers[*]');
    assert.notEqual(inner.role, 'classifier');
  });
});
