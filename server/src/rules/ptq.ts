/**
 * PL6xx: post-training quantization (PTQ) for inference, read from ir.ptq (analysis/ptq.ts).
 *  PL601 an lm-head or embedding (by role) reached by the quantization config;
 *  PL602 a config with static scales and no calibration (no forward_loop, or one that never runs the model);
 *  PL603 a calibration set far outside the recommended size;
 *  PL604 E5M2 for weights or activations (E4M3 is the inference format);
 *  PL605 an FP8 (or MX/NV FP4) format the target GPU family lacks;
 *  PL606 a ModelOpt-quantized model saved with torch.save(state_dict), which drops the quantizer state.
 * Each rule is a list of small named checks over one quantize call (or save); messages are one sentence each.
 */
import type { TargetGpu } from '../../../common/settings';
import type { Layer, ModelIR, PtqCalibrationSize, PtqQuantizeCall } from '../analysis/ir';
import { CALIB_SIZE, modeloptWildcard } from '../analysis/ptq-catalogue';
import { GPU_NAMES } from './autocast';
import { layerLabel } from './format';
import type { Finding, RuleContext, RuleModule } from './types';

type Check = (call: PtqQuantizeCall, ptqIndex: number, ctx: RuleContext) => Finding[];

const ROLE_WORD: Record<string, string> = { lm_head: 'the lm-head', embedding: 'an embedding' };
const HEAD_COST = 'The lm-head is the most precision-sensitive layer: in PLaMo-100B an FP8 head raised the z-loss and hurt downstream scores.';

function sizeFact(size: PtqCalibrationSize): string {
  const per = size.unit === 'batches' ? (size.batchSize ? ` of ${size.batchSize} samples each` : ' of unknown size') : '';
  return `The loop is bounded by ${size.text}: ${size.count} ${size.unit}${per}.`;
}

/** Which name to disable in a ModelOpt config: the module's last attribute as a wildcard (`*decoder*`). */
export function wildcardFor(layer: Layer): string {
  const attr = layer.attr ?? (layer.path ?? layer.name).replace(/^self\./, '').split('.').pop() ?? 'lm_head';
  return modeloptWildcard(attr.replace(/\[\*\]$/, ''));
}

const protectedLayer: Check = (call, ptqIndex, { ir }) => {
  const out: Finding[] = [];
  for (const hit of call.protectedHits) {
    const layer = ir.layers[hit.layerIndex];
    const what = `${layerLabel(layer)} (${ROLE_WORD[layer.role] ?? layer.role})`;
    const action = call.library === 'modelopt'
      ? `add {"quantizer_name": "${wildcardFor(layer)}", "enable": False} to quant_cfg`
      : layer.role === 'embedding' ? 'leave embeddings out of filter_fn' : 'pass a filter_fn that skips it';
    out.push({
      code: 'PL601', span: layer.span, severity: 'warning', layerIndex: hit.layerIndex, ptqIndex, message: `${call.callee} quantizes ${what} to FP8: ${action}`,
      related: [{ span: call.span, message: `${call.callee} with ${call.config?.base ?? call.config?.text ?? 'its config'}` }],
      explanation: {
        facts: [`Its role: ${layer.roleReasons.join('; ') || layer.role}.`, `Reached because ${hit.why}.`],
        consequence: HEAD_COST,
        fix: call.library === 'torchao' ? 'The quick fix adds a filter_fn that leaves the lm-heads found by role out.' : 'ModelOpt matches wildcards against quantizer names such as decoder.weight_quantizer.',
      },
    });
    if (layer.tied && layer.role === 'lm_head') {
      out.push({
        code: 'PL601', span: call.span, severity: 'warning', layerIndex: hit.layerIndex, ptqIndex,
        message: `${layerLabel(layer)} shares its weight with the embedding, so ${call.callee} quantizes the token table too: exclude the head`,
        related: [{ span: layer.span, message: `${layerLabel(layer)}: the lm-head, tied to the embedding` }],
        explanation: { facts: ['A tied head and the embedding are one tensor: quantizing the head quantizes every token vector.'], consequence: 'An 8-bit table blurs the distinctions between token vectors.' },
      });
    }
  }
  // torchao without a filter, on a model whose head is in another file: every nn.Linear, the output layer included.
  const headsHere = ir.layers.some((l) => l.role === 'lm_head');
  if (call.library === 'torchao' && !call.filter && !headsHere && call.config?.fp8) {
    out.push({
      code: 'PL601', span: call.span, severity: 'warning', ptqIndex, message: 'quantize_ without filter_fn makes every nn.Linear FP8, the lm-head included: pass a filter_fn that skips it',
      explanation: { facts: ["torchao's default filter takes every nn.Linear; the model's lm-head is defined in another file."], consequence: HEAD_COST },
    });
  }
  return out;
};

