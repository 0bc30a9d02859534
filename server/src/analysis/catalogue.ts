/**
 * The library catalogue: the layer classes model code is written with, as data. One row per class: its fully
 * qualified name, kind, constructor parameters in positional order, role hint, te.* mapping with the argument renames
 * a conversion needs, and the library file it was read from. Adding a library is adding rows (and its import root to
 * LIBRARY_ROOTS); `lookupClass` is the only reader of the rows and test/unit/catalogue.test.ts checks their integrity.
 *
 * Lookup order: the exact name, then the class name within its library (a class is re-exported from several
 * modules: `megatron.core.tensor_parallel.ColumnParallelLinear` and `...tensor_parallel.layers.ColumnParallelLinear`),
 * then the library's module rule (any other `torch.nn.X` is a module with no te.* twin), then the name families that
 * hold across libraries (a `ColumnParallelLinear` or an `RMSNorm` imported from a library not listed).
 */
import type { LayerKind, LayerRole } from './ir';

export type Library =
  | 'torch' | 'transformer_engine' | 'megatron' | 'fairscale' | 'fairseq' | 'apex' | 'transformers' | 'timm'
  | 'torchtune' | 'litgpt' | 'xformers' | 'flash_attn' | 'diffusers' | 'mamba_ssm';

/** The te.* class a row converts to, and how its arguments are spelt there. */
export interface TeMapping {
  cls: 'te.Linear' | 'te.LayerNorm' | 'te.RMSNorm';
  /** Keyword renames from this class's spelling to te.*'s (`input_size` -> `in_features`, `dtype` -> `params_dtype`). */
  renames?: Record<string, string>;
  parallelMode?: 'column' | 'row';
  /** The weight is stored [in, out] (Hugging Face Conv1D): te.Linear computes the same only with it transposed. */
  transposedWeight?: boolean;
}

/** What a class is in a model, when its class says it (a framework's output layer, its embedding module). */
export interface RoleHint {
  role: LayerRole;
  /** Why, for the role's reason (`an adaptive softmax: the output layer over the vocabulary`). */
  note: string;
  /** A keyword that, passed as a literal False, makes the module weightless (fairseq's PositionalEmbedding(learned=)). */
  weightsOnlyWhen?: string;
}

export interface CatalogueEntry {
  /** Fully qualified name as the library defines it. */
  name: string;
  /** Other import paths of the same class outside its library's root (apex's megatron-style layers). */
  aliases?: string[];
  library: Library;
  kind: LayerKind;
  /** Constructor parameters in positional order (keyword-only ones after `*` are not listed). */
  params: string[];
  role?: RoleHint;
  te?: TeMapping;
  /** Already a Transformer Engine module (or a library wrapper around one). */
  isTe?: boolean;
  /** A model library's own class whose forward is not in the user's file: its conversion is checked by hand. */
  imported?: boolean;
  /** Why a Linear or norm class has no te.* twin to convert to in place (said as the verdict's reason). */
  noTe?: string;
  /** Not a layer at all (containers, losses, parameters). */
  notLayer?: boolean;
  /** Where the signature was read: `owner/repo path`. */
  source: string;
}

/** Import roots of the catalogued libraries (the first segment of a resolved name). */
export const LIBRARY_ROOTS: Record<string, Library> = {
  torch: 'torch', transformer_engine: 'transformer_engine', megatron: 'megatron', fairscale: 'fairscale', fairseq: 'fairseq',
  apex: 'apex', transformers: 'transformers', timm: 'timm', torchtune: 'torchtune', litgpt: 'litgpt', xformers: 'xformers',
  flash_attn: 'flash_attn', diffusers: 'diffusers', mamba_ssm: 'mamba_ssm',
};

const LINEAR = ['in_features', 'out_features', 'bias', 'device', 'dtype'];
const CONV = ['in_channels', 'out_channels', 'kernel_size', 'stride', 'padding', 'dilation', 'groups', 'bias'];
const TORCH_DTYPE = { dtype: 'params_dtype' };
const MEGATRON_LINEAR = { input_size: 'in_features', output_size: 'out_features', skip_bias_add: 'return_bias', dtype: 'params_dtype' };
const MEGATRON_NORM = "Megatron builds this norm from its config (LayerNorm or RMSNorm by config.normalization): choose TENorm in the layer spec instead of converting the call.";
const TORCH_MODULES = 'pytorch/pytorch torch/nn/modules/';
const TE_MODULES = 'NVIDIA/TransformerEngine transformer_engine/pytorch/';

const torchNn = (cls: string, kind: LayerKind, params: string[], file: string, extra: Partial<CatalogueEntry> = {}): CatalogueEntry => ({
  name: `torch.nn.${cls}`, library: 'torch', kind, params, source: `${TORCH_MODULES}${file}`, ...extra,
});
const te = (cls: string, kind: LayerKind, params: string[], file: string): CatalogueEntry => ({
  name: `transformer_engine.pytorch.${cls}`, library: 'transformer_engine', kind, params, isTe: true, source: `${TE_MODULES}${file}`,
});

