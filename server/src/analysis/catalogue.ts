/**
 * The library catalogue: the layer classes model code is written with, as data. One row per class: its fully
 * qualified name, kind, constructor parameters in positional order, role hint, te.* mapping with the argument renames
 * a conversion needs, and the library file it was read from (repository, path and commit), or why it was not read. Adding a library is adding rows (and its import root to
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
  | 'torchtune' | 'litgpt' | 'xformers' | 'flash_attn' | 'diffusers' | 'mamba_ssm' | 'llmfoundry' | 'fla';

/** The te.* class a row converts to, and how its arguments are spelt there. */
export interface TeMapping {
  cls: 'te.Linear' | 'te.LayerNorm' | 'te.RMSNorm';
  /** Keyword renames from this class's spelling to te.*'s (`input_size` -> `in_features`, `dtype` -> `params_dtype`). */
  renames?: Record<string, string>;
  parallelMode?: 'column' | 'row';
  /** The weight is stored [in, out] (Hugging Face Conv1D): te.Linear computes the same only with it transposed. */
  transposedWeight?: boolean;
  /** The norm's flag that, False, leaves it without a weight, when not `elementwise_affine` (timm's `affine`). */
  affineFlag?: string;
  /** The norm's eps default when it is not te.*'s 1e-5 (timm's 1e-6): carried over when the call leaves eps out. */
  eps?: string;
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
  /**
   * For an imported norm class whose forward was read: it computes a plain norm over the last axis (no (1 + weight)
   * offset, no extra inputs), so te.* represents it. `from` says where the forward was read; `scaleName` is set when
   * its weight is not called `weight` (the state_dict keys change).
   */
  forwardRead?: ForwardRead;
  /** Not a layer at all (containers, losses, parameters). */
  notLayer?: boolean;
  /** A library function that builds a layer (llm-foundry's build_fc), not a class: looked up by its full name only. */
  builder?: boolean;
  /** Where the signature was read (repository, file, commit of the version read), or why it was not. */
  source: RowSource;
}

/** Where an imported norm's forward was read, and what it calls its weight when not `weight`. */
export interface ForwardRead {
  from: string;
  scaleName?: string;
  /**
   * Its forward scales by (1 + weight), its weight starting at zeros (Gemma's RMSNorm): te.* computes the same with
   * zero_centered_gamma=True, whose weight is stored and initialised the same way.
   */
  unitOffset?: boolean;
}

/** The library file a row's signature was read from, at the commit of the version read. */
export interface SourceRead {
  /** `owner/name` on GitHub. */
  repo: string;
  path: string;
  /** The 40-hex commit of the version read. */
  commit: string;
  /** What differs between that version and others still in use (a parameter added or renamed since). */
  note?: string;
}

/** A row whose signature was not read from source in a recorded version, and why. */
export interface Unverified {
  unverified: string;
}

export type RowSource = SourceRead | Unverified;

/** Whether a row's signature was read from a recorded source version. */
export function isRead(source: RowSource): source is SourceRead {
  return !('unverified' in source);
}

/** Import roots of the catalogued libraries (the first segment of a resolved name). */
export const LIBRARY_ROOTS: Record<string, Library> = {
  torch: 'torch', transformer_engine: 'transformer_engine', megatron: 'megatron', fairscale: 'fairscale', fairseq: 'fairseq',
  apex: 'apex', transformers: 'transformers', timm: 'timm', torchtune: 'torchtune', litgpt: 'litgpt', xformers: 'xformers',
  flash_attn: 'flash_attn', diffusers: 'diffusers', mamba_ssm: 'mamba_ssm', llmfoundry: 'llmfoundry', fla: 'fla',
};

const LINEAR = ['in_features', 'out_features', 'bias', 'device', 'dtype'];
const CONV = ['in_channels', 'out_channels', 'kernel_size', 'stride', 'padding', 'dilation', 'groups', 'bias', 'padding_mode', 'device', 'dtype'];
// ConvTranspose*d puts output_padding fifth and dilation after bias (torch/nn/modules/conv.py).
const CONV_TRANSPOSE = ['in_channels', 'out_channels', 'kernel_size', 'stride', 'padding', 'output_padding', 'groups', 'bias', 'dilation', 'padding_mode', 'device', 'dtype'];
const TORCH_DTYPE = { dtype: 'params_dtype' };
const MEGATRON_LINEAR = { input_size: 'in_features', output_size: 'out_features', skip_bias_add: 'return_bias', dtype: 'params_dtype' };
const MEGATRON_NORM = "Megatron builds this norm from its config (LayerNorm or RMSNorm by config.normalization): choose TENorm in the layer spec instead of converting the call.";
const NOT_READ = 'not read in the verification pass: the signature is from memory';

const read = (repo: string, path: string, commit: string, note?: string): SourceRead => (note ? { repo, path, commit, note } : { repo, path, commit });
const TORCH = (file: string, commit: string): SourceRead => read('pytorch/pytorch', `torch/nn/modules/${file}`, commit);
const TORCH_LINEAR = TORCH('linear.py', 'f2889c83d0672bf95de5c57f770dcbdf07ebee61');
const TORCH_NORM = TORCH('normalization.py', 'f3eef90335dca1b8b1d58e9df340629a5ad2ee1f');
const TORCH_SPARSE = TORCH('sparse.py', 'fc42e13b8c5acd65d322cf3d378da374696c1caf');
const TORCH_CONV = TORCH('conv.py', 'ddbcf1cd299571603b1412003ceee2d4d6a1986d');
const TE_1X_NORM = 'this TE 1.x version calls the size hidden_size; TE >= 2 calls it normalized_shape, same position';
const APEX_NORM = read('NVIDIA/apex', 'apex/normalization/fused_layer_norm.py', '014f30f72902aeca1437b56ef66f97801a7c35d9');
const TIMM_NORM = read('huggingface/pytorch-image-models', 'timm/layers/norm.py', '05ab01d555b021004df7e8b5f136974df6221d46');
const FAIRSCALE = read('facebookresearch/fairscale', 'fairscale/nn/model_parallel/layers.py', '158319ac73590d00b0b3ac140af0d0b4fdbd9ac1');
const FAIRSEQ_LN = read('facebookresearch/fairseq', 'fairseq/modules/layer_norm.py', '00bc279894ab6ed3641b0f791acc578ac2083584');
const LLMFOUNDRY_BUILDERS = read('mosaicml/llm-foundry', 'llmfoundry/models/layers/layer_builders.py', '0953267476433a8e9c54f2aa1e6004797db111c1',
  "the 'te' fc is registered in models/layers/fc.py @ 1a36d3f8202265cc86508d62007e1a2973dc29f5");