const noCalibration: Check = (call, ptqIndex) => {
  const cfg = call.config;
  if (call.library !== 'modelopt' || !cfg || cfg.scales !== 'static') return [];
  const name = cfg.base ?? 'this config';
  if (!call.forwardLoop) {
    return [{
      code: 'PL602', span: call.span, severity: 'warning', ptqIndex, message: `${name} needs calibrated activation scales but no forward_loop is passed: add one over 512 validation samples`,
      explanation: { facts: ['ModelOpt computes each static scale from the amax the forward_loop shows it; without data the input quantizers stay uncalibrated.'], consequence: 'The FP8 model clips or underflows activations.', fix: 'The source action "Quantize to FP8 after training (with calibration)" writes a calibration loop over the validation loader.' },
    }];
  }
  if (call.forwardLoop.runsModel === false) {
    return [{
      code: 'PL602', span: call.forwardLoop.fnSpan ?? call.forwardLoop.span, severity: 'warning', ptqIndex,
      message: `${call.forwardLoop.fnName ?? 'The forward_loop'} never runs the model it gets, so ${name} calibrates nothing: call model(batch) in it`,
      related: [{ span: call.span, message: `${call.callee} passes it as forward_loop` }],
      explanation: { facts: ['The loop neither calls the model it is handed nor passes it on.'], consequence: 'The static activation scales keep no calibrated amax.' },
    }];
  }
  return [];
};

const calibrationSize: Check = (call, ptqIndex) => {
  const size = call.forwardLoop?.size;
  if (!size || call.config?.scales !== 'static') return [];
  const samples = size.unit === 'samples' ? size.count : size.batchSize ? size.count * size.batchSize : undefined;
  const [lo, hi] = CALIB_SIZE.sweetSpot;
  const what = samples !== undefined ? `${samples} samples` : `${size.count} batches`;
  // Batches of unknown size are at least one sample each: only "too many" can be told.
  if (samples !== undefined && samples < CALIB_SIZE.tooFew) {
    return [{
      code: 'PL603', span: size.span, severity: 'information', ptqIndex, message: `Calibrating on ${what} misses activation outliers: use ${lo}-${hi} samples`,
      related: [{ span: call.span, message: `${call.callee} calibrates with this loop` }],
      explanation: { facts: [sizeFact(size)], consequence: 'Scales set from too few samples clip the outliers seen in production.' },
    }];
  }
  if ((samples ?? size.count) > CALIB_SIZE.tooMany) {
    return [{
      code: 'PL603', span: size.span, severity: 'information', ptqIndex, message: `Calibrating on ${what} costs time and gains nothing past ~${hi}: use ${lo}-${hi} samples`,
      related: [{ span: call.span, message: `${call.callee} calibrates with this loop` }],
      explanation: { facts: [sizeFact(size)], consequence: 'Past about a thousand samples the max statistics no longer change, only the wait grows.' },
    }];
  }
  return [];
};

