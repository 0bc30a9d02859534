/**
 * From held-out set 10's first run (docs/realcode.md): llm-foundry builds its MLP projections and norms through
 * registries keyed by the model config (`build_fc(name=fc_type["name"], ...)`, `build_norm(...)`); they were not listed
 * at all. They are now catalogued: listed with their sizes, not converted at the call, and said as a diagnostic with
 * what to change instead (the config's fc_type name `te` builds te.Linear). A lowercase name is catalogued only under
 * its full module path: an unrelated local `build_fc` stays unknown.
 */
import * as assert from 'node:assert/strict';
import { findingsOf } from '../../server/src/engine/engine';
import { analyze, initParser, layer } from './analysis-helpers';
import { MECHANICS_SETTINGS } from './fixes-support';

describe('held-out set 10 gaps', () => {
  before(initParser);

  const src = [
    'import torch.nn as nn',
    'from llmfoundry.models.layers.layer_builders import build_fc, build_norm',
    '',
    'class MPTMLP(nn.Module):',
    '    def __init__(self, d_model: int, ffn_hidden_size: int, fc_type: dict):',
    '        super().__init__()',
    '        self.norm = build_norm(name="low_precision_layernorm", normalized_shape=d_model)',
    '        self.up_proj = build_fc(name=fc_type["name"], in_features=d_model, out_features=ffn_hidden_size, fc_kwargs=fc_type)',
    '        self.down_proj = build_fc(name=fc_type["name"], in_features=ffn_hidden_size, out_features=d_model, fc_kwargs=fc_type)',
    '',
    '    def forward(self, x):',
    '        return self.down_proj(self.up_proj(self.norm(x)))',
    '',
  ].join('\n');

  it("llm-foundry's build_fc / build_norm are listed with their sizes, refused at the call, and say to set the config", () => {
    const ir = analyze(src);
    const up = layer(ir, 'self.up_proj');
    assert.equal(up.kind, 'linear');
    assert.equal(up.convertible, false);
    assert.equal(up.inFeatures?.text, 'd_model');
    assert.equal(up.outFeatures?.text, 'ffn_hidden_size');
    assert.match(up.reasons.join(' '), /fc_type names \(torch\.nn\.Linear by default, te\.Linear for the name te\): set the config's fc_type name to te/);
    assert.equal(layer(ir, 'self.norm').kind, 'layernorm');
    assert.equal(layer(ir, 'self.norm').convertible, false);
    const findings = findingsOf(ir, src, MECHANICS_SETTINGS, { anyAutocastRegion: true });
    const at = (name: string) => findings.find((f) => f.layerIndex === ir.layers.findIndex((l) => l.name === name));
    assert.equal(at('self.up_proj')?.code, 'PL101', findings.map((f) => `${f.code} ${f.message}`).join('\n'));
    assert.match(at('self.up_proj')!.message, /build_fc cannot become te\.Linear exactly; set the config's fc_type name to te instead of editing the call/);
    assert.equal(at('self.down_proj')?.code, 'PL101');
    assert.equal(at('self.norm')?.code, 'PL102');
  });

  it('a build_fc that is not llm-foundry\'s is not taken for it', () => {
    const local = src.replace('from llmfoundry.models.layers.layer_builders import build_fc, build_norm', 'from mylib.builders import build_fc, build_norm');
    const ir = analyze(local);
    assert.equal(ir.layers.some((l) => l.name === 'self.up_proj' && /fc_type/.test(l.reasons.join(' '))), false);
  });
});
