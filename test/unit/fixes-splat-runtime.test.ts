/**
 * A torch.nn.Linear passed *args/**kwargs whose names the file does not show (litgpt's LoRA layers) converts through the
 * fallback's fp8_linear_from, which checks the names when the layer is built, instead of being refused; what the
 * fallback cannot check (a norm, a file calling te.* directly, another Linear class) keeps the refusal.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { applyEdits, sourceFixes, type Fix } from '../../server/src/fixes';
import { findingsOf } from '../../server/src/engine/engine';
import { analyse, MECHANICS_SETTINGS, pyCompileError } from './fixes-support';

const INPUT = readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'linear_kwargs_passthrough.py'), 'utf8');

/** The findings as the editor and the CLI report them (the fix's refusal reconciled into the message). */
async function reported(text: string) {
  const { ir } = await analyse(text);
  const findings = findingsOf(ir, text, MECHANICS_SETTINGS, { anyAutocastRegion: true });
  const of = (name: string) => findings.find((f) => f.layerIndex === ir.layers.findIndex((l) => l.name === name))?.message ?? '';
  return { ir, findings, of };
}

describe('fixes: a Linear passed **kwargs of unknown names converts through fp8_linear_from', () => {
  it('the Linear is offered without "not automatically", convert-all writes the runtime check, the norm stays refused', async () => {
    const { ir, findings, of } = await reported(INPUT);
    const i = ir.layers.findIndex((l) => l.name === 'self.linear');
    assert.ok(findings.some((f) => f.code === 'PL101' && f.layerIndex === i), findings.map((f) => `${f.code} ${f.message}`).join('\n'));
    assert.doesNotMatch(of('self.linear'), /not automatically/);
    const fix = sourceFixes(INPUT, ir, MECHANICS_SETTINGS).find((f: Fix) => f.id === 'convert-all:file');
    assert.ok(fix, 'convert-all offered');
    const text = applyEdits(INPUT, fix.edits);
    assert.match(text, /self\.linear = fp8_linear_from\(torch\.nn\.Linear, torch\.nn\.Linear, in_features, out_features, \*\*kwargs\)/);
    // The norm's **kwargs: fp8_layernorm cannot check them at run time the same way: kept, with the reason.
    assert.match(text, /self\.norm = nn\.LayerNorm\(dim, \*\*kwargs\)/);
    assert.match(of('self.norm'), /but not automatically/);
    assert.match(text, /^def fp8_linear_from\(cls, default, \*args, \*\*kwargs\):$/m);
    assert.equal(pyCompileError(text), undefined);
  });

  it('a file that calls te.* directly (no fallback to check them) and a Linear subclass keep the refusal', async () => {
    const direct = INPUT.replace('import torch.nn as nn\n', 'import torch.nn as nn\nimport transformer_engine.pytorch as te\n');
    assert.match((await reported(direct)).of('self.linear'), /but not automatically/);
    const sub = INPUT.replace('class LoRAQKV', 'class MyLinear(nn.Linear):\n    pass\n\n\nclass LoRAQKV').replace('torch.nn.Linear(in_features, out_features, **kwargs)', 'MyLinear(in_features, out_features, **kwargs)');
    const b = await analyse(sub);
    const fix = sourceFixes(sub, b.ir, MECHANICS_SETTINGS).find((f: Fix) => f.id === 'convert-all:file');
    assert.doesNotMatch(fix ? applyEdits(sub, fix.edits) : sub, /fp8_linear_from\(MyLinear/);
  });
});