const e5m2: Check = (call, ptqIndex) => {
  const cfg = call.config;
  if (!cfg || !(cfg.weights === 'e5m2' || cfg.activations === 'e5m2') || cfg.base === 'Float8DynamicActivationFloat8SemiSparseWeightConfig') return [];
  const which = cfg.weights === 'e5m2' && cfg.activations === 'e5m2' ? 'weights and activations' : cfg.weights === 'e5m2' ? 'weights' : 'activations';
  const fix = call.library === 'modelopt' ? 'num_bits=(4, 3)' : 'torch.float8_e4m3fn';
  return [{
    code: 'PL604', span: cfg.e5m2At ?? cfg.span, severity: 'warning', ptqIndex, message: `E5M2 for ${which} keeps 2 mantissa bits, too coarse for inference: use E4M3 (${fix})`,
    related: [{ span: call.span, message: `${call.callee} uses this config` }],
    explanation: { facts: ['E4M3 (3 mantissa bits, range 448) is what TensorRT, TensorRT-LLM, vLLM and torchao deploy for weights and activations.'], consequence: 'E5M2 doubles the rounding error; its range only helps gradients.' },
  }];
};

/** What to use on a target GPU family that lacks the config's format (PL605's message and its fix's BF16 branch). */
export function insteadOn(target: TargetGpu): string {
  return target === 'ampere' ? 'use INT8 or BF16' : 'use an FP8 per-tensor config';
}

const gpuLacksFormat: Check = (call, ptqIndex, ctx) => {
  const cfg = call.config;
  const target: TargetGpu = ctx.settings.targetGpu;
  if (!cfg || target === 'any' || !cfg.gpus || cfg.gpus.includes(target)) return [];
  // Guarded by the GPU's compute capability (`if torch.cuda.get_device_capability() >= (8, 9):`): chosen at run time.
  if (call.capabilityGuard) return [];
  const fallback = `${insteadOn(target)} there`;
  return [{
    code: 'PL605', span: cfg.span, severity: 'error', ptqIndex, message: `${cfg.format ?? cfg.base ?? 'This format'} needs ${cfg.needs}, which ${GPU_NAMES[target]} lacks: ${fallback}`,
    explanation: { facts: [`The target GPU is ${GPU_NAMES[target]} (precisionLens.targetGpu, --target-gpu).`], consequence: 'The quantized model cannot run its FP8 kernels there: torchao asserts, TensorRT builds no FP8 engine.' },
  }];
};

const CALL_CHECKS: readonly Check[] = [protectedLayer, noCalibration, calibrationSize, e5m2, gpuLacksFormat];

/** PL606: torch.save(model.state_dict()) of a ModelOpt-quantized model, with no ModelOpt save or export beside it. */
function stateDictSaves(ir: ModelIR): Finding[] {
  const mo = ir.ptq.quantizeCalls.filter((c) => c.library === 'modelopt');
  if (!mo.length) return [];
  const keepsState = ir.ptq.saves.some((s) => s.kind === 'save-modelopt' || s.kind === 'modelopt-state' || s.kind === 'export-trtllm' || s.kind === 'export-hf');
  if (keepsState) return [];
  const models = new Set(mo.map((c) => c.model));
  return ir.ptq.saves.filter((s) => s.kind === 'torch-save-state-dict' && (!s.receiver || models.has(s.receiver) || models.size === 1)).map((s) => ({
    code: 'PL606' as const, span: s.span, severity: 'warning' as const,
    message: `state_dict() drops the ModelOpt quantizer state: save with mto.save(${s.receiver ?? 'model'}, path) or export_tensorrt_llm_checkpoint`,
    related: mo.map((c) => ({ span: c.span, message: `${c.callee} inserts the quantizers here` })),
    explanation: { facts: ['A state_dict holds tensors only: the quantizer modules, their formats and wildcards are not in it.'], consequence: 'A fresh model cannot load it, and the calibrated scales are lost.', fix: 'mto.restore(model, path) rebuilds the quantized model from what mto.save wrote.' },
  }));
}

export const ptqRules: RuleModule = {
  codes: ['PL601', 'PL602', 'PL603', 'PL604', 'PL605', 'PL606'],
  check(ctx: RuleContext): Finding[] {
    const findings: Finding[] = [];
    ctx.ir.ptq.quantizeCalls.forEach((call, i) => { for (const check of CALL_CHECKS) findings.push(...check(call, i, ctx)); });
    findings.push(...stateDictSaves(ctx.ir));
    return findings;
  },
};