export const CATALOGUE: CatalogueEntry[] = [
  // torch.nn
  torchNn('Linear', 'linear', LINEAR, 'linear.py', { te: { cls: 'te.Linear', renames: TORCH_DTYPE } }),
  // in_features is inferred at the first forward: no te.* twin (verdict.ts says what to do).
  torchNn('LazyLinear', 'other', ['out_features', 'bias', 'device', 'dtype'], 'linear.py'),
  torchNn('Bilinear', 'other', ['in1_features', 'in2_features', 'out_features', 'bias', 'device', 'dtype'], 'linear.py'),
  torchNn('LayerNorm', 'layernorm', ['normalized_shape', 'eps', 'elementwise_affine', 'bias', 'device', 'dtype'], 'normalization.py', { te: { cls: 'te.LayerNorm' } }),
  torchNn('RMSNorm', 'rmsnorm', ['normalized_shape', 'eps', 'elementwise_affine', 'device', 'dtype'], 'normalization.py', { te: { cls: 'te.RMSNorm' } }),
  torchNn('Embedding', 'embedding', ['num_embeddings', 'embedding_dim', 'padding_idx', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'sparse', '_weight', '_freeze', 'device', 'dtype'], 'sparse.py',
    { role: { role: 'embedding', note: 'a lookup table (embedding)' } }),
  torchNn('EmbeddingBag', 'embedding', ['num_embeddings', 'embedding_dim', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'mode', 'sparse'], 'sparse.py',
    { role: { role: 'embedding', note: 'a lookup table (embedding bag)' } }),
  torchNn('AdaptiveLogSoftmaxWithLoss', 'other', ['in_features', 'n_classes', 'cutoffs', 'div_value', 'head_bias', 'device', 'dtype'], 'adaptive.py',
    { role: { role: 'lm_head', note: 'an adaptive softmax: the output layer over the vocabulary (its head and tail projections)' } }),
  torchNn('MultiheadAttention', 'other', ['embed_dim', 'num_heads', 'dropout', 'bias', 'add_bias_kv', 'add_zero_attn', 'kdim', 'vdim', 'batch_first', 'device', 'dtype'],
    'activation.py', { role: { role: 'attention', note: 'an attention block' } }),
  ...(['Conv1d', 'Conv2d', 'Conv3d', 'ConvTranspose1d', 'ConvTranspose2d', 'ConvTranspose3d'].map((c) => torchNn(c, 'conv', CONV, 'conv.py'))),
  ...(['Module', 'ModuleList', 'ModuleDict', 'Sequential', 'Parameter', 'ParameterList', 'ParameterDict', 'Buffer', 'DataParallel', 'UninitializedParameter']
    .map((c) => torchNn(c, 'other', [], c.startsWith('Param') || c.endsWith('Parameter') || c === 'Buffer' ? '../parameter.py' : 'container.py', { notLayer: true }))),

  // Transformer Engine
  te('Linear', 'linear', ['in_features', 'out_features', 'sequence_parallel', 'fuse_wgrad_accumulation', 'tp_group', 'tp_size', 'get_rng_state_tracker', 'rng_tracker_name', 'init_method', 'bias'], 'module/linear.py'),
  te('LayerNorm', 'layernorm', ['normalized_shape', 'eps', 'sequence_parallel', 'params_dtype', 'zero_centered_gamma'], 'module/layernorm.py'),
  te('RMSNorm', 'rmsnorm', ['normalized_shape', 'eps', 'sequence_parallel', 'params_dtype', 'zero_centered_gamma'], 'module/rmsnorm.py'),
  te('LayerNormLinear', 'linear', ['in_features', 'out_features', 'eps', 'sequence_parallel'], 'module/layernorm_linear.py'),
  te('GroupedLinear', 'linear', ['num_gemms', 'in_features', 'out_features'], 'module/grouped_linear.py'),
  { ...te('LayerNormMLP', 'other', ['hidden_size', 'ffn_hidden_size', 'eps'], 'module/layernorm_mlp.py'), role: { role: 'mlp', note: 'an MLP block' } },
  { ...te('DotProductAttention', 'other', ['num_attention_heads', 'kv_channels'], 'attention/dot_product_attention/dot_product_attention.py'),
    role: { role: 'attention', note: 'an attention block' } },
  { ...te('MultiheadAttention', 'other', ['hidden_size', 'num_attention_heads'], 'attention/multi_head_attention.py'),
    role: { role: 'attention', note: 'an attention block' } },
  te('TransformerLayer', 'other', ['hidden_size', 'ffn_hidden_size', 'num_attention_heads'], 'transformer.py'),

  // Megatron-core
  { name: 'megatron.core.tensor_parallel.layers.ColumnParallelLinear', aliases: ['apex.transformer.tensor_parallel.layers.ColumnParallelLinear'], library: 'megatron',
    kind: 'parallel-linear', params: ['input_size', 'output_size'], te: { cls: 'te.Linear', renames: MEGATRON_LINEAR, parallelMode: 'column' },
    source: 'NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py' },
  { name: 'megatron.core.tensor_parallel.layers.RowParallelLinear', aliases: ['apex.transformer.tensor_parallel.layers.RowParallelLinear'], library: 'megatron',
    kind: 'parallel-linear', params: ['input_size', 'output_size'], te: { cls: 'te.Linear', renames: MEGATRON_LINEAR, parallelMode: 'row' },
    source: 'NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py' },
  { name: 'megatron.core.tensor_parallel.layers.VocabParallelEmbedding', aliases: ['apex.transformer.tensor_parallel.layers.VocabParallelEmbedding'], library: 'megatron',
    kind: 'embedding', params: ['num_embeddings', 'embedding_dim'], role: { role: 'embedding', note: 'a vocabulary-parallel token embedding' },
    source: 'NVIDIA/Megatron-LM megatron/core/tensor_parallel/layers.py' },
  { name: 'megatron.core.models.common.embeddings.language_model_embedding.LanguageModelEmbedding', library: 'megatron', kind: 'other',
    params: ['config', 'vocab_size', 'max_sequence_length', 'position_embedding_type', 'num_tokentypes'],
    role: { role: 'embedding', note: "Megatron's word + position embedding module" },
    source: 'NVIDIA/Megatron-LM megatron/core/models/common/embeddings/language_model_embedding.py' },
  { name: 'megatron.core.fusions.fused_linear_cross_entropy.FusedLinearCrossEntropyLoss', library: 'megatron', kind: 'other', params: [],
    role: { role: 'lm_head', note: "Megatron's fused output layer and cross-entropy (the logits projection)" },
    source: 'NVIDIA/Megatron-LM megatron/core/models/gpt/gpt_model.py' },
  // Megatron's own norms take the config first (`FusedLayerNorm(config, hidden_size, eps)`): no positional te.* twin.
  { name: 'megatron.core.fusions.fused_layer_norm.FusedLayerNorm', library: 'megatron', kind: 'layernorm', params: ['config', 'hidden_size', 'eps'], noTe: MEGATRON_NORM,
    source: 'NVIDIA/Megatron-LM megatron/core/fusions/fused_layer_norm.py' },
  { name: 'megatron.core.transformer.torch_norm.WrappedTorchNorm', library: 'megatron', kind: 'layernorm', params: ['config', 'hidden_size', 'eps'], noTe: MEGATRON_NORM,
    source: 'NVIDIA/Megatron-LM megatron/core/transformer/torch_norm.py' },
  ...(['TELinear', 'TEColumnParallelLinear', 'TERowParallelLinear', 'TELayerNormColumnParallelLinear'].map((c): CatalogueEntry => ({
    name: `megatron.core.extensions.transformer_engine.${c}`, library: 'megatron', kind: 'linear', params: ['input_size', 'output_size'], isTe: true,
    source: 'NVIDIA/Megatron-LM megatron/core/extensions/transformer_engine.py',
  }))),
  { name: 'megatron.core.extensions.transformer_engine.TENorm', library: 'megatron', kind: 'layernorm', params: ['config', 'hidden_size', 'eps'], isTe: true,
    source: 'NVIDIA/Megatron-LM megatron/core/extensions/transformer_engine.py' },
  { name: 'megatron.core.extensions.transformer_engine.TEDotProductAttention', library: 'megatron', kind: 'other', params: ['config', 'layer_number', 'attn_mask_type'], isTe: true,
    role: { role: 'attention', note: 'an attention block' }, source: 'NVIDIA/Megatron-LM megatron/core/extensions/transformer_engine.py' },

  // fairscale
  { name: 'fairscale.nn.model_parallel.layers.ColumnParallelLinear', library: 'fairscale', kind: 'parallel-linear', params: ['in_features', 'out_features', 'bias', 'gather_output'],
    te: { cls: 'te.Linear', renames: TORCH_DTYPE, parallelMode: 'column' }, source: 'facebookresearch/fairscale fairscale/nn/model_parallel/layers.py' },
  { name: 'fairscale.nn.model_parallel.layers.RowParallelLinear', library: 'fairscale', kind: 'parallel-linear', params: ['in_features', 'out_features', 'bias', 'input_is_parallel'],
    te: { cls: 'te.Linear', renames: TORCH_DTYPE, parallelMode: 'row' }, source: 'facebookresearch/fairscale fairscale/nn/model_parallel/layers.py' },
  { name: 'fairscale.nn.model_parallel.layers.ParallelEmbedding', library: 'fairscale', kind: 'embedding', params: ['num_embeddings', 'embedding_dim', 'padding_idx'],
    role: { role: 'embedding', note: 'a model-parallel token embedding' }, source: 'facebookresearch/fairscale fairscale/nn/model_parallel/layers.py' },
  { name: 'fairscale.nn.model_parallel.layers.VocabParallelEmbedding', library: 'fairscale', kind: 'embedding', params: ['num_embeddings', 'embedding_dim', 'padding_idx'],
    role: { role: 'embedding', note: 'a vocabulary-parallel token embedding' }, source: 'facebookresearch/fairscale fairscale/nn/model_parallel/layers.py' },

  // fairseq
  { name: 'fairseq.modules.adaptive_softmax.AdaptiveSoftmax', library: 'fairseq', kind: 'other', params: ['vocab_size', 'input_dim', 'cutoff', 'dropout'],
    role: { role: 'lm_head', note: 'an adaptive softmax: the output layer over the vocabulary (its head and tail projections)' },
    source: 'facebookresearch/fairseq fairseq/modules/adaptive_softmax.py' },
  { name: 'fairseq.modules.adaptive_input.AdaptiveInput', library: 'fairseq', kind: 'other', params: ['vocab_size', 'padding_idx', 'initial_dim', 'factor', 'output_dim', 'cutoff'],
    role: { role: 'embedding', note: 'an adaptive input: the token embedding, in bands' }, source: 'facebookresearch/fairseq fairseq/modules/adaptive_input.py' },
  { name: 'fairseq.modules.positional_embedding.PositionalEmbedding', library: 'fairseq', kind: 'embedding', params: ['num_embeddings', 'embedding_dim', 'padding_idx', 'learned'],
    role: { role: 'embedding', note: "fairseq's positional-embedding helper (a learned table when learned=True)", weightsOnlyWhen: 'learned' },
    source: 'facebookresearch/fairseq fairseq/modules/positional_embedding.py' },
  { name: 'fairseq.modules.learned_positional_embedding.LearnedPositionalEmbedding', library: 'fairseq', kind: 'embedding', params: ['num_embeddings', 'embedding_dim', 'padding_idx'],
    role: { role: 'embedding', note: 'a learned positional embedding table' }, source: 'facebookresearch/fairseq fairseq/modules/learned_positional_embedding.py' },
  { name: 'fairseq.modules.sinusoidal_positional_embedding.SinusoidalPositionalEmbedding', library: 'fairseq', kind: 'other', params: ['embedding_dim', 'padding_idx', 'init_size'],
    source: 'facebookresearch/fairseq fairseq/modules/sinusoidal_positional_embedding.py' },
  // A function returning apex's FusedLayerNorm or torch.nn.LayerNorm with the same arguments.
  { name: 'fairseq.modules.layer_norm.LayerNorm', library: 'fairseq', kind: 'layernorm', params: ['normalized_shape', 'eps', 'elementwise_affine', 'export'],
    te: { cls: 'te.LayerNorm' }, source: 'facebookresearch/fairseq fairseq/modules/layer_norm.py' },
  // forward computes in float32 and casts back (F.layer_norm(input.float(), ...).type_as(input)).
  { name: 'fairseq.modules.layer_norm.Fp32LayerNorm', library: 'fairseq', kind: 'layernorm', params: ['normalized_shape', 'eps', 'elementwise_affine'], imported: true,
    te: { cls: 'te.LayerNorm' }, source: 'facebookresearch/fairseq fairseq/modules/layer_norm.py' },
  { name: 'fairseq.models.transformer.Embedding', library: 'fairseq', kind: 'embedding', params: ['num_embeddings', 'embedding_dim', 'padding_idx'],
    role: { role: 'embedding', note: "fairseq's token-embedding helper" }, source: 'facebookresearch/fairseq fairseq/models/transformer/transformer_legacy.py' },

  // apex
  { name: 'apex.normalization.fused_layer_norm.FusedLayerNorm', library: 'apex', kind: 'layernorm', params: ['normalized_shape', 'eps', 'elementwise_affine'],
    te: { cls: 'te.LayerNorm' }, source: 'NVIDIA/apex apex/normalization/fused_layer_norm.py' },
  { name: 'apex.normalization.fused_layer_norm.MixedFusedLayerNorm', library: 'apex', kind: 'layernorm', params: ['normalized_shape', 'eps'],
    te: { cls: 'te.LayerNorm' }, source: 'NVIDIA/apex apex/normalization/fused_layer_norm.py' },
  { name: 'apex.normalization.fused_layer_norm.FusedRMSNorm', library: 'apex', kind: 'rmsnorm', params: ['normalized_shape', 'eps', 'elementwise_affine'],
    te: { cls: 'te.RMSNorm' }, source: 'NVIDIA/apex apex/normalization/fused_layer_norm.py' },
  { name: 'apex.normalization.fused_layer_norm.MixedFusedRMSNorm', library: 'apex', kind: 'rmsnorm', params: ['normalized_shape', 'eps'],
    te: { cls: 'te.RMSNorm' }, source: 'NVIDIA/apex apex/normalization/fused_layer_norm.py' },

  // Hugging Face transformers
  // GPT-2's Conv1D: a Linear with its weight stored transposed ([in, out]), Conv1D(nf=out, nx=in).
  { name: 'transformers.pytorch_utils.Conv1D', aliases: ['transformers.modeling_utils.Conv1D'], library: 'transformers', kind: 'linear', params: ['nf', 'nx'],
    te: { cls: 'te.Linear', transposedWeight: true }, source: 'huggingface/transformers src/transformers/pytorch_utils.py' },

  // timm
  { name: 'timm.layers.norm.LayerNorm', library: 'timm', kind: 'layernorm', params: ['num_channels', 'eps', 'affine'], imported: true,
    te: { cls: 'te.LayerNorm' }, source: 'huggingface/pytorch-image-models timm/layers/norm.py' },
  { name: 'timm.layers.norm.RmsNorm', library: 'timm', kind: 'rmsnorm', params: ['channels', 'eps', 'affine'], imported: true,
    te: { cls: 'te.RMSNorm' }, source: 'huggingface/pytorch-image-models timm/layers/norm.py' },
  // Normalises over the channel axis of NCHW tensors: te.* norms use the last axis.
  { name: 'timm.layers.norm.LayerNorm2d', library: 'timm', kind: 'other', params: ['num_channels', 'eps', 'affine'], source: 'huggingface/pytorch-image-models timm/layers/norm.py' },
  { name: 'timm.layers.mlp.Mlp', library: 'timm', kind: 'other', params: ['in_features', 'hidden_features', 'out_features', 'act_layer', 'norm_layer', 'bias', 'drop'],
    role: { role: 'mlp', note: "timm's MLP block" }, source: 'huggingface/pytorch-image-models timm/layers/mlp.py' },
  { name: 'timm.layers.patch_embed.PatchEmbed', library: 'timm', kind: 'other', params: ['img_size', 'patch_size', 'in_chans', 'embed_dim'],
    source: 'huggingface/pytorch-image-models timm/layers/patch_embed.py' },

  // torchtune
  // forward computes in float32 and casts back; its scale parameter is called `scale`.
  { name: 'torchtune.modules.rms_norm.RMSNorm', library: 'torchtune', kind: 'rmsnorm', params: ['dim', 'eps'], imported: true,
    te: { cls: 'te.RMSNorm', renames: { dim: 'normalized_shape' } }, source: 'pytorch/torchtune torchtune/modules/rms_norm.py' },
  { name: 'torchtune.modules.tied_linear.TiedLinear', library: 'torchtune', kind: 'other', params: ['tied_module'],
    role: { role: 'lm_head', note: "torchtune's output projection tied to the token embedding" }, source: 'pytorch/torchtune torchtune/modules/tied_linear.py' },
  { name: 'torchtune.modules.peft.lora.LoRALinear', library: 'torchtune', kind: 'other', params: ['in_dim', 'out_dim', 'rank', 'alpha', 'dropout'],
    source: 'pytorch/torchtune torchtune/modules/peft/lora.py' },

  // litgpt
  // forward computes in float32, scales by (1 + weight) when add_unit_offset, and casts back.
  { name: 'litgpt.model.RMSNorm', library: 'litgpt', kind: 'rmsnorm', params: ['size', 'dim', 'eps', 'add_unit_offset'], imported: true,
    te: { cls: 'te.RMSNorm', renames: { size: 'normalized_shape' } }, source: 'Lightning-AI/litgpt litgpt/model.py' },
  { name: 'litgpt.lora.LoRALinear', library: 'litgpt', kind: 'other', params: ['in_features', 'out_features', 'r', 'lora_alpha', 'lora_dropout'],
    source: 'Lightning-AI/litgpt litgpt/lora.py' },

  // xformers
  { name: 'xformers.ops.swiglu_op.SwiGLU', library: 'xformers', kind: 'other', params: ['in_features', 'hidden_features', 'out_features', 'bias'],
    role: { role: 'mlp', note: "xformers' fused SwiGLU MLP" }, source: 'facebookresearch/xformers xformers/ops/swiglu_op.py' },
  { name: 'xformers.ops.rmsnorm.RMSNorm', library: 'xformers', kind: 'rmsnorm', params: ['dim', 'eps', 'include_weight'], imported: true,
    te: { cls: 'te.RMSNorm', renames: { dim: 'normalized_shape' } }, source: 'facebookresearch/xformers xformers/ops/rmsnorm.py' },

  // flash-attn
  { name: 'flash_attn.ops.rms_norm.RMSNorm', library: 'flash_attn', kind: 'rmsnorm', params: ['hidden_size', 'eps', 'device', 'dtype'],
    te: { cls: 'te.RMSNorm', renames: { hidden_size: 'normalized_shape' } }, source: 'Dao-AILab/flash-attention flash_attn/ops/rms_norm.py' },
  { name: 'flash_attn.ops.triton.layer_norm.RMSNorm', library: 'flash_attn', kind: 'rmsnorm', params: ['hidden_size', 'eps', 'dropout_p'],
    te: { cls: 'te.RMSNorm', renames: { hidden_size: 'normalized_shape' } }, source: 'Dao-AILab/flash-attention flash_attn/ops/triton/layer_norm.py' },
  { name: 'flash_attn.ops.fused_dense.FusedDense', library: 'flash_attn', kind: 'linear', params: ['in_features', 'out_features', 'bias', 'return_residual'],
    te: { cls: 'te.Linear', renames: TORCH_DTYPE }, source: 'Dao-AILab/flash-attention flash_attn/ops/fused_dense.py' },
  { name: 'flash_attn.modules.embedding.GPT2Embeddings', library: 'flash_attn', kind: 'other',
    params: ['embed_dim', 'vocab_size', 'max_position_embeddings', 'padding_idx', 'word_embed_proj_dim'],
    role: { role: 'embedding', note: "flash-attn's word + position embedding module" }, source: 'Dao-AILab/flash-attention flash_attn/modules/embedding.py' },
  { name: 'flash_attn.modules.mha.MHA', library: 'flash_attn', kind: 'other', params: ['embed_dim', 'num_heads'],
    role: { role: 'attention', note: 'an attention block' }, source: 'Dao-AILab/flash-attention flash_attn/modules/mha.py' },

  // diffusers
  { name: 'diffusers.models.normalization.RMSNorm', library: 'diffusers', kind: 'rmsnorm', params: ['dim', 'eps', 'elementwise_affine', 'bias'], imported: true,
    te: { cls: 'te.RMSNorm', renames: { dim: 'normalized_shape' } }, source: 'huggingface/diffusers src/diffusers/models/normalization.py' },
  { name: 'diffusers.models.attention.FeedForward', library: 'diffusers', kind: 'other', params: ['dim', 'dim_out', 'mult', 'dropout', 'activation_fn'],
    role: { role: 'mlp', note: "diffusers' feed-forward block" }, source: 'huggingface/diffusers src/diffusers/models/attention.py' },
  { name: 'diffusers.models.attention_processor.Attention', library: 'diffusers', kind: 'other', params: ['query_dim', 'cross_attention_dim', 'heads', 'dim_head'],
    role: { role: 'attention', note: 'an attention block' }, source: 'huggingface/diffusers src/diffusers/models/attention_processor.py' },
  { name: 'diffusers.models.embeddings.PatchEmbed', library: 'diffusers', kind: 'other', params: ['height', 'width', 'patch_size', 'in_channels', 'embed_dim'],
    source: 'huggingface/diffusers src/diffusers/models/embeddings.py' },

  // mamba_ssm
  { name: 'mamba_ssm.ops.triton.layer_norm.RMSNorm', library: 'mamba_ssm', kind: 'rmsnorm', params: ['hidden_size', 'eps', 'dropout_p', 'device', 'dtype'],
    te: { cls: 'te.RMSNorm', renames: { hidden_size: 'normalized_shape' } }, source: 'state-spaces/mamba mamba_ssm/ops/triton/layer_norm.py' },
  { name: 'mamba_ssm.ops.triton.layer_norm.LayerNorm', library: 'mamba_ssm', kind: 'layernorm', params: ['hidden_size', 'eps', 'dropout_p', 'device', 'dtype'],
    te: { cls: 'te.LayerNorm', renames: { hidden_size: 'normalized_shape' } }, source: 'state-spaces/mamba mamba_ssm/ops/triton/layer_norm.py' },
  // Gated: forward(x, z) multiplies by a gate, which te.RMSNorm.forward cannot take.
  { name: 'mamba_ssm.ops.triton.layernorm_gated.RMSNorm', library: 'mamba_ssm', kind: 'other', params: ['hidden_size', 'eps', 'group_size', 'norm_before_gate'],
    source: 'state-spaces/mamba mamba_ssm/ops/triton/layernorm_gated.py' },
  { name: 'mamba_ssm.modules.mamba_simple.Mamba', library: 'mamba_ssm', kind: 'other', params: ['d_model', 'd_state', 'd_conv', 'expand'],
    source: 'state-spaces/mamba mamba_ssm/modules/mamba_simple.py' },
];

