/**
 * PL306's fix: the model a training script compiles goes through the FP8 fallback's fp8_for_compile on its way in,
 *
 *     model = torch.compile(model)   ->   model = torch.compile(fp8_for_compile(model))
 *     model.compile()                ->   fp8_for_compile(model).compile()
 *
 * and the file imports fp8_for_compile from the project's module (created with the fix when the project has none).
 * The argument is wrapped in place: no line is added or moved, the script's autocast, scaler and DDP stay as they are.
 */
import type { NotableCall } from '../analysis/ir';
import { compiledModel } from '../rules/compiled';
import { insert } from './edits';
import { COMPILE_FACTORY } from './fallback-source';
import { outcome, refuse, type FixContext, type FixOutcome } from './types';
import { bringInFallback } from './wrapper';

export function fp8ForCompile(ctx: FixContext, call: NotableCall): FixOutcome {
  const model = compiledModel(call, ctx.text);
  if (!model) return refuse('No automatic fix: the compiled value is not a model held in a name (torch.compile(model)).');
  const arg = model.text;
  const inPlace = call.args.$0 === undefined;
  // A model sharded before it is compiled (FSDP's flat parameters, fully_shard's DTensors): torchao's Float8Linear must
  // take the Linears before the sharding does, so the wrap goes where the model is built, by hand.
  const shard = /\b(FullyShardedDataParallel|FSDP|fully_shard)\s*\(/.exec(ctx.text.slice(0, call.span.startOffset));
  if (shard) {
    return refuse(`No automatic fix: the model is sharded (${shard[1]}, line ${ctx.text.slice(0, shard.index).split('\n').length}) before it is compiled; call ${COMPILE_FACTORY}(${arg}) before sharding it, then compile.`);
  }
  if (!ctx.fallbackModule) {
    return refuse(`No automatic fix: ${COMPILE_FACTORY} lives in the project's FP8 fallback module, which cannot be written from here (a file outside any workspace folder, or an editor that cannot create files).`);
  }
  const bring = bringInFallback(ctx, [COMPILE_FACTORY]);
  if (bring.refusal) return refuse(`No automatic fix: ${bring.refusal}`);
  return outcome([{
    id: `PL306:${arg}@${model.start}`,
    title: `Compile ${arg} with torchao FP8: ${inPlace ? `${COMPILE_FACTORY}(${arg}).compile()` : `torch.compile(${COMPILE_FACTORY}(${arg}))`} via ${bring.where}`,
    kind: 'quickfix', codes: ['PL306'], safe: false, isPreferred: true,
    edits: [insert(model.start, `${COMPILE_FACTORY}(`), insert(model.end, ')'), ...bring.edits],
    ...(bring.createFiles.length ? { createFiles: bring.createFiles } : {}),
  }]);
}
