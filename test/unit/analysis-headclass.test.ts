import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer } from './analysis-helpers';

describe('analysis: classification-head classes', () => {
  before(initParser);

  it('keeps the hidden projection of a head class that ends in a class-count output, and nothing else', () => {
    const ir = analyze(fixture('classification_head_class.py'));
    const out = layer(ir, 'self.logits_out');
    assert.equal(out.role, 'classifier');
    const hidden = layer(ir, 'self.hidden_proj');
    assert.equal(hidden.role, 'classifier');
    assert.equal(hidden.convertible, false);
    assert.match(hidden.reasons[0], /^Part of the classification head SentenceClassificationHead: /);
    // a head class with no class-count output, and the trunk's MLP, keep their roles and convert
    const proj = layer(ir, 'self.proj');
    assert.notEqual(proj.role, 'classifier');
    assert.equal(proj.convertible, true);
    for (const n of ['self.fc1', 'self.fc2']) {
      assert.equal(layer(ir, n).role, 'mlp');
      assert.equal(layer(ir, n).convertible, true);
    }
  });
});