/**
 * Rules by library for names the rows do not list: what any other class of that library's layer module is. Module
 * paths are prefixes of the resolved name; `skip` names classes there that are not layers (losses, recipes).
 */
interface ModuleRule {
  prefix: RegExp;
  library: Library;
  isTe?: boolean;
  skip?: RegExp;
}
const MODULE_RULES: ModuleRule[] = [
  // Losses (`loss_fct = CrossEntropyLoss()`) hold no weights and are not model layers; init/functional are modules.
  { prefix: /^torch\.nn\.(modules\.(\w+\.)?)?(?=[A-Z]\w*$)/, library: 'torch', skip: /Loss$/ },
  // Recipes, quantizers, tensors and optimizers are not layers (te.optimizers.FusedAdam, te.Float8Quantizer).
  { prefix: /^transformer_engine\.(pytorch\.)?(?=[A-Z]\w*$)|^transformer_engine\.pytorch\.(?!optimizers\.)[\w.]*\.(?=[A-Z]\w*$)/, library: 'transformer_engine', isTe: true,
    skip: /Recipe|Scaling|Format|Config$|Calibration|Quantizer$|Tensor$|Storage$|Stream$|Group$/ },
];

/**
 * Name families that hold across libraries, for classes imported from a module the rows do not list (a project's
 * own `mpu.ColumnParallelLinear`, a model library's `LlamaRMSNorm`). `imported`: its forward is not in the file.
 */