const MAMBA_GATED = read('state-spaces/mamba', 'mamba_ssm/ops/triton/layernorm_gated.py', '60dadf2e0ee730ac337035d5533de10bc26e4847');
// The TE* wrappers take the two sizes positionally and everything else by keyword (config=, init_method=, ...).
const MEGATRON_TE = read('NVIDIA/Megatron-LM', 'megatron/core/extensions/transformer_engine.py', 'd086a2e3b020ff78db9d29915f7cfe886e085f13');
// Everything after the two sizes is keyword-only (config=, init_method=, ...).
const MEGATRON_LAYERS = read('NVIDIA/Megatron-LM', 'megatron/core/tensor_parallel/layers.py', '960c06b972fd7813d39eced3079a50038207bbcc');

const torchNn = (cls: string, kind: LayerKind, params: string[], source: RowSource, extra: Partial<CatalogueEntry> = {}): CatalogueEntry => ({
  name: `torch.nn.${cls}`, library: 'torch', kind, params, source, ...extra,
});
const te = (cls: string, kind: LayerKind, params: string[], source: RowSource): CatalogueEntry => ({
  name: `transformer_engine.pytorch.${cls}`, library: 'transformer_engine', kind, params, isTe: true, source,
});
const NOT_A_LAYER: Unverified = { unverified: 'not a layer: only its name is matched, its signature is never used' };

