/** What the analysis knows about library classes: kinds and constructor signatures. */
import type { LayerKind } from './ir';

export interface KnownCtor {
  kind: LayerKind;
  /** Positional parameter names of the constructor, in order. */
  params: string[];
  isTe: boolean;
  /** Qualified short name for messages (`nn.Linear`, `te.Linear`). */
  display: string;
  /** te.* class it maps to. */
  te?: string;
  parallelMode?: 'column' | 'row';
  /** The weight is stored [in, out] (Hugging Face Conv1D): te.Linear computes the same only with it transposed. */
  transposedWeight?: boolean;
  /** A model library's own norm class, imported (its forward is not in the file): the resolved name. */
  imported?: string;
}

const LINEAR = ['in_features', 'out_features', 'bias', 'device', 'dtype'];
const CONV = ['in_channels', 'out_channels', 'kernel_size', 'stride', 'padding', 'dilation', 'groups', 'bias'];

const TORCH_NN: Record<string, [LayerKind, string[]]> = {
  Linear: ['linear', LINEAR],
  // in_features is inferred at the first forward: no te.* twin (verdict.ts says what to do).
  LazyLinear: ['other', ['out_features', 'bias', 'device', 'dtype']],
  LayerNorm: ['layernorm', ['normalized_shape', 'eps', 'elementwise_affine', 'bias', 'device', 'dtype']],
  RMSNorm: ['rmsnorm', ['normalized_shape', 'eps', 'elementwise_affine', 'device', 'dtype']],
  Embedding: ['embedding', ['num_embeddings', 'embedding_dim', 'padding_idx', 'max_norm', 'norm_type', 'scale_grad_by_freq', 'sparse']],
  EmbeddingBag: ['embedding', ['num_embeddings', 'embedding_dim']],
  Conv1d: ['conv', CONV],
  Conv2d: ['conv', CONV],
  Conv3d: ['conv', CONV],
  ConvTranspose1d: ['conv', CONV],
  ConvTranspose2d: ['conv', CONV],
  ConvTranspose3d: ['conv', CONV],
};

/** Containers and non-module names under torch.nn that are not layers. */
const TORCH_NN_NOT_LAYERS = new Set([
  'Module', 'ModuleList', 'ModuleDict', 'Sequential', 'Parameter', 'ParameterList', 'ParameterDict', 'Buffer',
  'DataParallel', 'init', 'functional', 'utils', 'parallel', 'UninitializedParameter',
]);

const TE: Record<string, [LayerKind, string[]]> = {
  Linear: ['linear', ['in_features', 'out_features']],
  LayerNorm: ['layernorm', ['normalized_shape', 'eps']],
  RMSNorm: ['rmsnorm', ['normalized_shape', 'eps']],
  LayerNormLinear: ['linear', ['in_features', 'out_features']],
  GroupedLinear: ['linear', ['num_gemms', 'in_features', 'out_features']],
  LayerNormMLP: ['other', ['hidden_size', 'ffn_hidden_size']],
  DotProductAttention: ['other', ['num_attention_heads', 'kv_channels']],
  MultiheadAttention: ['other', ['hidden_size', 'num_attention_heads']],
  TransformerLayer: ['other', ['hidden_size', 'ffn_hidden_size', 'num_attention_heads']],
};

const PARALLEL_LINEAR = ['input_size', 'output_size'];