interface Family {
  name: RegExp;
  kind: LayerKind;
  params: string[];
  te?: TeMapping;
  role?: RoleHint;
  /** Only for names resolved into one of these roots. */
  roots?: RegExp;
  /** The class's forward is elsewhere, unless the name resolves into one of these roots (fused kernels). */
  importedUnless?: RegExp;
}
const FAMILIES: Family[] = [
  { name: /^ColumnParallelLinear$/, kind: 'parallel-linear', params: ['input_size', 'output_size'], te: { cls: 'te.Linear', renames: MEGATRON_LINEAR, parallelMode: 'column' } },
  { name: /^RowParallelLinear$/, kind: 'parallel-linear', params: ['input_size', 'output_size'], te: { cls: 'te.Linear', renames: MEGATRON_LINEAR, parallelMode: 'row' } },
  { name: /^(Vocab)?ParallelEmbedding$/, kind: 'embedding', params: ['num_embeddings', 'embedding_dim'], role: { role: 'embedding', note: 'a model-parallel token embedding' } },
  // Model libraries' own norms (transformers' LlamaRMSNorm, T5LayerNorm, GemmaRMSNorm) are named for what they are,
  // but their forward is not in this file (Gemma's scales by 1 + weight); fused kernels' (apex, flash-attn) are plain.
  { name: /RMSNorm$|RmsNorm$|^T5LayerNorm$|^RMSLayerNorm$/, kind: 'rmsnorm', params: ['normalized_shape', 'eps'], te: { cls: 'te.RMSNorm' },
    importedUnless: /^(apex|megatron|flash_attn|torch\.nn)(\.|$)|(^|\.)(Fused|MixedFused)\w*$/ },
  { name: /^(Fused|MixedFused)?LayerNorm$/, kind: 'layernorm', params: ['normalized_shape', 'eps'], te: { cls: 'te.LayerNorm' } },
  { name: /^Conv1D$/, kind: 'linear', params: ['nf', 'nx'], te: { cls: 'te.Linear', transposedWeight: true }, roots: /transformers|pytorch_utils|modeling_utils/ },
];

