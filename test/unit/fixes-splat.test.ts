/**
 * `**dd` in a Linear's call, where dd is a dict literal bound earlier in the same function (timm's factory kwargs):
 * the conversion names its keys (te.Linear takes params_dtype, not dtype); anything less plain keeps the refusal.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MECHANICS_SETTINGS } from './fixes-support';
import { analyzeTree } from '../../server/src/analysis';
import { applyEdits, sourceFixes } from '../../server/src/fixes';
import { dictLiteralKeys, splatKeys } from '../../server/src/fixes/splat';
import { createPythonParser } from '../../server/src/engine/parser';

const at = (text: string, marker: string): number => text.indexOf(marker);

describe('fixes: **kwargs dicts with known keys', () => {
  it('reads the keys of a dict literal or dict(...) call, and nothing else', () => {
    assert.deepEqual(dictLiteralKeys("{'device': device, 'dtype': dtype}"), ['device', 'dtype']);
    assert.deepEqual(dictLiteralKeys('dict(device=device, dtype=dtype)'), ['device', 'dtype']);
    assert.equal(dictLiteralKeys('make_kwargs(device)'), undefined);
    assert.equal(dictLiteralKeys('{**base, "dtype": dtype}'), undefined);
    assert.equal(dictLiteralKeys('{k: v for k, v in items}'), undefined);
    assert.equal(dictLiteralKeys('{key: device}'), undefined);
  });

  it('finds the binding in the enclosing function, not past its def, not one made in a nested block', () => {
    const plain = 'def f(device, dtype):\n    dd = {"device": device, "dtype": dtype}\n    if x:\n        y = nn.Linear(1, 2, **dd)\n';
    assert.deepEqual(splatKeys(plain, at(plain, 'nn.Linear'), 'dd'), ['device', 'dtype']);
    const nested = 'def f(device, dtype):\n    dd = {"device": device}\n    if x:\n        dd = other()\n    y = nn.Linear(1, 2, **dd)\n';
    assert.equal(splatKeys(nested, at(nested, 'nn.Linear'), 'dd'), undefined);
    const outside = 'dd = {"device": "cpu"}\ndef f():\n    y = nn.Linear(1, 2, **dd)\n';
    assert.equal(splatKeys(outside, at(outside, 'nn.Linear'), 'dd'), undefined);
    const loop = 'def f(options):\n    dd = {"device": None}\n    for dd in options:\n        pass\n    y = nn.Linear(1, 2, **dd)\n';
    assert.equal(splatKeys(loop, at(loop, 'nn.Linear'), 'dd'), undefined);
  });

  it('the timm-style fixture: every **dd Linear converts with its keys named', async () => {
    const parser = await createPythonParser();
    try {
      const text = readFileSync(join(__dirname, '..', 'fixtures', 'facets', 'timm_factory_kwargs.py'), 'utf8');
      const tree = parser.parse(text)!;
      const ir = analyzeTree(tree, text);
      tree.delete();
      const fix = sourceFixes(text, ir, MECHANICS_SETTINGS).find((f) => f.id === 'convert-all:file');
      assert.ok(fix);
      const out = applyEdits(text, fix.edits);
      assert.match(out, /self\.qkv = fp8_linear\(dim, dim \* 3, bias=qkv_bias, device=dd\["device"\], params_dtype=dd\["dtype"\]\)/);
      assert.match(out, /self\.fc1 = fp8_linear\(in_features, hidden_features, device=factory_kwargs\["device"\], params_dtype=factory_kwargs\["dtype"\]\)/);
      assert.doesNotMatch(out, /= fp8_linear\([^\n]*\*\*/);
    } finally {
      parser.delete();
    }
  });
});
