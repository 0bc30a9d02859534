/**
 * PL7xx, FP8 at scale (DESIGN.md): the mistakes that cost nothing on one small run and bite in the runs that need
 * memory. PL701: torch's activation checkpoint around te.* layers. TE's layers run in FP8 only inside TE's autocast;
 * torch.utils.checkpoint.checkpoint recomputes the checkpointed forward during the backward, which runs outside that
 * autocast, so the recompute runs the te.* GEMMs in BF16 and the backward differentiates a forward other than the one
 * the loss came from. TE's own checkpoint (te.distributed.checkpoint, also te.checkpoint) enters the forward's FP8
 * autocast and recipe again for the recompute (and, with DelayedScaling, reuses the forward's scales); given a function
 * without TE modules it is torch's checkpoint. Read in TE 2.20.2's transformer_engine/pytorch/distributed.py.
 *
 * PL702: torchao's float8 all-gather (Float8LinearConfig(enable_fsdp_float8_all_gather=True)) in a file that shards
 * with FSDP1 (FullyShardedDataParallel). The flag swaps each Linear's weight for a tensor subclass whose pre/post
 * all-gather hooks only FSDP2 (fully_shard) calls; FSDP1 shards flat parameters and fails at the first step (torchao's
 * config.py; pytorch/ao#1605, its maintainer: "supported in FSDP2 and not supported in FSDP1"). torchao's float8
 * compute itself runs under FSDP1 (use_orig_params=True, torchao's test_fsdp.py).
 *
 * PL703: the same flag under FSDP2 with a training step in the file and no precompute_float8_dynamic_scale_for_fsdp:
 * each weight then all-reduces its own amax before its all-gather; the function, run after the optimizer step, does
 * one all-reduce for all of them (torchao/float8/fsdp_utils.py; torchtitan calls it right after optimizers.step()).
 */
import { fp8Layers } from '../analysis/autocast';
import type { ModelIR, NotableCall } from '../analysis/ir';
import { inReach, teInReach } from './compiled';
import type { Finding, RuleContext, RuleModule, WorkspaceFacts } from './types';

/**
 * The torch checkpoint calls PL701 reports: in a file whose layers run through TE, or a script with te.* layers in
 * reach (its folder, or the modules it imports: FSDP's checkpoint_wrapper sits in the training script, the model in
 * model.py), where no other FP8 stack owns them.
 */
export function checkpointCalls(ir: ModelIR, workspace: WorkspaceFacts): number[] {
  if (workspace.otherStack !== undefined || ir.fp8Conversions.length || ir.quantization.length) return [];
  if (!ir.calls.some((c) => c.kind === 'checkpoint') || (!fp8Layers(ir).length && !teInReach(ir, workspace))) return [];
  const out: number[] = [];
  ir.calls.forEach((c, i) => { if (c.kind === 'checkpoint') out.push(i); });
  return out;
}

/**
 * How a PL701 call reaches torch's checkpoint: called (`checkpoint(fn, x)`), by checkpoint_sequential (`sequential`),
 * through torch's checkpoint_wrapper given no
 * checkpoint_fn (`wrapper`), the same wrapper bound with `partial` (`partial`), or FSDP's apply_activation_checkpointing
 * with that wrapper, its default (`apply`), or Hugging Face's `model.gradient_checkpointing_enable()` (`hf`), which has
 * the model's layers call torch's checkpoint through their _gradient_checkpointing_func.
 */
export type CheckpointForm = 'call' | 'sequential' | 'wrapper' | 'partial' | 'apply' | 'hf';

export function checkpointForm(call: NotableCall): CheckpointForm {
  if (/(^|\.)gradient_checkpointing_enable$/.test(call.callee)) return 'hf';
  if (/(^|\.)checkpoint_wrapper$/.test(call.callee)) return 'wrapper';
  if (/(^|\.)partial$/.test(call.callee)) return 'partial';
  if (/(^|\.)apply_activation_checkpointing$/.test(call.callee)) return 'apply';
  if (/(^|\.)checkpoint_sequential$/.test(call.callee)) return 'sequential';
  return 'call';
}