/** A catalogue answer: the row (or the rule that stands for one) and the resolved name it was found for. */
export interface ClassLookup {
  entry: CatalogueEntry;
  /** How it was found: `exact`, `library` (same class name in the same library), `module` rule or name `family`. */
  via: 'exact' | 'library' | 'module' | 'family';
}

const byName = new Map<string, CatalogueEntry>();
const byLibraryClass = new Map<string, CatalogueEntry[]>();
for (const e of CATALOGUE) {
  for (const n of [e.name, ...(e.aliases ?? [])]) {
    byName.set(n, e);
    const key = `${n.split('.')[0]}:${n.slice(n.lastIndexOf('.') + 1)}`;
    const list = byLibraryClass.get(key);
    if (!list) byLibraryClass.set(key, [e]);
    else if (!list.includes(e)) list.push(e);
  }
}

/** Short display name for messages: `nn.Linear`, `te.Linear`, or the class name. */
export function displayName(e: CatalogueEntry): string {
  const last = e.name.slice(e.name.lastIndexOf('.') + 1);
  if (e.library === 'torch') return `nn.${last}`;
  if (e.library === 'transformer_engine') return `te.${last}`;
  return last;
}

const lookupCache = new Map<string, ClassLookup | null>();

/** The catalogue's answer for a resolved dotted name, or undefined when it names no known library class. */
export function lookupClass(resolved: string): ClassLookup | undefined {
  const hit = lookupCache.get(resolved);
  if (hit !== undefined) return hit ?? undefined;
  const r = lookupUncached(resolved);
  if (lookupCache.size > 5000) lookupCache.clear();
  lookupCache.set(resolved, r ?? null);
  return r;
}

