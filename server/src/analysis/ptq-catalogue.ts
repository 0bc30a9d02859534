/**
 * What the analysis knows about post-training quantization (PTQ) libraries, as data: the entry points, the named
 * configs with their formats and scale kinds, and the export/save paths. ptq.ts reads these tables; rules read the
 * resulting IR. Read from (public sources, the releases on PyPI on 2026-12-01):
 *  - nvidia-modelopt 0.47.0 (the wheel, installed and run on CPU here): the presets are YAML under
 *    modelopt_recipes/configs/ptq (presets/model/fp8.yaml = base_disable_all + w8a8_fp8_fp8 + default_disabled_quantizers)
 *    and `mtq.FP8_DEFAULT_CFG["quant_cfg"]` is a *list* of `{"quantizer_name", "enable", "cfg", "parent_class"}` entries
 *    applied in order; releases before it (config.py on GitHub, 2024-2025) used a dict `{wildcard: attributes}`. Both
 *    forms are read. Also modelopt/torch/quantization/config.py (`_default_disabled_quantizer_cfg`),
 *    modelopt/torch/quantization/model_quant.py (`quantize(model, config, forward_loop=None)`: "forward_loop ... is not
 *    required for weight-only quantization with the max algorithm"; `print_quant_summary`), modelopt/torch/export
 *    (`export_tensorrt_llm_checkpoint(model, decoder_type, dtype, export_dir, ...)`, `export_hf_checkpoint`),
 *    modelopt/torch/opt (`mto.save` / `mto.restore`, `mto.modelopt_state`), docs guides/_pytorch_quantization.rst.
 *  - torchao 0.18.0: torchao/quantization/quant_api.py (`quantize_(model, config, filter_fn=None, device=None)`, the
 *    default filter quantizes every nn.Linear), Float8DynamicActivationFloat8WeightConfig(activation_dtype=e4m3fn,
 *    weight_dtype=e4m3fn, granularity=None|PerTensor|PerRow), Float8WeightOnlyConfig(weight_dtype=e4m3fn),
 *    Float8StaticActivationFloat8WeightConfig(scale, ...).
 */
import type { TargetGpu } from '../../../common/settings';

export type PtqLibrary = 'modelopt' | 'torchao';
/** How a config gets its activation scales: from calibration data, from each tensor at run time, or none needed. */
export type ScaleKind = 'static' | 'dynamic' | 'weight-only';
export type Fp8Element = 'e4m3' | 'e5m2';

export interface PtqConfigEntry {
  library: PtqLibrary;
  /** The attribute / class name as the library exports it. */
  name: string;
  /** Short format label for messages (`FP8 per-tensor`, `MXFP8`, `INT8`). */
  format: string;
  /** Whether the format uses an FP8 element type anywhere (what the FP8 rules are about). */
  fp8: boolean;
  weights?: Fp8Element;
  activations?: Fp8Element;
  scales: ScaleKind;
  /** Quantizes the KV cache (ModelOpt *_KV_CFG), not the linear layers. */
  kvCache?: boolean;
  /** GPU families that run the format (the FP8 element types need SM >= 8.9; MX and NV FP4 formats need Blackwell). */
  gpus: TargetGpu[];
  /** What those families need, for messages. */
  needs: string;
  /** The same as a compute-capability test for a runtime guard: at least `min`, and within `major` when set. */
  sm?: SmNeed;
}

/** A compute capability requirement: `torch.cuda.get_device_capability() >= min` (and `[0] == major` when set). */
export interface SmNeed { min: [number, number]; major?: number }

const FP8_GPUS: TargetGpu[] = ['ada', 'hopper', 'blackwell'];
const SM89 = 'SM >= 8.9';
const SM89_NEED: SmNeed = { min: [8, 9] };
const NO_FP8_GPUS: TargetGpu[] = ['ampere', 'ada', 'hopper', 'blackwell'];

/**
 * ModelOpt's default disabled quantizers (0.47.0: configs/ptq/units/default_disabled_quantizers.yaml; before:
 * `_default_disabled_quantizer_cfg`): every named config merges them, so these wildcards are off unless the user's
 * config drops them. Matched with fnmatch against quantizer names (`lm_head.weight_quantizer`). 0.47.0 also disables
 * every quantizer whose parent is nn.Embedding, BatchNorm or LeakyReLU (by class, not name).
 */
export const MODELOPT_DEFAULT_DISABLED = [
  '*block_sparse_moe.gate*', '*linear_attn.conv1d*', '*self_attention.conv1d*', '*linear_attn.in_proj_a*',
  '*linear_attn.in_proj_b*', '*lm_head*', '*mixer.conv1d*', '*mlp.gate.*', '*mlp.shared_expert_gate.*', '*output_layer*',
  '*proj_out.*', '*router*', 'mtp.*', 'output.*', '*embed_vision*', '*vision_tower*', '*visual*', '*vision_model*',
  '*multi_modal_projector*',
];

