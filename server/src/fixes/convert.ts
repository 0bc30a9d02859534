/**
 * PL101 / PL102 / PL103 / PL106: convert a torch.nn layer to its te.* twin (or to the fallback wrapper's factory when
 * the file has the wrapper), and "convert all eligible layers" in a class or the file. Only the callee and the
 * specific arguments that differ are edited; comments and layout stay.
 */
import { paramAt, teMapping, teRenames } from '../analysis/catalogue';
import type { Layer, ModelIR } from '../analysis/ir';
import { wrapperRanges } from '../analysis/known';
import { predictedLoss } from '../analysis/gain-layer';
import { classRefsOf, extendClassTests, type ClassRef } from './class-tests';
import { applyEdits, removeArgs, renameArg, replace, appendArgs, type TextEdit } from './edits';
import { closeParen } from '../analysis/calls';
import { convertsThroughFallback } from './fallback';
import { bringInFallback } from './wrapper';
import { ATTENTION_FACTORY, CLASS_PARAM_FACTORY, CONV1D_FACTORY, FUSE_FACTORY, FUSED_CLASS_NAME, KEEP_CLASS_FACTORY, LINEAR_LIKE_FACTORY, PARALLEL_FACTORY, TE_CLASS_NAME } from './fallback-source';
import { findFusions, fusedLinears, type Fusion } from '../analysis/fusion';
import { fusionEdits, type FusionEdits } from './fuse';
import { attentionCalls } from '../rules/attention';
import { fusionCode } from '../rules/fusion';
import { attentionRename } from './attention';
import { addImport, teAccess } from './imports';
import { planParallel } from './parallel';
import { constructorSite, splitCallArgs, type CallArg, type CallArgs } from './source';
import { splatKeys } from './splat';

export { constructorSite } from './source';
import type { Fix, FixContext } from './types';

/** Factory per layer kind; they take te.* argument names (params_dtype) and map them back for torch.nn. */
export const FACTORY: Partial<Record<Layer['kind'], string>> = {
  linear: 'fp8_linear',
  'parallel-linear': 'fp8_linear',
  layernorm: 'fp8_layernorm',
  rmsnorm: 'fp8_rmsnorm',
};

/** Why a layer is not converted: a short label for summaries and a sentence for refusals. */
export interface SkipReason {
  label: string;
  sentence: string;
}

/** Keyword arguments te.Linear accepts (TE 1.x-2.x); anything else on a parallel linear has no te.Linear twin. */
const TE_LINEAR_KWARGS = new Set([
  'in_features', 'out_features', 'bias', 'params_dtype', 'device', 'init_method', 'parallel_mode', 'tp_group', 'tp_size',
  'sequence_parallel', 'return_bias', 'get_rng_state_tracker', 'rng_tracker_name', 'fuse_wgrad_accumulation',
  'skip_weight_param_allocation', 'name',
]);
/** te.Linear spellings for a class the catalogue does not list (a local subclass or factory): torch.nn's dtype. */
const LINEAR_RENAMES: Record<string, string> = { dtype: 'params_dtype' };
/** Names custom norm classes give their size argument. */
const NORM_SIZE_NAMES = new Set(['normalized_shape', 'hidden_size', 'dim', 'd_model', 'n_embd', 'size', 'features', 'num_features']);
const NORM_KWARGS = new Set(['eps', 'device', 'dtype', 'params_dtype', 'zero_centered_gamma', 'sequence_parallel']);

/** The te.* class for a layer kind. */
function teClass(layer: Layer): string | undefined {
  switch (layer.kind) {
    case 'linear':
    case 'parallel-linear':
      return 'Linear';
    case 'layernorm':
      return 'LayerNorm';
    case 'rmsnorm':
      return 'RMSNorm';
    default:
      return undefined;
  }
}

/** Why this layer must not be converted, or undefined when it may be. Mirrors the rules' protected roles. */
export function skipReason(layer: Layer): SkipReason | undefined {
  if (layer.isTe) return { label: 'already TE', sentence: 'it is already a Transformer Engine module.' };
  if (layer.role === 'lm_head') return { label: 'lm-head', sentence: 'it is the lm-head, the most precision-sensitive layer: it stays in BF16.' };
  if (layer.role === 'embedding' || layer.kind === 'embedding') return { label: 'embedding', sentence: 'it is an embedding: Transformer Engine has no FP8 embedding.' };
  if (layer.tied) return { label: 'tied', sentence: 'its weight is tied to the embedding, so converting it would quantize the embedding too.' };
  if (layer.role === 'classifier' || layer.role === 'router') {
    return { label: layer.role, sentence: `it is a ${layer.role === 'router' ? 'mixture-of-experts router' : 'classifier head'}: a small GEMM that gains nothing from FP8 and is precision-sensitive, so it stays in BF16.` };
  }
  // Other protected roles (a LoRA or bottleneck adapter, the output projection to pixels): the role check says why.
  if (layer.facets?.role.state === 'fails') return { label: 'kept in BF16', sentence: layer.facets.role.reason };
  if (!teClass(layer)) return { label: 'no te.* twin', sentence: `${layer.constructor} has no te.* equivalent.` };
  if (layer.shapeOk === false) return { label: 'shape', sentence: `its dimensions break the FP8 shape rule (in % 16, out % 16). ${layer.reasons.join(' ')}`.trim() };
  if (layer.convertible === 'uncertain') return { label: 'uncertain', sentence: `whether it can run in FP8 depends on runtime values. ${layer.reasons.join(' ')}`.trim() };
  if (layer.convertible === false) return { label: 'not exact', sentence: `Transformer Engine cannot represent it exactly. ${layer.reasons.join(' ')}`.trim() };
  return undefined;
}

/** The argument edits that turn this constructor's arguments into te.* (or factory) arguments. */
interface ArgPlan {
  edits: TextEdit[];
  /** Arguments dropped that changed nothing (elementwise_affine=True) do not count; these do. */
  droppedMeaningful: string[];
  refusal?: string;
  /** A few words for convert-all's summary ("bias set at run time", "*args"). */
  label?: string;
  /** An import the new arguments need (the model-parallel getters). */
  importLine?: string;
  /** The source call's arguments. */
  call?: CallArgs;
  /** Refused for *args/**kwargs whose names the file does not show (the fallback can check them when the layer is built). */
  uncheckedSplat?: boolean;
}

