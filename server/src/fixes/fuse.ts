/**
 * The edit that fuses a norm into what it feeds (analysis/fusion.ts proves the flow): the construction built later of
 * the two, the norm or the module that holds the Linear (within one class, the Linear itself), is wrapped in the
 * fallback's fp8_fuse_norm (te.LayerNormLinear where FP8 runs) or, for a whole MLP, fp8_fuse_mlp (te.LayerNormMLP);
 * both leave the layers as built elsewhere:
 *
 *     self.attn = fp8_fuse_norm(self.ln_1, CausalSelfAttention(config), "c_attn")
 *     self.fc1 = fp8_fuse_norm(self.norm, fp8_linear(d, 4 * d))
 *     self.ffn_norm = fp8_fuse_mlp(fp8_rmsnorm(dim), self.feed_forward, "w1", "w2", up="w3", activation="swiglu", returns="norm")
 *
 * The value is wrapped in place, so no line is added or moved.
 */
import type { Fusion } from '../analysis/fusion';
import type { ModelIR } from '../analysis/ir';
import { insert, type TextEdit } from './edits';
import { FUSE_FACTORY, FUSE_MLP_FACTORY } from './fallback-source';

export interface FusionEdits {
  /** Inserted where the wrapped value starts, before any other edit there. */
  open: TextEdit;
  /** Inserted where it ends, after any other edit there. */
  close: TextEdit;
  /** The fallback's factory the edit calls. */
  factory: string;
}

function attrLabel(ir: ModelIR, f: Fusion): string {
  return f.owner ? `self.${f.owner.attr}` : ir.layers[f.fc1].name || f.linearAttr;
}

/** The indentation of the line `offset` is on. */
function indentOf(text: string, offset: number): string {
  const start = text.lastIndexOf('\n', offset - 1) + 1;
  return /^[ \t]*/.exec(text.slice(start))![0];
}

/** The factory's arguments after the norm and the module: which Linear(s), the activation, the dropout kept. */
function tailArgs(f: Fusion): string {
  const m = f.fusedMlp;
  if (!m) return f.owner ? `, "${f.linearAttr}"` : '';
  const activation = m.activation ? `activation="${m.activation}"` : `activation_from="${m.activationFrom}"`;
  return `, "${f.linearAttr}", "${m.fc2Attr}"${m.upAttr ? `, up="${m.upAttr}"` : ''}, ${activation}${m.dropoutAttr ? `, dropout="${m.dropoutAttr}"` : ''}`;
}

/** The wrap, or why it cannot be made. */
export function fusionEdits(ir: ModelIR, f: Fusion, text: string): FusionEdits | { refusal: string } {
  const factory = f.fusedMlp ? FUSE_MLP_FACTORY : FUSE_FACTORY;
  if (f.fusedMlp && !f.owner) return { refusal: 'Not fused: te.LayerNormMLP replaces a whole MLP module, and this MLP is not a module of its own.' };
  if (f.ownerValue.start > f.normValue.start) {
    return {
      factory,
      open: insert(f.ownerValue.start, `${factory}(self.${f.normAttr}, `),
      close: insert(f.ownerValue.end, `${tailArgs(f)})`),
    };
  }
  // The norm is built after: wrap the norm, which then reaches the built module through self (within one class, the
  // Linear's own attribute), when both are built at the same level (not one of them inside a branch).
  if (indentOf(text, f.normValue.start) !== indentOf(text, f.ownerValue.start)) {
    return { refusal: `Not fused: self.${f.normAttr} is built after ${attrLabel(ir, f)} and at another level; build it first (move its line above) and the fix applies.` };
  }
  const module = f.owner ? `self.${f.owner.attr}` : 'self';
  const tail = f.owner ? tailArgs(f) : `, "${f.linearAttr}"`;
  return {
    factory,
    open: insert(f.normValue.start, `${factory}(`),
    close: insert(f.normValue.end, `, ${module}${tail}, returns="norm")`),
  };
}
