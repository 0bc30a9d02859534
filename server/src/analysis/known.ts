/**
 * What the analysis knows about library classes, read from the catalogue (catalogue.ts): kinds, constructor
 * signatures, role hints and te.* mappings, in the shape the layer collector uses.
 */
import { displayName, lookupClass, type ForwardRead, type RoleHint } from './catalogue';
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
  /** The imported norm's forward as the catalogue read it (a plain norm; its weight's name when not `weight`). */
  importedForward?: ForwardRead;
  /** What the class is in a model (a framework's output layer or embedding module), from the catalogue. */
  roleHint?: RoleHint;
  /** Why a Linear or norm class has no te.* twin in place. */
  noTe?: string;
  /** The norm's weight flag when not `elementwise_affine` (timm's `affine`, xformers' `include_weight`). */
  affineFlag?: string;
}

/** The FP8 fallback's layer factories (fixes/fallback-source.ts writes them) and the kind of layer each builds. */
export const FALLBACK_FACTORIES: Record<string, { kind: LayerKind; params: string[]; te: string }> = {
  fp8_linear: { kind: 'linear', params: ['in_features', 'out_features', 'bias'], te: 'te.Linear' },
  fp8_parallel_linear: { kind: 'parallel-linear', params: ['fallback', 'in_features', 'out_features', 'bias'], te: 'te.Linear' },
  fp8_layernorm: { kind: 'layernorm', params: ['normalized_shape', 'eps'], te: 'te.LayerNorm' },
  fp8_rmsnorm: { kind: 'rmsnorm', params: ['normalized_shape', 'eps'], te: 'te.RMSNorm' },
  fp8_layernorm_or: { kind: 'layernorm', params: ['fallback', 'normalized_shape', 'eps'], te: 'te.LayerNorm' },
  fp8_rmsnorm_or: { kind: 'rmsnorm', params: ['fallback', 'normalized_shape', 'eps'], te: 'te.RMSNorm' },
  fp8_conv1d_or: { kind: 'linear', params: ['fallback', 'nf', 'nx'], te: 'te.Linear' },
  fp8_linear_like: { kind: 'linear', params: ['module'], te: 'te.Linear' },
  fp8_layernorm_from: { kind: 'layernorm', params: ['cls', 'default', 'normalized_shape', 'eps'], te: 'te.LayerNorm' },
  fp8_rmsnorm_from: { kind: 'rmsnorm', params: ['cls', 'default', 'normalized_shape', 'eps'], te: 'te.RMSNorm' },
};

/** The fallback's factory that converts a module built elsewhere (`fp8_linear_like(make_linear(d, d))`): what it is
 *  passed is that layer where FP8 does not run. */
export const LIKE_FACTORY = 'fp8_linear_like';

/** The fallback's fusers (fixes/fuse.ts wraps a construction in them): a value built through one is fused already. */
export const FUSE_FACTORIES = { norm: 'fp8_fuse_norm', mlp: 'fp8_fuse_mlp' } as const;

/** Recognises a library layer constructor from its resolved dotted name (a catalogue lookup). */
export function knownCtor(resolved: string): KnownCtor | undefined {
  const hit = lookupClass(resolved);
  if (!hit) return undefined;
  const e = hit.entry;
  const k: KnownCtor = { kind: e.kind, params: e.params, isTe: !!e.isTe, display: displayName(e) };
  if (e.te && !e.isTe) k.te = e.te.cls;
  if (e.te?.parallelMode) k.parallelMode = e.te.parallelMode;
  if (e.te?.transposedWeight) k.transposedWeight = true;
  if (e.imported) k.imported = resolved;
  if (e.imported && e.forwardRead) k.importedForward = e.forwardRead;
  if (e.role) k.roleHint = e.role;
  if (e.noTe) k.noTe = e.noTe;
  if (e.te?.affineFlag) k.affineFlag = e.te.affineFlag;
  return k;
}

/** Name patterns for input and output size parameters of custom layer classes. */
export const IN_PARAM = /^(in_features|in_dim|input_dim|in_channels|input_size|d_in|in_size|fan_in|in_f|n_in|dim_in|in_feat|nx|input_features|in_planes)$/;
export const OUT_PARAM = /^(out_features|out_dim|output_dim|out_channels|output_size|d_out|out_size|fan_out|out_f|n_out|dim_out|out_feat|nf|output_features|out_planes)$/;
export const SHAPE_PARAM = /^(normalized_shape|ndim|dim|hidden_size|d_model|n_state|size|features|num_features|d|embed_dim|hidden_dim|channels|n_embd|hidden|normalized_dim|num_channels|width|model_dim)$/;

/** Output sizes that name a vocabulary. */
export const VOCAB_NAME = /(^|[._])(vocab(ulary)?(_size|_len|_length|size)?|padded_vocab_size|n_?vocab|num_vocab|ntokens?|n_?tokens|num_tokens|token_num|vocab_num|n_words|num_words|output_vocab_size|tgt_vocab_size|target_vocab_size|src_vocab_size|vocab_dim|n_?chars|num_chars|n_characters|num_characters|n_?symbols|num_symbols|alphabet_size|charset_size)\)?$/i;
export const VOCAB_EXPR = /\blen\(\s*(self\.)?[\w.]*(dictionary|dict|tokenizer|vocab|tgt_dict|itos|stoi|alphabet|chars|symbols|tokens|char_to_idx|idx_to_char|token_to_id|id2token|word2idx|idx2word)\w*\s*\)|\.weight\.(shape\[0\]|size\(0\))|\.num_embeddings\b/i;

export const CLASSIFIER_NAME = /(^|[._])(num_classes|n_classes|nclasses|num_class|n_class|num_labels|n_labels|nlabels|num_outputs|n_outputs|num_actions|n_actions|output_classes|classes|num_targets|classifier_proj_size|classifier_hidden_size|classifier_dim)\)?$/i;

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