function lookupUncached(resolved: string): ClassLookup | undefined {
  const last = resolved.slice(resolved.lastIndexOf('.') + 1);
  if (!/^[A-Z]/.test(last)) return undefined;
  const root = resolved.split('.')[0];
  // `self.LayerNorm(x)` / `cls.Norm(...)` calls a submodule or a stored class held by the instance; it never
  // constructs a library layer, whatever the attribute is called (BERT names its norm attribute `LayerNorm`).
  if (root === 'self' || root === 'cls' || resolved.startsWith('local:')) return undefined;
  const exact = byName.get(resolved);
  if (exact) return exact.notLayer ? undefined : { entry: exact, via: 'exact' };
  // torch and TE are matched by module (torch.ao.nn.quantized.Linear is no torch.nn.Linear).
  const same = root === 'torch' || root === 'transformer_engine' ? undefined : byLibraryClass.get(`${root}:${last}`);
  // Several rows of one library with the class name (mamba_ssm's plain and gated RMSNorm) need the exact module.
  if (same && (same.length === 1 || same.every((e) => e.kind === same[0].kind && e.te?.cls === same[0].te?.cls))) return { entry: same[0], via: 'library' };
  if (same) return { entry: { name: resolved, library: same[0].library, kind: 'other', params: [], source: 'ambiguous class name' }, via: 'library' };
  for (const m of MODULE_RULES) {
    const at = m.prefix.exec(resolved);
    if (!at || at.index !== 0) continue;
    if (m.skip?.test(last)) return undefined;
    const byClass = byName.get(`${m.library === 'torch' ? 'torch.nn' : 'transformer_engine.pytorch'}.${last}`);
    if (byClass) return byClass.notLayer ? undefined : { entry: byClass, via: 'module' };
    return { entry: { name: resolved, library: m.library, kind: 'other', params: [], isTe: m.isTe, source: 'module rule' }, via: 'module' };
  }
  if (root === 'torch' || root === 'transformer_engine') return undefined;
  for (const f of FAMILIES) {
    if (!f.name.test(last) || (f.roots && !f.roots.test(resolved))) continue;
    return {
      entry: {
        name: resolved, library: LIBRARY_ROOTS[root] ?? 'torch', kind: f.kind, params: f.params, te: f.te, role: f.role,
        imported: f.importedUnless ? !f.importedUnless.test(resolved) : undefined, source: 'name family',
      },
      via: 'family',
    };
  }
  return undefined;
}

