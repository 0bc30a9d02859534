/**
 * A Linear whose class is chosen at run time and called by name (timm's `linear_layer = partial(nn.Conv2d,
 * kernel_size=1) if use_conv else nn.Linear`, a `head_layer=nn.Linear` parameter): it converts through the fallback's
 * fp8_linear_from, which checks at run time that the class chosen is nn.Linear built plainly and builds the class as
 * written otherwise, instead of staying "uncertain" with nothing to apply.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MECHANICS_SETTINGS } from './fixes-support';
import { applyEdits, sourceFixes, type Fix } from '../../server/src/fixes';
import { fallbackSource } from '../../server/src/fixes/fallback-source';
import { analyse, pyCompileError } from './fixes-support';

const INPUT = readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'linear_layer_choice.py'), 'utf8');

describe('fixes: Linear layers whose class is chosen at run time convert through a run-time class check', () => {
  it('the verdict: convertible, with the name the class is bound to and the class the check looks for', async () => {
    const { ir } = await analyse(INPUT);
    const linears = ir.layers.filter((l) => l.kind === 'linear');
    assert.deepEqual(linears.map((l) => [l.ownerClass, l.name, l.convertible]), [
      ['Mlp', 'self.fc1', true], ['Mlp', 'self.fc2', true], ['GluMlp', 'self.fc1', true], ['GluMlp', 'self.fc2', true], ['Head', 'self.proj', true],
    ]);
    for (const l of linears.slice(0, 4)) {
      assert.deepEqual(l.classParam, { name: 'linear_layer', defaultClass: 'nn.Linear' });
      const why = l.reasons.join(' ');
      assert.match(why, /chosen at run time among classes that convert differently \(partial\(nn\.Conv2d, kernel_size=1\) -> no te\.\* twin; nn\.Linear -> te\.Linear\)/);
      assert.match(why, /the conversion checks at run time that the class is nn\.Linear/);
    }
    assert.deepEqual(linears[4].classParam, { name: 'head_layer', defaultClass: 'nn.Linear' });
    // Head is built nowhere in the file: its sizes are unknown, and the same factory checks the FP8 shape rule when
    // it builds the layer (keeping the class as written where it fails, not torch.nn.Linear).
    assert.match(linears[4].reasons.join(' '), /converts through fp8_linear_from, which builds te\.Linear when .* and keeps the class as written otherwise/);
  });

  it('"convert all" passes the bound name and nn.Linear to fp8_linear_from, the arguments as written; the result compiles and converts nothing twice', async () => {
    const { ir } = await analyse(INPUT);
    const fix = sourceFixes(INPUT, ir, MECHANICS_SETTINGS).find((f: Fix) => f.id === 'convert-all:file');
    assert.ok(fix, 'convert-all offered');
    const text = applyEdits(INPUT, fix.edits);
    assert.match(text, /self\.fc1 = fp8_linear_from\(linear_layer, nn\.Linear, in_features, hidden_features, bias=bias, \*\*dd\)/);
    assert.match(text, /self\.fc2 = fp8_linear_from\(linear_layer, nn\.Linear, hidden_features \/\/ 2, in_features, device=device, dtype=dtype\)/);
    assert.match(text, /self\.proj = fp8_linear_from\(head_layer, nn\.Linear, dim, dim\)/);
    assert.match(text, /linear_layer = partial\(nn\.Conv2d, kernel_size=1\) if use_conv else nn\.Linear/, 'the choice itself is left as written');
    assert.equal(pyCompileError(text), undefined);
    const again = await analyse(text);
    const left = again.ir.layers.filter((l) => l.convertible === true && !l.isTe);
    assert.deepEqual(left.map((l) => l.name), [], left.map((l) => `${l.name}: ${l.reasons.join(' ')}`).join('\n'));
  });

  it('the fallback module defines fp8_linear_from for both TE APIs', () => {
    for (const api of ['modern', 'legacy'] as const) {
      const src = fallbackSource({ api, settings: MECHANICS_SETTINGS, teName: 'te' } as Parameters<typeof fallbackSource>[0]);
      assert.match(src, /^def fp8_linear_from\(cls, default, \*args, \*\*kwargs\):$/m);
      assert.match(src, /^def _pl_linear_from\(cls, classes, args, kwargs\):$/m);
      assert.equal(pyCompileError(src), undefined);
    }
  });
});
