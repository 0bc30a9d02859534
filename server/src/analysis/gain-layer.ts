/**
 * The predicted FP8 gain of one layer, as the verdict's rules, fixes and hover read it (issue 22; docs/gain.md): the
 * measured H200 table (data/gemm-table-h200.json, from bench/tools/gemm_table.py via bench/tools/gain_data.py) read at
 * the layer's sizes and the step's token count. Pure; computed once per layer and token count (a WeakMap on the layer).
 *
 * Only a Linear whose in and out features the analysis knows is predicted; the rows are the tokens per step (the
 * `tokensPerStep` setting, else DEFAULT_TOKENS_PER_STEP, and the prediction says it assumed it). Per-sample layers
 * (timestep and class embedders, adaLN modulation) are kept in BF16 by the role check before any prediction.
 */
import { DEFAULT_TOKENS_PER_STEP, type PrecisionLensSettings } from '../../../common/settings';
import { backendStatus, describeRatio, layerGain, parseGainTable, predictStep, type GainTable, type LayerGain, type StepPrediction } from './gain';
import type { Layer, ModelIR } from './ir';
import tableJson from './data/gemm-table-h200.json';
import compiledAbJson from './data/compiled-ab-h200.json';
import attentionAbJson from './data/attention-ab-h200.json';

let table: GainTable | null | undefined;

/** The H200 table, parsed once (null if the shipped data failed to parse: no prediction then, never a crash). */
export function h200Table(): GainTable | null {
  if (table === undefined) {
    try {
      table = parseGainTable(tableJson);
    } catch {
      table = null;
    }
  }
  return table;
}

/** The table's backend for the recipe generated code uses: TE's DelayedScaling, or TE's current scaling. */
export function gainBackend(settings: PrecisionLensSettings): string {
  return settings.te.recipe === 'Float8CurrentScaling' ? 'te-current' : 'te-delayed';
}

/** torchao's float8 training recipes as the benchmark and the table name them (bench/plbench/backends.py). */
export const TORCHAO_BACKENDS = ['torchao-tensorwise', 'torchao-rowwise'] as const;

/**
 * The table backend that predicts a benchmark backend id (the sidebar's presets, bench/plbench/backends.py, an A/B
 * run's arms): `te` is the recipe the settings generate, `torchao` (and the A/B run's `torchao-original`) torchao's
 * default tensorwise recipe. undefined for ids the table has no rows for by design (bf16 is the baseline; ModelOpt,
 * inference).
 */
export function tableBackendOf(id: string, settings: PrecisionLensSettings): string | undefined {
  if (id === 'te' || id === 'converted') return gainBackend(settings);
  if (id === 'torchao' || id === 'torchao-original') return 'torchao-tensorwise';
  if (id === 'te-delayed' || id === 'te-current' || id === 'torch-fp8' || (TORCHAO_BACKENDS as readonly string[]).includes(id)) return id;
  return undefined;
}

export interface TokensUsed {
  tokens: number;
  /** No token count was given: the default was assumed. */
  assumed: boolean;
}

export function tokensOf(settings: PrecisionLensSettings): TokensUsed {
  return settings.tokensPerStep > 0 ? { tokens: settings.tokensPerStep, assumed: false } : { tokens: DEFAULT_TOKENS_PER_STEP, assumed: true };
}

/** `16k` for 16384, `8192` for 8192, `1.5M`... */
export function tokensText(n: number): string {
  if (n >= 1 << 20 && n % (1 << 20) === 0) return `${n / (1 << 20)}M`;
  if (n >= 10240 && n % 1024 === 0) return `${n / 1024}k`;
  return String(n);
}

export interface LayerPrediction {
  gain: LayerGain;
  tokens: TokensUsed;
  gpu: string;
  /** Predicted to run slower in FP8 than in BF16 (ratio below 1). */
  loses: boolean;
  /** `about 1.4x at 16k tokens` / `FP8 loses here: about 0.81x at 16k tokens`. */
  short: string;
  /** `0.81x at 16k tokens`. */
  at: string;
  /** The hover's lines: the numbers behind the prediction. */
  details: string[];
}

