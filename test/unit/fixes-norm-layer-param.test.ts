/**
 * A norm whose class is a parameter (`norm_layer(dim)`, defaulting to a norm class that converts, as timm, SAM, Hiera
 * and DINOv2 write their blocks): it converts through the fallback's fp8_layernorm_from, which checks at run time that
 * the class passed is the default (or torch.nn's) and builds the class as written otherwise.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MECHANICS_SETTINGS } from './fixes-support';
import { applyEdits, sourceFixes, type Fix } from '../../server/src/fixes';
import { fallbackSource } from '../../server/src/fixes/fallback-source';
import { analyse, pyCompileError } from './fixes-support';

const INPUT = readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'norm_layer_param.py'), 'utf8');

describe('fixes: norms built from a norm_layer parameter convert through a run-time class check', () => {
  it('the verdict: convertible when the default is one norm class (or a partial of one), or a choice among classes of which one converts', async () => {
    const { ir } = await analyse(INPUT);
    const get = (name: string) => ir.layers.find((l) => l.name === name)!;
    // `picked` defaults to `nn.Identity if USE_RMS else nn.LayerNorm`: the check at run time builds te.* only for the LayerNorm.
    for (const [name, param, cls] of [['self.pre', 'norm_layer', 'nn.LayerNorm'], ['self.post', 'norm_layer', 'nn.LayerNorm'], ['self.final', 'norm_layer', 'nn.LayerNorm'], ['self.chosen', 'picked', 'nn.LayerNorm']]) {
      const l = get(name);
      assert.equal(l.convertible, true, `${name}: ${l.reasons.join(' | ')}`);
      assert.deepEqual(l.classParam, { name: param, defaultClass: cls });
      assert.match(l.reasons.join(' '), new RegExp(`checks at run time that the class is ${cls.replace('.', '\\.')}`));
    }
    // A parameter defaulting to None builds no layer the analysis can name.
    assert.equal(ir.layers.find((l) => l.name === 'self.extra' && /norm/.test(l.kind)), undefined);
  });

  it('"convert all" passes the parameter and its default to fp8_layernorm_from, keeping the arguments as written', async () => {
    const { ir } = await analyse(INPUT);
    const fix = sourceFixes(INPUT, ir, MECHANICS_SETTINGS).find((f: Fix) => f.id === 'convert-all:file');
    assert.ok(fix, 'convert-all offered');
    const text = applyEdits(INPUT, fix.edits);
    assert.match(text, /self\.pre = fp8_layernorm_from\(norm_layer, nn\.LayerNorm, dim, \*\*dd\)/);
    assert.match(text, /self\.post = fp8_layernorm_from\(norm_layer, nn\.LayerNorm, dim\)/);
    assert.match(text, /self\.final = fp8_layernorm_from\(norm_layer, nn\.LayerNorm, dim\)/);
    assert.match(text, /self\.chosen = fp8_layernorm_from\(picked, nn\.LayerNorm, dim\)/);
    // pre feeds only up: fused where FP8 runs (fp8_fuse_norm checks at run time that the class passed in is a plain norm).
    assert.match(text, /self\.up = fp8_fuse_norm\(self\.pre, fp8_linear\(dim, hidden\)\)/);
    assert.equal(pyCompileError(text), undefined);
    // Analysed again: the factory is converted, and the class it is given is no new finding.
    const again = await analyse(text);
    const left = again.ir.layers.filter((l) => l.convertible === true && !l.isTe);
    assert.deepEqual(left.map((l) => l.name), [], left.map((l) => `${l.name}: ${l.reasons.join(' ')}`).join('\n'));
  });

  it('the fallback module defines fp8_is_class and both factories, for both TE APIs', () => {
    for (const api of ['modern', 'legacy'] as const) {
      const src = fallbackSource({ api, settings: MECHANICS_SETTINGS, teName: 'te' } as Parameters<typeof fallbackSource>[0]);
      assert.match(src, /^def fp8_is_class\(cls, \*classes\):$/m);
      assert.match(src, /^def fp8_layernorm_from\(cls, default, \*args, \*\*kwargs\):$/m);
      assert.match(src, /^def fp8_rmsnorm_from\(cls, default, \*args, \*\*kwargs\):$/m);
      assert.equal(pyCompileError(src), undefined);
    }
  });
});