function isTrue(value: string): boolean {
  return value.trim() === 'True';
}

function planArgs(ctx: FixContext, layer: Layer, viaFactory: boolean): ArgPlan {
  const call = splitCallArgs(ctx.text, constructorSite(ctx.text, layer).open);
  if (!call) return { edits: [], droppedMeaningful: [], refusal: 'the argument list could not be read.', label: 'unreadable call' };
  const edits: TextEdit[] = [];
  const drop: CallArg[] = [];
  const droppedMeaningful: string[] = [];
  const present = new Set<string>();
  const positional = call.args.filter((a) => !a.name && !/^\*/.test(a.value.trim()));
  const splats = call.args.filter((a) => /^\*/.test(a.value) && !a.name);
  const splatRefusal = { edits, droppedMeaningful, refusal: 'it passes *args/**kwargs, whose names cannot be checked.', label: '*args/**kwargs', uncheckedSplat: true, call };
  if (splats.length && (layer.kind !== 'linear' && layer.kind !== 'parallel-linear')) return splatRefusal;
  const named = splats.length ? namedSplats(ctx.text, layer, splats) : [];
  if (!named) return splatRefusal;

  const parallel = layer.kind === 'parallel-linear' ? planParallel(ctx.ir, layer, call) : undefined;
  if (parallel?.refusal) return { edits, droppedMeaningful, refusal: parallel.refusal, label: 'tensor-parallel options' };
  if (layer.kind === 'linear' || layer.kind === 'parallel-linear') {
    if (positional.length > 3) return { edits, droppedMeaningful, refusal: 'it passes more than three positional arguments, which te.Linear does not take in that order.', label: 'positional arguments' };
    // nn.Linear(in, out, bias): te.Linear's third parameter is sequence_parallel, so bias must be named.
    if (positional.length === 3) {
      const third = positional[2];
      if (call.args.some((a) => a.name === 'bias')) return { edits, droppedMeaningful, refusal: 'it passes bias twice.', label: 'bias twice' };
      edits.push(replace(third.start, third.end, `bias=${third.value.trim()}`));
      present.add('bias');
    }
    // The class's own spellings (Megatron's input_size / skip_bias_add) come from the catalogue.
    const renames = { ...LINEAR_RENAMES, ...teRenames(layer.resolved) };
    for (const { arg, keys } of named) {
      const targets = keys.map((k) => renames[k] ?? k);
      const bad = keys.filter((_, i) => !TE_LINEAR_KWARGS.has(targets[i]) || present.has(targets[i]) || parallel?.handled.has(keys[i]));
      if (bad.length) return { edits, droppedMeaningful, refusal: `it passes ${arg.value.trim()} with ${bad.join(', ')}, which te.Linear does not take.`, label: '*args/**kwargs' };
      const dict = arg.value.trim().slice(2);
      edits.push(replace(arg.start, arg.end, keys.map((k, i) => `${targets[i]}=${dict}["${k}"]`).join(', ')));
      for (const t of targets) present.add(t);
    }
    for (const arg of call.args) {
      if (!arg.name) continue;
      if (parallel?.handled.has(arg.name)) { drop.push(arg); continue; }
      const target = renames[arg.name] ?? arg.name;
      if (target !== arg.name) edits.push(renameArg(arg, target));
      if (!TE_LINEAR_KWARGS.has(target)) { drop.push(arg); droppedMeaningful.push(arg.name); continue; }
      present.add(target);
    }
  } else {
    const norm = planNormArgs(ctx, layer, call, viaFactory, { edits, drop, droppedMeaningful, present });
    if (norm) return { edits, droppedMeaningful, ...norm };
  }

  edits.push(...removeArgs(ctx.text, call, drop));
  const extra: string[] = [];
  const wantsZeroCentered = layer.zeroCenteredGamma || layer.teArgs?.zero_centered_gamma?.trim() === 'True';
  if ((layer.kind === 'rmsnorm' || layer.kind === 'layernorm') && !present.has('eps') && positional.length < 2) {
    // A custom or library norm class brings its own eps default (often 1e-6); TE's is 1e-5, so carry the class's over.
    const eps = localEpsDefault(ctx, layer) ?? teMapping(layer.resolved)?.eps;
    if (eps) extra.push(`eps=${eps}`);
  }
  if ((layer.kind === 'rmsnorm' || layer.kind === 'layernorm') && wantsZeroCentered && !present.has('zero_centered_gamma')) extra.push('zero_centered_gamma=True');
  if (layer.kind === 'parallel-linear' && !present.has('parallel_mode')) {
    const mode = layer.teArgs?.parallel_mode ?? (/Row/.test(layer.constructor) ? '"row"' : /Column/.test(layer.constructor) ? '"column"' : undefined);
    if (!mode) return { edits, droppedMeaningful, refusal: 'whether it is column- or row-parallel is unknown.', label: 'parallel layout unknown' };
    extra.push(`parallel_mode=${mode}`);
  }
  if (parallel) extra.push(...parallel.extra);
  if (layer.convertsWhen && (layer.kind === 'layernorm' || layer.kind === 'rmsnorm')) extra.push(`when=${layer.convertsWhen}`);
  // A norm that names its weight otherwise (`scale`): the factory keeps that checkpoint key on the te.* norm.
  if (layer.weightName && (layer.kind === 'layernorm' || layer.kind === 'rmsnorm')) extra.push(`weight_name="${layer.weightName}"`);
  // Keep the trailing-comma-free insertion after the last kept argument.
  const kept = { ...call, args: call.args.filter((a) => !drop.includes(a)) };
  const add = appendArgs(ctx.text, kept, extra);
  if (add) edits.push(add);
  return { edits, droppedMeaningful, call, ...(parallel?.importLine ? { importLine: parallel.importLine } : {}) };
}