/** One answer per object and key, computed once (an undefined answer too: a failed prediction is not retried). */
function memoised<O extends object, V>(memo: WeakMap<O, Map<string, V | undefined>>, obj: O, key: string, compute: () => V | undefined): V | undefined {
  let byKey = memo.get(obj);
  if (!byKey) memo.set(obj, (byKey = new Map()));
  if (!byKey.has(key)) byKey.set(key, compute());
  return byKey.get(key);
}

/** The hover's sentence on the rows the prediction read. */
function tokensSentence(tokens: TokensUsed): string {
  return tokens.assumed
    ? `Tokens per step assumed: ${DEFAULT_TOKENS_PER_STEP} (8 x 2048); set precisionLens.tokensPerStep (tokens-per-step in [tool.precision-lens]) to your micro-batch x sequence.`
    : `Tokens per step: ${tokens.tokens} (precisionLens.tokensPerStep).`;
}

/** describeRatio, except that a ratio below 1 is never "about even": it loses. */
function ratioWords(ratio: number): string {
  return describeRatio(ratio, ratio < 1 ? 0 : 0.03);
}

const memo = new WeakMap<Layer, Map<string, LayerPrediction | undefined>>();

/** The predicted FP8/BF16 ratio of a Linear at the step's tokens, or undefined (not a Linear, sizes unknown, no table). */
export function predictLayer(layer: Layer, settings: PrecisionLensSettings): LayerPrediction | undefined {
  if (layer.kind !== 'linear' && layer.kind !== 'parallel-linear') return undefined;
  const k = layer.inFeatures?.value;
  const n = layer.outFeatures?.value;
  if (!k || !n) return undefined;
  const tokens = tokensOf(settings);
  const backend = gainBackend(settings);
  return memoised(memo, layer, `${backend}:${tokens.tokens}:${tokens.assumed}:${k}:${n}`, () => {
    const t = h200Table();
    if (!t) return undefined;
    try {
      const gain = layerGain(t, backend, { m: tokens.tokens, k, n });
      const gpu = t.gpu.name ?? 'the measured GPU';
      const at = `at ${tokensText(tokens.tokens)} tokens`;
      const details = [
        `Predicted FP8/BF16 speed of this Linear's training step (forward, dgrad and wgrad, casts included) on the ${gpu}: ${gain.ratio.toFixed(2)}x ${at} (${tokens.tokens} x ${k} x ${n}).`,
        `Measured BF16 ${gain.bf16Ms.toFixed(3)} ms, predicted FP8 ${gain.fp8Ms.toFixed(3)} ms (${backend}, table of ${t.date.slice(0, 10)}, TE ${t.versions.transformer_engine ?? '?'}).`,
        tokensSentence(tokens),
        ...gain.notes.map((s) => `Note: ${s}.`),
      ];
      return { gain, tokens, gpu, loses: gain.ratio < 1, short: `${ratioWords(gain.ratio)} ${at}`, at: `${gain.ratio.toFixed(2)}x ${at}`, details };
    } catch {
      return undefined;
    }
  });
}

// ---------------------------------------------------------------------------------------------------- the model step

export interface ModelPrediction {
  step: StepPrediction;
  tokens: TokensUsed;
  gpu: string;
  /** The block as read from the file: its Linears, width, activation and norms. */
  block: { linears: number; width: number; activation: 'gelu' | 'swiglu'; norms: string };
  /** How many blocks: from the config field that says so, else assumed (DEFAULT_BLOCKS). */
  blocks: { count: number; from?: string };
  /** The lm-head counted (BF16 in both), when the file has one of known sizes. */
  lmHead?: { width: number; vocab: number };
  /** Predicted to run slower in FP8 than in BF16. */
  loses: boolean;
  /** `about 1.3x per step at 16k tokens` / `FP8 loses here: about 0.62x per step at 16k tokens (launch-bound)`. */
  short: string;
  details: string[];
}

