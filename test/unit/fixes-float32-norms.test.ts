/**
 * Norm subclasses whose forward computes in float32 and casts back (open_clip's LayerNormFp32, fairseq's and
 * diffusers' float32 LayerNorms written into a model file): te.LayerNorm / te.RMSNorm compute their statistics in
 * float32 and return the input's dtype, so they convert; where FP8 does not run the conversion builds the model's own
 * class (behind a lambda), since torch.nn's norm would meet a BF16 input with FP32 weights.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MECHANICS_SETTINGS } from './fixes-support';
import { applyEdits, sourceFixes, type Fix } from '../../server/src/fixes';
import { fallbackSource } from '../../server/src/fixes/fallback-source';
import { analyse, pyCompileError } from './fixes-support';

const INPUT = readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'float32_norm_subclasses.py'), 'utf8');

describe('fixes: float32 norm subclasses convert and keep their class for the fallback', () => {
  it('the verdict: convertible, with the class kept for the fallback; the channel-axis one stays', async () => {
    const { ir } = await analyse(INPUT);
    const get = (name: string) => ir.layers.find((l) => l.name === name)!;
    for (const [name, cls] of [['self.ln_1', 'LayerNormFp32'], ['self.rms', 'RMSNormFp32']]) {
      assert.equal(get(name).convertible, true, `${name}: ${get(name).reasons.join(' ')}`);
      assert.equal(get(name).fallbackKeepsClass, cls);
      assert.match(get(name).reasons.join(' '), new RegExp(`${cls}\\.forward computes in float32 .* keeps ${cls} for the fallback`));
    }
    // nn.RMSNorm's eps=None (the input dtype's epsilon) is kept by a subclass that leaves __init__ alone.
    assert.equal(get('self.rms_dtype_eps').convertible, 'uncertain');
    assert.match(get('self.rms_dtype_eps').reasons.join(' '), /torch\.finfo\(dtype\)\.eps/);
    assert.equal(get('self.neck').convertible, false);
    assert.equal(get('self.neck').fallbackKeepsClass, undefined);
  });

  it('"convert all" builds te.* through fp8_layernorm_or / fp8_rmsnorm_or with the original call behind a lambda', async () => {
    const { ir } = await analyse(INPUT);
    const fix = sourceFixes(INPUT, ir, MECHANICS_SETTINGS).find((f: Fix) => f.id === 'convert-all:file');
    assert.ok(fix, 'convert-all offered');
    const text = applyEdits(INPUT, fix.edits);
    assert.match(text, /self\.ln_1 = fp8_layernorm_or\(lambda: LayerNormFp32\(dim, eps=1e-6\), dim, eps=1e-6\)/);
    assert.match(text, /self\.rms = fp8_rmsnorm_or\(lambda: RMSNormFp32\(dim, eps=1e-6\), dim, eps=1e-6\)/);
    assert.match(text, /self\.plain = fp8_layernorm\(dim\)/);
    assert.match(text, /self\.rms_dtype_eps = RMSNormFp32\(dim\)/);
    assert.match(text, /self\.neck = ChannelsFirstNorm\(dim\)/);
    assert.equal(pyCompileError(text), undefined);
    // Analysed again, the kept classes are the factories' fallbacks, not new findings.
    const again = await analyse(text);
    for (const cls of ['LayerNormFp32', 'RMSNormFp32']) {
      const inner = again.ir.layers.find((l) => l.constructor === cls);
      assert.ok(inner, cls);
      assert.notEqual(inner.convertible, true, `${cls}: ${inner.reasons.join(' ')}`);
    }
  });

  it('the fallback module defines both factories, for both TE APIs', () => {
    for (const api of ['modern', 'legacy'] as const) {
      const src = fallbackSource({ api, settings: MECHANICS_SETTINGS, teName: 'te' } as Parameters<typeof fallbackSource>[0]);
      assert.match(src, /^def fp8_layernorm_or\(fallback, normalized_shape, eps=1e-5, when=True, weight_name=None, \*\*kwargs\):$/m);
      assert.match(src, /^def fp8_rmsnorm_or\(fallback, normalized_shape, eps=1e-5, when=True, weight_name=None, \*\*kwargs\):$/m);
      assert.equal(pyCompileError(src), undefined);
    }
  });
});