/** Each `**name` argument with the keys its dict literal binds (see splat.ts), or undefined when one is not such a dict. */
function namedSplats(text: string, layer: Layer, splats: CallArg[]): { arg: CallArg; keys: string[] }[] | undefined {
  const out: { arg: CallArg; keys: string[] }[] = [];
  for (const arg of splats) {
    const m = /^\*\*\s*([A-Za-z_]\w*)$/.exec(arg.value.trim());
    const keys = m ? splatKeys(text, layer.span.startOffset, m[1]) : undefined;
    if (!keys) return undefined;
    out.push({ arg, keys });
  }
  return out;
}

/** Where planArgs' edits and findings go. */
interface ArgSink {
  edits: TextEdit[];
  drop: CallArg[];
  droppedMeaningful: string[];
  present: Set<string>;
}

/** Norm arguments: te.LayerNorm / te.RMSNorm(normalized_shape, eps, ...); the refusal when they cannot be kept. */
function planNormArgs(ctx: FixContext, layer: Layer, call: CallArgs, viaFactory: boolean, sink: ArgSink): { refusal: string; label: string } | undefined {
  const { edits, drop, droppedMeaningful, present } = sink;
  const positional = call.args.filter((a) => !a.name);
  const legacy = ctx.api === 'legacy';
  const mapping = teMapping(layer.resolved);
  // Norms: te.LayerNorm / te.RMSNorm(normalized_shape, eps, ...). TE >= 2.9 calls the size `normalized_shape` and
  // the dtype `dtype`; older TE `hidden_size` and `params_dtype`. The factory always takes the TE >= 2.9 size name
  // and params_dtype (it maps them).
  const sizeName = legacy && !viaFactory ? 'hidden_size' : 'normalized_shape';
  const dtypeName = legacy || viaFactory ? 'params_dtype' : 'dtype';
  // The class's second parameter is not eps (xformers' RMSNorm(dim, include_weight, eps)): te.* would read it as eps.
  const second = paramAt(layer.resolved, 1);
  if (positional.length > 1 && second && second !== 'eps') {
    return { refusal: `it passes ${positional[1].value.trim()} as ${second} by position, where te.${teClass(layer)} takes eps: name the argument, then convert.`, label: `positional ${second}` };
  }
  if (positional.length > 2) {
    const third = positional[2];
    if (layer.kind === 'layernorm' && isTrue(third.value)) drop.push(third);
    else return { refusal: 'it passes elementwise_affine (or more) positionally with a value Transformer Engine cannot represent.', label: 'positional affine flag' };
  }
  // A (1 + weight) offset switched by a constructor flag: the flag's argument becomes zero_centered_gamma.
  const zcg = layer.teArgs?.zero_centered_gamma?.trim();
  for (const arg of call.args) {
    if (!arg.name) continue;
    if (zcg && zcg !== 'True' && arg.name !== 'zero_centered_gamma' && !NORM_KWARGS.has(arg.name) && arg.value.trim().replace(/\s+/g, ' ') === zcg) {
      edits.push(renameArg(arg, 'zero_centered_gamma'));
      present.add('zero_centered_gamma');
      continue;
    }
    // The class's own size name (timm's num_channels) comes from the catalogue.
    if (NORM_SIZE_NAMES.has(arg.name) || mapping?.renames?.[arg.name] === 'normalized_shape') {
      if (arg.name !== sizeName) edits.push(renameArg(arg, sizeName));
      continue;
    }
    if (arg.name === 'dtype' || arg.name === 'params_dtype') {
      if (arg.name !== dtypeName) edits.push(renameArg(arg, dtypeName));
      present.add('dtype');
      continue;
    }
    const affineFlag = arg.name === 'elementwise_affine' || arg.name === mapping?.affineFlag;
    // A flag decided at run time that the factory checks (when=): the te.* norm does not take it.
    if (layer.convertsWhen && (affineFlag || arg.name === 'bias') && !/^(True|False|0|1|None)$/.test(arg.value.trim())) { drop.push(arg); continue; }
    if (affineFlag || (arg.name === 'bias' && layer.kind === 'layernorm')) {
      // TE norms always have an affine weight (and LayerNorm a bias): True is the only value they can represent.
      if (!isTrue(arg.value)) {
        const has = layer.kind === 'layernorm' ? 'a weight and a bias' : 'a weight';
        // A value read at run time that the analysis could not hand to the factory's check (layer.convertsWhen unset:
        // a call, evaluated twice otherwise) may be True; the edit cannot know, so a person decides.
        return /^(False|0|None)$/.test(arg.value.trim())
          ? { refusal: `${arg.name}=${arg.value.trim()} cannot be represented: te.${teClass(layer)} always has ${has}.`, label: `${arg.name}=False` }
          : { refusal: `${arg.name}=${arg.value.trim()} is decided at run time: te.${teClass(layer)} always has ${has}, so it matches only while that is True; convert by hand if it is.`, label: `${arg.name} set at run time` };
      }
      drop.push(arg);
      continue;
    }
    if (arg.name === 'eps' && arg.value.trim() === 'None') { drop.push(arg); continue; }
    if (!NORM_KWARGS.has(arg.name)) { drop.push(arg); droppedMeaningful.push(arg.name); continue; }
    present.add(arg.name);
  }
  return undefined;
}

/**
 * The eps a local norm class builds with: its __init__'s `eps=` default, else a literal `eps=` its __init__ passes to
 * the base class (`super().__init__(d, eps=1e-6)` in a subclass of nn.RMSNorm: without it the conversion would fall
 * back to the base's eps and change the numerics silently).
 */
function localEpsDefault(ctx: FixContext, layer: Layer): string | undefined {
  const cls = layer.localClass && ctx.ir.classes.find((c) => c.name === layer.localClass);
  if (!cls) return undefined;
  const body = ctx.text.slice(cls.span.startOffset, cls.span.endOffset);
  const init = /def\s+__init__\s*\(([^)]*)\)/.exec(body);
  const eps = init && /\beps\s*(?::[^=,]+)?=\s*([^,\s)]+)/.exec(init[1]);
  if (eps && eps[1] !== 'None') return eps[1];
  const passed = /\bsuper\s*\([^)]*\)\s*\.\s*__init__\s*\(([^)]*)\)/.exec(body);
  const literal = passed && /\beps\s*=\s*([0-9][0-9_.eE+-]*)\s*(?:,|$)/.exec(passed[1].trim());
  return literal ? literal[1] : undefined;
}