const modelMemo = new WeakMap<ModelIR, Map<string, ModelPrediction | undefined>>();

/** Config fields that give the number of blocks, as models name them. */
const BLOCK_COUNT_FIELDS = ['n_layer', 'n_layers', 'num_layers', 'num_hidden_layers', 'depth', 'n_blocks', 'num_blocks'];
/** Blocks assumed when no config field says: GPT-2 small's and BERT-base's 12. */
export const DEFAULT_BLOCKS = 12;

function blockCountOf(ir: ModelIR): { count: number; from?: string } {
  for (const field of BLOCK_COUNT_FIELDS) {
    for (const c of ir.classes) {
      const v = c.fieldDefaults[field];
      if (v !== undefined && /^\d+$/.test(v.trim()) && +v > 0 && +v <= 1000) return { count: +v, from: `${c.name}.${field}` };
    }
  }
  return { count: DEFAULT_BLOCKS };
}

function mostCommon(values: number[]): number {
  const count = new Map<number, number>();
  for (const v of values) count.set(v, (count.get(v) ?? 0) + 1);
  return [...count.entries()].sort((a, b) => b[1] - a[1] || b[0] - a[0])[0][0];
}

/**
 * The predicted FP8 step speedup of the model a file builds: the file's convertible Linears of known sizes taken as one
 * block (a model file defines each block layer once, the stack repeats it) at the block's width (the most common
 * in_features), repeated as many times as the config's layer-count field says (else DEFAULT_BLOCKS, said), with each
 * block's attention, norms, activation and residuals, the lm-head and its loss and AdamW in BF16, and the host's time
 * to issue it all (the step takes the larger of host and GPU).
 * undefined when the file has no convertible Linear of known sizes or the table cannot answer.
 */
