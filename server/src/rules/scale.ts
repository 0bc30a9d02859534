/**
 * PL7xx, FP8 at scale (DESIGN.md): the mistakes that cost nothing on one small run and bite in the runs that need
 * memory. PL701: torch's activation checkpoint around te.* layers. TE's layers run in FP8 only inside TE's autocast;
 * torch.utils.checkpoint.checkpoint recomputes the checkpointed forward during the backward, which runs outside that
 * autocast, so the recompute runs the te.* GEMMs in BF16 and the backward differentiates a forward other than the one
 * the loss came from. TE's own checkpoint (te.distributed.checkpoint, also te.checkpoint) enters the forward's FP8
 * autocast and recipe again for the recompute (and, with DelayedScaling, reuses the forward's scales); given a function
 * without TE modules it is torch's checkpoint. Read in TE 2.20.2's transformer_engine/pytorch/distributed.py.
 */
import { fp8Layers } from '../analysis/autocast';
import type { ModelIR, NotableCall } from '../analysis/ir';
import type { Finding, RuleContext, RuleModule } from './types';

/** The torch checkpoint calls PL701 reports: in a file whose layers run through TE, and no other FP8 stack owns them. */
export function checkpointCalls(ir: ModelIR, otherStack: boolean): number[] {
  if (otherStack || ir.fp8Conversions.length || ir.quantization.length || !fp8Layers(ir).length) return [];
  const out: number[] = [];
  ir.calls.forEach((c, i) => { if (c.kind === 'checkpoint') out.push(i); });
  return out;
}

/** torch's checkpoint_wrapper (FSDP's activation checkpointing), given no checkpoint_fn: torch's checkpoint inside. */
export function isCheckpointWrapper(call: NotableCall): boolean {
  return /(^|\.)checkpoint_wrapper$/.test(call.callee);
}

export const scaleRules: RuleModule = {
  codes: ['PL701'],
  check({ ir, workspace }: RuleContext): Finding[] {
    return checkpointCalls(ir, workspace.otherStack !== undefined).map((callIndex): Finding => {
      const call = ir.calls[callIndex];
      const wrapper = isCheckpointWrapper(call);
      return {
        code: 'PL701', span: call.span, severity: 'warning', callIndex,
        message: wrapper
          ? `checkpoint_wrapper recomputes te.* layers outside FP8 autocast, in BF16; pass checkpoint_fn=fp8_checkpoint (TE's checkpoint)`
          : `torch's checkpoint recomputes this file's te.* layers outside FP8 autocast, in BF16; use fp8_checkpoint (TE's checkpoint)`,
        explanation: {
          facts: [
            wrapper
              ? `${call.callee}(...) without checkpoint_fn wraps the module in torch.utils.checkpoint.checkpoint, which recomputes its forward during the backward pass, outside TE's FP8 autocast.`
              : `${call.callee}(...) recomputes the checkpointed forward during the backward pass, which runs outside TE's FP8 autocast.`,
            "TE's layers run in FP8 only inside that autocast; TE's own checkpoint (te.distributed.checkpoint) enters the forward's autocast and recipe again for the recompute, and with DelayedScaling reuses the forward's scales (TE 2.20.2, transformer_engine/pytorch/distributed.py).",
          ],
          consequence: 'The recompute runs the te.* GEMMs in BF16: slower than the FP8 forward, and the gradients are those of a forward other than the one the loss came from (Megatron-LM and TE fixed the same mistake in their own checkpointing).',
          fix: wrapper
            ? "The fix passes checkpoint_fn=fp8_checkpoint from the FP8 fallback, with use_reentrant as the wrapper's checkpoint_impl chose it (TE's example passes checkpoint_fn=te.distributed.checkpoint the same way): where FP8 runs it is TE's checkpoint, elsewhere torch's. Given a module without TE modules, TE's checkpoint is torch's."
            : "The fix calls fp8_checkpoint(...) from the FP8 fallback with the same arguments: where FP8 runs it is TE's checkpoint (use_reentrant, context_fn and the rest passed on; TE restores the RNG states itself), elsewhere torch's checkpoint as called. Given a function without TE modules, TE's checkpoint is torch's.",
        },
      };
    });
  },
};