/** The edits converting one layer, or why it cannot be. */
export interface LayerConversion {
  edits: TextEdit[];
  safe: boolean;
  target: string;
  refusal?: string;
  /** The fallback names the edits call (`fp8_linear`): the caller brings the fallback in. */
  fallbackNames: string[];
  /** Imports the edits need, added once per batch. */
  importLines: string[];
  /** A few words for convert-all's summary. */
  label?: string;
}

/** Why no layer of the file converts: it, or a file importing it, uses another FP8 or quantization stack. */
function stackRefusal(ctx: FixContext): string | undefined {
  const whole = ctx.ir.fp8Conversions[0];
  if (whole) {
    return `Not converted: this file converts the model with ${whole.callee} (line ${whole.span.startLine + 1}), which swaps torch.nn.Linear for its own FP8 module; a te.* layer would leave that FP8 path and need TE autocast. Keep one FP8 stack.`;
  }
  const quant = ctx.ir.quantization[0];
  if (quant) {
    return `Not converted: this file quantizes the model with ${quant.callee} (line ${quant.span.startLine + 1}), which replaces torch.nn.Linear with its own quantized module; a te.* layer would stay unquantized. Keep one stack.`;
  }
  if (ctx.otherStack) {
    return `Not converted: ${ctx.otherStack} (in a file that imports this one) swaps torch.nn.Linear for its own module; a te.* layer would be left out of it. Keep one stack.`;
  }
  return undefined;
}

function refused(refusal: string, target = '', label?: string): LayerConversion {
  return { edits: [], safe: false, target, refusal, fallbackNames: [], importLines: [], ...(label ? { label } : {}) };
}

/**
 * Converts one layer's construction. Through the fallback (the file does not import TE unconditionally, or has the
 * fallback already) the callee becomes the factory: te.* where FP8 runs, torch.nn elsewhere, and for a parallel
 * linear the library's own layer (`fp8_parallel_linear(lambda: ColumnParallelLinear(...), ...)`) so the shards stay.
 * Otherwise te.<Class> under the file's TE alias. The caller brings the fallback in (bringInFallback).
 */
export function convertLayer(ctx: FixContext, layer: Layer): LayerConversion {
  const skip = skipReason(layer);
  const cls = teClass(layer);
  if (skip || !cls) return refused(`Not converted: ${skip?.sentence ?? 'no te.* equivalent.'}`, '', skip?.label ?? 'no te.* twin');
  const stack = stackRefusal(ctx);
  if (stack) return refused(stack);
  if (layer.classParam && (layer.kind === 'linear' || layer.kind === 'layernorm' || layer.kind === 'rmsnorm')) return classParamConversion(ctx, layer, layer.classParam);
  if (layer.importedFactory) return factoryResultConversion(ctx, layer);
  if (layer.transposedWeight) return conv1dConversion(ctx, layer);
  // A layer whose dims are unknown where it is built (shape `guarded`) goes through the factory even in a file that
  // imports TE: the factory checks the FP8 shape rule when it builds the layer and keeps torch.nn where it fails.
  // A layer whose own class must stay where FP8 does not run (a parallel linear keeps its shards, a Linear subclass
  // that casts its weight keeps that cast, a norm subclass computing in float32 keeps it): the factory builds it behind
  // a lambda, so it always goes through it.
  // A norm exact only while a flag decided at run time holds (layer.convertsWhen, `bias=config.bias`): the factory
  // checks it (`when=`) and builds the norm as written, behind the lambda, where it does not.
  const keepsClass = !!layer.fallbackKeepsClass || !!layer.convertsWhen;
  const parallel = layer.kind === 'parallel-linear' || keepsClass;
  const viaFactory = throughFactory(ctx, layer);
  const access = teAccess(ctx.ir);
  const keeper = keepsClass && layer.kind !== 'parallel-linear' ? KEEP_CLASS_FACTORY[layer.kind as keyof typeof KEEP_CLASS_FACTORY] : PARALLEL_FACTORY;
  const target = viaFactory ? (parallel ? keeper : FACTORY[layer.kind]!) : `${access.prefix}${cls}`;
  const args = planArgs(ctx, layer, viaFactory);
  if (args.refusal && splatCheckedAtRunTime(ctx, layer, args, viaFactory)) return runtimeSplatConversion(ctx, layer);
  if (args.refusal) return refused(`Not converted: ${args.refusal}`, target, args.label);
  const site = constructorSite(ctx.text, layer);
  const importLines = args.importLine ? [args.importLine] : [];
  if (!viaFactory && access.importLine) importLines.push(access.importLine);
  const callee = viaFactory && parallel && args.call
    // The library's layer, built where FP8 does not run: its original call, unchanged, behind a lambda.
    // (no trailing space where the original arguments start on the next line)
    ? replace(site.calleeStart, site.open + 1, `${target}(lambda: ${oneLine(ctx.text.slice(site.calleeStart, args.call.close + 1))},${/^[ \t]*\r?\n/.test(ctx.text.slice(site.open + 1)) ? '' : ' '}`)
    : replace(site.calleeStart, site.calleeEnd, target);
  // A conversion changes what the layer computes (FP8 under autocast, te.Linear's own weight init): `check --fix`
  // never applies it, only --unsafe-fixes does (through the fallback, so the file still runs without TE).
  const safe = false;
  const conversion = { edits: [callee, ...args.edits], safe, target, fallbackNames: viaFactory ? [target] : [], importLines };
  return layer.wrapperOff && layer.wrapperOff !== 'True' ? onlyWhenUnwrapped(ctx, layer.wrapperOff, conversion, site) : conversion;
}

/**
 * A layer handed to a wrapper that leaves it as it is only under a condition (fairseq's `quant_noise(nn.Linear(...),
 * p=q_noise, ...)` when q_noise <= 0): the converted construction where the condition holds, the original otherwise,
 * as one conditional expression in the wrapper's argument (`fp8_linear(d, h) if q_noise <= 0 else nn.Linear(d, h)`).
 */