export function predictModel(ir: ModelIR, settings: PrecisionLensSettings, backend = gainBackend(settings)): ModelPrediction | undefined {
  const tokens = tokensOf(settings);
  return memoised(modelMemo, ir, `${backend}:${tokens.tokens}:${tokens.assumed}`, () => {
    const t = h200Table();
    const linears = modelLinears(ir);
    if (!t || !linears.length) return undefined;
    const te = backend.startsWith('te-');
    try {
      const width = mostCommon(linears.map((l) => l.inFeatures!.value!));
      // SwiGLU: two expansions to the same hidden size from the width (gate and up), GELU otherwise.
      const expansions = linears.filter((l) => l.inFeatures!.value === width && l.outFeatures!.value! > width * 2);
      const hidden = expansions.map((l) => l.outFeatures!.value!);
      const activation: 'gelu' | 'swiglu' = hidden.some((h, i) => hidden.indexOf(h) !== i) ? 'swiglu' : 'gelu';
      const norms = ir.layers.filter((l) => l.kind === 'layernorm' || l.kind === 'rmsnorm');
      const rms = norms.some((l) => l.kind === 'rmsnorm');
      const writtenOut = norms.some((l) => l.kind === 'rmsnorm' && !!l.localClass);
      // The norms become TE's fused ones where the analysis converts every one of them (a written-out RMSNorm, and
      // torch's LayerNorm too: TE's is about 3x faster forward + backward at 16k tokens x 2048, the table's
      // te_layernorm_ms against norm_ms); a norm the analysis refuses keeps them all in BF16 in both arms.
      // torchao (and torch-fp8) change the Linears only: the norms stay BF16 in both arms.
      const convertNorms = te && norms.every((l) => l.convertible === true || l.isTe || l.viaFallback);
      const layers = linears.map((l) => ({ name: l.name || l.constructor, m: tokens.tokens, k: l.inFeatures!.value!, n: l.outFeatures!.value!, convert: true }));
      const blocks = blockCountOf(ir);
      const head = ir.layers.find((l) => l.role === 'lm_head' && l.inFeatures?.value && l.outFeatures?.value);
      const lmHead = head ? { width: head.inFeatures!.value!, vocab: head.outFeatures!.value! } : undefined;
      const blockParams = linears.reduce((a, l) => a + l.inFeatures!.value! * l.outFeatures!.value!, 0);
      const step = predictStep(t, backend, {
        layers: layers.map((l) => ({ ...l, count: blocks.count })), tokens: tokens.tokens, blocks: { count: blocks.count, width, activation },
        ...(lmHead ? { lmHead } : {}), params: blocks.count * blockParams + (lmHead ? 2 * lmHead.width * lmHead.vocab : 0),
        ...(norms.length ? { norms: { count: 2 * blocks.count + 1, kind: rms ? 'rmsnorm' as const : 'layernorm' as const, writtenOut, convert: convertNorms } } : {}),
      });
      const gpu = t.gpu.name ?? 'the measured GPU';
      const at = `per step at ${tokensText(tokens.tokens)} tokens`;
      const perBlock = (v: number): string => `${(v / blocks.count).toFixed(1)} ms`;
      const bound = step.hostBound.fp8 ? ' (launch-bound)' : '';
      const normsText = norms.length ? `${rms ? (writtenOut ? 'written-out RMSNorm' : 'RMSNorm') : 'LayerNorm'}${convertNorms ? ' -> TE' : ''}` : 'LayerNorm (assumed)';
      const ms = (v: number): string => `${v.toFixed(1)} ms`;
      const details = [
        `Predicted FP8 training step on the ${gpu} at ${tokens.tokens} tokens: ${step.speedup.toFixed(2)}x (BF16 ${ms(step.bf16StepMs)}, FP8 ${ms(step.fp8StepMs)}).`,
        `Read from this file: ${blocks.count} block(s) (${blocks.from ?? `assumed: no ${BLOCK_COUNT_FIELDS.slice(0, 3).join(' / ')} field`}), each ${linears.length} Linear(s) at width ${width} (GEMMs ${perBlock(step.gemmBf16Ms)} -> ${perBlock(step.gemmFp8Ms)}), ${activation === 'swiglu' ? 'SwiGLU' : 'GELU'} MLP, ${normsText}; attention, activations and residuals ${perBlock(step.rest.nonGemmMs)} in both.`,
        lmHead ? `The lm-head (${lmHead.width} -> ${lmHead.vocab}) and its loss stay in BF16: ${ms(step.rest.lmHeadMs + step.rest.lossMs)}; AdamW ${ms(step.rest.optimizerMs)}.` : 'No lm-head of known size in this file: none counted.',
        ...(te ? [] : [`Backend ${backend}${step.layers[0]?.compiled ? ', measured compiled against compiled BF16' : ''} (${t.backends[backend]?.library ?? 'no library'}).`]),
        ...(step.hostBf16Ms !== undefined ? [`Host time to issue it: BF16 ${ms(step.hostBf16Ms)}, FP8 ${ms(step.hostFp8Ms!)}${te ? " (TE's layers cost more to launch)" : ''}; the step takes the larger of host and GPU.`] : []),
        tokensSentence(tokens),
        ...[...new Set(step.notes.map((s) => s.replace(/^[^:]*: (outside the measured grid)/, '$1')))].slice(0, 3).map((s) => `Note: ${s}.`),
      ];
      return {
        step, tokens, gpu, block: { linears: linears.length, width, activation, norms: normsText }, blocks, ...(lmHead ? { lmHead } : {}), loses: step.speedup < 1,
        short: `${ratioWords(step.speedup)} ${at}${bound}`, details,
      };
    } catch {
      return undefined;
    }
  });
}

/** The Linears a model prediction counts: convertible, of known sizes, not the lm-head or an embedding. */
function modelLinears(ir: ModelIR): Layer[] {
  return ir.layers.filter((l) => (l.kind === 'linear' || l.kind === 'parallel-linear') && !l.isTe && l.convertible === true
    && l.inFeatures?.value && l.outFeatures?.value && l.role !== 'lm_head' && l.role !== 'embedding');
}

