/**
 * Fusing a norm into the one Linear it feeds (te.LayerNormLinear through fp8_fuse_norm) or the one MLP module it feeds
 * (te.LayerNormMLP through fp8_fuse_mlp): which the analysis finds, in one class and across a block and its child,
 * which it must not, and what the fixes write.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolveSettings } from '../../common/settings';
import { findFusions, type Fusion } from '../../server/src/analysis/fusion';
import type { ModelIR } from '../../server/src/analysis/ir';
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

  const describeFusion = (ir: ModelIR, f: Fusion): string => {
    const m = f.fusedMlp;
    const target = m ? `${f.owner!.attr} (${f.linearAttr}${m.upAttr ? `, ${m.upAttr}` : ''} -> ${m.activation ?? `self.${m.activationFrom}`} -> ${m.fc2Attr}${m.dropoutAttr ? `, ${m.dropoutAttr}` : ''})` : `${f.owner ? `${f.owner.attr}.` : ''}${f.linearAttr}`;
    return `${ir.layers[f.norm].ownerClass}.${ir.layers[f.norm].name} -> ${target}`;
  };

  it('finds the pair in one class (through a variable used once) and across a block and the child class it builds, and whole MLP children', () => {
    const { ir } = analyse(INPUT);
    // Shared.norm: its output feeds two Linears.
    assert.deepEqual(findFusions(ir, INPUT).map((f) => describeFusion(ir, f)), [
      'LlamaBlock.self.ffn_norm -> feed_forward (w1, w3 -> swiglu -> w2, dropout)',
      'LlamaBlock.self.mlp_norm -> relu_mlp (fc1 -> relu -> fc2)',
      'Block.self.ln_1 -> attn.qkv',
      'Block.self.ln_2 -> mlp (gate, up -> swiglu -> down)',
      'Proj.self.norm -> fc',
      'Late.self.norm -> fc',
    ]);
  });

  it('PL104 names the pair and the te.LayerNormLinear shape; its fix wraps the owner, or the norm where the norm is built later', () => {
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
    // Late builds its norm after the Linear: the norm is wrapped, reaching the Linear through self.
    const late = fixOutcome(INPUT, ir, pl104[2], SETTINGS);
    const lateText = applyEdits(INPUT, late.fixes[0].edits);
    assert.match(lateText, /^ {8}self\.fc = fp8_linear\(dim, dim\)\n {8}self\.norm = fp8_fuse_norm\(nn\.LayerNorm\(dim\), self, "fc", returns="norm"\)$/m);
    assert.equal(pyCompileError(lateText), undefined);
  });

  it('PL105 names the MLP, its activation and the te.LayerNormMLP shape; its fix converts the three Linears and wraps the norm built after the MLP', () => {
    const { ir, findings } = analyse(INPUT);
    const pl105 = findings.filter((f) => f.code === 'PL105');
    assert.deepEqual(pl105.map((f) => f.message), [
      'self.ffn_norm feeds only feed_forward, a gated MLP: fuse both as te.LayerNormMLP where FP8 runs',
      'self.mlp_norm feeds only relu_mlp, an MLP: fuse both as te.LayerNormMLP where FP8 runs',
      'self.ln_2 feeds only mlp, a gated MLP: fuse both as te.LayerNormMLP where FP8 runs',
    ]);
    assert.match(pl105[0].explanation!.facts.join(' '), /FeedForward\.forward is self\.dropout\(self\.w2\(F\.silu\(self\.w1\(x\)\) \* self\.w3\(x\)\)\): w1, w3 -> swiglu -> w2\..*te\.LayerNormMLP\(hidden_size=64, ffn_hidden_size=96, normalization="LayerNorm", activation="swiglu"\) computes the same block, w1's weight stacked over w3's/);
    const ff = fixOutcome(INPUT, ir, pl105[0], SETTINGS);
    assert.deepEqual(ff.fixes.map((f) => f.title), ['Fuse self.ffn_norm into feed_forward (te.LayerNormMLP where FP8 runs, converting 3 Linears)']);
    const text = applyEdits(INPUT, ff.fixes[0].edits);
    assert.match(text, /^ {8}self\.ffn_norm = fp8_fuse_mlp\(nn\.LayerNorm\(dim, eps=1e-6\), self\.feed_forward, "w1", "w2", up="w3", activation="swiglu", dropout="dropout", returns="norm"\)$/m);
    for (const w of ['w1', 'w2', 'w3']) assert.match(text, new RegExp(`^ {8}self\\.${w} = fp8_linear\\(`, 'm'), w);
    assert.equal(pyCompileError(text), undefined);
    // Analysed again: nothing left to fuse there.
    const again = analyse(text);
    assert.ok(!findFusions(again.ir, text).some((f) => again.ir.layers[f.norm].name === 'self.ffn_norm'));
    // The block's GatedMLP is built after its norm: the MLP is wrapped.
    const gated = applyEdits(INPUT, fixOutcome(INPUT, ir, pl105[2], SETTINGS).fixes[0].edits);
    assert.match(gated, /^ {8}self\.mlp = fp8_fuse_mlp\(self\.ln_2, GatedMLP\(dim, 4 \* dim\), "gate", "down", up="up", activation="swiglu"\)$/m);
  });

  it('no whole-MLP fusion for GELU (TE\'s is the tanh approximation), a forward that does more, a Linear used twice, or a dropout that is not one', () => {
    const variants: [string, string, string][] = [
      ['GELU', 'F.silu(self.gate(x))', 'F.gelu(self.gate(x))'],
      ['a residual inside', '        return self.down(F.silu(self.gate(x)) * self.up(x))\n', '        return x + self.down(F.silu(self.gate(x)) * self.up(x))\n'],
      ['a second statement', '        return self.down(F.silu(self.gate(x)) * self.up(x))\n', '        x = x * 2\n        return self.down(F.silu(self.gate(x)) * self.up(x))\n'],
      ['the same Linear twice', 'F.silu(self.gate(x)) * self.up(x)', 'F.silu(self.gate(x)) * self.gate(x)'],
      ['a division, not a product', 'F.silu(self.gate(x)) * self.up(x)', 'F.silu(self.gate(x)) / self.up(x)'],
      ['an activation module that is not one', 'self.act = nn.ReLU()', 'self.act = nn.Tanh()'],
      ['a wrapper that is not a dropout', 'self.dropout = nn.Dropout(dropout)', 'self.dropout = nn.Identity()'],
    ];
    for (const [what, from, to] of variants) {
      assert.ok(INPUT.includes(from), what);
      const text = INPUT.replace(from, to);
      const { ir } = analyse(text);
      const mlps = findFusions(ir, text).filter((f) => f.fusedMlp).map((f) => describeFusion(ir, f));
      assert.equal(mlps.length, 2, `${what}: ${mlps.join('; ')}`);
    }
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
    assert.equal(all.title, 'Convert 21 layers in this file to FP8 (with fallback; fusing 3 norms into te.LayerNormLinear, 3 MLPs into te.LayerNormMLP)');
    const text = applyEdits(INPUT, all.edits);
    assert.match(text, /^ {8}self\.attn = fp8_fuse_norm\(self\.ln_1, Attention\(dim, heads\), "qkv"\)$/m);
    assert.match(text, /^ {8}self\.fc = fp8_fuse_norm\(self\.norm, fp8_linear\(dim, dim\)\)$/m);
    assert.match(text, /^ {8}self\.mlp = fp8_fuse_mlp\(self\.ln_2, GatedMLP\(dim, 4 \* dim\), "gate", "down", up="up", activation="swiglu"\)$/m);
    assert.equal((text.match(/= fp8_fuse_norm\(/g) ?? []).length, 3);
    assert.equal((text.match(/= fp8_fuse_mlp\(/g) ?? []).length, 3);
    assert.equal(pyCompileError(text), undefined);
    const again = analyse(text);
    // The fused pairs are not offered again (a second fp8_fuse_norm would wrap a wrapped module).
    assert.deepEqual(again.findings.filter((f) => f.code === 'PL104' || f.code === 'PL105').map((f) => f.message), []);
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
      const blocks = findFusions(ir, text).filter((f) => ir.layers[f.norm].name === 'self.ln_1');
      assert.deepEqual(blocks.map((f) => f.linearAttr), [], what);
    }
  });

  it('a Hugging Face MLP (assign then return, the config\'s ACT2FN activation) fuses with the activation read at run time', () => {
    const text = readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'fuse_hf_mlp.py'), 'utf8');
    const { ir, findings } = analyse(text);
    assert.deepEqual(findFusions(ir, text).map((f) => describeFusion(ir, f)), ['DecoderLayer.self.post_attention_layernorm -> mlp (gate_proj, up_proj -> self.act_fn -> down_proj)']);
    const pl105 = findings.find((f) => f.code === 'PL105')!;
    assert.equal(pl105.message, 'self.post_attention_layernorm feeds only mlp, a gated MLP: fuse both as te.LayerNormMLP where FP8 runs');
    assert.match(pl105.explanation!.facts.join(' '), /MLP\.forward is self\.down_proj\(self\.act_fn\(self\.gate_proj\(x\)\) \* self\.up_proj\(x\)\): gate_proj, up_proj -> self\.act_fn -> down_proj\..*activation=TE's name for self\.act_fn, read when the model is built \(swiglu for SiLU, reglu for ReLU, geglu for tanh GELU; any other leaves the MLP as built\)/);
    const fixed = applyEdits(text, fixOutcome(text, ir, pl105, SETTINGS).fixes[0].edits);
    assert.match(fixed, /^ {8}self\.post_attention_layernorm = fp8_fuse_mlp\(RMSNorm\(config\.hidden_size, eps=config\.rms_norm_eps\), self\.mlp, "gate_proj", "down_proj", up="up_proj", activation_from="act_fn", returns="norm"\)$/m);
    assert.equal(pyCompileError(fixed), undefined);
    // An activation attribute that is neither a known module nor the config's choice: no whole-MLP fusion.
    const other = text.replace('self.act_fn = ACT2FN[config.hidden_act]', 'self.act_fn = make_activation(config)');
    const again = analyse(other);
    assert.deepEqual(findFusions(again.ir, other).filter((f) => f.fusedMlp), []);
  });

  it('"convert all" leaves the fusions of a rule turned off: PL105 off keeps the MLPs as Linears, PL104\'s pairs still fuse', () => {
    const settings = { ...SETTINGS, rules: { PL105: 'off' as const } };
    const { ir } = analyse(INPUT, settings);
    const all = sourceFixOutcome(INPUT, ir, settings).fixes.find((f) => f.id === 'convert-all:file')!;
    assert.match(all.title, /fusing 3 norms into te\.LayerNormLinear\)$/);
    const text = applyEdits(INPUT, all.edits);
    assert.equal((text.match(/= fp8_fuse_mlp\(/g) ?? []).length, 0);
    assert.equal((text.match(/= fp8_fuse_norm\(/g) ?? []).length, 3);
  });
});
