/**
 * The single source of truth for diagnostic codes: the server, the CLI, the docs test and the README table read this.
 * Codes are stable: tests, docs/rules/PLnnn.md and users' CI configurations refer to them.
 */
export type Severity = 'error' | 'warning' | 'information' | 'hint';

export interface RuleMeta {
  code: RuleCode;
  /** kebab-case name used in settings and SARIF. */
  rule: string;
  defaultSeverity: Severity;
  /** One line: when the rule fires. */
  summary: string;
}

export const RULES = {
  PL001: { rule: 'unused-noqa', defaultSeverity: 'hint', summary: 'a `# noqa: PLnnn` that silences no finding' },
  PL002: { rule: 'syntax-error', defaultSeverity: 'warning', summary: 'a syntax error: the analysis beyond it is partial' },
  PL101: { rule: 'linear-to-te', defaultSeverity: 'information', summary: 'nn.Linear (or a resolved alias/subclass) can become te.Linear' },
  PL102: { rule: 'layernorm-to-te', defaultSeverity: 'information', summary: 'nn.LayerNorm can become te.LayerNorm' },
  PL103: { rule: 'rmsnorm-to-te', defaultSeverity: 'information', summary: 'nn.RMSNorm or a custom RMSNorm can become te.RMSNorm' },
  PL104: { rule: 'fuse-norm-linear', defaultSeverity: 'hint', summary: 'a norm feeding only a Linear: te.LayerNormLinear' },
  PL105: { rule: 'fuse-norm-mlp', defaultSeverity: 'hint', summary: 'a norm and the MLP it feeds: one te.LayerNormMLP' },
  PL106: { rule: 'parallel-linear-to-te', defaultSeverity: 'information', summary: 'Column/RowParallelLinear can become te.Linear(parallel_mode=...)' },
  PL107: { rule: 'te-attention', defaultSeverity: 'information', summary: 'torch\'s scaled_dot_product_attention in a model that runs te.* layers: fp8_attention runs TE\'s fused attention' },
  PL110: { rule: 'fp8-shape', defaultSeverity: 'information', summary: 'known dims break the FP8 GEMM rule for training (in % 16, out % 16)' },
  PL201: { rule: 'fp8-lm-head', defaultSeverity: 'warning', summary: 'the lm-head is, or will be, run in FP8' },
  PL202: { rule: 'fp8-embedding', defaultSeverity: 'warning', summary: 'an embedding (or a head tied to it) is, or will be, quantized to FP8' },
  PL301: { rule: 'backward-in-autocast', defaultSeverity: 'warning', summary: '.backward() inside an FP8 autocast block' },
  PL302: { rule: 'te-without-autocast', defaultSeverity: 'information', summary: 'te.* layers but no FP8 autocast region in the analysed set: they run in BF16' },
  PL303: { rule: 'deprecated-te-api', defaultSeverity: 'hint', summary: 'fp8_autocast / fp8_model_init / fp8_recipe= / transformer_engine.pytorch.fp8 are deprecated on TE >= 2.9' },
  PL304: { rule: 'invalid-recipe', defaultSeverity: 'error', summary: 'Format.E5M2 alone, DelayedScaling(interval=...), or a recipe the target GPU lacks' },
  PL305: { rule: 'delayed-scaling-compile', defaultSeverity: 'warning', summary: 'DelayedScaling together with torch.compile (TE raises where the autocast is traced)' },
  PL306: { rule: 'compiled-without-fp8', defaultSeverity: 'information', summary: 'a training script compiles a model that trains in BF16: torchao FP8 (fp8_for_compile) is the one that compiles' },
  PL401: { rule: 'no-fp8-fallback', defaultSeverity: 'warning', summary: 'FP8 turned on with no capability check or an unguarded TE import: crashes on A100/RTX 4090' },
  PL402: { rule: 'unlogged-precision', defaultSeverity: 'hint', summary: 'the FP8/BF16 choice is never logged' },
  PL501: { rule: 'te-checkpoint-strict', defaultSeverity: 'information', summary: 'load_state_dict(strict=True) across TE and plain modules (_extra_state keys)' },
  PL502: { rule: 'low-precision-master-weights', defaultSeverity: 'warning', summary: 'whole model cast to FP16/BF16 before the optimizer: master weights lose precision' },
  PL601: { rule: 'ptq-protected-layer', defaultSeverity: 'warning', summary: 'a post-training quantization config reaches the lm-head or an embedding (found by role)' },
  PL602: { rule: 'ptq-no-calibration', defaultSeverity: 'warning', summary: 'a quantization config with static scales gets no calibration (no forward_loop, or one that never runs the model)' },
  PL603: { rule: 'ptq-calibration-size', defaultSeverity: 'information', summary: 'the calibration set is far outside the recommended 512-1024 samples' },
  PL604: { rule: 'ptq-e5m2', defaultSeverity: 'warning', summary: 'E5M2 chosen for weights or activations in inference quantization (E4M3 is the inference format)' },
  PL605: { rule: 'ptq-target-gpu', defaultSeverity: 'error', summary: 'a quantization format the target GPU family lacks (FP8 on Ampere, MXFP8/NVFP4 before Blackwell)' },
  PL606: { rule: 'ptq-state-dict-save', defaultSeverity: 'warning', summary: 'a ModelOpt-quantized model saved with torch.save(state_dict()), which drops the quantizer state' },
  PL701: { rule: 'checkpoint-te-recompute', defaultSeverity: 'warning', summary: 'torch\'s activation checkpoint around te.* layers: the recompute runs outside FP8 autocast, in BF16' },
  PL702: { rule: 'float8-all-gather-fsdp1', defaultSeverity: 'error', summary: 'torchao float8 all-gather (enable_fsdp_float8_all_gather=True) with FSDP1: it needs FSDP2 (fully_shard)' },
  PL703: { rule: 'float8-all-gather-precompute', defaultSeverity: 'information', summary: 'torchao float8 all-gather without precompute_float8_dynamic_scale_for_fsdp after the optimizer step: one all-reduce per weight' },
} as const satisfies Record<string, Omit<RuleMeta, 'code'>>;

export type RuleCode = keyof typeof RULES;
export const RULE_CODES = Object.keys(RULES) as RuleCode[];

export function ruleMeta(code: RuleCode): RuleMeta {
  return { code, ...RULES[code] };
}

export function isRuleCode(value: string): value is RuleCode {
  return Object.prototype.hasOwnProperty.call(RULES, value);
}

/** Public location of a rule's page; the diagnostic's codeDescription.href. */
export const DOCS_BASE = 'https://github.com/precision-lens/precision-lens/blob/main/docs/rules/';
export function ruleDocUrl(code: RuleCode): string {
  return `${DOCS_BASE}${code}.md`;
}

export const SOURCE = 'precision-lens';
