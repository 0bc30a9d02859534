/**
 * PL501: loading a checkpoint with strict=True across TE and plain modules (TE writes `<prefix>._extra_state` for its
 * FP8 metadata, plain checkpoints lack those keys and vice versa). PL502: the whole model cast to FP16/BF16 before
 * the optimizer is built, so the optimizer's master weights are low precision and small updates round away.
 */
import type { Finding, RuleContext, RuleModule } from './types';

/** A call's text on one line, at most 44 characters. */
function shortText(text: string): string {
  const one = text.replace(/\s+/g, ' ');
  return one.length <= 44 ? one : `${one.slice(0, 41)}...`;
}

/** Training only adapters on frozen 16-bit weights: PEFT / LoRA, QLoRA preparation, a frozen base. */
const FROZEN_BASE = /\bget_peft_model\s*\(|\bprepare_model_for_kbit_training\s*\(|\bLoraConfig\s*\(|\b(model|base_model|backbone)\s*\.\s*requires_grad_\s*\(\s*False\s*\)/;

export const checkpointRules: RuleModule = {
  codes: ['PL501', 'PL502'],
  check(ctx: RuleContext): Finding[] {
    const { ir } = ctx;
    const findings: Finding[] = [];
    // TE modules here, or FP8 autocast (a training script loading a TE model built elsewhere); an import alone is not use.
    const usesTe = ir.layers.some((l) => l.isTe) || ir.autocastRegions.some((r) => !r.disabled);
    ir.calls.forEach((call, callIndex) => {
      if (call.kind === 'load_state_dict' && usesTe && (call.args.strict ?? 'True').trim() !== 'False') {
        findings.push({
          code: 'PL501', span: call.span, severity: 'information', callIndex,
          message: 'strict=True fails across TE and torch.nn checkpoints (_extra_state keys); pass strict=False',
          explanation: {
            facts: ['This file uses Transformer Engine (its modules or FP8 autocast).', 'TE modules save FP8 metadata under "<prefix>._extra_state" keys.'],
            consequence: 'Loading a checkpoint from a plain torch.nn model (or into one) with strict=True fails with missing or unexpected "_extra_state" keys.',
            fix: "The fix passes strict=False (TE's own Hugging Face loader does); check the returned missing keys, or filter the _extra_state keys instead.",
          },
        });
      }
    });
    // An optimizer that keeps FP32 master weights itself (te.optimizers.FusedAdam(master_weights=True)) is fine.
    let frozen: boolean | undefined; // read once, only when a cast meets an optimizer
    const optimizers = ir.calls.filter((c) => c.kind === 'optimizer_ctor' && !/master_weights\s*=\s*True/.test(c.text));
    ir.calls.forEach((call, callIndex) => {
      if (call.kind !== 'cast_low_precision') return;
      // Before the optimizer is built, or after (Module._apply swaps param.data in place, so the optimizer's parameters
      // become 16-bit too): either way it updates 16-bit weights.
      const optimizer = optimizers.find((o) => o.ownerFunction === call.ownerFunction);
      if (!optimizer) return;
      // Adapters (PEFT/LoRA) or frozen base weights: the 16-bit weights are not what the optimizer updates.
      frozen ??= FROZEN_BASE.test(ctx.text);
      if (frozen) return;
      const when = optimizer.span.startOffset > call.span.endOffset ? 'before the optimizer' : 'after the optimizer';
      const fp16 = /\b(half|float16|fp16)\b/.test(call.text);
      const loads = /from_pretrained$/.test(call.callee);
      const step = fp16
        ? 'updates smaller than the FP16 step (about 0.05 % of a weight) round away, and small gradients underflow without loss scaling'
        : 'updates smaller than the BF16 step (about 0.4 % of a weight) round away and training stalls';
      findings.push({
        code: 'PL502', span: call.span, severity: 'warning', callIndex,
        message: `${shortText(call.text)} ${loads ? 'loads 16-bit weights' : 'casts the model to 16-bit'} ${when}; keep FP32 parameters and use autocast`,
        related: [{ span: optimizer.span, message: `the optimizer (${optimizer.callee}) is created here` }],
        explanation: {
          facts: [`${loads ? call.text : call.text.slice(0, 60)} ${loads ? 'loads the model\'s weights in 16-bit' : 'casts the whole model to 16-bit'} ${when} (${optimizer.callee}) is created, so the optimizer updates 16-bit master weights.`],
          consequence: `${step[0].toUpperCase()}${step.slice(1)}.`,
          fix: 'Keep parameters in FP32 and train under autocast (TE autocast computes FP8 from FP32/BF16 masters).',
        },
      });
    });
    return findings;
  },
};
