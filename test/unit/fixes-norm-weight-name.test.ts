/**
 * A norm whose class calls its weight otherwise (torchtune's RMSNorm: `scale`) converts instead of staying guarded on
 * the checkpoint key: the conversion goes through fp8_rmsnorm_or(lambda: <the class as written>, ..., weight_name=
 * "scale"), whose te.* norm saves and loads `<name>.scale` and reads as `.scale`; without FP8 the class as written.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_SETTINGS } from '../../common/settings';
import { applyEdits, sourceFixes, type Fix } from '../../server/src/fixes';
import { fallbackSource } from '../../server/src/fixes/fallback-source';
import { analyse, pyCompileError } from './fixes-support';

const INPUT = readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'norm_weight_name.py'), 'utf8');

describe('fixes: a norm that calls its weight `scale` converts, keeping that checkpoint key', () => {
  it('the verdict: convertible, with the weight name kept and the class kept for the fallback', async () => {
    const { ir } = await analyse(INPUT);
    for (const name of ['self.sa_norm', 'self.mlp_norm']) {
      const l = ir.layers.find((x) => x.name === name)!;
      assert.equal(l.convertible, true, `${name}: ${l.reasons.join(' | ')}`);
      assert.equal(l.weightName, 'scale');
      assert.equal(l.fallbackKeepsClass, 'RMSNorm');
      assert.match(l.reasons.join(' '), new RegExp(`keeps the checkpoint key ${name.slice(5)}\\.scale`));
    }
  });

  it('"convert all" builds the class as written behind a lambda and passes weight_name; the result compiles and converts nothing twice', async () => {
    const { ir } = await analyse(INPUT);
    const fix = sourceFixes(INPUT, ir, DEFAULT_SETTINGS).find((f: Fix) => f.id === 'convert-all:file');
    assert.ok(fix, 'convert-all offered');
    const text = applyEdits(INPUT, fix.edits);
    assert.match(text, /self\.sa_norm = fp8_rmsnorm_or\(lambda: RMSNorm\(dim=embed_dim, eps=norm_eps\), normalized_shape=embed_dim, eps=norm_eps, weight_name="scale"\)/);
    assert.match(text, /self\.mlp_norm = fp8_rmsnorm_or\(lambda: RMSNorm\(embed_dim\), embed_dim, eps=1e-6, weight_name="scale"\)/);
    assert.equal(pyCompileError(text), undefined);
    const again = await analyse(text);
    const left = again.ir.layers.filter((l) => l.convertible === true && !l.isTe && l.name !== '');
    assert.deepEqual(left.map((l) => l.name), [], left.map((l) => `${l.name}: ${l.reasons.join(' ')}`).join('\n'));
  });

  it('the fallback module renames the key on save and load, for both TE APIs', () => {
    for (const api of ['modern', 'legacy'] as const) {
      const src = fallbackSource({ api, settings: DEFAULT_SETTINGS, teName: 'te' } as Parameters<typeof fallbackSource>[0]);
      assert.match(src, /^def _pl_keep_weight_name\(layer, name\):$/m);
      assert.match(src, /^def fp8_rmsnorm_or\(fallback, normalized_shape, eps=1e-5, weight_name=None, \*\*kwargs\):$/m);
      assert.equal(pyCompileError(src), undefined);
    }
  });
});
