/**
 * Gaps found by scoring the analysis against an FP8 expert's labels on real model files it had not seen
 * (`npm run eval:realcode`, bench/realcode/): each fixed generally, each with a fixture written in that style.
 */
import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser } from './analysis-helpers';

describe('analysis: gaps from the real-code evaluation', () => {
  before(initParser);

  it('a projection to the classifier width (classifier_proj_size) belongs to the classification head, the encoder does not', () => {
    const ir = analyze(fixture('audio_classification_head.py'));
    const get = (name: string) => ir.layers.find((l) => l.name === name)!;
    for (const name of ['self.projector', 'self.classifier']) {
      assert.equal(get(name).role, 'classifier', name);
      assert.equal(get(name).convertible, false, name);
    }
    for (const name of ['self.q_proj', 'self.k_proj', 'self.v_proj', 'self.out_proj', 'self.fc1', 'self.fc2']) {
      assert.equal(get(name).convertible, true, `${name}: ${get(name).reasons.join(' ')}`);
    }
  });

  it('an imported library norm whose forward the catalogue read converts; one called scale, or unread, stays guarded with the reason', () => {
    const ir = analyze(fixture('library_norms.py'));
    const get = (name: string) => ir.layers.find((l) => l.name === name)!;
    const timm = get('self.timm_norm');
    assert.equal(timm.kind, 'rmsnorm');
    assert.equal(timm.convertible, true, timm.reasons.join(' '));
    assert.match(timm.facets!.structure.reason, /plain RMSNorm over the last axis \(read in timm/);
    const tune = get('self.tune_norm');
    assert.notEqual(tune.convertible, true);
    assert.equal(tune.facets!.structure.check, 'norm-scale-name');
    assert.match(tune.facets!.structure.reason, /tune_norm\.scale -> tune_norm\.weight/);
    const other = get('self.other_norm');
    assert.notEqual(other.convertible, true);
    assert.equal(other.facets!.structure.check, 'imported-norm-class');
  });
});
