/**
 * PL107's fix: torch's attention call goes through the FP8 fallback's fp8_attention, which takes the same arguments,
 *
 *     y = F.scaled_dot_product_attention(q, k, v, is_causal=True)   ->   y = fp8_attention(q, k, v, is_causal=True)
 *
 * and the file imports fp8_attention from the project's module (or uses its inline block's). Only the callee changes.
 */
import type { NotableCall } from '../analysis/ir';
import { replace, type TextEdit } from './edits';
import { ATTENTION_FACTORY } from './fallback-source';
import { outcome, refuse, type FixContext, type FixOutcome } from './types';
import { bringInFallback } from './wrapper';

/** The rename of the call's callee to fp8_attention, or undefined where the callee is not written as its name. */
export function attentionRename(ctx: FixContext, call: NotableCall): TextEdit | undefined {
  const start = call.span.startOffset;
  return ctx.text.startsWith(call.callee, start) ? replace(start, start + call.callee.length, ATTENTION_FACTORY) : undefined;
}

export function teAttention(ctx: FixContext, call: NotableCall): FixOutcome {
  const rename = attentionRename(ctx, call);
  if (!rename) return refuse('No automatic fix: the call is not written as a plain name (F.scaled_dot_product_attention(...)).');
  const bring = bringInFallback(ctx, [ATTENTION_FACTORY]);
  if (bring.refusal) return refuse(`No automatic fix: ${bring.refusal}`);
  return outcome([{
    id: `PL107:${call.span.startOffset}`,
    title: `Run this attention in TE's fused kernel where FP8 runs: ${ATTENTION_FACTORY}(...) via ${bring.where}`,
    kind: 'quickfix', codes: ['PL107'], safe: false, isPreferred: true,
    edits: [rename, ...bring.edits],
    ...(bring.createFiles.length ? { createFiles: bring.createFiles } : {}),
  }]);
}
