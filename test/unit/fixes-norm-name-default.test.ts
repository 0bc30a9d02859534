/**
 * A norm class named by a string parameter and looked up in torch.nn (`norm_name: str = "LayerNorm"`, then
 * `norm_name = partial(getattr(nn, norm_name), eps=1e-6)` when it is a string, then `norm_name(width)`; held-out set
 * 5's Hiera final norm): getattr(nn, "LayerNorm") is nn.LayerNorm itself, so the call converts through the fallback's
 * fp8_layernorm_from(norm_name, nn.LayerNorm, width), which checks at run time that the class looked up (or passed
 * instead of a name) is nn.LayerNorm built plainly and builds it as written otherwise. Fixture of its own:
 * test/fixtures/fixes/norm_name_default.py; its CPU run and its run under the fake TE are in test/python/exec.test.ts.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MECHANICS_SETTINGS, analyse, pyCompileError } from './fixes-support';
import { applyEdits, sourceFixes, type Fix } from '../../server/src/fixes';

const INPUT = readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'norm_name_default.py'), 'utf8');

describe('fixes: a norm class looked up by a string parameter converts through a run-time class check', () => {
  it('the verdict: convertible, checked at run time against the default name\'s class', async () => {
    const { ir } = await analyse(INPUT);
    const n = ir.layers.find((l) => l.name === 'self.norm')!;
    assert.equal(n.kind, 'layernorm');
    assert.equal(n.resolved, 'torch.nn.LayerNorm');
    assert.equal(n.convertible, true, n.reasons.join(' | '));
    assert.deepEqual(n.classParam, { name: 'norm_name', defaultClass: 'nn.LayerNorm' });
    assert.match(n.reasons.join(' '), /chosen at run time: the conversion checks at run time that the class is nn\.LayerNorm/);
    // The caller's own norm class is no layer of this file's classes' own.
    assert.equal(ir.layers.filter((l) => l.ownerClass === 'OwnNorm' && /norm/.test(l.kind)).length, 0);
  });

  it('"convert all" passes the name and nn.LayerNorm to fp8_layernorm_from, the lookup and its eps untouched', async () => {
    const { ir } = await analyse(INPUT);
    const fix = sourceFixes(INPUT, ir, MECHANICS_SETTINGS).find((f: Fix) => f.id === 'convert-all:file');
    assert.ok(fix, 'convert-all offered');
    const text = applyEdits(INPUT, fix.edits);
    assert.match(text, /self\.norm = fp8_layernorm_from\(norm_name, nn\.LayerNorm, width\)/);
    assert.match(text, /norm_name = partial\(getattr\(nn, norm_name\), eps=1e-6\)/);
    assert.match(text, /self\.up = fp8_linear\(width, hidden\)/);
    assert.equal(pyCompileError(text), undefined);
    const again = await analyse(text);
    const left = again.ir.layers.filter((l) => l.convertible === true && !l.isTe);
    assert.deepEqual(left.map((l) => l.name), [], left.map((l) => `${l.name}: ${l.reasons.join(' ')}`).join('\n'));
  });
});
