/**
 * PL107: a model whose layers run through Transformer Engine calls torch's scaled_dot_product_attention. The fallback's
 * fp8_attention takes the same arguments and hands the call to te.DotProductAttention (cuDNN's fused attention, BF16)
 * where FP8 runs, torch's own function elsewhere and for whatever that kernel does not take the same way (a mask,
 * dropout, FP32 inputs, a compiled region): the same softmax(q k^T) v, a faster kernel at the sizes FP8 pays for
 * (bench/results/h200/2026-12-04-te-attention). A call with a mask is left alone: TE's kernel would not run it.
 */
import { fp8Layers } from '../analysis/autocast';
import type { ModelIR, NotableCall } from '../analysis/ir';
import type { Finding, RuleContext, RuleModule } from './types';

/** Whether the call passes an attention mask (TE's kernel in fp8_attention takes none; torch's would run anyway). */
export function masked(call: NotableCall): boolean {
  const mask = call.args.attn_mask ?? call.args.$3;
  return mask !== undefined && mask !== 'None';
}

/** The attention calls PL107 reports: in a file that builds te.* layers, torch's function, no mask. */
export function attentionCalls(ir: ModelIR): number[] {
  const out: number[] = [];
  ir.calls.forEach((c, i) => { if (c.kind === 'attention' && !masked(c)) out.push(i); });
  return out;
}

export const attentionRules: RuleModule = {
  codes: ['PL107'],
  check({ ir, workspace }: RuleContext): Finding[] {
    // The te.* path only: another stack (torchao through fp8_for_compile, QLoRA) owns the layers, or nothing runs TE.
    if (ir.fp8Conversions.length || ir.quantization.length || workspace.otherStack !== undefined || !fp8Layers(ir).length) return [];
    return attentionCalls(ir).map((callIndex): Finding => {
      const call = ir.calls[callIndex];
      return {
        code: 'PL107', span: call.span, severity: 'information', callIndex,
        message: `torch's attention in an FP8 model: fp8_attention runs it in TE's fused attention where FP8 runs, the same result`,
        explanation: {
          facts: [
            `${call.callee}(...) runs torch's flash attention; this file's layers run through Transformer Engine.`,
            'te.DotProductAttention (cuDNN fused attention, BF16) computes the same softmax(q k^T * scale) v with the same causal mask.',
          ],
          consequence: 'Attention is BF16 either way and a large share of the step once the GEMMs run in FP8; on an H200 the converted nanoGPT went from 1.243x to 1.290x of its BF16 step at 12 x 2048 (1.439x at 4096), llama2.c to 1.399x / 1.532x.',
          fix: 'The fix calls fp8_attention(...) from the FP8 fallback with the same arguments: where FP8 runs it hands the call to te.DotProductAttention; without TE, on a CPU, with a mask, dropout, FP32 inputs or under torch.compile it calls torch\'s function as written, the reason logged once.',
        },
      };
    });
  },
};