/**
 * What the files in reach of this one (its folder, the modules it imports: rules/compiled.ts inReach) do at scale,
 * beside what this file does: torchao's float8 all-gather config, FSDP1's wrapper and the scale precompute are often
 * in different files (the config with the model, the sharding and the loop in train.py). Each is the first such file
 * other than this one, or undefined. Read once per check, and only for a file with a config or an optimizer step.
 */
interface ScaleReach {
  allGather?: string;
  fsdp1?: string;
  precompute?: string;
}

function elsewhere(ir: ModelIR, workspace: WorkspaceFacts, files: readonly string[] | undefined): string | undefined {
  if (!files?.length || !workspace.path) return undefined;
  const self = workspace.path.replace(/\\/g, '/');
  return inReach(ir, workspace.path, files).find((f) => f !== self);
}

function reachOf(ir: ModelIR, workspace: WorkspaceFacts): ScaleReach {
  return {
    allGather: elsewhere(ir, workspace, workspace.allGatherFiles),
    fsdp1: elsewhere(ir, workspace, workspace.fsdp1Files),
    precompute: elsewhere(ir, workspace, workspace.precomputeFiles),
  };
}

const named = (path: string): string => path.slice(path.lastIndexOf('/') + 1);

/** torchao float8 all-gather configs of this file where it, or a file in its reach, wraps with FSDP1. */
function allGatherWithFsdp1(ir: ModelIR, reach: ScaleReach): number[] {
  if (!ir.calls.some((c) => c.kind === 'fsdp1') && !reach.fsdp1) return [];
  const out: number[] = [];
  ir.calls.forEach((c, i) => { if (c.kind === 'float8_allgather') out.push(i); });
  return out;
}

function allGatherFindings(ir: ModelIR, reach: ScaleReach): Finding[] {
  const fsdp = ir.calls.find((c) => c.kind === 'fsdp1');
  const other = fsdp ? undefined : reach.fsdp1;
  const where = fsdp ? 'this file shards' : `${named(other ?? 'another file')} shards`;
  return allGatherWithFsdp1(ir, reach).map((callIndex): Finding => ({
    code: 'PL702', span: ir.calls[callIndex].span, severity: 'error', callIndex,
    message: `float8 all-gather needs FSDP2 (fully_shard) and ${where} with FSDP1; turn it off or move to fully_shard`,
    ...(fsdp ? { related: [{ span: fsdp.span, message: `FSDP1 wraps the model here: ${fsdp.text}` }] } : {}),
    explanation: {
      facts: [
        "enable_fsdp_float8_all_gather=True makes each float8 Linear's weight a tensor subclass whose pre/post all-gather hooks only FSDP2 (torch.distributed.fsdp.fully_shard) calls; torchao's config documents it as an FSDP2 feature.",
        ...(other ? [`${other} wraps a model with FullyShardedDataParallel (FSDP1); it is in this file's folder or imported by it.`] : []),
        'FSDP1 (FullyShardedDataParallel) shards flat parameters and never calls them: torchao\'s maintainers call float8 all-gather "not supported in FSDP1" (pytorch/ao#1605), where it failed with an AttributeError at the first step.',
      ],
      consequence: 'Training stops at the first forward; float8 compute alone runs under FSDP1 (use_orig_params=True).',
      fix: 'The fix sets enable_fsdp_float8_all_gather=False: the Linears still train in float8, the all-gather moves BF16/FP32 weights. To keep float8 all-gather, shard with fully_shard (FSDP2) instead.',
    },
  }));
}

/**
 * The optimizer step PL703 reports (the file's first), when float8 all-gather is on (here or in a file in reach),
 * neither this file nor one in reach shards with FSDP1 (that is PL702), and none precomputes the scales. With the
 * config in another file, the step is reported where the training loop is.
 */
