/**
 * Roles and conversions that come from the library catalogue: framework output layers and embedding modules built
 * through library classes (fairseq's adaptive softmax and positional-embedding helper, Megatron's word + position
 * embedding module), on fixtures written in those styles.
 */
import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer, py } from './analysis-helpers';

describe('analysis: library classes from the catalogue', () => {
  before(initParser);

  it('fairseq style: the adaptive softmax is the lm-head, the learned positional helper an embedding, the sinusoidal one weightless', () => {
    const ir = analyze(fixture('fairseq_style.py'));
    const sm = layer(ir, 'self.adaptive_softmax');
    assert.equal(sm.role, 'lm_head');
    assert.match(sm.roleReasons[0], /adaptive softmax/);
    assert.equal(sm.convertible, false);
    const pos = layer(ir, 'self.embed_positions');
    assert.equal(pos.role, 'embedding');
    assert.equal(pos.convertible, false);
    assert.notEqual(layer(ir, 'self.sin_positions').role, 'embedding');
    assert.equal(layer(ir, 'self.output_projection').role, 'lm_head');
    assert.equal(layer(ir, 'self.layernorm_embedding').teEquivalent, 'te.LayerNorm');
    for (const l of ir.layers.filter((x) => x.kind === 'linear' && x.role !== 'lm_head')) assert.notEqual(l.role, 'embedding', l.name);
    assert.equal(ir.layers.filter((l) => l.role === 'lm_head').length, 2);
  });

  it("Megatron style: LanguageModelEmbedding is the embedding; a config-first norm is not converted with the config as its size", () => {
    const ir = analyze(py`
      from megatron.core.models.common.embeddings.language_model_embedding import LanguageModelEmbedding
      from megatron.core.fusions.fused_layer_norm import FusedLayerNorm
      from megatron.core.transformer.module import MegatronModule

      class Model(MegatronModule):
          def __init__(self, config, vocab_size):
              super().__init__(config=config)
              self.embedding = LanguageModelEmbedding(config=config, vocab_size=vocab_size, max_sequence_length=4096)
              self.final_layernorm = FusedLayerNorm(config, config.hidden_size, eps=config.layernorm_epsilon)
    `);
    const emb = layer(ir, 'self.embedding');
    assert.equal(emb.role, 'embedding');
    assert.match(emb.roleReasons[0], /word \+ position embedding/);
    const norm = layer(ir, 'self.final_layernorm');
    assert.equal(norm.convertible, false);
    assert.match(norm.reasons[0], /TENorm/);
  });

  it('binds positional arguments by the signatures read from source (xformers RMSNorm, timm norms, ConvTranspose)', () => {
    const ir = analyze(py`
      import torch.nn as nn
      from xformers.ops.rmsnorm import RMSNorm as XRMSNorm
      from timm.layers.norm import LayerNorm as TimmLayerNorm

      class Block(nn.Module):
          def __init__(self):
              super().__init__()
              self.weightless = XRMSNorm(512, False)
              self.timm_no_affine = TimmLayerNorm(768, 1e-6, False)
              self.timm_by_name = TimmLayerNorm(num_channels=768)
              self.up = nn.ConvTranspose2d(64, 32, 3, 2, 1, 1)
    `);
    // xformers' second parameter is include_weight, not eps: RMSNorm(512, False) has no weight.
    const w = layer(ir, 'self.weightless');
    assert.equal(w.options.include_weight, 'False');
    assert.equal(w.options.eps, undefined);
    assert.equal(w.convertible, false);
    assert.match(w.reasons.join(' '), /include_weight=False means no weight/);
    // timm's third parameter is affine (elementwise_affine under another name).
    const t = layer(ir, 'self.timm_no_affine');
    assert.equal(t.convertible, false);
    assert.match(t.reasons.join(' '), /affine=False means no weight or bias/);
    assert.equal(layer(ir, 'self.timm_by_name').normalizedShape?.value, 768);
    // ConvTranspose2d's sixth parameter is output_padding (Conv2d's is dilation).
    const up = layer(ir, 'self.up');
    assert.equal(up.options.output_padding, '1');
    assert.equal(up.options.dilation, undefined);
  });
});