/** Recognises a library layer constructor from its resolved dotted name. */
export function knownCtor(resolved: string): KnownCtor | undefined {
  const parts = resolved.split('.');
  const last = parts[parts.length - 1];
  if (!/^[A-Z]/.test(last)) return undefined;
  // `self.LayerNorm(x)` / `cls.Norm(...)` calls a submodule or a stored class held by the instance; it never
  // constructs a library layer, whatever the attribute is called (BERT names its norm attribute `LayerNorm`).
  if (parts[0] === 'self' || parts[0] === 'cls') return undefined;
  if (resolved.startsWith('transformer_engine.')) {
    if (!/^transformer_engine\.(pytorch\.)?[A-Z]\w*$/.test(resolved) && !resolved.startsWith('transformer_engine.pytorch.')) return undefined;
    // Recipes, quantizers, tensors and optimizers are not layers (te.optimizers.FusedAdam, te.Float8Quantizer).
    if (/Recipe|Scaling|Format|Config$|Calibration|Quantizer$|Tensor$|Storage$|Stream$|Group$/.test(last) || resolved.includes('.optimizers.')) return undefined;
    const t = TE[last];
    return { kind: t ? t[0] : 'other', params: t ? t[1] : [], isTe: true, display: `te.${last}` };
  }
  if (/^torch\.nn\.(modules\.(\w+\.)?)?[A-Z]\w*$/.test(resolved)) {
    // Losses (`loss_fct = CrossEntropyLoss()` inside forward) hold no weights and are not model layers.
    if (TORCH_NN_NOT_LAYERS.has(last) || /Loss$/.test(last)) return undefined;
    const t = TORCH_NN[last];
    const kind = t ? t[0] : 'other';
    const te = kind === 'linear' ? 'te.Linear' : kind === 'layernorm' ? 'te.LayerNorm' : kind === 'rmsnorm' ? 'te.RMSNorm' : undefined;
    return { kind, params: t ? t[1] : [], isTe: false, display: `nn.${last}`, te };
  }
  if (/^(Column|Row)ParallelLinear$/.test(last)) {
    const mode = last.startsWith('Column') ? 'column' : 'row';
    const fairscale = resolved.includes('fairscale');
    return {
      kind: 'parallel-linear', params: fairscale ? ['in_features', 'out_features'] : PARALLEL_LINEAR, isTe: false,
      display: last, te: 'te.Linear', parallelMode: mode,
    };
  }
  if (/^(Vocab)?ParallelEmbedding$/.test(last)) {
    return { kind: 'embedding', params: ['num_embeddings', 'embedding_dim'], isTe: false, display: last };
  }
  // apex / other libraries' fused norms, imported rather than defined here. Model libraries' own norms
  // (transformers' LlamaRMSNorm, T5LayerNorm, GemmaRMSNorm) are named for what they are, but their forward is not in
  // this file (Gemma's scales by 1 + weight): `imported` makes their verdict uncertain.
  const fusedLib = /^(apex|megatron|flash_attn|torch\.nn)(\.|$)/.test(resolved) || /^(Fused|MixedFused)/.test(last);
  if ((/^(Fused|Mixed)?(Fused)?RMSNorm$|RMSNorm$|RmsNorm$|^T5LayerNorm$|^RMSLayerNorm$/.test(last)) && !resolved.startsWith('local:')) {
    return { kind: 'rmsnorm', params: ['normalized_shape', 'eps'], isTe: false, display: last, te: 'te.RMSNorm', ...(fusedLib ? {} : { imported: resolved }) };
  }
  if (/^(Fused|MixedFused)?LayerNorm$/.test(last) && !resolved.startsWith('local:')) {
    return { kind: 'layernorm', params: ['normalized_shape', 'eps'], isTe: false, display: last, te: 'te.LayerNorm', ...(fusedLib || last === 'LayerNorm' ? {} : { imported: resolved }) };
  }
  if (/^Conv1D$/.test(last) && /transformers|pytorch_utils|modeling_utils/.test(resolved)) {
    // Hugging Face's GPT-2 Conv1D: a Linear with its weight stored transposed ([in, out]), Conv1D(nf=out, nx=in).
    return { kind: 'linear', params: ['nf', 'nx'], isTe: false, display: last, te: 'te.Linear', transposedWeight: true };
  }
  return undefined;
}

/** Name patterns for input and output size parameters of custom layer classes. */
export const IN_PARAM = /^(in_features|in_dim|input_dim|in_channels|input_size|d_in|in_size|fan_in|in_f|n_in|dim_in|in_feat|nx|input_features|in_planes)$/;
export const OUT_PARAM = /^(out_features|out_dim|output_dim|out_channels|output_size|d_out|out_size|fan_out|out_f|n_out|dim_out|out_feat|nf|output_features|out_planes)$/;
export const SHAPE_PARAM = /^(normalized_shape|ndim|dim|hidden_size|d_model|n_state|size|features|num_features|d|embed_dim|hidden_dim|channels|n_embd|hidden|normalized_dim|num_channels|width|model_dim)$/;

/** Output sizes that name a vocabulary. */
export const VOCAB_NAME = /(^|[._])(vocab(ulary)?(_size|_len|_length|size)?|padded_vocab_size|n_?vocab|num_vocab|ntokens?|n_?tokens|num_tokens|token_num|vocab_num|n_words|num_words|output_vocab_size|tgt_vocab_size|target_vocab_size|src_vocab_size|vocab_dim|n_?chars|num_chars|n_characters|num_characters|n_?symbols|num_symbols|alphabet_size|charset_size)\)?$/i;
export const VOCAB_EXPR = /\blen\(\s*(self\.)?[\w.]*(dictionary|dict|tokenizer|vocab|tgt_dict|itos|stoi|alphabet|chars|symbols|tokens|char_to_idx|idx_to_char|token_to_id|id2token|word2idx|idx2word)\w*\s*\)|\.weight\.(shape\[0\]|size\(0\))|\.num_embeddings\b/i;

export const CLASSIFIER_NAME = /(^|[._])(num_classes|n_classes|nclasses|num_class|n_class|num_labels|n_labels|nlabels|num_outputs|n_outputs|num_actions|n_actions|output_classes|classes|num_targets)\)?$/i;

export const EXPERTS_NAME = /(^|[._])(num_experts|n_experts|num_local_experts|n_routed_experts|moe_num_experts|num_experts_per_tok|experts|n_expert|expert_num|num_moe_experts)\)?$/i;

/** First and last lines of the FP8 fallback wrapper the fixes insert (fixes/wrapper.ts writes them). */
export const WRAPPER_MARKER = '# precision-lens: fp8 fallback';
export const WRAPPER_END_MARKER = '# precision-lens: end of fp8 fallback';

/** Offset ranges of the inserted wrapper blocks: the project's own code, which the analysis does not report on. */
export function wrapperRanges(src: string): [number, number][] {
  const out: [number, number][] = [];
  let at = src.indexOf(WRAPPER_MARKER);
  while (at >= 0) {
    const end = src.indexOf(WRAPPER_END_MARKER, at);
    if (end < 0) break;
    out.push([at, end + WRAPPER_END_MARKER.length]);
    at = src.indexOf(WRAPPER_MARKER, end + WRAPPER_END_MARKER.length);
  }
  return out;
}
