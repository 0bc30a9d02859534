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

/** Offset of an `isinstance(x, nn.Linear)` test (also in a tuple of classes), or -1. */
export function isinstanceLinearAt(text: string): number {
  const m = /\bisinstance\s*\([^,()]+,\s*\(?[^()]*\bLinear\b/.exec(text);
  return m ? m.index : -1;
}
