/**
 * The PL6xx quick fixes refuse, with the reason, where no exact edit exists: a calibration bound in batches of an
 * unknown size, a torch.save with more than a state_dict and a path, the
 * library's own config object passed as is, a head wildcard that would switch off another layer too, a call with no
 * validation loader in scope. Inline files through the real parser, analysis, rules and fixes.
 */
import * as assert from 'node:assert/strict';
import { MECHANICS_SETTINGS } from './fixes-support';
import { fixOutcome } from '../../server/src/fixes';
import { analyse } from './fixes-support';

const HEAD = `import copy
import itertools

import torch
import torch.nn as nn
import modelopt.torch.quantization as mtq


class LM(nn.Module):
    def __init__(self, vocab_size: int = 512, d: int = 64):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d)
        self.HEAD_ATTR_layers = nn.ModuleList([nn.Linear(d, d)])
        self.HEAD_ATTR = nn.Linear(d, vocab_size, bias=False)

    def forward(self, idx):
        x = self.tok(idx)
        for layer in self.HEAD_ATTR_layers:
            x = layer(x)
        return self.HEAD_ATTR(x)


model = LM()
`;

async function outcomeOf(text: string, code: string): Promise<{ titles: string[]; refusals: string[] }> {
  const { ir, findings } = await analyse(text);
  const finding = findings.find((f) => f.code === code);
  assert.ok(finding, `no ${code}: ${findings.map((f) => f.code).join(', ')}`);
  const out = fixOutcome(text, ir, finding, MECHANICS_SETTINGS);
  return { titles: out.fixes.map((f) => f.title), refusals: out.refusals };
}

describe('fixes: PL6xx refusals where no exact edit exists', () => {
  it('PL603: a bound in batches of unknown size', async () => {
    const unknown = `${HEAD.replace(/HEAD_ATTR/g, 'lm_head')}loader = iter(range(10))\n\n\ndef loop(m):\n    for batch in itertools.islice(loader, 20_000):\n        m(batch)\n\n\nmodel = mtq.quantize(model, mtq.FP8_DEFAULT_CFG, loop)\n`;
    const a = await outcomeOf(unknown, 'PL603');
    assert.deepEqual(a.titles, []);
    assert.match(a.refusals[0], /batch size is unknown/);
  });

  it('PL606: a torch.save with more arguments than the state_dict and the path', async () => {
    const text = `${HEAD.replace(/HEAD_ATTR/g, 'lm_head')}\n\ndef loop(m):\n    m(torch.zeros(1, 4, dtype=torch.long))\n\n\nmodel = mtq.quantize(model, mtq.FP8_DEFAULT_CFG, loop)\ntorch.save(model.state_dict(), "q.pt", pickle_protocol=4)\n`;
    const a = await outcomeOf(text, 'PL606');
    assert.deepEqual(a.titles, []);
    assert.match(a.refusals[0], /more than a state_dict and a path/);
  });

  it('PL601: the library config passed as is, and a wildcard that would match another layer', async () => {
    const loop = `\n\ndef loop(m):\n    m(torch.zeros(1, 4, dtype=torch.long))\n\n\n`;
    const bare = await outcomeOf(`${HEAD.replace(/HEAD_ATTR/g, 'decoder')}${loop}model = mtq.quantize(model, mtq.FP8_DEFAULT_CFG, loop)\n`, 'PL601');
    assert.deepEqual(bare.titles, []);
    assert.match(bare.refusals[0], /would also disable decoder_layers/);
    const own = await outcomeOf(`${HEAD.replace(/HEAD_ATTR_layers/g, 'blocks').replace(/HEAD_ATTR/g, 'decoder')}${loop}model = mtq.quantize(model, mtq.FP8_DEFAULT_CFG, loop)\n`, 'PL601');
    assert.deepEqual(own.titles, []);
    assert.match(own.refusals[0], /passes mtq\.FP8_DEFAULT_CFG itself; copy it/);
  });

  it('PL602: no validation loader in scope', async () => {
    const text = `${HEAD.replace(/HEAD_ATTR/g, 'lm_head')}train_loader = [torch.zeros(1, 4, dtype=torch.long)]\nmodel = mtq.quantize(model, mtq.FP8_DEFAULT_CFG)\n`;
    const a = await outcomeOf(text, 'PL602');
    assert.deepEqual(a.titles, []);
    assert.match(a.refusals[0], /no validation loader in scope/);
  });
});
