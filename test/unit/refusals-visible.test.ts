/**
 * Every refusal visible: a layer the fix will not convert is never announced as "can become" without saying so, the
 * refused quick fixes and file/class actions carry titles and reasons (the editor's disabled code actions), and
 * convert-all names each kind of skip.
 */
import * as assert from 'node:assert/strict';
import { DEFAULT_SETTINGS } from '../../common/settings';
import { analyzeText } from '../../server/src/engine/engine';
import { fixOutcome, sourceFixOutcome } from '../../server/src/fixes';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';
import { explanationText } from '../../server/src/rules/explain';

const CONFIG_BIAS = `import torch.nn as nn
from dataclasses import dataclass


@dataclass
class Config:
    n_embd: int = 768
    n_classes: int = 3
    bias: bool = True


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=bool(config.bias))
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.proj = nn.Linear(100, 30)
        self.classifier = nn.Linear(config.n_embd, config.n_classes)

    def forward(self, x):
        return self.classifier(self.fc(self.ln_2(self.ln_1(x))))
`;

describe('refusals are visible, and never after a "can become"', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });
  after(() => parser.delete());

  const analyse = (text: string) => {
    const r = analyzeText(parser, text, DEFAULT_SETTINGS, {});
    r.tree?.delete();
    return r;
  };

  it('a LayerNorm whose bias comes from a config field converts with the flag checked; one the fix cannot check again says why', () => {
    const { ir, findings } = analyse(CONFIG_BIAS);
    const [checked, refused] = findings.filter((f) => f.code === 'PL102');
    assert.match(checked.message, /^self\.ln_1: nn\.LayerNorm 768 can become te\.LayerNorm while config\.bias \(checked at run time\)$/);
    const fix = fixOutcome(CONFIG_BIAS, ir, checked, DEFAULT_SETTINGS).fixes[0];
    assert.ok(fix, 'the conversion is offered');
    assert.match(fix.edits.map((e) => e.newText).join('\n'), /fp8_layernorm_or\(lambda: /);
    assert.match(explanationText(checked), /The conversion checks that where it builds the layer \(when=config\.bias\)/);
    // bool(config.bias) is a call: the converted code would evaluate it a second time, so no conversion, and the reason.
    assert.match(refused.message, /^self\.ln_2: nn\.LayerNorm 768 may become te\.LayerNorm; bind it to a name first, then convert$/i);
    assert.match(explanationText(refused), /bool\(config\.bias\) cannot be checked again where the layer is built/);
    const out = fixOutcome(CONFIG_BIAS, ir, refused, DEFAULT_SETTINGS);
    assert.equal(out.fixes.length, 0);
    assert.deepEqual(out.refused?.map((r) => r.title), ['Convert self.ln_2 to te.LayerNorm']);
  });

  it('a shape-failing layer has a refused "Convert" with the FP8 rule as its reason', () => {
    const { ir, findings } = analyse(CONFIG_BIAS);
    const pl110 = findings.find((f) => f.code === 'PL110')!;
    const out = fixOutcome(CONFIG_BIAS, ir, pl110, DEFAULT_SETTINGS);
    assert.equal(out.refused?.[0]?.title, 'Convert self.proj to te.Linear');
    assert.match(out.refused![0].reason, /in_features % 16 == 0, out_features % 16 == 0/);
  });

  it('convert-all names each kind of skip: uncertain, shape, classifier', () => {
    const { ir } = analyse(CONFIG_BIAS);
    // At width 768 the gain table predicts FP8 slower: the mechanics of naming skips are tested with that check off.
    const out = sourceFixOutcome(CONFIG_BIAS, ir, { ...DEFAULT_SETTINGS, convertLosingLayers: true }, { className: 'Block' });
    const titles = out.fixes.map((f) => f.title);
    assert.ok(titles.includes('Convert 2 layers in class Block to FP8 (with fallback; fusing 1 norm into te.LayerNormLinear; skipped 3: uncertain, shape, classifier)'), titles.join('\n'));
  });

  it('a file-wide action that is refused is listed with its title and reason', () => {
    const text = 'import torch\nimport torch.nn as nn\n\nhead = nn.Linear(100, 30)\n';
    const { ir } = analyse(text);
    const out = sourceFixOutcome(text, ir, DEFAULT_SETTINGS);
    const refused = out.refused?.find((r) => r.id === 'convert-all:file');
    assert.ok(refused, JSON.stringify(out.refused));
    assert.equal(refused.title, 'Convert the layers in this file to te.*');
    assert.match(refused.reason, /^No layer in this file can be converted \(skipped 1: shape\)\.$/);
  });
});