function stepWithoutPrecompute(ir: ModelIR, reach: ScaleReach): number | undefined {
  const on = ir.calls.some((c) => c.kind === 'float8_allgather') || reach.allGather;
  if (!on || ir.calls.some((c) => c.kind === 'fsdp1') || reach.fsdp1) return undefined;
  if (ir.calls.some((c) => c.kind === 'float8_precompute') || reach.precompute) return undefined;
  const i = ir.calls.findIndex((c) => c.kind === 'optimizer_step');
  return i < 0 ? undefined : i;
}

function precomputeFindings(ir: ModelIR, reach: ScaleReach): Finding[] {
  const callIndex = stepWithoutPrecompute(ir, reach);
  if (callIndex === undefined) return [];
  const config = ir.calls.find((c) => c.kind === 'float8_allgather');
  const other = config ? undefined : reach.allGather;
  return [{
    code: 'PL703', span: ir.calls[callIndex].span, severity: 'information', callIndex,
    message: 'each float8 weight all-reduces its own scale; precompute_float8_dynamic_scale_for_fsdp(model) after this step does one',
    ...(config ? { related: [{ span: config.span, message: `float8 all-gather is on here: ${config.text}` }] } : {}),
    explanation: {
      facts: [
        ...(other ? [`${other} turns torchao's float8 all-gather on (enable_fsdp_float8_all_gather=True); it is in this file's folder or imported by it, and no file there calls precompute_float8_dynamic_scale_for_fsdp.`] : []),
        "With enable_fsdp_float8_all_gather=True each float8 Linear's weight is cast to float8 before FSDP2's all-gather; without a precomputed scale the cast all-reduces that weight's amax across the mesh first (torchao 0.18, torchao/float8/fsdp_utils.py).",
        "precompute_float8_dynamic_scale_for_fsdp(model), run after the optimizer step, computes every weight's scale in one all-reduce; torchao's docstring says to run it there, and torchtitan calls it right after optimizers.step().",
      ],
      consequence: 'One small all-reduce per float8 weight per step instead of one in all: communication that grows with the layer count (a performance cost; the numbers are the same).',
      fix: 'The fix inserts precompute_float8_dynamic_scale_for_fsdp(model) after the optimizer step, with the model the file converts with convert_to_float8_training, and imports it from torchao.float8. Run it after every step: a scale computed once goes stale as the weights change.',
    },
  }];
}

export const scaleRules: RuleModule = {
  codes: ['PL701', 'PL702', 'PL703'],
  check({ ir, workspace }: RuleContext): Finding[] {
    const scale = ir.calls.some((c) => c.kind === 'float8_allgather' || c.kind === 'optimizer_step');
    const reach = scale ? reachOf(ir, workspace) : {};
    return [...allGatherFindings(ir, reach), ...precomputeFindings(ir, reach), ...checkpointFindings(ir, workspace)];
  },
};

const recomputes = (call: NotableCall) => `${call.callee}(...) recomputes the checkpointed forward during the backward pass, which runs outside TE's FP8 autocast.`;
const WRAPPER_FIX = "The fix passes checkpoint_fn=fp8_checkpoint from the FP8 fallback, with use_reentrant as the wrapper's checkpoint_impl chose it (TE's example passes checkpoint_fn=te.distributed.checkpoint the same way): where FP8 runs it is TE's checkpoint, elsewhere torch's. Given a module without TE modules, TE's checkpoint is torch's.";

