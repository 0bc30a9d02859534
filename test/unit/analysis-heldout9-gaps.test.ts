/**
 * General rules from held-out set 9's first run (docs/realcode.md), each on code of its own: flash-attn's tensor-parallel
 * Linears are refused with the reason (they shard their own way) and said so as a diagnostic; a norm whose forward
 * swaps the last two axes around it is kept; a norm's weight read on a branch beside its call converts, as a Linear's
 * does; `if norm_layer is None: norm_layer = partial(nn.LayerNorm, ...)` is the parameter's default, checked at run time;
 * flash-attn's ParallelGPT2Embeddings is the token embedding; a norm class whose (base's) weight exists on some paths
 * only (OLMo's LayerNormBase) is uncertain.
 */
import * as assert from 'node:assert/strict';
import { findingsOf } from '../../server/src/engine/engine';
import { applyEdits, sourceFixes, type Fix } from '../../server/src/fixes';
import { analyze, initParser, layer } from './analysis-helpers';
import { MECHANICS_SETTINGS, pyCompileError } from './fixes-support';

describe('held-out set 9 gaps', () => {
  before(initParser);

  it("flash-attn's Column/RowParallelLinear: not convertible, a PL106 that says to convert by hand; Megatron's still converts", () => {
    const src = [
      'import torch.nn as nn',
      'from flash_attn.ops.fused_dense import ColumnParallelLinear, RowParallelLinear',
      'from megatron.core.tensor_parallel.layers import ColumnParallelLinear as MegatronColumn',
      '',
      'class ParallelMLP(nn.Module):',
      '    def __init__(self, dim, hidden, process_group, config, init_method):',
      '        super().__init__()',
      '        self.fc1 = ColumnParallelLinear(dim, hidden, process_group, bias=True, sequence_parallel=True)',
      '        self.fc2 = RowParallelLinear(hidden, dim, process_group, bias=True, sequence_parallel=True)',
      '        self.meg = MegatronColumn(dim, hidden, config=config, init_method=init_method)',
      '',
    ].join('\n');
    const ir = analyze(src);
    for (const [name, cls] of [['self.fc1', 'ColumnParallelLinear'], ['self.fc2', 'RowParallelLinear']]) {
      const l = layer(ir, name);
      assert.equal(l.convertible, false, l.reasons.join('\n'));
      assert.match(l.reasons.join(' '), new RegExp(`^flash-attn's ${cls} shards its weight`));
    }
    assert.match(layer(ir, 'self.fc2').reasons.join(' '), /keeps its bias on rank 0 only/);
    assert.notEqual(layer(ir, 'self.meg').convertible, false);
    const findings = findingsOf(ir, src, MECHANICS_SETTINGS, { anyAutocastRegion: true });
    const fc1 = findings.find((f) => f.code === 'PL106' && f.layerIndex === ir.layers.findIndex((l) => l.name === 'self.fc1'));
    assert.ok(fc1, findings.map((f) => `${f.code} ${f.message}`).join('\n'));
    assert.match(fc1.message, /cannot become te\.Linear exactly; convert by hand, with a checkpoint mapping for the shards/);
  });

  it('a norm whose forward swaps the last two axes around it is kept; the same subclass without the swap converts', () => {
    const src = (swap: boolean) => [
      'import torch.nn as nn',
      '',
      'class LayerNorm(nn.LayerNorm):',
      '    def forward(self, input):',
      swap ? '        x = input.transpose(-2, -1)' : '        x = input',
      '        x = nn.functional.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)',
      swap ? '        return x.transpose(-2, -1)' : '        return x',
      '',
      'class Conv(nn.Module):',
      '    def __init__(self, channels=512):',
      '        super().__init__()',
      '        self.norm = LayerNorm(normalized_shape=channels, elementwise_affine=True)',
      '',
    ].join('\n');
    const kept = layer(analyze(src(true)), 'self.norm');
    assert.equal(kept.convertible, false);
    assert.match(kept.reasons.join(' '), /forward swaps the last two axes around the norm \(`\.transpose\(-2,-1\)`\)/);
    assert.equal(layer(analyze(src(false)), 'self.norm').convertible, true);
  });

  it("a norm's weight read on a branch beside its call converts and says so; read on the only path it stays uncertain", () => {
    const src = (beside: boolean) => [
      'import torch.nn as nn',
      'from flash_attn.ops.triton.layer_norm import layer_norm_fn',
      '',
      'class Block(nn.Module):',
      '    def __init__(self, dim=2048, fused=False):',
      '        super().__init__()',
      '        self.fused = fused',
      '        self.norm1 = nn.LayerNorm(dim)',
      '        self.fc = nn.Linear(dim, dim)',
      '',
      '    def forward(self, x):',
      ...(beside
        ? ['        if not self.fused:', '            h = self.norm1(x)', '        else:', '            h = layer_norm_fn(x, self.norm1.weight, self.norm1.bias, eps=self.norm1.eps)']
        : ['        h = layer_norm_fn(x, self.norm1.weight, self.norm1.bias, eps=self.norm1.eps)']),
      '        return self.fc(h)',
      '',
    ].join('\n');
    const b = layer(analyze(src(true)), 'self.norm1');
    assert.equal(b.convertible, true, b.reasons.join('\n'));
    assert.match(b.reasons.join(' '), /Block reads self\.norm1\.weight directly only on the branch `else:`, whose other branch calls self\.norm1/);
    assert.equal(layer(analyze(src(false)), 'self.norm1').convertible, 'uncertain');
  });

  it('`if norm_layer is None: norm_layer = partial(nn.LayerNorm, eps=1e-5)`: the default, converted through fp8_layernorm_from', () => {
    const src = (body: string) => [
      'from functools import partial',
      'import torch.nn as nn',
      '',
      'class Swin(nn.Module):',
      '    def __init__(self, embed_dim=1024, norm_layer=None, flag=False):',
      '        super().__init__()',
      body,
      '        self.norm = norm_layer(embed_dim)',
      '',
    ].join('\n');
    const text = src('        if norm_layer is None:\n            norm_layer = partial(nn.LayerNorm, eps=1e-5)');
    const ir = analyze(text);
    const n = layer(ir, 'self.norm');
    assert.equal(n.convertible, true, n.reasons.join('\n'));
    assert.deepEqual(n.classParam, { name: 'norm_layer', defaultClass: 'nn.LayerNorm' });
    assert.match(n.reasons.join(' '), /Its class comes from the parameter norm_layer \(partial\(nn\.LayerNorm, eps=1e-5\) when None\): the conversion checks at run time/);
    const fix = sourceFixes(text, ir, MECHANICS_SETTINGS).find((f: Fix) => f.id === 'convert-all:file');
    assert.ok(fix);
    const out = applyEdits(text, fix.edits);
    assert.match(out, /self\.norm = fp8_layernorm_from\(norm_layer, nn\.LayerNorm, embed_dim\)/);
    assert.equal(pyCompileError(out), undefined);
    // Assigned under another condition (or in an else): not the default, so not a run-time-checked conversion.
    const other = layer(analyze(src('        if flag:\n            norm_layer = partial(nn.LayerNorm, eps=1e-5)')), 'self.norm');
    assert.equal(other.classParam, undefined);
  });

  it("flash-attn's ParallelGPT2Embeddings and BertEmbeddings are the embedding", () => {
    const ir = analyze([
      'import torch.nn as nn',
      'from flash_attn.modules.embedding import BertEmbeddings, ParallelGPT2Embeddings',
      '',
      'class GPTModel(nn.Module):',
      '    def __init__(self, config, process_group):',
      '        super().__init__()',
      '        self.embeddings = ParallelGPT2Embeddings(config.hidden_size, config.vocab_size, config.max_position_embeddings, process_group=process_group)',
      '        self.bert = BertEmbeddings(config.hidden_size, config.vocab_size, config.max_position_embeddings, config.type_vocab_size)',
      '',
    ].join('\n'));
    for (const name of ['self.embeddings', 'self.bert']) {
      const e = layer(ir, name);
      assert.equal(e.role, 'embedding', `${name}: ${e.reasons.join(' ')}`);
      assert.notEqual(e.convertible, true);
    }
  });

  it("a norm class whose base builds its weight on some paths only (OLMo's LayerNormBase) is uncertain, with the line", () => {
    const src = (optional: boolean) => [
      'import torch',
      'import torch.nn as nn',
      'import torch.nn.functional as F',
      '',
      'class LayerNormBase(nn.Module):',
      '    def __init__(self, size, elementwise_affine=True):',
      '        super().__init__()',
      '        self.normalized_shape = (size,)',
      '        self.eps = 1e-5',
      ...(optional
        ? ['        if elementwise_affine:', '            self.weight = nn.Parameter(torch.ones(self.normalized_shape))', '            self.bias = nn.Parameter(torch.zeros(self.normalized_shape))',
          '        else:', '            self.register_parameter("bias", None)', '            self.register_parameter("weight", None)']
        : ['        self.weight = nn.Parameter(torch.ones(self.normalized_shape))', '        self.bias = nn.Parameter(torch.zeros(self.normalized_shape))']),
      '',
      'class LayerNorm(LayerNormBase):',
      '    def forward(self, x):',
      '        return F.layer_norm(x, self.normalized_shape, weight=self.weight, bias=self.bias, eps=self.eps)',
      '',
      'class Block(nn.Module):',
      '    def __init__(self, d_model=2048):',
      '        super().__init__()',
      '        self.attn_norm = LayerNorm(d_model)',
      '',
    ].join('\n');
    const n = layer(analyze(src(true)), 'self.attn_norm');
    assert.equal(n.convertible, 'uncertain', n.reasons.join('\n'));
    assert.match(n.reasons.join(' '), /LayerNorm has a weight only on some paths \(`self\.register_parameter\("weight", None\)` on the others\), while te\.LayerNorm always has one/);
    assert.equal(layer(analyze(src(false)), 'self.attn_norm').convertible, true);
  });
});
