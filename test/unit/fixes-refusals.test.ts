/**
 * What fixes refuse, and say why (the rule messages and hovers include these sentences), and which fixes are safe
 * for `precision-lens check --fix`.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolveSettings } from '../../common/settings';
import { MECHANICS_SETTINGS } from './fixes-support';

/** TE >= 2.9 declared (te-api modern): PL303's migration may then be batch-applied. */
const MODERN = resolveSettings({ te: { apiVersion: 'modern' } });
import { applyEdits, explainRefusal, fixOutcome, sourceFixes, sourceFixOutcome } from '../../server/src/fixes';
import { analyse, FIXTURES, pyCompileError } from './fixes-support';

async function load(name: string) {
  const text = readFileSync(join(FIXTURES, name), 'utf8');
  return { text, ...(await analyse(text)) };
}

describe('fixes: refusals and safety', () => {
  it('offers no conversion for a LayerNorm TE cannot represent, and says why', async () => {
    const { text, ir, findings } = await load('convert_norms.py');
    const byName = (n: string) => findings.find((f) => f.layerIndex !== undefined && ir.layers[f.layerIndex].name === n)!;
    assert.match(explainRefusal(text, ir, byName('self.ln_nobias'), MECHANICS_SETTINGS) ?? '', /always has a weight and a bias/);
    assert.match(explainRefusal(text, ir, byName('self.ln_noaffine'), MECHANICS_SETTINGS) ?? '', /elementwise_affine=False/);
    assert.equal(explainRefusal(text, ir, byName('self.ln'), MECHANICS_SETTINGS), undefined);
  });

  it('refuses to move backward() past a statement that follows it in the block', async () => {
    const { text, ir, findings } = await load('backward_inside.py');
    const bad = findings.filter((f) => f.code === 'PL301')[1];
    const out = fixOutcome(text, ir, bad, MECHANICS_SETTINGS);
    assert.equal(out.fixes.length, 0);
    assert.match(out.refusals[0], /`stats = out\.detach\(\)\.mean\(\)` \(line 23\) follows backward\(\)/);
  });

  it('refuses the PL303 migration when the call passes **kwargs (their keys would need renaming too)', async () => {
    const text = [
      'import torch',
      'import transformer_engine.pytorch as te',
      'from transformer_engine.common import recipe',
      '',
      'fp8_autocast_kwargs = {"enabled": True, "fp8_recipe": recipe.DelayedScaling()}',
      'model = te.Linear(768, 768)',
      'with te.fp8_autocast(**fp8_autocast_kwargs):',
      '    y = model(torch.randn(16, 768))',
      'with te.fp8_autocast(enabled=True):',
      '    y = model(torch.randn(16, 768))',
      '',
    ].join('\n');
    const { ir, findings } = await analyse(text);
    assert.deepEqual(ir.autocastRegions[0].args, { '**': '**fp8_autocast_kwargs' });
    const pl303 = findings.filter((f) => f.code === 'PL303');
    assert.equal(pl303.length, 2);
    const splatted = fixOutcome(text, ir, pl303[0], MECHANICS_SETTINGS);
    assert.equal(splatted.fixes.length, 0);
    assert.match(splatted.refusals[0], /passes \*\*fp8_autocast_kwargs, whose keys the new API names differently \(fp8_recipe -> recipe/);
    // Batch-safe only once TE >= 2.9 is known: the new names do not exist before.
    assert.equal(fixOutcome(text, ir, pl303[1], MECHANICS_SETTINGS).fixes[0]?.safe, false);
    assert.equal(fixOutcome(text, ir, pl303[1], MODERN).fixes[0]?.safe, true);
  });

  it('convert all skips protected and failing layers and reports them', async () => {
    const { text, ir } = await load('gpt_convert_all.py');
    const all = sourceFixes(text, ir, MECHANICS_SETTINGS).find((f) => f.id === 'convert-all:file')!;
    assert.equal(all.title, 'Convert 5 layers in this file to FP8 (with fallback; attention through fp8_attention; skipped 3: shape, embedding, lm-head)');
    // One runnable edit: the factories and the fallback that defines them, never a bare TE import.
    assert.doesNotMatch(applyEdits(text, all.edits), /^import transformer_engine/m);
    // Offered, but not for a batch --fix: it brings in new code (the fallback).
    assert.equal(all.safe, false);
    const withTe = text.replace('import torch\n', 'import torch\nimport transformer_engine.pytorch as te\n');
    const again = await analyse(withTe);
    // A conversion changes behaviour (FP8, te.Linear's init): only --unsafe-fixes applies it, even where TE is imported.
    assert.equal(sourceFixes(withTe, again.ir, MECHANICS_SETTINGS).find((f) => f.id === 'convert-all:file')?.safe, false);
  });

  it('refuses te.* conversions in a file that converts its model with torchao; extends isinstance(nn.Linear) tests with the conversion', async () => {
    const base = [
      'import torch',
      'import torch.nn as nn',
      'import transformer_engine.pytorch as te',
      '',
      'def init(m):',
      '    if isinstance(m, nn.Linear):',
      '        nn.init.normal_(m.weight, std=0.02)',
      '',
      'm = nn.Sequential(nn.Linear(2048, 4096), nn.Linear(4096, 128))',
      '',
    ].join('\n');
    const plain = await analyse(base);
    const pl101 = plain.findings.filter((f) => f.code === 'PL101');
    assert.equal(pl101.length, 2);
    assert.doesNotMatch(pl101[0].message, /tests the layer's class/, 'said once, by the conversion, not on every layer');
    const one = fixOutcome(base, plain.ir, pl101[0], MECHANICS_SETTINGS).fixes[0];
    assert.equal(one.title, 'Convert to te.Linear (extending 1 class test)');
    assert.match(applyEdits(base, one.edits), /isinstance\(m, \(nn\.Linear, te\.Linear\)\)/);
    assert.equal(one.safe, false);
    // The other ways to test a class are extended too, per layer kind converted (minGPT's configure_optimizers).
    const forms: [string, string[], RegExp | undefined][] = [
      ['white = (torch.nn.Linear,)\ndef groups(m):\n    return isinstance(m, white)\n', ['linear'], /white = \(torch\.nn\.Linear, te\.Linear,\)/],
      ['def groups(m):\n    return type(m) == nn.Linear\n', ['linear'], /type\(m\) in \(nn\.Linear, te\.Linear\)/],
      ['def groups(m):\n    return m.__class__ in (nn.Linear, nn.Embedding)\n', ['linear'], /\(nn\.Linear, te\.Linear, nn\.Embedding\)/],
      ['black = (torch.nn.LayerNorm, torch.nn.Embedding)\ndef groups(m):\n    return isinstance(m, black)\n', ['layernorm'], /\(torch\.nn\.LayerNorm, te\.LayerNorm, torch\.nn\.Embedding\)/],
      ['white, black = (te.Linear,), (torch.nn.LayerNorm, torch.nn.Embedding)\ndef groups(m):\n    return isinstance(m, black)\n', ['layernorm'], undefined],
      ['def groups(m):\n    return isinstance(m, (nn.Embedding,))\n', [], undefined],
    ];
    for (const [code, kinds, extended] of forms) {
      const text = `import torch\nimport torch.nn as nn\nimport transformer_engine.pytorch as te\n${code}\nm = nn.Sequential(nn.Linear(2048, 4096), nn.LayerNorm(4096))\n`;
      const a = await analyse(text);
      assert.equal(a.findings.filter((x) => x.code === 'PL101' || x.code === 'PL102').length, 2, code);
      for (const f of a.findings.filter((x) => x.code === 'PL101' || x.code === 'PL102')) {
        const held = kinds.includes(f.code === 'PL101' ? 'linear' : 'layernorm');
        const fix = fixOutcome(text, a.ir, f, MECHANICS_SETTINGS).fixes[0];
        assert.equal(fix?.safe, false, `${code} / ${f.code}`);
        if (held && extended) assert.match(applyEdits(text, fix.edits), extended, code);
      }
    }
    // `cls = (nn.Linear)` is the class in parentheses, not a tuple of classes: left as it is (issue 23).
    const paren = 'import torch\nimport torch.nn as nn\nimport transformer_engine.pytorch as te\ncls = (nn.Linear)\nm = nn.Sequential(nn.Linear(2048, 4096))\n';
    const pa = await analyse(paren);
    const pfix = fixOutcome(paren, pa.ir, pa.findings.find((x) => x.code === 'PL101')!, MECHANICS_SETTINGS).fixes[0];
    assert.match(applyEdits(paren, pfix.edits), /^cls = \(nn\.Linear\)$/m);
    // A case pattern cannot list the te.* class: the conversion is refused with the reason.
    const match = `${base}def kind(m):\n    match m:\n        case nn.Linear():\n            return 1\n`;
    const mm = await analyse(match);
    const refused = fixOutcome(match, mm.ir, mm.findings.find((f) => f.code === 'PL101')!, MECHANICS_SETTINGS);
    assert.equal(refused.fixes.length, 0);
    assert.match(refused.refusals[0], /case pattern/);
    const torchao = `${base}from torchao.float8 import convert_to_float8_training\nconvert_to_float8_training(m)\n`;
    const conv = await analyse(torchao);
    assert.equal(conv.findings.filter((f) => f.code === 'PL101').length, 0);
    const all = sourceFixes(torchao, conv.ir, MECHANICS_SETTINGS).find((f) => f.id === 'convert-all:file');
    assert.equal(all, undefined);
  });

  it('marks renames safe, checkpoint loading and structural rewrites not', async () => {
    const safety = async (name: string) => {
      const { text, ir, findings } = await load(name);
      return findings.flatMap((f) => fixOutcome(text, ir, f, MODERN).fixes).map((f) => `${f.codes.join()}:${f.safe}`);
    };
    const deprecated = await safety('deprecated_api.py');
    assert.ok(deprecated.includes('PL303:true') && deprecated.includes('PL304:true'));
    // Its autocast reduces amax over a process group, which the fallback wrapper's context cannot take: no wrapper.
    assert.ok(!deprecated.some((x) => x.startsWith('PL401')), deprecated.join());
    const dep = await load('deprecated_api.py');
    const pl401 = dep.findings.find((f) => f.code === 'PL401');
    assert.ok(pl401);
    assert.match(fixOutcome(dep.text, dep.ir, pl401, MECHANICS_SETTINGS).refusals[0] ?? '', /process group \(group\)/);
    // strict=False also accepts really missing keys: offered in the editor, never batch-applied.
    assert.deepEqual([...new Set(await safety('checkpoint_load.py'))].sort(), ['PL401:false', 'PL501:false']);
    assert.ok((await safety('compile_recipe.py')).includes('PL305:false'));
    assert.ok((await safety('te_head.py')).includes('PL201:false'));
  });

  it('PL502 has no automatic fix and says what to do', async () => {
    const text = 'import torch\nmodel = torch.nn.Linear(16, 16).half()\nopt = torch.optim.AdamW(model.parameters())\n';
    const { ir, findings } = await analyse(text);
    const f = findings.find((x) => x.code === 'PL502');
    assert.ok(f, 'PL502 fires on a model cast to FP16 before its optimizer');
    assert.match(explainRefusal(text, ir, f, MECHANICS_SETTINGS) ?? '', /FP32/);
  });
});

describe('fixes: library norms by the signatures read from source', () => {
  const text = [
    'import torch.nn as nn',
    'from timm.layers.norm import LayerNorm',
    '',
    'class Block(nn.Module):',
    '    def __init__(self):',
    '        super().__init__()',
    '        self.by_name = LayerNorm(num_channels=768)',
    '        self.with_eps = LayerNorm(768, 1e-5)',
    '',
    '    def forward(self, x):',
    '        return self.with_eps(self.by_name(x))',
    '',
  ].join('\n');

  it("renames timm's num_channels to normalized_shape and keeps its eps default (1e-6, not TE's 1e-5)", async () => {
    const { ir, findings } = await analyse(text);
    const converted = (name: string): string => {
      const f = findings.find((x) => x.layerIndex !== undefined && ir.layers[x.layerIndex].name === name && fixOutcome(text, ir, x, MECHANICS_SETTINGS).fixes.length > 0);
      assert.ok(f, `no conversion offered for ${name}`);
      return applyEdits(text, fixOutcome(text, ir, f, MECHANICS_SETTINGS).fixes[0].edits);
    };
    const a = converted('self.by_name');
    // Through the FP8 fallback's factory, which takes te.*'s argument names.
    assert.match(a, /self\.by_name = fp8_layernorm\(normalized_shape=768, eps=1e-6\)/);
    assert.equal(pyCompileError(a), undefined);
    // An eps the call passes is kept as it is.
    assert.match(converted('self.with_eps'), /self\.with_eps = fp8_layernorm\(768, 1e-5\)/);
  });
});

describe('fixes: PL501 only on module checkpoints', () => {
  it('ignores optimizer/scheduler/scaler/dcp loads and module-level functions, refuses **kwargs', async () => {
    const text = [
      'import torch',
      'import torch.distributed.checkpoint as dcp',
      'import transformer_engine.pytorch as te',
      'from transformers.modeling_utils import load_state_dict',
      '',
      'model = te.Linear(768, 768)',
      'optimizer = torch.optim.AdamW(model.parameters())',
      'ckpt = torch.load("c.pt")',
      'optimizer.load_state_dict(ckpt["optim"])',
      'scheduler.load_state_dict(ckpt["sched"])',
      'scaler.load_state_dict(ckpt["scaler"])',
      'o = torch.optim.SGD(model.parameters(), lr=0.1)',
      'o.load_state_dict(ckpt["o"])',
      'loader = StatefulDataLoader(ds, batch_size=8)',
      'loader.load_state_dict(ckpt["loader"])',
      'ema = ExponentialMovingAverage(model.parameters(), decay=0.999)',
      'ema.load_state_dict(ckpt["ema"])',
      'x.load_state_dict(ckpt["x"])',
      'dcp.load_state_dict(ckpt, checkpoint_id="x")',
      'sd = load_state_dict("shard.bin")',
      'model.load_state_dict(ckpt["model"], **kw)',
      'model.load_state_dict(ckpt["model"])',
      '',
    ].join('\n');
    const { ir, findings } = await analyse(text);
    const pl501 = findings.filter((f) => f.code === 'PL501');
    assert.equal(pl501.length, 2, pl501.map((f) => f.span.startLine).join());
    const splat = fixOutcome(text, ir, pl501[0], MECHANICS_SETTINGS);
    assert.equal(splat.fixes.length, 0);
    assert.match(splat.refusals[0], /passes \*\*kw/);
    assert.equal(fixOutcome(text, ir, pl501[1], MECHANICS_SETTINGS).fixes[0]?.safe, false);
  });

  it('PL303 stays quiet on the old-API path of version-checking code, and its fixes are not batch-applied there', async () => {
    const text = [
      'import torch',
      'import transformer_engine.pytorch as te',
      '',
      'def fp8_ctx(recipe):',
      '    if hasattr(te, "autocast"):',
      '        return te.autocast(enabled=True, recipe=recipe)',
      '    return te.fp8_autocast(enabled=True, fp8_recipe=recipe)',
      '',
      'def step(model, x, recipe):',
      '    with te.fp8_autocast(enabled=True, fp8_recipe=recipe):',
      '        return model(x)',
      '',
    ].join('\n');
    const { ir, findings } = await analyse(text);
    const pl303 = findings.filter((f) => f.code === 'PL303');
    assert.deepEqual(pl303.map((f) => f.span.startLine + 1), [10]);
    const fix = fixOutcome(text, ir, pl303[0], MECHANICS_SETTINGS).fixes[0];
    assert.ok(fix, 'offered in the editor');
    assert.equal(fix.safe, false, 'the file supports TE < 2.9 on purpose');
    // Without the version check the same migration is batch-safe.
    const plain = text.replace(/    if hasattr\(te, "autocast"\):\n        return te\.autocast\(enabled=True, recipe=recipe\)\n/, '');
    const b = await analyse(plain);
    const f2 = b.findings.filter((f) => f.code === 'PL303');
    assert.equal(f2.length, 2);
    assert.ok(f2.every((f) => fixOutcome(plain, b.ir, f, MODERN).fixes[0]?.safe === true));
    assert.ok(f2.every((f) => fixOutcome(plain, b.ir, f, MECHANICS_SETTINGS).fixes[0]?.safe === false), 'TE version unknown: not batch-applied');
  });
});

describe('fixes: keeping a TE lm-head in BF16 without changing other layers', () => {
  it('does not rebuild a te.LayerNormLinear head as nn.Linear, nor wrap a statement that also calls another layer', async () => {
    const text = [
      'import torch',
      'import torch.nn as nn',
      'import transformer_engine.pytorch as te',
      '',
      'class GPT(nn.Module):',
      '    def __init__(self, d: int = 1024, vocab_size: int = 50304):',
      '        super().__init__()',
      '        self.proj = te.Linear(d, d)',
      '        self.lm_head = te.LayerNormLinear(d, vocab_size, bias=False)',
      '',
      '    def forward(self, h):',
      '        return self.lm_head(self.proj(h))',
      '',
      'model = GPT()',
      'with te.autocast(enabled=True):',
      '    y = model(torch.randn(4, 1024))',
      '',
    ].join('\n');
    const { ir, findings } = await analyse(text);
    const pl201 = findings.find((f) => f.code === 'PL201');
    assert.ok(pl201, findings.map((f) => f.code).join());
    const out = fixOutcome(text, ir, pl201!, MECHANICS_SETTINGS);
    assert.equal(out.fixes.length, 0);
    assert.ok(out.refusals.some((r) => /fuses more than a Linear/.test(r)), out.refusals.join('\n'));
    assert.ok(out.refusals.some((r) => /also calls self\.proj\(\), which would leave FP8 too/.test(r)), out.refusals.join('\n'));
  });
});

describe('fixes: what the FP8 fallback wrapper cannot carry over', () => {
  const base = [
    'import torch',
    'import transformer_engine.pytorch as te',
    '',
    'layer = te.Linear(1024, 1024)',
    'x = torch.randn(16, 1024)',
  ];
  it('refuses when the autocast reduces amax over a process group', async () => {
    const text = [...base, 'with te.autocast(enabled=True, amax_reduction_group=group):', '    y = layer(x)', ''].join('\n');
    const { ir, findings } = await analyse(text);
    const pl401 = findings.find((f) => f.code === 'PL401');
    assert.ok(pl401, findings.map((f) => f.code).join());
    const out = fixOutcome(text, ir, pl401!, MECHANICS_SETTINGS);
    assert.equal(out.fixes.length, 0);
    assert.match(out.refusals[0], /process group \(group\)/);
  });
  it('refuses when the file subclasses a TE class at import time (issue 23): a guarded import would leave te = None there', async () => {
    const text = [
      'import torch',
      'from torch import nn',
      'import transformer_engine as te',
      '',
      '',
      'class Block(te.pytorch.TransformerLayer):',
      '    pass',
      '',
      '',
      'class Net(nn.Module):',
      '    def __init__(self):',
      '        super().__init__()',
      '        self.block = Block(1024, 4096, 16)',
      '        self.fc = te.pytorch.Linear(1024, 1024)',
      '',
      '    def forward(self, x):',
      '        with te.pytorch.autocast(enabled=True):',
      '            return self.fc(self.block(x))',
      '',
    ].join('\n');
    const { ir, findings } = await analyse(text);
    const pl401 = findings.find((f) => f.code === 'PL401');
    assert.ok(pl401, findings.map((f) => f.code).join());
    const out = fixOutcome(text, ir, pl401!, MECHANICS_SETTINGS);
    assert.equal(out.fixes.length, 0);
    assert.match(out.refusals[0], /line 6 uses Transformer Engine when the file is imported \(class Block\(te\.pytorch\.TransformerLayer\)\)/);
    // Without the subclass the same file is guarded and routed.
    const plain = text.replace('class Block(te.pytorch.TransformerLayer):', 'class Block(nn.Module):');
    const again = await analyse(plain);
    const fixed = fixOutcome(plain, again.ir, again.findings.find((f) => f.code === 'PL401')!, MECHANICS_SETTINGS);
    assert.equal(fixed.fixes.length, 1, fixed.refusals.join(' '));
  });
  it('refuses when TE layers get TE-only forward arguments', async () => {
    const text = [...base, 'with te.autocast(enabled=True):', '    y = layer(x, is_first_microbatch=True)', ''].join('\n');
    const { ir, findings } = await analyse(text);
    const out = fixOutcome(text, ir, findings.find((f) => f.code === 'PL401')!, MECHANICS_SETTINGS);
    assert.equal(out.fixes.length, 0);
    assert.match(out.refusals[0], /is_first_microbatch=/);
  });

  it('with a guarded TE import (te = None fallback) conversions are not batch-safe, and the torch.nn fallback branch is kept', async () => {
    const text = [
      'import torch.nn as nn',
      'try:',
      '    import transformer_engine.pytorch as te',
      'except ImportError:',
      '    te = None',
      '',
      'class MLP(nn.Module):',
      '    def __init__(self, use_te: bool = False):',
      '        super().__init__()',
      '        if use_te and te is not None:',
      '            self.norm = te.LayerNorm(1024)',
      '        else:',
      '            self.norm = nn.LayerNorm(1024)',
      '        self.fc1 = nn.Linear(1024, 4096)',
      '',
      '    def forward(self, x):',
      '        return self.fc1(self.norm(x))',
    ].join('\n');
    const { ir, findings } = await analyse(text);
    const norm = ir.layers.find((l) => l.name === 'self.norm' && !l.isTe)!;
    assert.equal(norm.convertible, false);
    assert.match(norm.reasons.join(' '), /also built as te\.LayerNorm \(line 11\).*fallback/);
    assert.ok(!findings.some((f) => f.layerIndex === ir.layers.indexOf(norm)), 'no diagnostic on the fallback');
    const fc1 = findings.find((f) => f.code === 'PL101')!;
    const out = fixOutcome(text, ir, fc1, MECHANICS_SETTINGS);
    assert.equal(out.fixes.length, 1, 'offered in the editor');
    assert.equal(out.fixes[0].safe, false, 'not applied by --fix: te may be None');
    // With an unconditional import the same conversion is batch-safe.
    const plain = text.replace(/try:\n    import transformer_engine\.pytorch as te\nexcept ImportError:\n    te = None/, 'import transformer_engine.pytorch as te');
    const b = await analyse(plain);
    assert.equal(fixOutcome(plain, b.ir, b.findings.find((f) => f.code === 'PL101')!, MECHANICS_SETTINGS).fixes[0].safe, false, 'a conversion is never behaviour-preserving');
  });

  it('convert-all is refused when a file importing this one uses another stack (editor: env.otherStack)', async () => {
    const text = 'import torch.nn as nn\nimport transformer_engine.pytorch as te\n\nclass MLP(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(1024, 4096)\n';
    const { ir } = await analyse(text);
    assert.ok(sourceFixes(text, ir, MECHANICS_SETTINGS).some((f) => f.id === 'convert-all:file'));
    const out = sourceFixOutcome(text, ir, MECHANICS_SETTINGS, { env: { otherStack: 'convert_to_float8_training' } });
    assert.equal(out.fixes.find((f) => f.id === 'convert-all:file'), undefined);
    assert.ok(out.refusals.some((r) => /convert_to_float8_training \(in a file that imports this one\)/.test(r)), out.refusals.join('\n'));
  });

  it("names a positional bias (te.Linear's third parameter is sequence_parallel) and keeps a (1 + w) LayerNorm's offset", async () => {
    const text = [
      'import torch.nn as nn',
      'import torch.nn.functional as F',
      'import transformer_engine.pytorch as te',
      '',
      'class LayerNorm1P(nn.LayerNorm):',
      '    def forward(self, x):',
      '        return F.layer_norm(x, self.normalized_shape, self.weight + 1, self.bias, self.eps)',
      '',
      'class M(nn.Module):',
      '    def __init__(self, d: int = 1024, use_bias: bool = False):',
      '        super().__init__()',
      '        self.a = nn.Linear(d, d, False)',
      '        self.b = nn.Linear(d, d, use_bias)',
      '        self.n = LayerNorm1P(d, eps=1e-5)',
    ].join('\n');
    const { ir, findings } = await analyse(text);
    const fixed = (name: string) => {
      const f = findings.find((x) => x.layerIndex !== undefined && ir.layers[x.layerIndex].name === name)!;
      const fix = fixOutcome(text, ir, f, MECHANICS_SETTINGS).fixes[0];
      return applyEdits(text, fix.edits);
    };
    assert.match(fixed('self.a'), /self\.a = te\.Linear\(d, d, bias=False\)/);
    assert.match(fixed('self.b'), /self\.b = te\.Linear\(d, d, bias=use_bias\)/);
    assert.match(fixed('self.n'), /self\.n = te\.LayerNorm\(d, eps=1e-5, zero_centered_gamma=True\)/);
  });

  it('after the wrapper is inserted, its own layers and autocast are not analysed, so no fix rewrites the wrapper', async () => {
    const text = [
      'import torch',
      'import transformer_engine.pytorch as te',
      '',
      'class M(torch.nn.Module):',
      '    def __init__(self):',
      '        super().__init__()',
      '        self.a = te.Linear(64, 64)',
      '        self.b = te.Linear(64, 64)',
      '        self.c = torch.nn.Linear(64, 64)',
      '',
      'def step(m, x):',
      '    with te.autocast(enabled=True):',
      '        y = m(x)',
      '    y.sum().backward()',
      '',
    ].join('\n');
    const first = await analyse(text);
    const insert = sourceFixes(text, first.ir, MECHANICS_SETTINGS).find((f) => f.id === 'insert-wrapper')!;
    assert.ok(insert, 'insert-wrapper offered');
    const wrapped = applyEdits(text, insert.edits);
    const start = wrapped.indexOf('# precision-lens: fp8 fallback');
    const end = wrapped.indexOf('# precision-lens: end of fp8 fallback');
    assert.ok(start > 0 && end > start);
    const after = await analyse(wrapped);
    const inWrapper = (o: number) => o >= start && o <= end;
    assert.ok(after.ir.layers.every((l) => !inWrapper(l.span.startOffset)), after.ir.layers.map((l) => l.name).join());
    assert.ok(after.findings.every((f) => !inWrapper(f.span.startOffset)), after.findings.map((f) => `${f.code}@${f.span.startLine}`).join());
    // Each layer built through fp8_linear is seen as both of what the factory can return (te.Linear with FP8,
    // torch.nn.Linear without); the torch.nn one is the fallback of its te.* twin.
    assert.deepEqual([...new Set(after.ir.layers.map((l) => l.name))], ['self.a', 'self.b', 'self.c']);
    // Every fix still offered leaves the wrapper alone (no fp8_linear calling itself).
    const fixes = [...sourceFixes(wrapped, after.ir, MECHANICS_SETTINGS), ...after.findings.flatMap((f) => fixOutcome(wrapped, after.ir, f, MECHANICS_SETTINGS).fixes)];
    for (const f of fixes) for (const e of f.edits) assert.ok(!inWrapper(e.startOffset), `${f.title} edits the wrapper at ${e.startOffset}`);
  });

  it('wrapping a selection in FP8 autocast refuses imports, half an if statement, an existing region and __init__', async () => {
    const text = [
      'import torch',
      'import torch.nn as nn',
      '',
      'class M(nn.Module):',
      '    def __init__(self):',
      '        super().__init__()',
      '        self.fc = nn.Linear(64, 64)',
      '',
      'def step(model, x, ok):',
      '    if ok:',
      '        y = model(x)',
      '    else:',
      '        y = model(x * 2)',
      '    z = model(y)',
      '    return z',
      '',
    ].join('\n');
    const { ir } = await analyse(text);
    const sel = (from: string, to: string) => ({ startOffset: text.indexOf(from), endOffset: text.indexOf(to) + to.length });
    const refusal = (from: string, to: string) => sourceFixOutcome(text, ir, MECHANICS_SETTINGS, { selection: sel(from, to) }).refusals.join(' ');
    const wraps = (from: string, to: string) => sourceFixOutcome(text, ir, MECHANICS_SETTINGS, { selection: sel(from, to) }).fixes.some((f) => f.id === 'wrap-selection');
    assert.match(refusal('import torch', 'import torch.nn as nn'), /holds an import/);
    assert.match(refusal('if ok:', 'y = model(x)'), /ends inside an if\/try statement/);
    assert.match(refusal('self.fc = nn.Linear(64, 64)', 'self.fc = nn.Linear(64, 64)'), /in __init__/);
    assert.ok(wraps('if ok:', 'y = model(x * 2)'), 'the whole if/else wraps');
    assert.ok(wraps('z = model(y)', 'z = model(y)'));
  });

  it('the wrapper refuses autocast arguments its context cannot carry (calibrating=, **kwargs) instead of dropping them', async () => {
    const text = [
      'import torch',
      'import transformer_engine.pytorch as te',
      '',
      'def run(model, x, kw):',
      '    with te.autocast(enabled=True, calibrating=True):',
      '        y = model(x)',
      '    return y',
      '',
    ].join('\n');
    const { ir, findings } = await analyse(text);
    const out = sourceFixOutcome(text, ir, MECHANICS_SETTINGS);
    assert.equal(out.fixes.find((f) => f.id === 'insert-wrapper'), undefined);
    assert.ok(out.refusals.some((r) => /passes calibrating=True, which the fallback wrapper's context does not take/.test(r)), out.refusals.join('\n'));
    const pl401 = findings.find((f) => f.code === 'PL401');
    assert.ok(pl401, 'the unguarded TE import is flagged');
    assert.equal(fixOutcome(text, ir, pl401, MECHANICS_SETTINGS).fixes.find((f) => /wrapper/.test(f.title)), undefined);
  });

  it('does not rebuild a TE head as nn.Linear when that would drop its init_method; running it outside FP8 is still offered', async () => {
    const text = [
      'import torch',
      'import torch.nn as nn',
      'import transformer_engine.pytorch as te',
      '',
      'VOCAB = 32000',
      '',
      'class LM(nn.Module):',
      '    def __init__(self, hidden, init_fn):',
      '        super().__init__()',
      '        self.emb = nn.Embedding(VOCAB, hidden)',
      '        self.lm_head = te.Linear(hidden, VOCAB, bias=False, init_method=init_fn)',
      '',
      '    def forward(self, idx):',
      '        x = self.emb(idx)',
      '        return self.lm_head(x)',
      '',
      'def step(model, idx):',
      '    with te.autocast(enabled=True):',
      '        logits = model(idx)',
      '    logits.sum().backward()',
      '',
    ].join('\n');
    const { ir, findings } = await analyse(text);
    const pl201 = findings.find((f) => f.code === 'PL201')!;
    const out = fixOutcome(text, ir, pl201, MECHANICS_SETTINGS);
    assert.equal(out.fixes.find((f) => f.id.startsWith('keep-bf16')), undefined);
    assert.ok(out.refusals.some((r) => /init_method=init_fn has no torch\.nn\.Linear equivalent/.test(r)), out.refusals.join('\n'));
    assert.ok(out.fixes.some((f) => f.id.startsWith('head-outside-fp8')), out.fixes.map((f) => f.id).join());
  });

  it('inserting the wrapper into a file that imports contextlib already does not import it twice', async () => {
    const text = [
      'import contextlib',
      'import torch',
      'import transformer_engine.pytorch as te',
      '',
      'layer = te.Linear(64, 64)',
      '',
      'def step(x):',
      '    with te.autocast(enabled=True):',
      '        y = layer(x)',
      '    y.sum().backward()',
      '',
    ].join('\n');
    const { ir } = await analyse(text);
    const insert = sourceFixes(text, ir, MECHANICS_SETTINGS).find((f) => f.id === 'insert-wrapper')!;
    const out = applyEdits(text, insert.edits);
    assert.equal(out.match(/^import contextlib$/gm)?.length, 1, out);
    assert.equal(pyCompileError(out), undefined);
  });
});