function onlyWhenUnwrapped(ctx: FixContext, when: string, conversion: LayerConversion, site: { calleeStart: number; open: number }): LayerConversion {
  const start = site.calleeStart;
  const end = closeParen(ctx.text, site.open);
  if (conversion.edits.some((e) => e.startOffset < start || e.endOffset > end)) {
    return refused(`Not converted: it is passed to a wrapper that keeps it only when ${when}, and its conversion edits more than its own call.`, conversion.target);
  }
  const original = ctx.text.slice(start, end);
  const converted = applyEdits(original, conversion.edits.map((e) => ({ ...e, startOffset: e.startOffset - start, endOffset: e.endOffset - start })));
  return { ...conversion, edits: [replace(start, end, `${converted} if ${when} else ${original}`)] };
}

/** Whether a layer's conversion goes through the fallback's factory (see convertLayer). */
function throughFactory(ctx: FixContext, layer: Layer): boolean {
  return convertsThroughFallback(ctx) || layer.facets?.shape.state === 'guarded' || !!layer.fallbackKeepsClass || !!layer.convertsWhen;
}

/**
 * transformers' Conv1D(nf, nx), its weight stored [in, out]: `fp8_conv1d_or(lambda: Conv1D(nf, nx), nf, nx)`, whose
 * wrapper holds te.Linear(nx, nf) under a child path and keeps Conv1D's checkpoint keys and layout (see the fallback's
 * _PLConv1D); the Conv1D as written where FP8 does not run. The arguments stay as written (Conv1D's nf and nx are the
 * factory's): anything else refuses, since the wrapper would drop it.
 */
function conv1dConversion(ctx: FixContext, layer: Layer): LayerConversion {
  const site = constructorSite(ctx.text, layer);
  const call = splitCallArgs(ctx.text, site.open);
  const refusal = conv1dRefusal(call);
  if (refusal || !call) return refused(`Not converted: ${refusal}`, CONV1D_FACTORY, call ? 'Conv1D arguments' : 'unreadable call');
  const spaced = /^[ \t]*\r?\n/.test(ctx.text.slice(site.open + 1)) ? '' : ' ';
  const callee = replace(site.calleeStart, site.open + 1, `${CONV1D_FACTORY}(lambda: ${oneLine(ctx.text.slice(site.calleeStart, call.close + 1))},${spaced}`);
  return { edits: [callee], safe: false, target: CONV1D_FACTORY, fallbackNames: [CONV1D_FACTORY], importLines: [] };
}

/** Why a Conv1D call cannot go through fp8_conv1d_or as written (it takes nf and nx, nothing else), or undefined. */
function conv1dRefusal(call: CallArgs | undefined): string | undefined {
  if (!call) return 'the argument list could not be read.';
  const other = call.args.filter((a) => (a.name ? a.name !== 'nf' && a.name !== 'nx' : /^\*/.test(a.value.trim())));
  if (!other.length && call.args.length === 2) return undefined;
  return `Conv1D is built with ${call.args.map((a) => a.value.trim() && a.name ? `${a.name}=${a.value.trim()}` : a.value.trim()).join(', ') || 'no arguments'}, where fp8_conv1d_or takes nf and nx only.`;
}

/**
 * A call copied behind the fallback's lambda, on one line: the original arguments stay where they were (as the
 * factory's), so a conversion adds no line and every line below keeps its number. A call with a comment, a string
 * spanning lines or a backslash continuation inside is copied as written.
 */