export type BackendModelPrediction =
  | { backend: string; measured: true; prediction: ModelPrediction }
  | { backend: string; measured: false; reason: string };

/**
 * The model's predicted step speedup with a benchmark backend (tableBackendOf): the prediction where the table
 * measured that backend, else "not measured" with the reason (never a number the table does not hold). undefined:
 * the id has no table rows by design, there is no table, or the file has no Linear to predict.
 */
export function predictModelFor(ir: ModelIR, settings: PrecisionLensSettings, id: string): BackendModelPrediction | undefined {
  const backend = tableBackendOf(id, settings);
  const t = h200Table();
  if (!backend || !t || !modelLinears(ir).length) return undefined;
  const status = backendStatus(t, backend);
  if (!status.measured) return { backend, measured: false, reason: status.reason };
  const prediction = predictModel(ir, settings, backend);
  return prediction ? { backend, measured: true, prediction } : undefined;
}

/** The model lens's line on torchao: each recipe's predicted step speedup (compiled), or "not measured" and why. */
export function torchaoLines(ir: ModelIR, settings: PrecisionLensSettings): string[] {
  const all = TORCHAO_BACKENDS.map((b) => predictModelFor(ir, settings, b)).filter((p): p is BackendModelPrediction => !!p);
  if (!all.length) return [];
  const head = 'torchao instead (convert_to_float8_training, compiled';
  const reasons = [...new Set(all.map((p) => (p.measured ? '' : p.reason)))];
  // Neither recipe measured, for one reason: said once.
  if (reasons.length === 1 && reasons[0]) return [`${head}): ${reasons[0]}.`];
  const recipe = (b: string): string => b.slice('torchao-'.length);
  const parts = all.map((p) => (p.measured
    ? `${recipe(p.backend)} ${p.prediction.step.speedup.toFixed(2)}x${p.prediction.step.hostBound.fp8 ? ' (launch-bound)' : ''}`
    : `${recipe(p.backend)} ${p.reason}`));
  return [`${head}, against compiled BF16): ${parts.join('; ')}.`];
}

interface CompiledAbRun {
  model: string;
  layers: number;
  width: number;
  /** [lowest, highest] over the runs measured. */
  te_vs_compiled_bf16: number[];
  torchao_vs_compiled_bf16: number[];
}

const COMPILED_AB = compiledAbJson as { gpu: string; versions: { transformer_engine: string; torch: string }; runs: CompiledAbRun[] };

/**
 * Where the project calls torch.compile, what the TE estimate (eager against eager BF16) does not say: te.* modules
 * graph-break and run eager between compiled graphs (TE 2.20 on torch 2.11), so a compiling script's baseline is
 * compiled BF16, and what the conversion measured against it on real code (data/compiled-ab-h200.json). One line for
 * the model lens's details; none when the project does not compile.
 */
export function compiledLines(compiles: boolean | undefined): string[] {
  if (!compiles) return [];
  return [`This project calls torch.compile: the estimate above is eager against eager BF16. Compiled, te.* modules run eager between graphs (TE ${COMPILED_AB.versions.transformer_engine}, torch ${COMPILED_AB.versions.torch.split('+')[0]}); ${compiledRunsText(false)}. For a model the script compiles, PL306 converts it with torchao (fp8_for_compile); Measure conversion compares both on your model.`];
}

interface AttentionAbRun {
  model: string;
  layers: number;
  width: number;
  /** Converted / original BF16, [lowest, highest] over the runs: attention through torch's SDPA, and through fp8_attention. */
  without: number[];
  with: number[];
}

const ATTENTION_AB = attentionAbJson as { gpu: string; versions: { transformer_engine: string; torch: string }; runs: AttentionAbRun[] };

