/**
 * Issue 23, "never silence for a construction that builds parameters": a norm class imported from a module the
 * analysis does not have, whose name is not a plain LayerNorm / RMSNorm (SAM's LayerNorm2d, diffusers' AdaLayerNorm*,
 * ConvNeXt-V2's GlobalResponseNorm), is listed as a module with no te.* equivalent, saying why and where its verdict
 * would come from, instead of nothing.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { analyzeTree } from '../../server/src/analysis';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';

const TEXT = readFileSync(join(__dirname, '..', 'fixtures', 'analysis', 'unknown_norm_classes.py'), 'utf8');

describe('analysis: norm classes from modules the analysis does not have are listed', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });
  after(() => parser.delete());

  const layers = () => {
    const tree = parser.parse(TEXT)!;
    try { return analyzeTree(tree, TEXT).layers; } finally { tree.delete(); }
  };

  it('lists LayerNorm2d, GlobalResponseNorm and the adaptive norms, not converted, with the reason', () => {
    const all = layers();
    const get = (name: string) => all.find((l) => l.name === name);
    for (const [name, cls, what] of [
      ['self.neck', 'LayerNorm2d', /a norm over channels laid out for convolutions defined in \.common/],
      ['self.grn', 'GlobalResponseNorm', /a normalization module defined in \.grn/],
      ['self.norm1', 'AdaLayerNormZero', /an adaptive norm .* defined in \.\.normalization/],
      ['self.norm_out', 'AdaLayerNormContinuous', /an adaptive norm/],
    ] as const) {
      const l = get(name);
      assert.ok(l, `${name} listed`);
      assert.equal(l.constructor, cls);
      assert.equal(l.kind, 'other');
      assert.equal(l.convertible, false);
      assert.match(l.reasons.join(' '), what);
      assert.match(l.reasons.join(' '), /te\.LayerNorm \/ te\.RMSNorm replace only a plain norm over the last axis/);
    }
  });

  it('lists a classification head class from a package (timm ClassifierHead) as kept in BF16', () => {
    const head = layers().find((l) => l.name === 'self.head');
    assert.ok(head, 'self.head listed');
    assert.deepEqual([head.kind, head.convertible], ['other', false]);
    assert.match(head.reasons.join(' '), /ClassifierHead is a classification head defined in timm\.layers: .* stays in BF16/);
  });

  it('leaves the other verdicts alone: a plain RMSNorm from a sibling, torch\'s norm, the Linear', () => {
    const all = layers();
    const get = (name: string) => all.find((l) => l.name === name)!;
    assert.equal(get('self.plain').kind, 'rmsnorm');
    assert.equal(get('self.ln').kind, 'layernorm');
    assert.equal(get('self.ln').convertible, true);
    assert.equal(get('self.proj').kind, 'linear');
  });
});
