/**
 * Blocks imported from a package the catalogue does not know whose names say they build Linears or weight matrices
 * (`MLP`, `LowRankCrossNet`, `...FeedForward`; held-out set 7's torchrec DLRM arches): listed, not converted, saying
 * where their layers are built, instead of nothing. Fixture of its own: test/fixtures/analysis/unknown_library_blocks.py.
 */
import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer } from './analysis-helpers';

describe('analysis: blocks imported from packages the catalogue does not know', () => {
  before(initParser);
  const ir = () => analyze(fixture('unknown_library_blocks.py'));

  it('an MLP, a cross network and a feed-forward block from unknown packages are listed, not converted, with where to convert', () => {
    const m = ir();
    for (const [name, cls, module] of [
      ['self.bottom', 'MLP', 'recsys_lib.layers.perceptron'],
      ['self.cross', 'LowRankCrossNet', 'recsys_lib.layers.interactions'],
      ['self.ffn', 'GatedFeedForward', 'some_framework.blocks'],
    ]) {
      const l = layer(m, name);
      assert.equal(l.constructor, cls);
      assert.equal(l.kind, 'other');
      assert.equal(l.convertible, false);
      assert.ok(l.reasons.join(' ').startsWith(`${cls} is defined in ${module}, outside this file and the catalogue: its layers are built there`), l.reasons.join(' '));
    }
  });

  it('a catalogued library\'s block, a relative import and the Linears beside them keep their own verdicts', () => {
    const m = ir();
    // timm's Mlp is in the catalogue: its own verdict, not the unknown-package one.
    assert.doesNotMatch(layer(m, 'self.vision').reasons.join(' '), /outside this file and the catalogue/);
    // A relative import is the project's own module: no report from this rule.
    assert.ok(!m.layers.some((l) => l.name === 'self.local'), m.layers.map((l) => l.name).join(', '));
    assert.equal(layer(m, 'self.top').convertible, true);
  });

  it('a class of the file with such a name is read as the file defines it', () => {
    const m = analyze([
      'import torch.nn as nn',
      'from recsys_lib.layers import MLP as _Unused',
      'class MLP(nn.Module):',
      '    def __init__(self, d=512):',
      '        super().__init__()',
      '        self.fc = nn.Linear(d, d)',
      '    def forward(self, x):',
      '        return self.fc(x)',
      'class M(nn.Module):',
      '    def __init__(self):',
      '        super().__init__()',
      '        self.mlp = MLP(512)',
      '    def forward(self, x):',
      '        return self.mlp(x)',
      '',
    ].join('\n'));
    assert.doesNotMatch(layer(m, 'self.mlp').reasons.join(' '), /outside this file/);
    assert.equal(layer(m, 'self.fc').convertible, true);
  });
});
