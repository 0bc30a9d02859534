/**
 * Norms whose class calls its weight otherwise (torchtune's RMSNorm and k-diffusion's: `scale`) convert instead of
 * staying guarded on the checkpoint key: the conversion goes through fp8_rmsnorm_or(lambda: <the class as written>, ...,
 * weight_name="scale"), whose te.* norm saves and loads `<name>.scale` through state-dict hooks and reads as `.scale`;
 * without FP8 the class as written. test/python/exec.test.ts runs the result (strict loads both ways, same output).
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_SETTINGS } from '../../common/settings';
import { applyEdits, fixOutcome, sourceFixes, type Fix } from '../../server/src/fixes';
import { fallbackSource } from '../../server/src/fixes/fallback-source';
import { analyse, MECHANICS_SETTINGS, pyCompileError } from './fixes-support';

const INPUT = readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'norm_weight_name.py'), 'utf8');

describe('fixes: a norm that calls its weight `scale` converts, keeping that checkpoint key', () => {
  it('the verdict: convertible, with the weight name kept, the class kept for the fallback, and the key mapping said', async () => {
    const { ir } = await analyse(INPUT);
    for (const [name, cls] of [['self.sa_norm', 'RMSNorm'], ['self.mlp_norm', 'RMSNorm'], ['self.out_norm', 'KRMSNorm']]) {
      const l = ir.layers.find((x) => x.name === name)!;
      assert.equal(l.convertible, true, `${name}: ${l.reasons.join(' | ')}`);
      assert.equal(l.kind, 'rmsnorm');
      assert.equal(l.weightName, 'scale');
      assert.equal(l.fallbackKeepsClass, cls);
      assert.match(l.reasons.join(' '), new RegExp(`keeps the checkpoint key ${name.slice(5)}\\.scale .*state_dict saves its weight as ${name.slice(5)}\\.scale and load_state_dict reads it from there`));
      assert.match(l.reasons.join(' '), /A loader that bypasses load_state_dict finds no scale parameter and reports it\./);
    }
  });

  it('"convert all" builds the class as written behind a lambda and passes weight_name; the result compiles and converts nothing twice', async () => {
    const { ir } = await analyse(INPUT);
    const fix = sourceFixes(INPUT, ir, MECHANICS_SETTINGS).find((f: Fix) => f.id === 'convert-all:file');
    assert.ok(fix, 'convert-all offered');
    const text = applyEdits(INPUT, fix.edits);
    assert.match(text, /self\.sa_norm = fp8_rmsnorm_or\(lambda: RMSNorm\(dim=embed_dim, eps=norm_eps\), normalized_shape=embed_dim, eps=norm_eps, weight_name="scale"\)/);
    assert.match(text, /self\.mlp_norm = fp8_rmsnorm_or\(lambda: RMSNorm\(embed_dim\), embed_dim, eps=1e-6, weight_name="scale"\)/);
    assert.match(text, /self\.out_norm = fp8_rmsnorm_or\(lambda: KRMSNorm\(embed_dim\), embed_dim, eps=1e-6, weight_name="scale"\)/);
    assert.equal(pyCompileError(text), undefined);
    const again = await analyse(text);
    const left = again.ir.layers.filter((l) => l.convertible === true && !l.isTe && l.name !== '');
    assert.deepEqual(left.map((l) => l.name), [], left.map((l) => `${l.name}: ${l.reasons.join(' ')}`).join('\n'));
  });

  it('the single-layer fix gives the same call', async () => {
    const { ir, findings } = await analyse(INPUT);
    const i = ir.layers.findIndex((l) => l.name === 'self.out_norm');
    const finding = findings.find((f) => f.code === 'PL103' && f.layerIndex === i);
    assert.ok(finding, `PL103 on out_norm: ${findings.map((f) => `${f.code} ${f.layerIndex}`).join(', ')}`);
    const fix = fixOutcome(INPUT, ir, finding, MECHANICS_SETTINGS).fixes[0];
    assert.match(applyEdits(INPUT, fix.edits), /self\.out_norm = fp8_rmsnorm_or\(lambda: KRMSNorm\(embed_dim\), embed_dim, eps=1e-6, weight_name="scale"\)/);
  });

  it('the fallback module maps the key on save and load (module-level hooks, so the model pickles), for both TE APIs', () => {
    for (const api of ['modern', 'legacy'] as const) {
      const src = fallbackSource({ api, settings: DEFAULT_SETTINGS, teName: 'te' } as Parameters<typeof fallbackSource>[0]);
      assert.match(src, /^def _pl_keep_weight_name\(layer, name\):$/m);
      assert.match(src, /^def _pl_named_save\(name, module, state, prefix, local_metadata\):$/m);
      assert.match(src, /^def fp8_rmsnorm_or\(fallback, normalized_shape, eps=1e-5, when=True, weight_name=None, \*\*kwargs\):$/m);
      assert.equal(pyCompileError(src), undefined);
    }
  });
});
