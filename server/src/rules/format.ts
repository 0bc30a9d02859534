/** Small wording helpers shared by rule messages. */
import type { Dim, Layer } from '../analysis/ir';

export function dimText(d: Dim | undefined): string {
  if (!d) return '?';
  return d.value !== undefined ? String(d.value) : d.text;
}

/** `768 -> 2304` for a linear layer, `768` for a norm. */
export function shapeText(layer: Layer): string {
  if (layer.kind === 'layernorm' || layer.kind === 'rmsnorm') return dimText(layer.normalizedShape ?? layer.inFeatures);
  return `${dimText(layer.inFeatures)} -> ${dimText(layer.outFeatures)}`;
}

/** `self.c_attn` or, for an unnamed layer, the constructor. */
export function layerLabel(layer: Layer): string {
  return layer.name || layer.constructor;
}

export function joinReasons(reasons: readonly string[]): string {
  return reasons.map((r) => r.trim()).filter(Boolean).map((r) => (/[.!?]$/.test(r) ? r : `${r}.`)).join(' ');
}

/**
 * A test of which Transformer Engine version or API is installed: `hasattr(te, "autocast")`, `te.__version__`,
 * `is_te_min_version("1.0")`, `get_te_version()`, `RequirementCache("transformer_engine>=...")`, `version.parse(te...)`.
 * Code written this way supports old TE on purpose.
 */
export const TE_VERSION_CHECK = /\bhasattr\s*\(\s*(te|transformer_engine[\w.]*)\s*,|\b(te|transformer_engine[\w.]*)\s*\.\s*__version__|\bis_te_min_version\s*\(|\bget_te_version\s*\(|\bte_version\b|RequirementCache\s*\(\s*["']transformer[_-]engine|\b_TE_VERSION\b|\bTE_VERSION\b/;

/** Whether the text tests the installed TE version or API anywhere. */
export function supportsOldTe(text: string): boolean {
  // A plain substring test first: most files have none of these words, and the regex then never runs.
  return (text.includes('hasattr') || text.includes('version') || text.includes('VERSION') || text.includes('RequirementCache'))
    && TE_VERSION_CHECK.test(text);
}
