import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer } from './analysis-helpers';

describe('analysis: a weight read on a branch beside the call', () => {
  before(initParser);

  it('converts when every direct read sits on a branch whose sibling calls the layer, and only then', () => {
    const ir = analyze(fixture('weight_read_in_branch.py'));
    for (const [name, head] of [['self.out', 'if self.slices > 1 and self.exact:'], ['self.qkv', 'else:']] as const) {
      const l = layer(ir, name);
      assert.equal(l.convertible, true, `${name}: ${l.reasons.join(' | ')}`);
      assert.ok(l.reasons.some((r) => r.includes(`only on the branch \`${head}\``)), `${name}: ${l.reasons.join(' | ')}`);
    }
    for (const name of ['self.proj', 'self.mix']) {
      const l = layer(ir, name);
      assert.equal(l.convertible, 'uncertain', `${name}: ${l.reasons.join(' | ')}`);
      assert.match(l.reasons.join(' '), /also reads self\.\w+\.weight directly/);
    }
  });
});
