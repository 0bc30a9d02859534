/**
 * The edit that fuses a norm into the Linear it feeds (analysis/fusion.ts proves the pair): the construction built
 * later of the two, the module that holds the Linear (or, within one class, the Linear itself), is wrapped in the
 * fallback's fp8_fuse_norm, which builds te.LayerNormLinear where FP8 runs and leaves both as built elsewhere:
 *
 *     self.attn = fp8_fuse_norm(self.ln_1, CausalSelfAttention(config), "c_attn")
 *     self.fc1 = fp8_fuse_norm(self.norm, fp8_linear(d, 4 * d))
 *
 * The value is wrapped in place, so no line is added or moved.
 */
import type { Fusion } from '../analysis/fusion';
import type { ModelIR } from '../analysis/ir';
import { insert, type TextEdit } from './edits';
import { FUSE_FACTORY } from './fallback-source';

export interface FusionEdits {
  /** Inserted where the wrapped value starts, before any other edit there. */
  open: TextEdit;
  /** Inserted where it ends, after any other edit there. */
  close: TextEdit;
}

function attrLabel(ir: ModelIR, f: Fusion): string {
  return f.owner ? `self.${f.owner.attr}` : ir.layers[f.fc1].name || f.linearAttr;
}

/** The wrap, or why it cannot be made. */
export function fusionEdits(ir: ModelIR, f: Fusion): FusionEdits | { refusal: string } {
  if (f.ownerValue.start < f.normValue.start) {
    return { refusal: `Not fused: self.${f.normAttr} is built after ${attrLabel(ir, f)}; build it first (move its line above) and the fix applies.` };
  }
  return {
    open: insert(f.ownerValue.start, `${FUSE_FACTORY}(self.${f.normAttr}, `),
    close: insert(f.ownerValue.end, f.owner ? `, "${f.linearAttr}")` : ')'),
  };
}
