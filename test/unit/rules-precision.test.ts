/** PL201 on whole-model FP8 conversions: the advice fits the library that converts. */
import * as assert from 'node:assert/strict';
import { resolveSettings } from '../../common/settings';
import { analyzeText } from '../../server/src/engine';
import { createPythonParser, type Parser } from '../../server/src/parser';

const MODEL = `import torch
import torch.nn as nn

class LM(nn.Module):
    def __init__(self, vocab_size: int = 50304, d: int = 768):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, d)
        self.fc = nn.Linear(d, 4 * d)
        self.lm_head = nn.Linear(d, vocab_size, bias=False)

model = LM()
`;

describe('rules: PL201 on whole-model conversions', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });
  const pl201 = (text: string): string[] => {
    const { tree, findings } = analyzeText(parser, text, resolveSettings({}), { anyAutocastRegion: true });
    tree?.delete();
    return findings.filter((f) => f.code === 'PL201').map((f) => f.message);
  };

  it('torchao: pass a module_filter_fn', () => {
    const msgs = pl201(`${MODEL}from torchao.float8 import convert_to_float8_training\nconvert_to_float8_training(model)\n`);
    assert.equal(msgs.length, 1);
    assert.match(msgs[0], /the lm-head \(self\.lm_head\) will run in FP8/);
    assert.match(msgs[0], /module_filter_fn that skips it \(torchao\)/);
  });

  it("Transformer Engine's convert_model has no filter: restore the head or disable autocast around it", () => {
    const msgs = pl201(`${MODEL}from accelerate.utils import convert_model\nconvert_model(model)\n`);
    assert.equal(msgs.length, 1);
    assert.match(msgs[0], /no filter for single modules: restore the head to torch\.nn\.Linear after converting/);
    assert.doesNotMatch(msgs[0], /filter_fqns/);
  });
});
