import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolveSettings } from '../../common/settings';
import { analyzeText } from '../../server/src/engine/engine';
import { createPythonParser } from '../../server/src/engine/parser';
import { explanationText } from '../../server/src/rules/explain';

describe('rules: PL104 / PL105 fusion hints from the data flow in forward', () => {
  let byClass: Map<string, string[]>;
  let messages: string[];

  before(async () => {
    const parser = await createPythonParser();
    const text = readFileSync(join(__dirname, '..', 'fixtures', 'rules', 'fusion.py'), 'utf8');
    // The data flow is tested, not the gain: the layers are small enough for FP8 to lose, where no hint is given.
    const { tree, ir, findings } = analyzeText(parser, text, { ...resolveSettings({}), convertLosingLayers: true }, {});
    tree?.delete();
    byClass = new Map();
    messages = [];
    for (const f of findings.filter((x) => x.code === 'PL104' || x.code === 'PL105')) {
      const owner = ir.layers[f.layerIndex!].ownerClass!;
      byClass.set(owner, [...(byClass.get(owner) ?? []), f.code]);
      messages.push(`${f.message} ${explanationText(f)}`);
    }
  });

  it('a norm nested directly in a Linear call: PL104 with the te.LayerNormLinear shape', () => {
    assert.deepEqual(byClass.get('Direct'), ['PL104']);
    assert.ok(messages.some((m) => m.includes('te.LayerNormLinear(1024, 3072, normalization="LayerNorm")')), messages.join('\n'));
  });

  it('norm -> fc1 -> activation module -> fc2 through one reused variable: PL105 (RMSNorm, gelu)', () => {
    assert.deepEqual(byClass.get('ThroughVariable'), ['PL105']);
    assert.ok(messages.some((m) => m.includes('hidden_size=2048, ffn_hidden_size=8192, normalization="RMSNorm", activation="gelu"')), messages.join('\n'));
  });

  it('functional activation nested in calls: PL105', () => {
    assert.deepEqual(byClass.get('Mlp'), ['PL105']);
  });

  it("says that TE's gelu is the tanh approximation when the model uses exact GELU, not when it already uses tanh", () => {
    const pl105 = messages.filter((m) => m.includes('activation="gelu"'));
    const exact = pl105.find((m) => m.includes('hidden_size=2048'))!;
    assert.match(exact, /TE's activation="gelu" is the tanh approximation of GELU, while nn\.GELU\(\) is the exact \(erf\) form/);
    assert.deepEqual(byClass.get('TanhGelu'), ['PL105']);
    const tanh = pl105.find((m) => m.includes('hidden_size=1024, ffn_hidden_size=4096'))!;
    assert.ok(tanh, pl105.join('\n'));
    assert.doesNotMatch(tanh, /tanh approximation/);
  });

  it('no hint when the norm output has another use, feeds a submodule, or the Linear is called twice', () => {
    assert.equal(byClass.get('UsedTwice'), undefined);
    assert.equal(byClass.get('IntoSubmodule'), undefined);
    assert.equal(byClass.get('SharedLinear'), undefined);
  });
});
