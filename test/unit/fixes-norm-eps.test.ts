/**
 * A local subclass of a torch norm that fixes its eps in the call to the base class (`super().__init__(d, eps=1e-6)`):
 * the conversion carries that eps over. TE's default is 1e-5, and the base class's is another again, so a conversion
 * without it would change the numerics silently.
 */
import * as assert from 'node:assert/strict';
import { applyEdits, fixOutcome } from '../../server/src/fixes';
import { analyse, MECHANICS_SETTINGS, pyCompileError } from './fixes-support';

const SOURCE = `import torch.nn as nn


class MyNorm(nn.RMSNorm):
    def __init__(self, d):
        super().__init__(d, eps=1e-6)


class OwnDefault(nn.LayerNorm):
    def __init__(self, d, eps=1e-12):
        super().__init__(d, eps=eps)


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = MyNorm(4096)
        self.ln = OwnDefault(4096)
`;

describe('fixes: a norm subclass keeps the eps it passes to its base class', () => {
  it('MyNorm(4096) becomes fp8_rmsnorm(4096, eps=1e-6); an __init__ default still wins', async () => {
    const a = await analyse(SOURCE);
    const convert = (name: string) => {
      const f = a.findings.find((x) => (x.code === 'PL103' || x.code === 'PL102') && a.ir.layers[x.layerIndex!]?.name === name);
      assert.ok(f, `a finding on ${name}: ${a.findings.map((x) => x.message).join(' | ')}`);
      const fix = fixOutcome(SOURCE, a.ir, f, MECHANICS_SETTINGS).fixes[0];
      assert.ok(fix, `a fix for ${name}`);
      return applyEdits(SOURCE, fix.edits);
    };
    const rms = convert('self.norm');
    assert.match(rms, /self\.norm = fp8_rmsnorm\(4096, eps=1e-6\)/);
    assert.equal(pyCompileError(rms), undefined);
    assert.match(convert('self.ln'), /self\.ln = fp8_layernorm\(4096, eps=1e-12\)/);
  });
});
