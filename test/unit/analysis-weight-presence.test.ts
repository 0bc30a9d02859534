import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer } from './analysis-helpers';

describe('analysis: testing whether a weight or bias exists is no direct read', () => {
  before(initParser);

  it('converts Linears whose bias is only tested against None (is / is not / == / !=) before initialising it', () => {
    const ir = analyze(fixture('weight_presence_tests.py'));
    for (const name of ['self.gate', 'self.value', 'self.down']) {
      const l = layer(ir, name);
      assert.equal(l.convertible, true, `${name}: ${l.reasons.join(' | ')}`);
      assert.ok(!l.reasons.some((r) => /reads self\.\w+\.weight directly/.test(r)), `${name}: ${l.reasons.join(' | ')}`);
    }
  });

  it('still counts a weight read for a functional op in the same class as a direct read', () => {
    const l = layer(analyze(fixture('weight_presence_tests.py')), 'self.proj');
    assert.notEqual(l.convertible, true, l.reasons.join(' | '));
    assert.match(l.reasons.join(' '), /reads self\.proj\.weight directly/);
  });
});
