/**
 * PL701's fix: torch's activation checkpoint call goes through the FP8 fallback's fp8_checkpoint, which takes the same
 * arguments,
 *
 *     x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)   ->   x = fp8_checkpoint(block, x, use_reentrant=False)
 *
 * and the file imports fp8_checkpoint from the project's module (or uses its inline block's). Only the callee changes.
 * torch's checkpoint_wrapper given no checkpoint_fn gets one, with the use_reentrant its checkpoint_impl meant:
 *
 *     checkpoint_wrapper(block)   ->   checkpoint_wrapper(block, checkpoint_fn=fp8_checkpoint, use_reentrant=False)
 */
import type { NotableCall } from '../analysis/ir';
import { insert, replace, type TextEdit } from './edits';
import { CHECKPOINT_FACTORY, CHECKPOINT_SEQUENTIAL_FACTORY, HF_CHECKPOINT_FACTORY } from './fallback-source';
import { outcome, refuse, type FixContext, type FixOutcome } from './types';
import { bringInFallback } from './wrapper';
import { addImport, attributeAccess } from './imports';
import { statementAt } from './source';
import { checkpointForm, type CheckpointForm } from '../rules/scale';

/** Text appended to a call's arguments (before its `)`), or why not. */
function appendToCall(ctx: FixContext, call: NotableCall, args: string): TextEdit | string {
  const close = call.span.endOffset - 1;
  if (ctx.text[close] !== ')') return 'No automatic fix: the end of the call was not found.';
  const before = ctx.text.slice(call.span.startOffset, close).trimEnd();
  const sep = before.endsWith('(') ? '' : before.endsWith(',') ? ' ' : ', ';
  return insert(call.span.startOffset + before.length, `${sep}${args}`);
}

/**
 * checkpoint_wrapper's arguments (or those of `partial(checkpoint_wrapper, ...)`, one position further), completed:
 * checkpoint_fn=fp8_checkpoint and the use_reentrant of its checkpoint_impl.
 */
function wrapperEdit(ctx: FixContext, call: NotableCall, form: CheckpointForm): TextEdit | string {
  const impl = call.args.checkpoint_impl ?? call.args[form === 'partial' ? '$2' : '$1'];
  // torch's wrapper: use_reentrant = (checkpoint_impl == CheckpointImpl.REENTRANT), NO_REENTRANT by default.
  const reentrant = impl === undefined || /(^|\.)NO_REENTRANT$/.test(impl) ? 'False' : /(^|\.)REENTRANT$/.test(impl) ? 'True' : undefined;
  if (!reentrant) return `No automatic fix: checkpoint_impl=${impl} is chosen at run time; pass checkpoint_fn=${CHECKPOINT_FACTORY} and the use_reentrant it means by hand.`;
  return appendToCall(ctx, call, `checkpoint_fn=${CHECKPOINT_FACTORY}, use_reentrant=${reentrant}`);
}

/**
 * apply_activation_checkpointing's wrapper, made TE's: checkpoint_wrapper_fn=partial(checkpoint_wrapper,
 * checkpoint_fn=fp8_checkpoint, use_reentrant=False), given where it was left to its default or replacing torch's bare
 * checkpoint_wrapper (NO_REENTRANT, the wrapper's default, is use_reentrant=False).
 */
function applyEdits(ctx: FixContext, call: NotableCall): TextEdit[] | string {
  const partial = attributeAccess(ctx.ir, ctx.text, 'functools', 'partial');
  const wrapper = attributeAccess(ctx.ir, ctx.text, 'torch.distributed.algorithms._checkpoint.checkpoint_wrapper', 'checkpoint_wrapper');
  if (!partial || !wrapper) {
    return `No automatic fix: ${partial ? 'checkpoint_wrapper' : 'partial'} names something else in this file; pass checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_fn=${CHECKPOINT_FACTORY}, use_reentrant=False) by hand.`;
  }
  const value = `${partial.name}(${wrapper.name}, checkpoint_fn=${CHECKPOINT_FACTORY}, use_reentrant=False)`;
  const key = call.args.checkpoint_wrapper_fn !== undefined ? 'checkpoint_wrapper_fn' : call.args.$1 !== undefined ? '$1' : undefined;
  let edit: TextEdit | string;
  if (key) {
    const span = call.argSpans?.[key];
    if (!span) return 'No automatic fix: the checkpoint_wrapper_fn argument was not found again.';
    edit = replace(span.startOffset, span.endOffset, key === '$1' ? value : `checkpoint_wrapper_fn=${value}`);
  } else edit = appendToCall(ctx, call, `checkpoint_wrapper_fn=${value}`);
  if (typeof edit === 'string') return edit;
  return [edit, ...[partial.importLine, wrapper.importLine].filter((l): l is string => !!l).map((l) => addImport(ctx.model, l))];
}