/** Whether a resolved name is in one of the catalogued libraries (used for module-level aliases). */
export function isLibraryName(resolved: string): boolean {
  const root = resolved.split('.')[0];
  return root in LIBRARY_ROOTS || root === 'torchao' || root === 'accelerate';
}

/** Names `from torch.nn import *` binds that the analysis reads (layers and containers the catalogue lists). */
export function torchNnStarName(name: string): boolean {
  const e = byName.get(`torch.nn.${name}`);
  return !!e || /^(Dropout|GELU|ReLU|SiLU)$/.test(name);
}

/** The te.* keyword renames for a resolved class (empty when the class is not catalogued). */
export function teRenames(resolved: string): Record<string, string> {
  return lookupClass(resolved)?.entry.te?.renames ?? {};
}

/** A library config attribute that holds a layer class, chosen at run time among these candidates. */
export interface ClassAttribute {
  /** The config class, fully qualified. */
  owner: string;
  attr: string;
  /** The classes it can be, fully qualified. */
  candidates: string[];
  /** What picks one, for the message. */
  note: string;
  source: string;
}

export const CLASS_ATTRIBUTES: ClassAttribute[] = [
  // `getattr(torch.nn, self.norm_class_name)`, or `partial(RMSNorm, add_unit_offset="Gemma" in self.name)`.
  { owner: 'litgpt.config.Config', attr: 'norm_class', candidates: ['torch.nn.LayerNorm', 'litgpt.model.RMSNorm'],
    note: 'chosen by config.norm_class_name', source: 'Lightning-AI/litgpt litgpt/config.py' },
];

/** The catalogue's row for a config class attribute that holds a layer class, if any. */
export function lookupClassAttribute(owner: string, attr: string): ClassAttribute | undefined {
  return CLASS_ATTRIBUTES.find((a) => a.attr === attr && a.owner === owner);
}