/** Named configs (ModelOpt: `mtq.<NAME>`; torchao: config classes). */
export const PTQ_CONFIGS: readonly PtqConfigEntry[] = [
  { library: 'modelopt', name: 'FP8_DEFAULT_CFG', format: 'FP8 per-tensor', fp8: true, weights: 'e4m3', activations: 'e4m3', scales: 'static', gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'modelopt', name: 'FP8_PER_CHANNEL_PER_TOKEN_CFG', format: 'FP8 per-channel/per-token', fp8: true, weights: 'e4m3', activations: 'e4m3', scales: 'dynamic', gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'modelopt', name: 'FP8_2D_BLOCKWISE_WEIGHT_ONLY_CFG', format: 'FP8 blockwise weight-only', fp8: true, weights: 'e4m3', scales: 'weight-only', gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'modelopt', name: 'MXFP8_DEFAULT_CFG', format: 'MXFP8', fp8: true, weights: 'e4m3', activations: 'e4m3', scales: 'dynamic', gpus: ['blackwell'], needs: 'SM 10.x (Blackwell)', sm: { min: [10, 0], major: 10 } },
  { library: 'modelopt', name: 'W4A8_AWQ_BETA_CFG', format: 'INT4 weights + FP8 activations', fp8: true, activations: 'e4m3', scales: 'static', gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'modelopt', name: 'W4A8_MXFP4_FP8_CFG', format: 'MXFP4 weights + FP8 activations', fp8: true, activations: 'e4m3', scales: 'static', gpus: ['blackwell'], needs: 'SM 10.x (Blackwell)', sm: { min: [10, 0], major: 10 } },
  { library: 'modelopt', name: 'FP8_KV_CFG', format: 'FP8 KV cache', fp8: true, activations: 'e4m3', scales: 'static', kvCache: true, gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'modelopt', name: 'FP8_AFFINE_KV_CFG', format: 'FP8 KV cache (affine)', fp8: true, activations: 'e4m3', scales: 'static', kvCache: true, gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'modelopt', name: 'NVFP4_DEFAULT_CFG', format: 'NVFP4', fp8: false, scales: 'static', gpus: ['blackwell'], needs: 'SM >= 10.0 (Blackwell)', sm: { min: [10, 0] } },
  { library: 'modelopt', name: 'INT8_DEFAULT_CFG', format: 'INT8', fp8: false, scales: 'static', gpus: NO_FP8_GPUS, needs: 'any' },
  { library: 'modelopt', name: 'INT8_SMOOTHQUANT_CFG', format: 'INT8 SmoothQuant', fp8: false, scales: 'static', gpus: NO_FP8_GPUS, needs: 'any' },
  { library: 'modelopt', name: 'INT4_AWQ_CFG', format: 'INT4 AWQ', fp8: false, scales: 'static', gpus: NO_FP8_GPUS, needs: 'any' },
  { library: 'modelopt', name: 'INT4_BLOCKWISE_WEIGHT_ONLY_CFG', format: 'INT4 weight-only', fp8: false, scales: 'weight-only', gpus: NO_FP8_GPUS, needs: 'any' },
  { library: 'torchao', name: 'Float8DynamicActivationFloat8WeightConfig', format: 'FP8 dynamic activation + weight', fp8: true, weights: 'e4m3', activations: 'e4m3', scales: 'dynamic', gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'torchao', name: 'float8_dynamic_activation_float8_weight', format: 'FP8 dynamic activation + weight', fp8: true, weights: 'e4m3', activations: 'e4m3', scales: 'dynamic', gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'torchao', name: 'Float8WeightOnlyConfig', format: 'FP8 weight-only', fp8: true, weights: 'e4m3', scales: 'weight-only', gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'torchao', name: 'float8_weight_only', format: 'FP8 weight-only', fp8: true, weights: 'e4m3', scales: 'weight-only', gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'torchao', name: 'Float8StaticActivationFloat8WeightConfig', format: 'FP8 static activation + weight', fp8: true, weights: 'e4m3', activations: 'e4m3', scales: 'static', gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'torchao', name: 'float8_static_activation_float8_weight', format: 'FP8 static activation + weight', fp8: true, weights: 'e4m3', activations: 'e4m3', scales: 'static', gpus: FP8_GPUS, needs: SM89, sm: SM89_NEED },
  { library: 'torchao', name: 'Float8DynamicActivationFloat8SemiSparseWeightConfig', format: 'FP8 2:4 sparse', fp8: true, weights: 'e4m3', activations: 'e5m2', scales: 'dynamic', gpus: ['hopper', 'blackwell'], needs: 'SM >= 9.0 (Hopper)', sm: { min: [9, 0] } },
];

/** Keyword arguments of torchao config classes that pick the element type, and what they set. */
export const TORCHAO_DTYPE_ARGS: Record<string, 'weights' | 'activations'> = { weight_dtype: 'weights', activation_dtype: 'activations' };