export function teCheckpoint(ctx: FixContext, call: NotableCall): FixOutcome {
  const start = call.span.startOffset;
  const form = checkpointForm(call);
  const factory = form === 'sequential' ? CHECKPOINT_SEQUENTIAL_FACTORY : form === 'hf' ? HF_CHECKPOINT_FACTORY : CHECKPOINT_FACTORY;
  let edits: TextEdit[] | TextEdit | string;
  if (form === 'hf') edits = hfEdits(ctx, call);
  else if (form === 'apply') edits = applyEdits(ctx, call);
  else if (form === 'wrapper' || form === 'partial') edits = wrapperEdit(ctx, call, form);
  else if (ctx.text.startsWith(call.callee, start)) edits = replace(start, start + call.callee.length, factory);
  else edits = `No automatic fix: the call is not written as a plain name (torch.utils.checkpoint.${form === 'sequential' ? 'checkpoint_sequential' : 'checkpoint'}(...)).`;
  if (typeof edits === 'string') return refuse(edits);
  const bring = bringInFallback(ctx, [factory]);
  if (bring.refusal) return refuse(`No automatic fix: ${bring.refusal}`);
  const what = form === 'apply' ? `checkpoint_wrapper_fn with checkpoint_fn=${CHECKPOINT_FACTORY}` : form === 'hf' ? `${factory}(${call.receiver})`
    : form === 'call' || form === 'sequential' ? `${factory}(...)` : `checkpoint_fn=${CHECKPOINT_FACTORY}`;
  return outcome([{
    id: `PL701:${start}`,
    title: `Recompute in FP8 with TE's checkpoint where FP8 runs: ${what} via ${bring.where}`,
    kind: 'quickfix', codes: ['PL701'], safe: false, isPreferred: true,
    edits: [...(Array.isArray(edits) ? edits : [edits]), ...bring.edits],
    ...(bring.createFiles.length ? { createFiles: bring.createFiles } : {}),
  }]);
}

/**
 * PL701's edit for Hugging Face's `model.gradient_checkpointing_enable(...)`: the model handed through the fallback's
 * fp8_gradient_checkpointing first, `fp8_gradient_checkpointing(model).gradient_checkpointing_enable(...)`, which swaps
 * the torch checkpoint Hugging Face installs for fp8_checkpoint (with its arguments) now and at every later call.
 */
function hfEdits(ctx: FixContext, call: NotableCall): TextEdit[] | string {
  const start = call.span.startOffset;
  const receiver = call.receiver;
  if (!receiver || !ctx.text.startsWith(`${receiver}.`, start)) return 'No automatic fix: the model is not named plainly before .gradient_checkpointing_enable(...).';
  return [insert(start, `${HF_CHECKPOINT_FACTORY}(`), insert(start + receiver.length, ')')];
}

/**
 * PL702's fix: `Float8LinearConfig(enable_fsdp_float8_all_gather=True)` -> `...=False` in a file that shards with
 * FSDP1, which cannot run float8 all-gather; the Linears still train in float8. Safe: one literal, nothing else moves.
 */
export function allGatherOff(ctx: FixContext, call: NotableCall): FixOutcome {
  const span = call.argSpans?.enable_fsdp_float8_all_gather;
  const arg = span ? ctx.text.slice(span.startOffset, span.endOffset) : '';
  const value = /True\s*$/.exec(arg);
  if (!span || !value) return refuse('No automatic fix: the enable_fsdp_float8_all_gather=True argument was not found again.');
  const at = span.startOffset + value.index;
  return outcome([{
    id: `PL702:${call.span.startOffset}`,
    title: 'Turn float8 all-gather off: enable_fsdp_float8_all_gather=False (FSDP1 cannot run it)',
    kind: 'quickfix', codes: ['PL702'], safe: true, isPreferred: true,
    edits: [replace(at, at + 4, 'False')],
  }]);
}

/**
 * PL703's fix: `precompute_float8_dynamic_scale_for_fsdp(model)` on the line after the optimizer step, at its
 * indentation, with the model the file hands to convert_to_float8_training; imported from torchao.float8.
 */
export function precomputeAfterStep(ctx: FixContext, call: NotableCall): FixOutcome {
  const conversion = ctx.ir.fp8Conversions.find((c) => /(^|\.)convert_to_float8_training$/.test(c.callee));
  const model = conversion && /^[^(]*\(\s*(?:module\s*=\s*)?([A-Za-z_][\w.]*)\s*[,)]/.exec(ctx.text.slice(conversion.span.startOffset, conversion.span.endOffset))?.[1];
  if (!model) return refuse('No automatic fix: the model converted with convert_to_float8_training is not in this file; call precompute_float8_dynamic_scale_for_fsdp(model) after optimizer.step() by hand.');
  const stmt = statementAt(ctx.model, call.span.startOffset);
  // The step must be a statement of its own: after `if ok: optimizer.step()` the line would run unconditionally.
  if (!stmt || stmt.start !== call.span.startOffset || stmt.isHeader) return refuse('No automatic fix: the optimizer step is not a statement of its own; call precompute_float8_dynamic_scale_for_fsdp(model) after it by hand.');
  const nl = ctx.text.slice(stmt.lineStart, stmt.lineEnd).endsWith('\n') ? '' : '\n';
  return outcome([{
    id: `PL703:${call.span.startOffset}`,
    title: `Precompute the float8 scales in one all-reduce: precompute_float8_dynamic_scale_for_fsdp(${model}) after the step`,
    kind: 'quickfix', codes: ['PL703'], safe: false, isPreferred: true,
    edits: [insert(stmt.lineEnd, `${nl}${stmt.indent}precompute_float8_dynamic_scale_for_fsdp(${model})\n`), addImport(ctx.model, 'from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp')],
  }]);
}
