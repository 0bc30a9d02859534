/**
 * PL701's fix: torch's activation checkpoint call goes through the FP8 fallback's fp8_checkpoint, which takes the same
 * arguments,
 *
 *     x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)   ->   x = fp8_checkpoint(block, x, use_reentrant=False)
 *
 * and the file imports fp8_checkpoint from the project's module (or uses its inline block's). Only the callee changes.
 */
import type { NotableCall } from '../analysis/ir';
import { replace } from './edits';
import { CHECKPOINT_FACTORY } from './fallback-source';
import { outcome, refuse, type FixContext, type FixOutcome } from './types';
import { bringInFallback } from './wrapper';

export function teCheckpoint(ctx: FixContext, call: NotableCall): FixOutcome {
  const start = call.span.startOffset;
  if (!ctx.text.startsWith(call.callee, start)) return refuse('No automatic fix: the call is not written as a plain name (torch.utils.checkpoint.checkpoint(...)).');
  const bring = bringInFallback(ctx, [CHECKPOINT_FACTORY]);
  if (bring.refusal) return refuse(`No automatic fix: ${bring.refusal}`);
  return outcome([{
    id: `PL701:${start}`,
    title: `Recompute in FP8 with TE's checkpoint where FP8 runs: ${CHECKPOINT_FACTORY}(...) via ${bring.where}`,
    kind: 'quickfix', codes: ['PL701'], safe: false, isPreferred: true,
    edits: [replace(start, start + call.callee.length, CHECKPOINT_FACTORY), ...bring.edits],
    ...(bring.createFiles.length ? { createFiles: bring.createFiles } : {}),
  }]);
}