export type PtqCallKind = 'quantize' | 'summary' | 'calibrate' | 'export-trtllm' | 'export-hf' | 'export-onnx' | 'save-modelopt' | 'restore-modelopt' | 'modelopt-state';

export interface PtqFunction {
  library: PtqLibrary | 'torch';
  /** Module prefixes the function is imported from (resolved name must start with one, then `.name`). */
  modules: string[];
  name: string;
  kind: PtqCallKind;
  /** Where the config, the calibration loop and the filter are (positional index, keyword name). */
  config?: [number, string];
  loop?: [number, string];
  filter?: [number, string];
}

export const PTQ_FUNCTIONS: readonly PtqFunction[] = [
  { library: 'modelopt', modules: ['modelopt.torch.quantization', 'modelopt.torch.quantization.model_quant'], name: 'quantize', kind: 'quantize', config: [1, 'config'], loop: [2, 'forward_loop'] },
  { library: 'modelopt', modules: ['modelopt.torch.quantization', 'modelopt.torch.quantization.model_quant'], name: 'calibrate', kind: 'calibrate', loop: [2, 'forward_loop'] },
  { library: 'modelopt', modules: ['modelopt.torch.quantization', 'modelopt.torch.quantization.model_quant'], name: 'print_quant_summary', kind: 'summary' },
  { library: 'torchao', modules: ['torchao.quantization', 'torchao.quantization.quant_api', 'torchao'], name: 'quantize_', kind: 'quantize', config: [1, 'config'], filter: [2, 'filter_fn'] },
  { library: 'modelopt', modules: ['modelopt.torch.export', 'modelopt.torch.export.model_config_export'], name: 'export_tensorrt_llm_checkpoint', kind: 'export-trtllm' },
  { library: 'modelopt', modules: ['modelopt.torch.export', 'modelopt.torch.export.unified_export_hf'], name: 'export_hf_checkpoint', kind: 'export-hf' },
  { library: 'modelopt', modules: ['modelopt.torch.opt', 'modelopt.torch.opt.conversion'], name: 'save', kind: 'save-modelopt' },
  { library: 'modelopt', modules: ['modelopt.torch.opt', 'modelopt.torch.opt.conversion'], name: 'restore', kind: 'restore-modelopt' },
  { library: 'modelopt', modules: ['modelopt.torch.opt', 'modelopt.torch.opt.conversion'], name: 'modelopt_state', kind: 'modelopt-state' },
  { library: 'torch', modules: ['torch.onnx'], name: 'export', kind: 'export-onnx' },
];

/** Argument names that give a calibration set's size in samples (ModelOpt's examples: calib_size, num_calib_samples). */
export const CALIB_SIZE_NAMES = /^(calib_size|calib_samples|num_calib_samples|calib_num_samples|num_calibration_samples|calibration_samples|n_calib|num_samples|n_samples|max_calib_samples)$/i;

/**
 * Calibration-set size guidance (ModelOpt: "typically 128-512 samples"; the 512-1024 sweet spot). Below
 * `tooFew` the amax statistics miss outliers; above `tooMany` calibration costs time and gains nothing.
 */
export const CALIB_SIZE = { tooFew: 128, sweetSpot: [512, 1024] as const, tooMany: 10000 };

/**
 * The suffixes of ModelOpt's quantizer module names (QuantLinear: weight_quantizer, input_quantizer,
 * output_quantizer; attention: k_bmm_quantizer, v_bmm_quantizer; modelopt/torch/quantization/nn, 0.47).
 */
export const MODELOPT_QUANTIZER_SUFFIXES = ['weight_quantizer', 'input_quantizer', 'output_quantizer', 'k_bmm_quantizer', 'v_bmm_quantizer'] as const;

/**
 * The ModelOpt wildcard that disables one module's quantizers, from its attribute name: `*lm_head*` (ModelOpt's own
 * idiom), or `*output.*` where the bare name is part of a quantizer suffix (`*output*` would also switch off every
 * layer's output_quantizer).
 */
export function modeloptWildcard(attr: string): string {
  return MODELOPT_QUANTIZER_SUFFIXES.some((s) => s.includes(attr)) ? `*${attr}.*` : `*${attr}*`;
}

export function configEntry(library: PtqLibrary, name: string): PtqConfigEntry | undefined {
  return PTQ_CONFIGS.find((c) => c.library === library && c.name === name);
}

/** The catalogue function a resolved dotted name stands for (`modelopt.torch.quantization.quantize`). */
export function ptqFunction(resolved: string): PtqFunction | undefined {
  const dot = resolved.lastIndexOf('.');
  if (dot < 0) return undefined;
  const mod = resolved.slice(0, dot);
  const name = resolved.slice(dot + 1);
  return PTQ_FUNCTIONS.find((f) => f.name === name && f.modules.includes(mod));
}