/**
 * What the estimate does not count about attention, for a model converted to te.* (the estimate's backends): the block table
 * times torch's SDPA in both arms, while PL107's fp8_attention hands the call to TE's fused attention where FP8 runs,
 * which measured faster on real code (data/attention-ab-h200.json). One line when the file calls torch's attention or
 * already calls fp8_attention; none otherwise.
 */
export function attentionLines(ir: ModelIR): string[] {
  // fp8_attention imported from the project's fallback module (the inline block's is not told apart here).
  const viaFallback = ir.imports.some((b) => b.local === 'fp8_attention' && /(^|\.)fp8_attention$/.test(b.target));
  const torchCall = ir.calls.some((c) => c.kind === 'attention');
  if (!viaFallback && !torchCall) return [];
  const span = ([lo, hi]: number[]) => (Math.abs(hi - lo) < 0.005 ? `${lo.toFixed(2)}x` : `${lo.toFixed(2)}-${hi.toFixed(2)}x`);
  const runs = ATTENTION_AB.runs.map((r) => `${r.model} ${r.layers} x ${r.width} ${span(r.without)} -> ${span(r.with)}`).join(', ');
  const head = viaFallback
    ? "Attention runs through fp8_attention (TE's fused attention where FP8 runs), which this estimate counts as torch's BF16 SDPA"
    : "Attention is torch's scaled_dot_product_attention, counted the same in both arms; fp8_attention (PL107) hands it to TE's fused attention";
  return [`${head}: on the ${ATTENTION_AB.gpu} the converted step measured, without and with it (TE ${ATTENTION_AB.versions.transformer_engine}, eager): ${runs}.`];
}

/** What real code measured compiled, TE against torchao: "Measured against compiled BF16 on the NVIDIA H200: nanoGPT ...". */
export function compiledRunsText(capital = true): string {
  const span = ([lo, hi]: number[]) => (Math.abs(hi - lo) < 0.005 ? `${lo.toFixed(2)}x` : `${lo.toFixed(2)}-${hi.toFixed(2)}x`);
  const runs = COMPILED_AB.runs.map((r) => `${r.model} ${r.layers} x ${r.width}: TE ${span(r.te_vs_compiled_bf16)}, torchao ${span(r.torchao_vs_compiled_bf16)}`);
  return `${capital ? 'Measured' : 'measured'} against compiled BF16 on the ${COMPILED_AB.gpu}: ${runs.join('; ')}`;
}

export interface LosingVerdict {
  /** `0.88x at 16k tokens` (the layer) or `model 0.74x per step at 16k tokens` (the model it belongs to). */
  at: string;
  /** A sentence for the hover and the fix's title. */
  why: string;
}

/**
 * Whether converting this layer is predicted to slow training down: the model the file builds is predicted slower in
 * FP8 (launch-bound, small GEMMs), or this Linear alone is. undefined: predicted to gain, or no prediction.
 */
export function predictedLoss(ir: ModelIR, layer: Layer, settings: PrecisionLensSettings): LosingVerdict | undefined {
  const norm = layer.kind === 'layernorm' || layer.kind === 'rmsnorm';
  if (!norm && layer.kind !== 'linear' && layer.kind !== 'parallel-linear') return undefined;
  const model = predictModel(ir, settings);
  // A norm gains nothing by itself: in a model predicted to lose, it stays with its Linears in BF16.
  if (model?.loses && (norm || predictLayer(layer, settings))) {
    const at = `model ${model.step.speedup.toFixed(2)}x at ${tokensText(model.tokens.tokens)} tokens`;
    return { at, why: `The model this file builds is predicted to train slower in FP8 on the ${model.gpu} (${at}${model.step.hostBound.fp8 ? ', launch-bound: issuing TE\'s layers costs the host more than the GPU saves' : ''}).` };
  }
  const p = norm ? undefined : predictLayer(layer, settings);
  if (p?.loses) return { at: p.at, why: `This Linear is predicted to run slower in FP8 on the ${p.gpu} (${p.at}): its GEMMs are too small for FP8's casts to pay.` };
  return undefined;
}
