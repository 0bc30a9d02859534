/**
 * General rules from held-out set 8's first run (docs/realcode.md), each on a fixture of its own: a Linear built only
 * for its parameters is kept (AudioCraft's attention keeps in_proj's weight and bias for F.linear); a weight named in a
 * comment or a docstring is not a read (litgpt's LoRAQKVLinear documents `self.linear.weight` beside its call); an
 * imported norm factory named `create_norm_fn` (AudioCraft) is reported like `create_norm`; torchtune's GemmaRMSNorm (read
 * in its source: 1 + scale) converts to te.RMSNorm(zero_centered_gamma=True) keeping its `scale` key, and its
 * GemmaNormEmbeddings is the token embedding; `config.norm_class(...)` is read through a file's subclass of litgpt's
 * Config, and listed (not converted) where `config` has no known class.
 */
import * as assert from 'node:assert/strict';
import { analyze, fixture, initParser, layer } from './analysis-helpers';

describe('held-out set 8 gaps', () => {
  before(initParser);

  it('a local Linear whose weight and bias are kept and the module thrown away is not convertible, and says why', () => {
    const ir = analyze(fixture('params_only_local.py'));
    const inProj = layer(ir, 'in_proj');
    assert.equal(inProj.convertible, false);
    assert.ok(inProj.reasons.some((r) => /in_proj is built only for its parameters and never called \(`self\.in_proj_weight = in_proj\.weight`\)/.test(r)), inProj.reasons.join('\n'));
    assert.equal(layer(ir, 'self.out_proj').convertible, true);
  });

  it('a local Linear that is stored, initialised or passed on stays convertible', () => {
    const ir = analyze(fixture('params_only_local.py'));
    // Initialised through its bias, then stored as a module: called in forward.
    const proj = ir.layers.filter((l) => l.name === 'proj' || l.name === 'self.proj');
    assert.ok(proj.length >= 1, ir.layers.map((l) => l.name).join(', '));
    for (const l of proj) assert.equal(l.convertible, true, `${l.name}: ${l.reasons.join(' ')}`);
    const mlp = ir.layers.filter((x) => x.name === 'up' || x.name === 'down');
    assert.equal(mlp.length, 2, ir.layers.map((l) => l.name).join(', '));
    for (const l of mlp) assert.equal(l.convertible, true, `${l.name}: ${l.reasons.join(' ')}`);
  });

  it('a weight named in a comment or a docstring is no direct read; one read in code still is', () => {
    const ir = analyze(fixture('weight_named_in_comments.py'));
    const [documented, merged] = ir.layers.filter((l) => l.name === 'self.linear');
    assert.equal(documented.ownerClass, 'LoRAQKV');
    assert.equal(documented.convertible, true, documented.reasons.join('\n'));
    assert.equal(merged.ownerClass, 'LoRAMerged');
    assert.equal(merged.convertible, 'uncertain');
    assert.ok(merged.reasons.some((r) => /also reads self\.linear\.weight directly/.test(r)), merged.reasons.join('\n'));
  });

  it('an imported norm factory called create_norm_fn is reported, not converted, naming where its class is chosen', () => {
    const ir = analyze([
      'import torch.nn as nn',
      'from ..modules.transformer import StreamingTransformer, create_norm_fn',
      '',
      'class LMModel(nn.Module):',
      '    def __init__(self, dim=1024, norm="layer_norm"):',
      '        super().__init__()',
      '        self.out_norm = create_norm_fn(norm, dim)',
      '        self.run_fn = make_runner_fn(dim)',
      '',
    ].join('\n'));
    const norm = layer(ir, 'self.out_norm');
    assert.equal(norm.kind, 'layernorm');
    assert.notEqual(norm.convertible, true);
    assert.match(norm.reasons.join(' '), /create_norm_fn\(\) from \.\.modules\.transformer builds a norm whose class is chosen in that module/);
    assert.equal(ir.layers.some((l) => l.name === 'self.run_fn'), false);
  });

  it("torchtune's GemmaRMSNorm converts with zero_centered_gamma=True, keeping its scale key and the class for the fallback", () => {
    const ir = analyze([
      'import torch.nn as nn',
      'from torchtune.models.gemma.rms_norm import GemmaRMSNorm',
      'from torchtune.modules.rms_norm import RMSNorm',
      'from torchtune.models.gemma.gemma_norm_embedding import GemmaNormEmbeddings',
      '',
      'class Block(nn.Module):',
      '    def __init__(self, dim=2048, eps=1e-6):',
      '        super().__init__()',
      '        self.sa_norm = GemmaRMSNorm(dim, eps=eps)',
      '        self.plain = RMSNorm(dim)',
      '        self.tok_embeddings = GemmaNormEmbeddings(256000, dim)',
      '',
    ].join('\n'));
    const g = layer(ir, 'self.sa_norm');
    assert.equal(g.kind, 'rmsnorm');
    assert.equal(g.convertible, true, g.reasons.join('\n'));
    assert.equal(g.zeroCenteredGamma, true);
    assert.equal(g.teArgs?.zero_centered_gamma, 'True');
    assert.equal(g.weightName, 'scale');
    assert.equal(g.fallbackKeepsClass, 'GemmaRMSNorm');
    assert.match(g.reasons.join(' '), /scaled by \(1 \+ weight\) \(read in torchtune .*rms_norm\.py.*\): it maps onto te\.RMSNorm\(zero_centered_gamma=True\)/);
    // torchtune's plain RMSNorm: no offset.
    const p = layer(ir, 'self.plain');
    assert.equal(p.convertible, true);
    assert.notEqual(p.zeroCenteredGamma, true);
    assert.equal(p.teArgs?.zero_centered_gamma, undefined);
    const e = layer(ir, 'self.tok_embeddings');
    assert.equal(e.kind, 'embedding');
    assert.equal(e.role, 'embedding');
    assert.notEqual(e.convertible, true);
  });

  it("config.norm_class(...): through a local subclass of litgpt's Config its candidates; untyped, listed and not converted", () => {
    const body = [
      'class GPT(nn.Module):',
      '    def __init__(self, config__ANN__) -> None:',
      '        super().__init__()',
      '        self.transformer = nn.ModuleDict(dict(',
      '            wte=nn.Embedding(config.padded_vocab_size, config.n_embd),',
      '            ln_f=config.norm_class(config.n_embd, eps=config.norm_eps),',
      '        ))',
      '        self.extra = self.norm_class(config.n_embd)',
      '',
    ];
    const head = ['from dataclasses import dataclass', 'import torch.nn as nn', 'from litgpt.config import Config as BaseConfig', '',
      '@dataclass', 'class Config(BaseConfig):', '    lora_r: int = 4', '', ''];
    const typed = analyze([...head, ...body].join('\n').replace('__ANN__', ': Config'));
    const t = layer(typed, 'transformer.ln_f');
    assert.equal(t.convertible, 'uncertain', t.reasons.join('\n'));
    assert.match(t.reasons.join(' '), /Its class comes from config\.norm_class \(chosen by config\.norm_class_name\), chosen at run time among classes that convert differently \(nn\.LayerNorm -> te\.LayerNorm; litgpt\.model\.RMSNorm -> te\.RMSNorm\)/);
    const untyped = analyze([...head, ...body].join('\n').replace('__ANN__', ''));
    const u = layer(untyped, 'transformer.ln_f');
    assert.equal(u.convertible, false);
    assert.match(u.reasons.join(' '), /^config\.norm_class\(\.\.\.\) builds a norm whose class config chooses at run time .* not converted here\./);
    // self.norm_class(...) with nothing defining it: no guess.
    assert.equal(untyped.layers.some((l) => l.name === 'self.extra'), false);
  });
});