/** Per form, PL701's sentence, what it recomputes and where (the first fact), and its fix. */
const CHECKPOINT_TEXT: Record<CheckpointForm, { message: string; fact: (call: NotableCall) => string; fix: string }> = {
  call: {
    message: `torch's checkpoint recomputes te.* layers outside FP8 autocast, in BF16; use fp8_checkpoint (TE's checkpoint)`,
    fact: recomputes,
    fix: "The fix calls fp8_checkpoint(...) from the FP8 fallback with the same arguments: where FP8 runs it is TE's checkpoint (use_reentrant, context_fn and the rest passed on; TE restores the RNG states itself), elsewhere torch's checkpoint as called. Given a function without TE modules, TE's checkpoint is torch's.",
  },
  sequential: {
    message: `torch's checkpoint_sequential recomputes te.* layers outside FP8 autocast, in BF16; use fp8_checkpoint_sequential`,
    fact: recomputes,
    fix: "The fix calls fp8_checkpoint_sequential(...) from the FP8 fallback with the same arguments: where FP8 runs it splits the functions as torch does and checkpoints each segment but the last with TE's checkpoint (TE has no sequential form), elsewhere it is torch's checkpoint_sequential as called.",
  },
  wrapper: {
    message: `checkpoint_wrapper recomputes te.* layers outside FP8 autocast, in BF16; pass checkpoint_fn=fp8_checkpoint (TE's checkpoint)`,
    fact: (call) => `${call.callee}(...) without checkpoint_fn wraps the module in torch.utils.checkpoint.checkpoint, which recomputes its forward during the backward pass, outside TE's FP8 autocast.`,
    fix: WRAPPER_FIX,
  },
  partial: {
    message: `checkpoint_wrapper recomputes te.* layers outside FP8 autocast, in BF16; pass checkpoint_fn=fp8_checkpoint (TE's checkpoint)`,
    fact: (call) => `${call.callee}(${call.args.$0}, ...) without checkpoint_fn wraps the module in torch.utils.checkpoint.checkpoint, which recomputes its forward during the backward pass, outside TE's FP8 autocast.`,
    fix: WRAPPER_FIX,
  },
  hf: {
    message: `gradient_checkpointing_enable makes the layers recompute te.* in BF16 with torch's checkpoint; use fp8_gradient_checkpointing`,
    fact: (call) => `${call.callee}(...) sets each layer's _gradient_checkpointing_func to torch.utils.checkpoint.checkpoint (Hugging Face's gradient checkpointing), which recomputes the layer's forward during the backward pass, outside TE's FP8 autocast.`,
    fix: "The fix hands the model through fp8_gradient_checkpointing(model) first: the checkpoint function Hugging Face installs becomes fp8_checkpoint with the same arguments (use_reentrant and the rest), TE's checkpoint where FP8 runs and torch's elsewhere, now and at every later gradient_checkpointing_enable call (Trainer's included).",
  },
  apply: {
    message: `apply_activation_checkpointing recomputes te.* layers outside FP8 autocast, in BF16; wrap with checkpoint_fn=fp8_checkpoint`,
    fact: (call) => `${call.callee}(...) wraps the chosen submodules with torch's checkpoint_wrapper${call.args.checkpoint_wrapper_fn ?? call.args.$1 ? '' : ' (its default checkpoint_wrapper_fn)'}, which without checkpoint_fn runs torch.utils.checkpoint.checkpoint: the forward is recomputed during the backward pass, outside TE's FP8 autocast.`,
    fix: "The fix gives it checkpoint_wrapper_fn=partial(checkpoint_wrapper, checkpoint_fn=fp8_checkpoint, use_reentrant=False): the default wrapper's non-reentrant checkpoint, through the FP8 fallback's fp8_checkpoint (TE's checkpoint where FP8 runs, torch's elsewhere).",
  },
};

function checkpointFindings(ir: ModelIR, workspace: WorkspaceFacts): Finding[] {
  return checkpointCalls(ir, workspace).map((callIndex): Finding => {
    const call = ir.calls[callIndex];
    const text = CHECKPOINT_TEXT[checkpointForm(call)];
    return {
      code: 'PL701', span: call.span, severity: 'warning', callIndex,
      message: text.message,
      explanation: {
        facts: [
          text.fact(call),
          "TE's layers run in FP8 only inside that autocast; TE's own checkpoint (te.distributed.checkpoint) enters the forward's autocast and recipe again for the recompute, and with DelayedScaling reuses the forward's scales (TE 2.20.2, transformer_engine/pytorch/distributed.py).",
        ],
        consequence: 'The recompute runs the te.* GEMMs in BF16: slower than the FP8 forward, and the gradients are those of a forward other than the one the loss came from (Megatron-LM and TE fixed the same mistake in their own checkpointing).',
        fix: text.fix,
      },
    };
  });
}
