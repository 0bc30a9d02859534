/**
 * Fusing a norm into the one Linear it feeds (te.LayerNormLinear through fp8_fuse_norm): which pairs the analysis
 * finds, in one class and across a block and its child, which it must not, and what the fixes write.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolveSettings } from '../../common/settings';
import { findFusions } from '../../server/src/analysis/fusion';
import { analyzeText } from '../../server/src/engine/engine';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';
import { fixOutcome, sourceFixOutcome } from '../../server/src/fixes';
import { applyEdits } from '../../server/src/fixes/edits';
import { pyCompileError } from './fixes-support';

const INPUT = readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'fuse_blocks.py'), 'utf8');
// The fixture is 64 wide so it runs on the CPU: the gain check (FP8 loses there) is not what is tested.
const SETTINGS = { ...resolveSettings({}), convertLosingLayers: true };

describe('fixes: a norm that feeds only one Linear is fused into te.LayerNormLinear', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });
  after(() => parser.delete());
  const analyse = (text: string, settings = SETTINGS) => {
    const r = analyzeText(parser, text, settings, {});
    r.tree?.delete();
    return r;
  };

  it('finds the pair in one class (through a variable used once) and across a block and the child class it builds', () => {
    const { ir } = analyse(INPUT);
    const pairs = findFusions(ir, INPUT).map((f) => `${ir.layers[f.norm].ownerClass}.${ir.layers[f.norm].name} -> ${f.owner ? `${f.owner.attr}.` : ''}${f.linearAttr}`);
    // Block.ln_2 -> mlp: GatedMLP reads its input twice (gate and up). Shared.norm: its output feeds two Linears.
    assert.deepEqual(pairs, ['Block.self.ln_1 -> attn.qkv', 'Proj.self.norm -> fc', 'Late.self.norm -> fc']);
  });

  it('PL104 names the pair and the te.LayerNormLinear shape; its fix wraps the owner, and refuses with a reason where the norm is built later', () => {
    const { ir, findings } = analyse(INPUT);
    const pl104 = findings.filter((f) => f.code === 'PL104');
    assert.deepEqual(pl104.map((f) => f.message), [
      'self.ln_1 feeds only attn.qkv: fuse them as te.LayerNormLinear(64, 192) where FP8 runs',
      'self.norm feeds only self.fc: fuse them as te.LayerNormLinear(64, 64) where FP8 runs',
      'self.norm feeds only self.fc: fuse them as te.LayerNormLinear(64, 64) where FP8 runs',
    ]);
    const block = fixOutcome(INPUT, ir, pl104[0], SETTINGS);
    assert.deepEqual(block.fixes.map((f) => f.title), ['Fuse self.ln_1 into attn.qkv (te.LayerNormLinear where FP8 runs, converting attn.qkv)']);
    const text = applyEdits(INPUT, block.fixes[0].edits);
    assert.match(text, /^ {8}self\.attn = fp8_fuse_norm\(self\.ln_1, Attention\(dim, heads\), "qkv"\)$/m);
    assert.match(text, /^ {8}self\.qkv = fp8_linear\(dim, 3 \* dim, bias=False\)$/m);
    assert.equal(pyCompileError(text), undefined);
    const late = fixOutcome(INPUT, ir, pl104[2], SETTINGS);
    assert.deepEqual(late.fixes, []);
    assert.match(late.refused![0].reason, /^Not fused: self\.norm is built after self\.fc; build it first/);
  });

  it('no PL104 where the Linear is predicted to lose (PL101 keeps it in BF16: nothing to fuse into); the PL104 fix refuses it with the prediction', () => {
    const settings = resolveSettings({});
    const { ir, findings } = analyse(INPUT, settings);
    assert.deepEqual(findings.filter((f) => f.code === 'PL104'), []);
    assert.ok(findings.some((f) => f.code === 'PL101' && /loses/.test(f.message)));
    // The fix itself (reached with the setting on, then asked without it) still says why it would not fuse.
    const pl104 = analyse(INPUT).findings.find((f) => f.code === 'PL104')!;
    const out = fixOutcome(INPUT, ir, pl104, settings);
    assert.deepEqual(out.fixes, []);
    assert.match(out.refused![0].reason, /^Not fused: self\.qkv is predicted to lose in FP8/);
  });

  it('"convert all" fuses both pairs in the same edit, and analysed again finds nothing left to fuse or convert', () => {
    const { ir } = analyse(INPUT);
    const all = sourceFixOutcome(INPUT, ir, SETTINGS).fixes.find((f) => f.id === 'convert-all:file')!;
    assert.equal(all.title, 'Convert 14 layers in this file to FP8 (with fallback; fusing 2 norms into te.LayerNormLinear)');
    const text = applyEdits(INPUT, all.edits);
    assert.match(text, /^ {8}self\.attn = fp8_fuse_norm\(self\.ln_1, Attention\(dim, heads\), "qkv"\)$/m);
    assert.match(text, /^ {8}self\.fc = fp8_fuse_norm\(self\.norm, fp8_linear\(dim, dim\)\)$/m);
    assert.match(text, /^ {8}self\.mlp = GatedMLP\(dim, 4 \* dim\)$/m);
    assert.equal((text.match(/fp8_fuse_norm\(self/g) ?? []).length, 2);
    assert.equal(pyCompileError(text), undefined);
    const again = analyse(text);
    // The fused pairs are not offered again (a second fp8_fuse_norm would wrap a wrapped module).
    const owners = again.findings.filter((f) => f.code === 'PL104').map((f) => again.ir.layers[f.layerIndex!].ownerClass);
    assert.ok(!owners.includes('Block') && !owners.includes('Proj'), owners.join(', '));
    assert.deepEqual(again.ir.layers.filter((l) => l.convertible === true && !l.isTe).map((l) => l.name), []);
  });

  it('a class test that lists TE_LINEAR already gains only TE_LAYERNORM_LINEAR, each name once', () => {
    const text = [
      'import torch.nn as nn',
      'from fp8_fallback import TE_LINEAR, fp8_linear',
      '',
      '',
      'class Block(nn.Module):',
      '    def __init__(self, dim=4096):',
      '        super().__init__()',
      '        self.proj = fp8_linear(dim, dim)',
      '        self.norm = nn.LayerNorm(dim)',
      '        self.fc = nn.Linear(dim, 4 * dim)',
      '',
      '    def forward(self, x):',
      '        return self.proj(self.fc(self.norm(x)))',
      '',
      '    def _init(self, m):',
      '        if isinstance(m, (nn.Linear, TE_LINEAR)):',
      '            nn.init.zeros_(m.bias)',
      '',
    ].join('\n');
    const { ir, findings } = analyse(text);
    const out = fixOutcome(text, ir, findings.find((f) => f.code === 'PL104')!, SETTINGS);
    const fixed = applyEdits(text, out.fixes[0].edits);
    assert.match(fixed, /^ {8}if isinstance\(m, \(nn\.Linear, TE_LAYERNORM_LINEAR, TE_LINEAR\)\):$/m);
    assert.equal(pyCompileError(fixed), undefined);
  });

  it('no pair when the norm is named more than twice, the child reads its input elsewhere, or the child is not built here', () => {
    const variants: [string, string, string][] = [
      ['a second use of the norm', '        return x + self.mlp(self.ln_2(x))\n', '        return x + self.mlp(self.ln_2(x)) + self.ln_1(x)\n'],
      ['the child reads x in a residual', '        B, T, C = x.size()\n', '        B, T, C = x.size()\n        x = x + 0\n'],
      ['the child passed in, not built here', '        self.attn = Attention(dim, heads)\n', '        self.attn = attn_cls(dim, heads)\n'],
    ];
    for (const [what, from, to] of variants) {
      assert.ok(INPUT.includes(from), what);
      const text = INPUT.replace(from, to).replace('def __init__(self, dim, heads):\n        super().__init__()\n        self.ln_1', 'def __init__(self, dim, heads, attn_cls=None):\n        super().__init__()\n        self.ln_1');
      const { ir } = analyse(text);
      const blocks = findFusions(ir, text).filter((f) => ir.layers[f.norm].ownerClass === 'Block');
      assert.deepEqual(blocks.map((f) => f.linearAttr), [], what);
    }
  });
});