export const CATALOGUE: CatalogueEntry[] = [
  // torch.nn
  torchNn('Linear', 'linear', LINEAR, TORCH_LINEAR, { te: { cls: 'te.Linear', renames: TORCH_DTYPE } }),
  // in_features is inferred at the first forward: no te.* twin (verdict.ts says what to do).
  torchNn('LazyLinear', 'other', ['out_features', 'bias', 'device', 'dtype'], TORCH_LINEAR),
  torchNn('Bilinear', 'other', ['in1_features', 'in2_features', 'out_features', 'bias', 'device', 'dtype'], TORCH_LINEAR),
  torchNn('LayerNorm', 'layernorm', ['normalized_shape', 'eps', 'elementwise_affine', 'bias', 'device', 'dtype'], TORCH_NORM, { te: { cls: 'te.LayerNorm' } }),
  // eps defaults to None: ATen then takes the epsilon of the type it computes in, float32's (2**-23) for BF16 / FP16 /
  // FP32 inputs (torch 2.13 measured on CPU; the docs say torch.finfo(x.dtype).eps), not te.RMSNorm's 1e-5.
  torchNn('RMSNorm', 'rmsnorm', ['normalized_shape', 'eps', 'elementwise_affine', 'device', 'dtype'], TORCH_NORM, { te: { cls: 'te.RMSNorm', eps: '1.1920928955078125e-07' } }),
  torchNn('Embedding', 'embedding', ['num_embeddings', 'embedding_dim', 'padding_idx', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'sparse', '_weight', '_freeze', 'device', 'dtype'], TORCH_SPARSE,
    { role: { role: 'embedding', note: 'a lookup table (embedding)' } }),
  torchNn('EmbeddingBag', 'embedding', ['num_embeddings', 'embedding_dim', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'mode', 'sparse', '_weight', 'include_last_offset', 'padding_idx', 'device', 'dtype'],
    TORCH_SPARSE, { role: { role: 'embedding', note: 'a lookup table (embedding bag)' } }),
  torchNn('AdaptiveLogSoftmaxWithLoss', 'other', ['in_features', 'n_classes', 'cutoffs', 'div_value', 'head_bias', 'device', 'dtype'],
    TORCH('adaptive.py', 'd59313b0e0d922ecc9c7f1d04b6b9644ac8be4b9'),
    { role: { role: 'lm_head', note: 'an adaptive softmax: the output layer over the vocabulary (its head and tail projections)' } }),
  torchNn('MultiheadAttention', 'other', ['embed_dim', 'num_heads', 'dropout', 'bias', 'add_bias_kv', 'add_zero_attn', 'kdim', 'vdim', 'batch_first', 'device', 'dtype'],
    TORCH('activation.py', '691d5f4b6f2884330f41b7c1571ed691a4060d59'), { role: { role: 'attention', note: 'an attention block' } }),
  ...(['Conv1d', 'Conv2d', 'Conv3d'].map((c) => torchNn(c, 'conv', CONV, TORCH_CONV))),
  ...(['ConvTranspose1d', 'ConvTranspose2d', 'ConvTranspose3d'].map((c) => torchNn(c, 'conv', CONV_TRANSPOSE, TORCH_CONV))),
  ...(['Module', 'ModuleList', 'ModuleDict', 'Sequential', 'Parameter', 'ParameterList', 'ParameterDict', 'Buffer', 'DataParallel', 'UninitializedParameter']
    .map((c) => torchNn(c, 'other', [], NOT_A_LAYER, { notLayer: true }))),

  // Transformer Engine
  te('Linear', 'linear', ['in_features', 'out_features', 'sequence_parallel', 'fuse_wgrad_accumulation', 'tp_group', 'tp_size', 'get_rng_state_tracker', 'rng_tracker_name', 'init_method', 'bias'],
    read('NVIDIA/TransformerEngine', 'transformer_engine/pytorch/module/linear.py', '3ec878759cc601d088dfa5c0a4772acf4317b190',
      'this version has no rng_tracker_name (later TE inserts it after get_rng_state_tracker); the first seven positions agree')),
  te('LayerNorm', 'layernorm', ['normalized_shape', 'eps', 'sequence_parallel', 'params_dtype', 'zero_centered_gamma', 'device'],
    read('NVIDIA/TransformerEngine', 'transformer_engine/pytorch/module/layernorm.py', '89d4ffb8d278e0b208950eeeda10e0bb38ed3ad8', TE_1X_NORM)),
  te('RMSNorm', 'rmsnorm', ['normalized_shape', 'eps', 'sequence_parallel', 'params_dtype', 'zero_centered_gamma', 'device'],
    read('NVIDIA/TransformerEngine', 'transformer_engine/pytorch/module/rmsnorm.py', '5c62f7283a651b682648ee44d46831d232eef04a', TE_1X_NORM)),
  te('LayerNormLinear', 'linear', ['in_features', 'out_features', 'eps', 'sequence_parallel', 'fuse_wgrad_accumulation', 'tp_group', 'tp_size'],
    read('NVIDIA/TransformerEngine', 'transformer_engine/pytorch/module/layernorm_linear.py', '3ec878759cc601d088dfa5c0a4772acf4317b190')),
  te('GroupedLinear', 'linear', ['num_gemms', 'in_features', 'out_features', 'sequence_parallel', 'fuse_wgrad_accumulation', 'tp_group', 'tp_size', 'get_rng_state_tracker', 'rng_tracker_name', 'init_method', 'bias'],
    read('NVIDIA/TransformerEngine', 'transformer_engine/pytorch/module/grouped_linear.py', '3ea1356190e88a50d8c2cae17e80c4e6ae96d442')),
  { ...te('LayerNormMLP', 'other', ['hidden_size', 'ffn_hidden_size', 'eps', 'sequence_parallel', 'return_bias', 'get_rng_state_tracker', 'tp_group', 'tp_size', 'init_method', 'bias'],
    read('NVIDIA/TransformerEngine', 'transformer_engine/pytorch/module/layernorm_mlp.py', '62a84b3c8ae910b15760c6246ba00da1d57781fe')), role: { role: 'mlp', note: 'an MLP block' } },
  { ...te('DotProductAttention', 'other', ['num_attention_heads', 'kv_channels'], { unverified: NOT_READ }), role: { role: 'attention', note: 'an attention block' } },
  { ...te('MultiheadAttention', 'other', ['hidden_size', 'num_attention_heads'], { unverified: NOT_READ }), role: { role: 'attention', note: 'an attention block' } },
  te('TransformerLayer', 'other', ['hidden_size', 'ffn_hidden_size', 'num_attention_heads', 'num_gqa_groups', 'layernorm_epsilon', 'hidden_dropout', 'attention_dropout'],
    read('NVIDIA/TransformerEngine', 'transformer_engine/pytorch/transformer.py', 'a211af6506d689e8281a2a97ef4bcb7c2e6551c0')),

  // Megatron-core
  { name: 'megatron.core.tensor_parallel.layers.ColumnParallelLinear', aliases: ['apex.transformer.tensor_parallel.layers.ColumnParallelLinear'], library: 'megatron',
    kind: 'parallel-linear', params: ['input_size', 'output_size'], te: { cls: 'te.Linear', renames: MEGATRON_LINEAR, parallelMode: 'column' },
    source: MEGATRON_LAYERS },
  { name: 'megatron.core.tensor_parallel.layers.RowParallelLinear', aliases: ['apex.transformer.tensor_parallel.layers.RowParallelLinear'], library: 'megatron',
    kind: 'parallel-linear', params: ['input_size', 'output_size'], te: { cls: 'te.Linear', renames: MEGATRON_LINEAR, parallelMode: 'row' },
    source: MEGATRON_LAYERS },
  { name: 'megatron.core.tensor_parallel.layers.VocabParallelEmbedding', aliases: ['apex.transformer.tensor_parallel.layers.VocabParallelEmbedding'], library: 'megatron',
    kind: 'embedding', params: ['num_embeddings', 'embedding_dim'], role: { role: 'embedding', note: 'a vocabulary-parallel token embedding' },
    source: MEGATRON_LAYERS },
  { name: 'megatron.core.models.common.embeddings.language_model_embedding.LanguageModelEmbedding', library: 'megatron', kind: 'other',
    params: ['config', 'vocab_size', 'max_sequence_length', 'position_embedding_type', 'num_tokentypes'],
    role: { role: 'embedding', note: "Megatron's word + position embedding module" },
    source: read('NVIDIA/Megatron-LM', 'megatron/core/models/common/embeddings/language_model_embedding.py', '019eddbba422c1daafaead558fbf4d8bd4b58bf9') },
  { name: 'megatron.core.fusions.fused_linear_cross_entropy.FusedLinearCrossEntropyLoss', library: 'megatron', kind: 'other', params: [],
    role: { role: 'lm_head', note: "Megatron's fused output layer and cross-entropy (the logits projection)" },
    source: { unverified: NOT_READ } },
  // Megatron's own norms take the config first (`FusedLayerNorm(config, hidden_size, eps)`): no positional te.* twin.
  { name: 'megatron.core.fusions.fused_layer_norm.FusedLayerNorm', library: 'megatron', kind: 'layernorm', params: ['config', 'hidden_size', 'eps'], noTe: MEGATRON_NORM,
    source: read('NVIDIA/Megatron-LM', 'megatron/core/fusions/fused_layer_norm.py', '00caa53af30912914981c86f39db123961678bbd') },
  { name: 'megatron.core.transformer.torch_norm.WrappedTorchNorm', library: 'megatron', kind: 'layernorm', params: ['config', 'hidden_size', 'eps'], noTe: MEGATRON_NORM,
    source: read('NVIDIA/Megatron-LM', 'megatron/core/transformer/torch_norm.py', '00caa53af30912914981c86f39db123961678bbd', 'a class whose __new__ returns torch.nn.LayerNorm or RMSNorm by config.normalization') },
  ...(['TELinear', 'TEColumnParallelLinear', 'TERowParallelLinear', 'TELayerNormColumnParallelLinear'].map((c): CatalogueEntry => ({
    name: `megatron.core.extensions.transformer_engine.${c}`, library: 'megatron', kind: 'linear', params: ['input_size', 'output_size'], isTe: true,
    source: MEGATRON_TE,
  }))),
  { name: 'megatron.core.extensions.transformer_engine.TENorm', library: 'megatron', kind: 'layernorm', params: ['config', 'hidden_size', 'eps'], isTe: true,
    source: MEGATRON_TE },
  { name: 'megatron.core.extensions.transformer_engine.TEDotProductAttention', library: 'megatron', kind: 'other',
    params: ['config', 'layer_number', 'attn_mask_type', 'attention_type', 'attention_dropout', 'softmax_scale', 'k_channels', 'v_channels'], isTe: true,
    role: { role: 'attention', note: 'an attention block' }, source: MEGATRON_TE },


  // fairscale
  { name: 'fairscale.nn.model_parallel.layers.ColumnParallelLinear', library: 'fairscale', kind: 'parallel-linear',
    params: ['in_features', 'out_features', 'bias', 'gather_output', 'init_method', 'stride', 'keep_master_weight_for_test'],
    te: { cls: 'te.Linear', parallelMode: 'column' }, source: FAIRSCALE },
  { name: 'fairscale.nn.model_parallel.layers.RowParallelLinear', library: 'fairscale', kind: 'parallel-linear',
    params: ['in_features', 'out_features', 'bias', 'input_is_parallel', 'init_method', 'stride', 'keep_master_weight_for_test'],
    te: { cls: 'te.Linear', parallelMode: 'row' }, source: FAIRSCALE },
  { name: 'fairscale.nn.model_parallel.layers.ParallelEmbedding', library: 'fairscale', kind: 'embedding',
    params: ['num_embeddings', 'embedding_dim', 'padding_idx', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'sparse', 'init_method', 'keep_master_weight_for_test'],
    role: { role: 'embedding', note: 'a model-parallel token embedding' }, source: FAIRSCALE },
  { name: 'fairscale.nn.model_parallel.layers.VocabParallelEmbedding', library: 'fairscale', kind: 'embedding',
    params: ['num_embeddings', 'embedding_dim', 'padding_idx', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'sparse', 'init_method'],
    role: { role: 'embedding', note: 'a vocabulary-parallel token embedding' }, source: FAIRSCALE },

  // fairseq
  { name: 'fairseq.modules.adaptive_softmax.AdaptiveSoftmax', library: 'fairseq', kind: 'other', params: ['vocab_size', 'input_dim', 'cutoff', 'dropout'],
    role: { role: 'lm_head', note: 'an adaptive softmax: the output layer over the vocabulary (its head and tail projections)' },
    source: read('facebookresearch/fairseq', 'fairseq/modules/adaptive_softmax.py', '1234818b8293bac0286038c60253ffb1896804f7') },
  { name: 'fairseq.modules.adaptive_input.AdaptiveInput', library: 'fairseq', kind: 'other', params: ['vocab_size', 'padding_idx', 'initial_dim', 'factor', 'output_dim', 'cutoff'],
    role: { role: 'embedding', note: 'an adaptive input: the token embedding, in bands' },
    source: read('facebookresearch/fairseq', 'fairseq/modules/adaptive_input.py', '02c338e462080048524a4cdafefb5073ae089b24') },
  // A function: learned=True returns a LearnedPositionalEmbedding, otherwise a SinusoidalPositionalEmbedding.
  { name: 'fairseq.modules.positional_embedding.PositionalEmbedding', library: 'fairseq', kind: 'embedding', params: ['num_embeddings', 'embedding_dim', 'padding_idx', 'learned'],
    role: { role: 'embedding', note: "fairseq's positional-embedding helper (a learned table when learned=True)", weightsOnlyWhen: 'learned' },
    source: read('facebookresearch/fairseq', 'fairseq/modules/positional_embedding.py', '4cdde4b53326ddbae5764eb00740ae6e2524d013') },
  { name: 'fairseq.modules.learned_positional_embedding.LearnedPositionalEmbedding', library: 'fairseq', kind: 'embedding', params: ['num_embeddings', 'embedding_dim', 'padding_idx'],
    role: { role: 'embedding', note: 'a learned positional embedding table' },
    source: read('facebookresearch/fairseq', 'fairseq/modules/learned_positional_embedding.py', '184629a721adf84a4fbd1fd5db8306c49da7685d',
      'this older version takes a fourth parameter, left_pad; the first three agree') },
  { name: 'fairseq.modules.sinusoidal_positional_embedding.SinusoidalPositionalEmbedding', library: 'fairseq', kind: 'other', params: ['embedding_dim', 'padding_idx', 'init_size'],
    source: read('facebookresearch/fairseq', 'fairseq/modules/sinusoidal_positional_embedding.py', '0491f2696114f5e35e14b6c133fc55c2e60d8077') },
  // A function returning apex's FusedLayerNorm or torch.nn.LayerNorm with the same arguments.
  { name: 'fairseq.modules.layer_norm.LayerNorm', library: 'fairseq', kind: 'layernorm', params: ['normalized_shape', 'eps', 'elementwise_affine', 'export'],
    te: { cls: 'te.LayerNorm' }, source: FAIRSEQ_LN },
  // forward computes in float32 and casts back (F.layer_norm(input.float(), ...).type_as(input)); takes nn.LayerNorm's arguments.
  { name: 'fairseq.modules.layer_norm.Fp32LayerNorm', library: 'fairseq', kind: 'layernorm', params: ['normalized_shape', 'eps', 'elementwise_affine'], imported: true,
    te: { cls: 'te.LayerNorm' }, source: FAIRSEQ_LN },
  { name: 'fairseq.models.transformer.Embedding', library: 'fairseq', kind: 'embedding', params: ['num_embeddings', 'embedding_dim', 'padding_idx'],
    role: { role: 'embedding', note: "fairseq's token-embedding helper" },
    source: read('facebookresearch/fairseq', 'fairseq/models/transformer/transformer_base.py', 'ef5a7118e40a98207e99465ab9835602fd804bf8',
      'a function returning nn.Embedding(num_embeddings, embedding_dim, padding_idx=padding_idx); not in transformer_legacy.py') },

  // apex: memory_efficient follows elementwise_affine; the Mixed* variants take eps and then keyword-only arguments.
  { name: 'apex.normalization.fused_layer_norm.FusedLayerNorm', library: 'apex', kind: 'layernorm', params: ['normalized_shape', 'eps', 'elementwise_affine', 'memory_efficient'],
    te: { cls: 'te.LayerNorm' }, source: APEX_NORM },
  { name: 'apex.normalization.fused_layer_norm.MixedFusedLayerNorm', library: 'apex', kind: 'layernorm', params: ['normalized_shape', 'eps'],
    te: { cls: 'te.LayerNorm' }, source: APEX_NORM },
  { name: 'apex.normalization.fused_layer_norm.FusedRMSNorm', library: 'apex', kind: 'rmsnorm', params: ['normalized_shape', 'eps', 'elementwise_affine', 'memory_efficient'],
    te: { cls: 'te.RMSNorm' }, source: APEX_NORM },
  { name: 'apex.normalization.fused_layer_norm.MixedFusedRMSNorm', library: 'apex', kind: 'rmsnorm', params: ['normalized_shape', 'eps'],
    te: { cls: 'te.RMSNorm' }, source: APEX_NORM },

  // Hugging Face transformers
  // GPT-2's Conv1D: a Linear with its weight stored transposed ([in, out]), Conv1D(nf=out, nx=in).
  { name: 'transformers.pytorch_utils.Conv1D', aliases: ['transformers.modeling_utils.Conv1D'], library: 'transformers', kind: 'linear', params: ['nf', 'nx'],
    te: { cls: 'te.Linear', transposedWeight: true },
    source: read('huggingface/transformers', 'src/transformers/pytorch_utils.py', '04ae75715f2cca2d87bbaf07c1d8e9fb2ab20bfd') },

  // timm: the size comes first and is called num_channels / channels; eps defaults to 1e-6; `affine` is
  // elementwise_affine.
  { name: 'timm.layers.norm.LayerNorm', library: 'timm', kind: 'layernorm', params: ['num_channels', 'eps', 'affine'], imported: true,
    te: { cls: 'te.LayerNorm', renames: { num_channels: 'normalized_shape' }, affineFlag: 'affine', eps: '1e-6' }, source: TIMM_NORM },
  { name: 'timm.layers.norm.RmsNorm', library: 'timm', kind: 'rmsnorm', params: ['channels', 'eps', 'affine', 'device', 'dtype'], imported: true,
    te: { cls: 'te.RMSNorm', renames: { channels: 'normalized_shape' }, affineFlag: 'affine', eps: '1e-6' }, source: TIMM_NORM,
    forwardRead: { from: 'timm 1.0.31 (PyPI wheel), timm/layers/norm.py: rms_norm(x, normalized_shape, self.weight, eps) over the last axis' } },
  // Normalises over the channel axis of NCHW tensors: te.* norms use the last axis.
  { name: 'timm.layers.norm.LayerNorm2d', library: 'timm', kind: 'other', params: ['num_channels', 'eps', 'affine'], source: TIMM_NORM },
  { name: 'timm.layers.mlp.Mlp', library: 'timm', kind: 'other', params: ['in_features', 'hidden_features', 'out_features', 'act_layer', 'norm_layer', 'bias', 'drop', 'use_conv'],
    role: { role: 'mlp', note: "timm's MLP block" }, source: read('huggingface/pytorch-image-models', 'timm/layers/mlp.py', '0d87caeffff595d74109828fad306dd6dcdd25a2') },
  { name: 'timm.layers.patch_embed.PatchEmbed', library: 'timm', kind: 'other',
    params: ['img_size', 'patch_size', 'in_chans', 'embed_dim', 'norm_layer', 'flatten', 'output_fmt', 'bias', 'strict_img_size', 'dynamic_img_pad', 'device', 'dtype'],
    source: read('huggingface/pytorch-image-models', 'timm/layers/patch_embed.py', '0ad09de3f2e99ca2e8f60614d0f992b24e43e7c6') },

  // torchtune
  // forward computes in float32 and casts back; its scale parameter is called `scale`.
  { name: 'torchtune.modules.rms_norm.RMSNorm', library: 'torchtune', kind: 'rmsnorm', params: ['dim', 'eps'], imported: true,
    te: { cls: 'te.RMSNorm', renames: { dim: 'normalized_shape' }, eps: '1e-6' }, source: read('pytorch/torchtune', 'torchtune/modules/rms_norm.py', '1b0918f2e68bb9ea6a5399243b9027b60024c504'),
    forwardRead: { from: 'torchtune 0.6.1 (PyPI wheel), torchtune/modules/rms_norm.py: F.rms_norm(x.float(), weight=self.scale, eps=self.eps).to(x.dtype)', scaleName: 'scale' } },
  // A subclass of nn.LayerNorm (same arguments) whose forward computes in float32 and casts back (type_as(x)).
  // Gemma's RMSNorm as torchtune writes it: x.float() * rsqrt(mean(x^2) + eps) * (1 + scale.float()), cast back; scale
  // starts at zeros.
  { name: 'torchtune.models.gemma.rms_norm.GemmaRMSNorm', library: 'torchtune', kind: 'rmsnorm', params: ['dim', 'eps'], imported: true,
    te: { cls: 'te.RMSNorm', renames: { dim: 'normalized_shape' }, eps: '1e-6' }, source: read('pytorch/torchtune', 'torchtune/models/gemma/rms_norm.py', 'cad98befb55e74cbaf5c28df21f8d9ae302a7be3'),
    forwardRead: { from: 'torchtune (commit cad98be), torchtune/models/gemma/rms_norm.py: x.float() * rsqrt(mean(x^2) + eps) * (1 + scale.float()), cast back; scale starts at zeros', scaleName: 'scale', unitOffset: true } },

  { name: 'torchtune.models.gemma.gemma_norm_embedding.GemmaNormEmbeddings', library: 'torchtune', kind: 'embedding', params: ['num_embeddings', 'embedding_dim'],
    role: { role: 'embedding', note: "Gemma's token embedding (an nn.Embedding whose output is scaled by sqrt(embedding_dim))" },
    source: read('pytorch/torchtune', 'torchtune/models/gemma/gemma_norm_embedding.py', '175782f7419a78060b30f207bb041f83afc3c529') },

  { name: 'torchtune.modules.layer_norm.Fp32LayerNorm', library: 'torchtune', kind: 'layernorm', params: ['normalized_shape', 'eps', 'elementwise_affine', 'bias', 'device', 'dtype'], imported: true,
    te: { cls: 'te.LayerNorm' }, source: read('pytorch/torchtune', 'torchtune/modules/layer_norm.py', '73a83608c99483c0ec8a63d56716776cf86c03e6') },
  // Not an nn.Module: a callable holding the tied module, F.linear(x, tied_module.weight) without bias.
  { name: 'torchtune.modules.tied_linear.TiedLinear', library: 'torchtune', kind: 'other', params: ['tied_module'],
    role: { role: 'lm_head', note: "torchtune's output projection tied to the token embedding" },
    source: read('pytorch/torchtune', 'torchtune/modules/tied_linear.py', '0e52fd0145781890289578f843240a391134eace') },
  { name: 'torchtune.modules.peft.lora.LoRALinear', library: 'torchtune', kind: 'other', params: ['in_dim', 'out_dim', 'rank', 'alpha', 'dropout', 'use_bias', 'quantize_base'],
    source: read('pytorch/torchtune', 'torchtune/modules/peft/lora.py', '031d89b8a659e24607d92a413c30b9e090e7c29d') },

  // litgpt
  // forward computes in float32, scales by (1 + weight) when add_unit_offset, and casts back.
  { name: 'litgpt.model.RMSNorm', library: 'litgpt', kind: 'rmsnorm', params: ['size', 'dim', 'eps', 'add_unit_offset'], imported: true,
    te: { cls: 'te.RMSNorm', renames: { size: 'normalized_shape' }, eps: '1e-6' },
    source: read('Lightning-AI/litgpt', 'litgpt/model.py', '04205815e8849fe883825e3e858e62749c5d7f4d') },
  { name: 'litgpt.lora.LoRALinear', library: 'litgpt', kind: 'other', params: ['in_features', 'out_features', 'r', 'lora_alpha', 'lora_dropout'],
    source: read('Lightning-AI/litgpt', 'litgpt/lora.py', '01e39f5069f50634d4f5b2ebeda9a0e9d9b41974') },

  // xformers
  { name: 'xformers.ops.swiglu_op.SwiGLU', library: 'xformers', kind: 'other', params: ['in_features', 'hidden_features', 'out_features', 'bias'],
    role: { role: 'mlp', note: "xformers' fused SwiGLU MLP" }, source: read('facebookresearch/xformers', 'xformers/ops/swiglu_op.py', '11783ed70717aa2d7ac6f167f1255e71e816f69d') },
  // include_weight comes before eps: RMSNorm(dim, False) is a weightless norm, not eps=False. Its forward refuses
  // tensors that require grad (inference only) and defaults eps to 1e-6.
  { name: 'xformers.ops.rmsnorm.RMSNorm', library: 'xformers', kind: 'rmsnorm', params: ['dim', 'include_weight', 'eps'], imported: true,
    te: { cls: 'te.RMSNorm', renames: { dim: 'normalized_shape' }, affineFlag: 'include_weight', eps: '1e-6' }, source: read('facebookresearch/xformers', 'xformers/ops/rmsnorm.py', '66b17439e8691ffee243d7cb2cd74d469610a6f6') },

  // flash-attn (flash_attn/ops/rms_norm.py defines DropoutAddRMSNorm, a residual-add fused norm, and no RMSNorm)
  { name: 'flash_attn.ops.rms_norm.DropoutAddRMSNorm', library: 'flash_attn', kind: 'other',
    params: ['hidden_size', 'prenorm', 'p', 'eps', 'residual_in_fp32', 'device', 'dtype'],
    source: read('Dao-AILab/flash-attention', 'flash_attn/ops/rms_norm.py', '393882bc089aff64863c260a8633b8390c90aa78', 'forward(x0, residual) adds the residual before the norm') },
  { name: 'flash_attn.ops.triton.layer_norm.RMSNorm', library: 'flash_attn', kind: 'rmsnorm', params: ['hidden_size', 'eps', 'dropout_p', 'device', 'dtype'],
    te: { cls: 'te.RMSNorm', renames: { hidden_size: 'normalized_shape' } },
    source: read('Dao-AILab/flash-attention', 'flash_attn/ops/triton/layer_norm.py', '0a721daebe4fa7149f06ecf3d3eabeb6dcd0f1fa') },
  { name: 'flash_attn.ops.fused_dense.FusedDense', library: 'flash_attn', kind: 'linear', params: ['in_features', 'out_features', 'bias', 'return_residual', 'device', 'dtype'],
    te: { cls: 'te.Linear', renames: TORCH_DTYPE }, source: read('Dao-AILab/flash-attention', 'flash_attn/ops/fused_dense.py', '081c2b012a08ef90346d6adf7e54f55a58b58e9f') },
  // Its tensor-parallel Linears take the process group positionally and shard their own way: RowParallelLinear keeps
  // the bias on rank 0 only, and since 2.6 both split unevenly in multiples of multiple_of (the first ranks take one
  // more); te.Linear(parallel_mode=..., tp_group=...) splits evenly and keeps the bias on every rank.
  ...(['ColumnParallelLinear', 'RowParallelLinear'].map((c): CatalogueEntry => ({
    name: `flash_attn.ops.fused_dense.${c}`, library: 'flash_attn', kind: 'parallel-linear',
    params: ['in_features', 'out_features', 'process_group', 'bias', 'sequence_parallel', 'multiple_of', 'device', 'dtype'],
    noTe: `flash-attn's ${c} shards its weight${c === 'RowParallelLinear' ? ' and keeps its bias on rank 0 only' : ''} its own way (since 2.6 unevenly, in multiples of multiple_of), which te.Linear(parallel_mode="${c.startsWith('Column') ? 'column' : 'row'}", tp_group=process_group) does not reproduce: convert by hand, with a checkpoint mapping for the shards.`,
    source: read('Dao-AILab/flash-attention', 'flash_attn/ops/fused_dense.py', '081c2b012a08ef90346d6adf7e54f55a58b58e9f', 'flash-attn 2.8.3 (PyPI sdist) adds multiple_of and splits unevenly'),
  }))),
  { name: 'flash_attn.modules.embedding.GPT2Embeddings', library: 'flash_attn', kind: 'other',
    params: ['embed_dim', 'vocab_size', 'max_position_embeddings', 'padding_idx', 'device', 'dtype'],
    role: { role: 'embedding', note: "flash-attn's word + position embedding module" },
    source: read('Dao-AILab/flash-attention', 'flash_attn/modules/embedding.py', '4cab4de5eabb5e630b75c668f1e3915814d349a0') },
  { name: 'flash_attn.modules.embedding.ParallelGPT2Embeddings', library: 'flash_attn', kind: 'other',
    params: ['embed_dim', 'vocab_size', 'max_position_embeddings', 'process_group', 'padding_idx', 'sequence_parallel', 'device', 'dtype'],
    role: { role: 'embedding', note: "flash-attn's tensor-parallel word + position embedding module" },
    source: read('Dao-AILab/flash-attention', 'flash_attn/modules/embedding.py', '4cab4de5eabb5e630b75c668f1e3915814d349a0', 'signature as read in flash-attn 2.8.3 (PyPI sdist)') },
  { name: 'flash_attn.modules.embedding.BertEmbeddings', library: 'flash_attn', kind: 'other',
    params: ['embed_dim', 'vocab_size', 'max_position_embeddings', 'type_vocab_size', 'padding_idx', 'device', 'dtype'],
    role: { role: 'embedding', note: "flash-attn's word + position + token-type embedding module" },
    source: read('Dao-AILab/flash-attention', 'flash_attn/modules/embedding.py', '4cab4de5eabb5e630b75c668f1e3915814d349a0') },
  { name: 'flash_attn.modules.mha.MHA', library: 'flash_attn', kind: 'other',
    params: ['embed_dim', 'num_heads', 'num_heads_kv', 'cross_attn', 'qkv_proj_bias', 'out_proj_bias', 'dropout', 'softmax_scale', 'causal', 'layer_idx'],
    role: { role: 'attention', note: 'an attention block' }, source: read('Dao-AILab/flash-attention', 'flash_attn/modules/mha.py', '011ec323d6064cb18fb9a55a0904cabf9d62b8aa') },

  // flash-linear-attention (fla-core): a Triton RMSNorm over the last axis; forward(x, residual=None, prenorm=False,
  // residual_in_fp32=False) also fuses a residual add when given one, which te.RMSNorm does not take (the call-site check
  // norm-called-with-more keeps those); bias=True adds a bias te.RMSNorm does not have.
  { name: 'fla.modules.norm.layernorm.RMSNorm', aliases: ['fla.modules.RMSNorm', 'fla.modules.layernorm.RMSNorm'], library: 'fla', kind: 'rmsnorm',
    params: ['hidden_size', 'elementwise_affine', 'bias', 'eps', 'device', 'dtype'], imported: true,
    te: { cls: 'te.RMSNorm', renames: { hidden_size: 'normalized_shape', ...TORCH_DTYPE } },
    source: read('fla-org/flash-linear-attention', 'fla/modules/norm/layernorm.py', '1f81376ff68590d58d89188f4939770474e72234'),
    forwardRead: { from: 'fla-core 0.6.0 (PyPI wheel), fla/modules/norm/layernorm.py: rms_norm(x, self.weight, self.bias, eps=self.eps) over the last axis (+ residual when given), weight ones, eps 1e-5' } },

  // Its gated MLP block: gate, up and down projections; with fuse_swiglu (the default) forward hands down_proj's weight
  // to a fused SwiGLU + Linear kernel. Listed as a block (its Linears are fla's code).
  { name: 'fla.modules.mlp.GatedMLP', aliases: ['fla.modules.GatedMLP'], library: 'fla', kind: 'other',
    params: ['hidden_size', 'hidden_ratio', 'intermediate_size', 'hidden_act', 'fuse_swiglu'],
    role: { role: 'mlp', note: "flash-linear-attention's gated MLP block (its down projection's weight goes to a fused SwiGLU kernel by default)" },
    source: read('fla-org/flash-linear-attention', 'fla/modules/mlp.py', '20ceee5295631b9c76e2334c1613fb13576829c9') },

  // diffusers
  // eps has no default; bias=True adds a bias te.RMSNorm does not have.
  { name: 'diffusers.models.normalization.RMSNorm', library: 'diffusers', kind: 'rmsnorm', params: ['dim', 'eps', 'elementwise_affine', 'bias'], imported: true,
    te: { cls: 'te.RMSNorm', renames: { dim: 'normalized_shape' } },
    source: read('huggingface/diffusers', 'src/diffusers/models/normalization.py', '04e9323055098220d57b84cfe68b6850b3b3fc0c'),
    forwardRead: { from: 'diffusers 0.42.1 (PyPI wheel), src/diffusers/models/normalization.py: x * rsqrt(mean(x.float()^2, -1) + eps) * weight (+ bias when bias=True), elementwise_affine=True by default' } },
  // forward computes in float32 (input, weight and bias) and casts the result back to the input dtype; te.LayerNorm
  // computes in float32 inside its kernel and returns its weights' dtype (or torch.autocast's), not the input's;
  // takes nn.LayerNorm's arguments (elementwise_affine=False leaves it weightless).
  { name: 'diffusers.models.normalization.FP32LayerNorm', library: 'diffusers', kind: 'layernorm', params: ['normalized_shape', 'eps', 'elementwise_affine', 'bias', 'device', 'dtype'], imported: true,
    te: { cls: 'te.LayerNorm' }, source: read('huggingface/diffusers', 'src/diffusers/models/normalization.py', 'df9efaec266bb41dae8e93729a2c35716600d5bc') },
  { name: 'diffusers.models.attention.FeedForward', library: 'diffusers', kind: 'other', params: ['dim', 'dim_out', 'mult', 'dropout', 'activation_fn'],
    role: { role: 'mlp', note: "diffusers' feed-forward block" }, source: read('huggingface/diffusers', 'src/diffusers/models/attention.py', 'd4c167cffcc678a7cd72114ac2fb730176098c69') },
  { name: 'diffusers.models.attention_processor.Attention', library: 'diffusers', kind: 'other',
    params: ['query_dim', 'cross_attention_dim', 'heads', 'dim_head', 'dropout', 'bias', 'upcast_attention', 'upcast_softmax'],
    role: { role: 'attention', note: 'an attention block' }, source: read('huggingface/diffusers', 'src/diffusers/models/attention_processor.py', '001d4da0eb5809c779120c51f74ef73d6078b08c') },
  { name: 'diffusers.models.embeddings.PatchEmbed', library: 'diffusers', kind: 'other',
    params: ['height', 'width', 'patch_size', 'in_channels', 'embed_dim', 'layer_norm', 'flatten', 'bias', 'interpolation_scale', 'pos_embed_type', 'pos_embed_max_size'],
    source: read('huggingface/diffusers', 'src/diffusers/models/embeddings.py', '0002117e9fa1351a3c0ee988d9c13e683cfb273b') },

  // llm-foundry builds its layers through registries keyed by the model config (layer_builders.py): build_fc makes
  // the class `fc_type.name` registers (models/layers/fc.py: 'torch' -> torch.nn.Linear, 'te' -> te.Linear when TE
  // imports), build_norm the `norm_type` one. The FP8 switch is the config, not the call.
  { name: 'llmfoundry.models.layers.layer_builders.build_fc', library: 'llmfoundry', kind: 'linear', builder: true, params: ['name', 'in_features', 'out_features', 'fc_kwargs'],
    noTe: "llm-foundry's build_fc builds the class its config's fc_type names (torch.nn.Linear by default, te.Linear for the name te): set the config's fc_type name to te (FP8 then runs under te.fp8_autocast) instead of editing the call.",
    source: LLMFOUNDRY_BUILDERS },
  { name: 'llmfoundry.models.layers.layer_builders.build_norm', library: 'llmfoundry', kind: 'layernorm', builder: true, params: ['name', 'normalized_shape', 'device'],
    noTe: "llm-foundry's build_norm builds the class the model config's norm_type names from its registry: choose a TE-backed norm there, not at the call.",
    source: LLMFOUNDRY_BUILDERS },

  // mamba_ssm (mamba_ssm/ops/triton/layer_norm.py defines RMSNorm and functions; its LayerNorm is the gated one)
  { name: 'mamba_ssm.ops.triton.layer_norm.RMSNorm', library: 'mamba_ssm', kind: 'rmsnorm', params: ['hidden_size', 'eps', 'dropout_p', 'device', 'dtype'],
    te: { cls: 'te.RMSNorm', renames: { hidden_size: 'normalized_shape' } },
    source: read('state-spaces/mamba', 'mamba_ssm/ops/triton/layer_norm.py', '0f12d2c811687ebae68b1d9ef2dab5b1a91fce4e') },
  // Gated: forward(x, z) multiplies by a gate, which te.RMSNorm.forward / te.LayerNorm.forward cannot take.
  { name: 'mamba_ssm.ops.triton.layernorm_gated.RMSNorm', library: 'mamba_ssm', kind: 'other',
    params: ['hidden_size', 'eps', 'group_size', 'norm_before_gate', 'device', 'dtype'], source: MAMBA_GATED },
  { name: 'mamba_ssm.ops.triton.layernorm_gated.LayerNorm', library: 'mamba_ssm', kind: 'other',
    params: ['hidden_size', 'eps', 'group_size', 'norm_before_gate', 'device', 'dtype'], source: MAMBA_GATED },
  { name: 'mamba_ssm.modules.mamba_simple.Mamba', library: 'mamba_ssm', kind: 'other',
    params: ['d_model', 'd_state', 'd_conv', 'expand', 'dt_rank', 'dt_min', 'dt_max', 'dt_init', 'dt_scale', 'dt_init_floor', 'conv_bias', 'bias', 'use_fast_path', 'layer_idx', 'device', 'dtype'],
    source: read('state-spaces/mamba', 'mamba_ssm/modules/mamba_simple.py', '000b310f8b02060a038a01fb6b221dd08edc4b13') },
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

/** Every catalogued library module (a row's name without its class), by library. */
const modulesByLibrary = new Map<Library, Set<string>>();
for (const e of CATALOGUE) {
  for (const n of [e.name, ...(e.aliases ?? [])]) {
    const lib = LIBRARY_ROOTS[n.split('.')[0]];
    if (!lib || lib !== e.library) continue;
    const set = modulesByLibrary.get(lib) ?? new Set<string>();
    set.add(n.slice(0, n.lastIndexOf('.')));
    modulesByLibrary.set(lib, set);
  }
}

/** Every catalogued class by its exact name (a row's name or alias). */
const catalogueNames = new Set(CATALOGUE.flatMap((e) => [e.name, ...(e.aliases ?? [])]));

/** Whether the catalogue lists a class by exactly this fully qualified name. */
export function isCatalogued(name: string): boolean {
  return catalogueNames.has(name);
}

/**
 * The catalogued modules a relative import's module path can name (`normalization` from `from ..normalization import
 * RMSNorm` -> `diffusers.models.normalization`), by library: those whose dotted path ends with the tail.
 */
export function modulesEndingWith(tail: string): Map<Library, string[]> {
  const out = new Map<Library, string[]>();
  if (!tail) return out;
  for (const [lib, mods] of modulesByLibrary) {
    const hits = [...mods].filter((m) => m.endsWith(`.${tail}`));
    if (hits.length) out.set(lib, hits);
  }
  return out;
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
  // A library's layer-building function (llm-foundry's build_fc) is catalogued under its full name only.
  if (!/^[A-Z]/.test(last)) {
    const fn = byName.get(resolved);
    return fn?.builder ? { entry: fn, via: 'exact' } : undefined;
  }
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
  if (same) return { entry: { name: resolved, library: same[0].library, kind: 'other', params: [], source: { unverified: 'no row: the class name is ambiguous within its library' } }, via: 'library' };
  for (const m of MODULE_RULES) {
    const at = m.prefix.exec(resolved);
    if (!at || at.index !== 0) continue;
    if (m.skip?.test(last)) return undefined;
    const byClass = byName.get(`${m.library === 'torch' ? 'torch.nn' : 'transformer_engine.pytorch'}.${last}`);
    if (byClass) return byClass.notLayer ? undefined : { entry: byClass, via: 'module' };
    return { entry: { name: resolved, library: m.library, kind: 'other', params: [], isTe: m.isTe, source: { unverified: 'no row: answered by the module rule' } }, via: 'module' };
  }
  if (root === 'torch' || root === 'transformer_engine') return undefined;
  for (const f of FAMILIES) {
    if (!f.name.test(last) || (f.roots && !f.roots.test(resolved))) continue;
    return {
      entry: {
        name: resolved, library: LIBRARY_ROOTS[root] ?? 'torch', kind: f.kind, params: f.params, te: f.te, role: f.role,
        imported: f.importedUnless ? !f.importedUnless.test(resolved) : undefined, source: { unverified: 'no row: answered by a name family' },
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

/** The te.* mapping of a resolved class, when the catalogue has one. */
export function teMapping(resolved: string): TeMapping | undefined {
  return lookupClass(resolved)?.entry.te;
}

/** The name of a resolved class's constructor parameter at a position, when the catalogue lists the class. */
export function paramAt(resolved: string, index: number): string | undefined {
  return lookupClass(resolved)?.entry.params[index];
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
  source: RowSource;
}

export const CLASS_ATTRIBUTES: ClassAttribute[] = [
  // `getattr(torch.nn, self.norm_class_name)`, or `partial(RMSNorm, add_unit_offset="Gemma" in self.name)`.
  { owner: 'litgpt.config.Config', attr: 'norm_class', candidates: ['torch.nn.LayerNorm', 'litgpt.model.RMSNorm'],
    note: 'chosen by config.norm_class_name',
    source: read('Lightning-AI/litgpt', 'litgpt/config.py', '0006c973aa7d6ace293e2a5fedaf1f8f804f960c',
      "OLMo's LayerNorm is partial(torch.nn.LayerNorm, elementwise_affine=False); Gemma's RMSNorm has add_unit_offset=True") },
];

/** The catalogue's row for a config class attribute that holds a layer class, if any. */
export function lookupClassAttribute(owner: string, attr: string): ClassAttribute | undefined {
  return CLASS_ATTRIBUTES.find((a) => a.attr === attr && a.owner === owner);
}
