/**
 * PL306's fix: the model a training script compiles goes through the FP8 fallback's fp8_for_compile on its way in,
 *
 *     model = torch.compile(model)   ->   model = torch.compile(fp8_for_compile(model))
 *
 * and the file imports fp8_for_compile from the project's module (created with the fix when the project has none).
 * The argument is wrapped in place: no line is added or moved, the script's autocast, scaler and DDP stay as they are.
 */
import type { NotableCall } from '../analysis/ir';
import { compiledModelArg } from '../rules/compiled';
import { insert } from './edits';
import { COMPILE_FACTORY } from './fallback-source';
import { outcome, refuse, type FixContext, type FixOutcome } from './types';
import { bringInFallback } from './wrapper';

export function fp8ForCompile(ctx: FixContext, call: NotableCall): FixOutcome {
  const arg = compiledModelArg(call, ctx.text);
  const span = call.argSpans?.$0;
  if (!arg || !span) return refuse('No automatic fix: the compiled value is not a model held in a name (torch.compile(model)).');
  if (!ctx.fallbackModule) {
    return refuse(`No automatic fix: ${COMPILE_FACTORY} lives in the project's FP8 fallback module, which cannot be written from here (a file outside any workspace folder, or an editor that cannot create files).`);
  }
  const bring = bringInFallback(ctx, [COMPILE_FACTORY]);
  if (bring.refusal) return refuse(`No automatic fix: ${bring.refusal}`);
  return outcome([{
    id: `PL306:${arg}@${span.startOffset}`,
    title: `Compile ${arg} with torchao FP8: torch.compile(${COMPILE_FACTORY}(${arg})) via ${bring.where}`,
    kind: 'quickfix', codes: ['PL306'], safe: false, isPreferred: true,
    edits: [insert(span.startOffset, `${COMPILE_FACTORY}(`), insert(span.endOffset, ')'), ...bring.edits],
    ...(bring.createFiles.length ? { createFiles: bring.createFiles } : {}),
  }]);
}