function oneLine(call: string): string {
  if (!call.includes('\n') || /#|"""|\'\'\'|\\\r?\n/.test(call)) return call;
  return call.replace(/\s*\n\s*/g, ' ').replace(/\(\s+/g, '(').replace(/,?\s*\)$/, ')');
}

/**
 * A layer whose class is chosen at run time and called by name: a norm_layer parameter defaulting to a norm class that
 * converts (`norm_layer(dim, **dd)`), or a local name bound to a choice among classes of which one converts
 * (`linear_layer = partial(nn.Conv2d, kernel_size=1) if use_conv else nn.Linear`, timm): its call goes through the
 * fallback's `fp8_layernorm_from(norm_layer, nn.LayerNorm, dim, **dd)` / `fp8_linear_from(linear_layer, nn.Linear,
 * ...)`, which checks at run time that the class is that one (or torch.nn's) built plainly and builds te.* only then,
 * and otherwise calls the class with the arguments as written. The arguments stay as they are.
 */
function classParamConversion(ctx: FixContext, layer: Layer, param: { name: string; defaultClass: string }): LayerConversion {
  const target = CLASS_PARAM_FACTORY[layer.kind as keyof typeof CLASS_PARAM_FACTORY];
  const site = constructorSite(ctx.text, layer);
  if (ctx.text.slice(site.calleeStart, site.calleeEnd).trim() !== param.name) return refused(`Not converted: its class is not called by the name it is bound to (${param.name}).`, target);
  const args = ctx.text.slice(site.open + 1, site.open + 1 + 200).trimStart().startsWith(')') ? '' : ', ';
  const callee = replace(site.calleeStart, site.open + 1, `${target}(${param.name}, ${param.defaultClass}${args}`);
  return { edits: [callee], safe: false, target, fallbackNames: [target], importLines: [] };
}

/**
 * A Linear built by an imported function whose body this file does not show (`self.head = make_linear(d, d)`): the
 * call stays as written, its result goes through the fallback's `fp8_linear_like`, which makes a plain torch.nn.Linear
 * a te.Linear holding the same initialised weights where FP8 runs and returns anything else (a LoRA or quantized
 * layer, one with hooks) as it is. Replacing the call would drop whatever the function does.
 */
function factoryResultConversion(ctx: FixContext, layer: Layer): LayerConversion {
  const site = constructorSite(ctx.text, layer);
  const end = closeParen(ctx.text, site.open);
  return {
    edits: [replace(site.calleeStart, site.calleeStart, `${LINEAR_LIKE_FACTORY}(`), replace(end, end, ')')],
    safe: false, target: LINEAR_LIKE_FACTORY, fallbackNames: [LINEAR_LIKE_FACTORY], importLines: [],
  };
}

/**
 * A plain torch.nn.Linear passed *args/**kwargs whose names the file does not show (litgpt's LoRA layers:
 * `torch.nn.Linear(in_features, out_features, **kwargs)`), converting through the fallback: its names are checked when
 * the layer is built instead (fp8_linear_from), so the conversion is offered rather than refused.
 */
function splatCheckedAtRunTime(ctx: FixContext, layer: Layer, args: ArgPlan, viaFactory: boolean): boolean {
  if (!args.uncheckedSplat || !viaFactory || layer.kind !== 'linear' || layer.resolved !== 'torch.nn.Linear'
    || layer.fallbackKeepsClass || layer.convertsWhen || layer.classParam) return false;
  // Splats of plain names only (`**kwargs`), as a caller's arguments are passed on; and never the fallback's own code
  // (an inline block's fp8_linear builds torch.nn.Linear(..., **_pl_torch_kwargs(kwargs)) where FP8 does not run).
  const start = constructorSite(ctx.text, layer).calleeStart;
  if (wrapperRanges(ctx.text).some(([a, b]) => start >= a && start < b)) return false;
  return !!args.call && args.call.args.filter((a) => /^\*/.test(a.value.trim())).every((a) => /^\*{1,2}\s*[A-Za-z_]\w*$/.test(a.value.trim()));
}

/**
 * `fp8_linear_from(nn.Linear, nn.Linear, in_features, out_features, **kwargs)`: the arguments as written; the fallback
 * builds te.Linear where FP8 runs, the sizes pass the FP8 rule and the arguments are a Linear's own (sizes, bias,
 * device, dtype), and torch.nn.Linear as written otherwise, logging why.
 */
function runtimeSplatConversion(ctx: FixContext, layer: Layer): LayerConversion {
  const target = CLASS_PARAM_FACTORY.linear;
  const site = constructorSite(ctx.text, layer);
  const callee = ctx.text.slice(site.calleeStart, site.calleeEnd).trim();
  const sep = /^[ \t]*\r?\n/.test(ctx.text.slice(site.open + 1)) ? ',' : ', ';
  return { edits: [replace(site.calleeStart, site.open + 1, `${target}(${callee}, ${callee}${sep}`)], safe: false, target, fallbackNames: [target], importLines: [] };
}

/** Why the layer's arguments as written keep it from converting (see argumentRefusal), or undefined. */
export function conversionArgumentRefusal(ctx: FixContext, layer: Layer): string | undefined {
  if (skipReason(layer) || !teClass(layer)) return undefined;
  if (layer.transposedWeight) {
    const why = conv1dRefusal(splitCallArgs(ctx.text, constructorSite(ctx.text, layer).open));
    return why ? `Not converted: ${why}` : undefined;
  }
  const plan = planArgs(ctx, layer, convertsThroughFallback(ctx));
  if (plan.refusal && splatCheckedAtRunTime(ctx, layer, plan, throughFactory(ctx, layer))) return undefined;
  return plan.refusal ? `Not converted: ${plan.refusal}` : undefined;
}

/** Stable id part for a layer: owner and attribute path, or its constructor text, plus its ordinal among equals. */
const layerKeys = new WeakMap<ModelIR, Map<Layer, string>>();

export function layerKey(ctx: FixContext, layer: Layer): string {
  let keys = layerKeys.get(ctx.ir);
  if (!keys) {
    // Numbered per owner and name, in document order, computed once per IR (a file has thousands of layers).
    keys = new Map();
    const seen = new Map<string, number>();
    for (const l of ctx.ir.layers) {
      const base = `${l.ownerClass ?? ''}.${l.name || l.constructor}`;
      const n = seen.get(base) ?? 0;
      seen.set(base, n + 1);
      keys.set(l, `${base}#${n}`);
    }
    layerKeys.set(ctx.ir, keys);
  }
  return keys.get(layer) ?? `${layer.ownerClass ?? ''}.${layer.name || layer.constructor}#?`;
}

/** The te.* classes a batch of conversions introduces, as class references to extend in the file's class tests. */
function classRefsFor(ctx: FixContext, layers: readonly Layer[], viaFallback: boolean, fuses = false): ClassRef[] {
  const refs = new Map<string, ClassRef>();
  const prefix = teAccess(ctx.ir).prefix;
  for (const layer of layers) {
    const cls = teClass(layer);
    if (!cls) continue;
    // A fused Linear is a te.LayerNormLinear where FP8 runs: tests of the Linear class name both.
    const teNames = viaFallback ? (fuses && cls === 'Linear' ? [TE_CLASS_NAME[cls], FUSED_CLASS_NAME] : [TE_CLASS_NAME[cls]]) : [`${prefix}${cls}`];
    for (const text of classRefsOf(ctx.ir, layer)) refs.set(text, { text, teNames });
  }
  if (fuses) {
    // The Linears converted earlier (fp8_linear already): the tests that name torch.nn.Linear gain the fused class.
    for (const b of ctx.ir.imports) {
      const text = b.target === 'torch.nn.Linear' ? b.local : 'torch.nn.Linear'.startsWith(`${b.target}.`) ? b.local + 'torch.nn.Linear'.slice(b.target.length) : undefined;
      if (text && !refs.has(text)) refs.set(text, { text, teNames: [FUSED_CLASS_NAME] });
    }
  }
  return [...refs.values()];
}

/**
 * The whole edit for converting `layers` (already converted one by one): the class tests extended, the fallback
 * brought in, the imports added once. A refusal when the class tests or the fallback cannot follow.
 */
function completeConversion(ctx: FixContext, layers: readonly Layer[], convs: readonly LayerConversion[], fusions: readonly FusionEdits[] = [], attention: readonly TextEdit[] = []): {
  edits: TextEdit[]; createFiles: Fix['createFiles']; tests: number; where?: string; refusal?: string;
  /** The edit brings in new code (the fallback, an import), beyond the calls it rewrites. */
  addsCode?: boolean;
} {
  const viaFallback = convs.some((c) => c.fallbackNames.length) || fusions.length > 0;
  const tests = extendClassTests(ctx.text, ctx.model, classRefsFor(ctx, layers, viaFallback, fusions.some((f) => f.factory === FUSE_FACTORY)));
  if (tests.refusal) return { edits: [], createFiles: [], tests: 0, refusal: `Not converted: the file tests the layer class and ${tests.refusal}` };
  // A fusion wraps a whole value that a conversion may edit at its ends too: its opening goes first, its closing last.
  const edits = [...fusions.map((f) => f.open), ...convs.flatMap((c) => c.edits), ...tests.edits, ...fusions.map((f) => f.close), ...attention];
  const lines = new Set(convs.flatMap((c) => c.importLines));
  for (const line of lines) edits.push(addImport(ctx.model, line));
  if (!viaFallback) return { edits, createFiles: [], tests: tests.count, addsCode: lines.size > 0 };
  const names = [...convs.flatMap((c) => c.fallbackNames), ...tests.names, ...new Set(fusions.map((f) => f.factory)), ...(attention.length ? [ATTENTION_FACTORY] : [])];
  const bring = bringInFallback(ctx, names);
  if (bring.refusal) return { edits: [], createFiles: [], tests: 0, refusal: `Not converted: ${bring.refusal}` };
  return {
    edits: [...edits, ...bring.edits], createFiles: bring.createFiles, tests: tests.count, where: bring.where,
    addsCode: lines.size > 0 || bring.edits.length > 0 || bring.createFiles.length > 0 || fusions.length > 0 || attention.length > 0,
  };
}

function testsNote(n: number): string {
  return n ? `, extending ${n} class test${n === 1 ? '' : 's'}` : '';
}

/** The quick fix for one layer's PL101/102/103/106 finding. */
export function conversionFix(ctx: FixContext, layer: Layer, code: Fix['codes'][number]): { fix?: Fix; refusal?: string } {
  const conv = convertLayer(ctx, layer);
  if (conv.refusal) return { refusal: conv.refusal };
  const done = completeConversion(ctx, [layer], [conv]);
  if (done.refusal) return { refusal: done.refusal };
  const cls = `te.${teClass(layer)}`;
  const loss = ctx.settings.convertLosingLayers ? undefined : predictedLoss(ctx.ir, layer, ctx.settings);
  const title = (done.where ? `Convert to ${cls} (with fallback: ${conv.target}${testsNote(done.tests)})` : `Convert to ${conv.target}${done.tests ? ` (${testsNote(done.tests).slice(2)})` : ''}`)
    + (loss ? ` despite the prediction: FP8 loses here (${loss.at})` : '');
  const safe = conv.safe && !done.addsCode && !done.tests;
  return {
    fix: {
      id: `convert:${layerKey(ctx, layer)}`, title, kind: 'quickfix', codes: [code], safe, isPreferred: !loss, edits: done.edits,
      ...(done.createFiles?.length ? { createFiles: done.createFiles } : {}),
      ...(loss ? { predictedLoss: loss.why } : {}),
    },
  };
}

/**
 * PL107's edit within a batch conversion through the fallback: torch's attention calls (no mask) in the classes whose
 * layers the batch converts (any in the file for the file's), renamed fp8_attention; none where PL107 is off.
 */
function batchAttention(ctx: FixContext, converted: readonly Layer[], convs: readonly LayerConversion[], wholeFile: boolean): TextEdit[] {
  if (ctx.settings.rules.PL107 === 'off' || !convs.some((c) => c.fallbackNames.length)) return [];
  const classes = new Set(converted.map((l) => l.ownerClass).filter((c): c is string => !!c));
  const spans = ctx.ir.classes.filter((c) => classes.has(c.name)).map((c) => c.span);
  return attentionCalls(ctx.ir).map((i) => ctx.ir.calls[i])
    .filter((call) => wholeFile || spans.some((sp) => sp.startOffset <= call.span.startOffset && call.span.endOffset <= sp.endOffset))
    .flatMap((call) => attentionRename(ctx, call) ?? []);
}

/**
 * The fusions a batch conversion makes: every proved norm -> Linear pair whose Linear this batch converts through the
 * fallback (or was converted before) and whose norm is in the batch's scope (a class's convert-all does not edit
 * another class).
 */
function batchFusions(ctx: FixContext, scope: readonly Layer[], converted: readonly Layer[], convs: readonly LayerConversion[]): FusionEdits[] {
  if (!convs.some((c) => c.fallbackNames.length)) return [];
  const inScope = new Set(scope);
  const now = new Set(converted);
  const out: FusionEdits[] = [];
  for (const f of findFusions(ctx.ir, ctx.text)) {
    const linears = fusedLinears(f).map((i) => ctx.ir.layers[i]);
    // A rule turned off (PL104, PL105) turns its fusion off in "convert all" too, as PL107 does for the attention.
    if (ctx.settings.rules[fusionCode(f)] === 'off') continue;
    if (!inScope.has(ctx.ir.layers[f.norm]) || !linears.every((l) => now.has(l) || l.viaFallback)) continue;
    const edits = fusionEdits(ctx.ir, f, ctx.text);
    if ('open' in edits) out.push(edits);
  }
  return out;
}

/**
 * PL104 / PL105's fix: the norm fused into the Linear it feeds (te.LayerNormLinear where FP8 runs, through the
 * fallback's fp8_fuse_norm), converting that Linear in the same edit when it is still torch.nn.
 */
export function fusionFix(ctx: FixContext, fusion: Fusion, code: Fix['codes'][number]): { fix?: Fix; refusal?: string } {
  const fusedClass = fusion.fusedMlp ? 'te.LayerNormMLP' : 'te.LayerNormLinear';
  if (!convertsThroughFallback(ctx)) {
    return { refusal: `Not fused: the fusion goes through the FP8 fallback, and this file imports Transformer Engine itself without it; build ${fusedClass} by hand.` };
  }
  const wrap = fusionEdits(ctx.ir, fusion, ctx.text);
  if (!('open' in wrap)) return { refusal: wrap.refusal };
  const convs: LayerConversion[] = [];
  const converting: Layer[] = [];
  for (const linear of fusedLinears(fusion).map((i) => ctx.ir.layers[i])) {
    if (linear.viaFallback) continue;
    const label = linear.name || linear.constructor;
    const conv = convertLayer(ctx, linear);
    if (conv.refusal) return { refusal: `Not fused: ${label} is not converted. ${conv.refusal.replace(/^Not converted: /, '')}` };
    const loss = ctx.settings.convertLosingLayers ? undefined : predictedLoss(ctx.ir, linear, ctx.settings);
    if (loss) return { refusal: `Not fused: ${label} is predicted to lose in FP8 (${loss.at}), so it stays torch.nn and there is nothing to fuse into.` };
    if (!conv.fallbackNames.length) return { refusal: `Not fused: the fusion goes through the FP8 fallback (${wrap.factory}), which this file does not use.` };
    convs.push(conv);
    converting.push(linear);
  }
  const done = completeConversion(ctx, converting, convs, [wrap]);
  if (done.refusal) return { refusal: done.refusal.replace(/^Not converted/, 'Not fused') };
  const norm = ctx.ir.layers[fusion.norm];
  const linear = ctx.ir.layers[fusion.fc1];
  const target = fusion.fusedMlp ? fusion.owner!.attr : fusion.owner ? `${fusion.owner.attr}.${fusion.linearAttr}` : linear.name || linear.constructor;
  const converted = convs.length ? `, converting ${fusion.fusedMlp ? `${convs.length} Linear${convs.length === 1 ? '' : 's'}` : target}` : '';
  return {
    fix: {
      id: `fuse:${layerKey(ctx, norm)}`, kind: 'quickfix', codes: [code], safe: false, isPreferred: true, edits: done.edits,
      title: `Fuse ${norm.name || norm.constructor} into ${target} (${fusedClass} where FP8 runs${converted})`,
      ...(done.createFiles?.length ? { createFiles: done.createFiles } : {}),
    },
  };
}

const CODE_BY_KIND: Partial<Record<Layer['kind'], Fix['codes'][number]>> = { linear: 'PL101', layernorm: 'PL102', rmsnorm: 'PL103', 'parallel-linear': 'PL106' };

/** The skip label of a layer left in BF16 because FP8 is predicted to slow it down. */
const PREDICTED_SLOWER = 'predicted slower in FP8';

/** Layer kinds "convert all" considers at all (convs and others are not candidates, so not "skipped"). */
const CANDIDATE_KINDS = new Set<Layer['kind']>(['linear', 'layernorm', 'rmsnorm', 'parallel-linear', 'embedding']);

/**
 * "Convert all eligible layers" over `layers` (a class, the file or a selection), in one runnable edit: every layer
 * that may be converted, through the fallback (brought in by the same edit) unless the file imports TE itself, with
 * the file's class tests extended; says how many were skipped and why, e.g. "Convert 4 layers in this file to FP8
 * (with fallback; skipped 2: lm-head, embedding)".
 */
export function convertAllFix(ctx: FixContext, layers: Layer[], scope: { id: string; where: string }): { fix?: Fix; refusal?: string } {
  const stack = stackRefusal(ctx);
  if (stack) return { refusal: stack };
  const skipped = new Map<string, number>();
  const convs: LayerConversion[] = [];
  const converted: Layer[] = [];
  const codes = new Set<Fix['codes'][number]>();
  let losing: string | undefined;
  for (const layer of layers) {
    if (!CANDIDATE_KINDS.has(layer.kind)) continue;
    const conv = convertLayer(ctx, layer);
    if (conv.refusal) {
      const label = conv.label ?? skipReason(layer)?.label ?? 'arguments';
      skipped.set(label, (skipped.get(label) ?? 0) + 1);
      continue;
    }
    const loss = ctx.settings.convertLosingLayers ? undefined : predictedLoss(ctx.ir, layer, ctx.settings);
    if (loss) {
      // Converting it would slow training down: left in BF16, counted and said (the setting overrides).
      skipped.set(PREDICTED_SLOWER, (skipped.get(PREDICTED_SLOWER) ?? 0) + 1);
      losing ??= loss.at.startsWith('model ') ? loss.at : undefined;
      continue;
    }
    convs.push(conv);
    converted.push(layer);
    codes.add(CODE_BY_KIND[layer.kind]!);
  }
  const skippedCount = [...skipped.values()].reduce((a, b) => a + b, 0);
  const skipList = skippedCount ? `skipped ${skippedCount}: ${[...skipped.entries()].map(([l, n]) => (n > 1 ? `${n} ${l}` : l)).join(', ')}` : '';
  if (!convs.length) {
    if (skipped.has(PREDICTED_SLOWER)) {
      return { refusal: `No layer ${scope.where} is predicted to gain from FP8${losing ? ` (${losing})` : ''}${skipList ? `; ${skipList}` : ''}: set precisionLens.convertLosingLayers to convert anyway.` };
    }
    return { refusal: `No layer ${scope.where} can be converted${skipList ? ` (${skipList})` : ''}.` };
  }
  const fusions = batchFusions(ctx, layers, converted, convs);
  const attention = batchAttention(ctx, converted, convs, scope.id === 'file');
  const done = completeConversion(ctx, converted, convs, fusions, attention);
  if (done.refusal) return { refusal: done.refusal };
  const noun = convs.length === 1 ? 'layer' : 'layers';
  const plural = (n: number, noun: string): string => `${n} ${noun}${n === 1 ? '' : 's'}`;
  const normFusions = fusions.filter((f) => f.factory === FUSE_FACTORY).length;
  const mlpFusions = fusions.length - normFusions;
  const fused = fusions.length
    ? `fusing ${[normFusions ? `${plural(normFusions, 'norm')} into te.LayerNormLinear` : '', mlpFusions ? `${plural(mlpFusions, 'MLP')} into te.LayerNormMLP` : ''].filter(Boolean).join(', ')}`
    : '';
  const attended = attention.length ? `attention through ${ATTENTION_FACTORY}${attention.length > 1 ? ` (${attention.length} calls)` : ''}` : '';
  const notes = [done.where ? 'with fallback' : '', fused, attended, done.tests ? testsNote(done.tests).slice(2) : '', skipList].filter(Boolean).join('; ');
  const safe = convs.every((c) => c.safe) && !done.addsCode && !done.tests;
  return {
    fix: {
      id: `convert-all:${scope.id}`, title: `Convert ${convs.length} ${noun} ${scope.where} to ${done.where ? 'FP8' : 'te.*'}${notes ? ` (${notes})` : ''}`,
      kind: 'source', codes: [...codes], safe, edits: done.edits, ...(done.createFiles?.length ? { createFiles: done.createFiles } : {}),
    },
  };
}
