/**
 * PL101 / PL102 / PL103 / PL106: convert a torch.nn layer to its te.* twin (or to the fallback wrapper's factory when
 * the file has the wrapper), and "convert all eligible layers" in a class or the file. Only the callee and the
 * specific arguments that differ are edited; comments and layout stay.
 */
import { teRenames } from '../analysis/catalogue';
import type { Layer, ModelIR } from '../analysis/ir';
import { removeArgs, renameArg, replace, appendArgs, type TextEdit } from './edits';
import { addImport, teAccess } from './imports';
import { typeTestAt } from '../rules/format';
import { splitCallArgs, type CallArg } from './source';
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
  if (!teClass(layer)) return { label: 'no te.* twin', sentence: `${layer.constructor} has no te.* equivalent.` };
  if (layer.shapeOk === false) return { label: 'shape', sentence: `its dimensions break the FP8 shape rule (in % 16, out % 8). ${layer.reasons.join(' ')}`.trim() };
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
}

function isTrue(value: string): boolean {
  return value.trim() === 'True';
}

/**
 * Where the constructor call is written: for a layer built through a local helper the IR's spans point at the helper's
 * call site, and `constructionSpan` at the `nn.Linear(...)` inside the helper, which is what gets converted.
 */
export function constructorSite(text: string, layer: Layer): { calleeStart: number; calleeEnd: number; open: number } {
  if (!layer.constructionSpan) return { calleeStart: layer.calleeSpan.startOffset, calleeEnd: layer.calleeSpan.endOffset, open: layer.argsSpan.startOffset };
  const start = layer.constructionSpan.startOffset;
  const open = text.indexOf('(', start);
  return { calleeStart: start, calleeEnd: start + text.slice(start, open).trimEnd().length, open };
}

function planArgs(ctx: FixContext, layer: Layer, viaFactory: boolean): ArgPlan {
  const call = splitCallArgs(ctx.text, constructorSite(ctx.text, layer).open);
  if (!call) return { edits: [], droppedMeaningful: [], refusal: 'the argument list could not be read.' };
  const edits: TextEdit[] = [];
  const drop: CallArg[] = [];
  const droppedMeaningful: string[] = [];
  const present = new Set<string>();
  const positional = call.args.filter((a) => !a.name);
  if (call.args.some((a) => /^\*/.test(a.value) && !a.name)) return { edits, droppedMeaningful, refusal: 'it passes *args/**kwargs, whose names cannot be checked.' };
  const legacy = ctx.api === 'legacy';

  if (layer.kind === 'linear' || layer.kind === 'parallel-linear') {
    if (positional.length > 3) return { edits, droppedMeaningful, refusal: 'it passes more than three positional arguments, which te.Linear does not take in that order.' };
    // nn.Linear(in, out, bias): te.Linear's third parameter is sequence_parallel, so bias must be named.
    if (positional.length === 3) {
      const third = positional[2];
      if (call.args.some((a) => a.name === 'bias')) return { edits, droppedMeaningful, refusal: 'it passes bias twice.' };
      edits.push(replace(third.start, third.end, `bias=${third.value.trim()}`));
      present.add('bias');
    }
    // The class's own spellings (Megatron's input_size / skip_bias_add) come from the catalogue.
    const renames = { ...LINEAR_RENAMES, ...teRenames(layer.resolved) };
    for (const arg of call.args) {
      if (!arg.name) continue;
      const target = renames[arg.name] ?? arg.name;
      if (target !== arg.name) edits.push(renameArg(arg, target));
      if (!TE_LINEAR_KWARGS.has(target)) { drop.push(arg); droppedMeaningful.push(arg.name); continue; }
      present.add(target);
    }
  } else {
    // Norms: te.LayerNorm / te.RMSNorm(normalized_shape, eps, ...). TE >= 2.9 calls the size `normalized_shape` and
    // the dtype `dtype`; older TE `hidden_size` and `params_dtype`. The factory always takes the TE >= 2.9 size name
    // and params_dtype (it maps them).
    const sizeName = legacy && !viaFactory ? 'hidden_size' : 'normalized_shape';
    const dtypeName = legacy || viaFactory ? 'params_dtype' : 'dtype';
    if (positional.length > 2) {
      const third = positional[2];
      if (layer.kind === 'layernorm' && isTrue(third.value)) drop.push(third);
      else return { edits, droppedMeaningful, refusal: 'it passes elementwise_affine (or more) positionally with a value Transformer Engine cannot represent.' };
    }
    for (const arg of call.args) {
      if (!arg.name) continue;
      if (NORM_SIZE_NAMES.has(arg.name)) {
        if (arg.name !== sizeName) edits.push(renameArg(arg, sizeName));
        continue;
      }
      if (arg.name === 'dtype' || arg.name === 'params_dtype') {
        if (arg.name !== dtypeName) edits.push(renameArg(arg, dtypeName));
        present.add('dtype');
        continue;
      }
      if (arg.name === 'elementwise_affine' || (arg.name === 'bias' && layer.kind === 'layernorm')) {
        // TE norms always have an affine weight (and LayerNorm a bias): True is the only value they can represent.
        if (!isTrue(arg.value)) return { edits, droppedMeaningful, refusal: `${arg.name}=${arg.value.trim()} cannot be represented: te.${teClass(layer)} always has ${layer.kind === 'layernorm' ? 'a weight and a bias' : 'a weight'}.` };
        drop.push(arg);
        continue;
      }
      if (arg.name === 'eps' && arg.value.trim() === 'None') { drop.push(arg); continue; }
      if (!NORM_KWARGS.has(arg.name)) { drop.push(arg); droppedMeaningful.push(arg.name); continue; }
      present.add(arg.name);
    }
  }

  edits.push(...removeArgs(ctx.text, call, drop));
  const extra: string[] = [];
  const wantsZeroCentered = layer.zeroCenteredGamma || layer.teArgs?.zero_centered_gamma?.trim() === 'True';
  if ((layer.kind === 'rmsnorm' || layer.kind === 'layernorm') && !present.has('eps') && positional.length < 2) {
    // A custom norm class brings its own eps default (often 1e-6); TE's is 1e-5, so carry the class's over.
    const eps = localEpsDefault(ctx, layer);
    if (eps) extra.push(`eps=${eps}`);
  }
  if ((layer.kind === 'rmsnorm' || layer.kind === 'layernorm') && wantsZeroCentered && !present.has('zero_centered_gamma')) extra.push('zero_centered_gamma=True');
  if (layer.kind === 'parallel-linear' && !present.has('parallel_mode')) {
    const mode = layer.teArgs?.parallel_mode ?? (/Row/.test(layer.constructor) ? '"row"' : /Column/.test(layer.constructor) ? '"column"' : undefined);
    if (!mode) return { edits, droppedMeaningful, refusal: 'whether it is column- or row-parallel is unknown.' };
    extra.push(`parallel_mode=${mode}`);
  }
  // Keep the trailing-comma-free insertion after the last kept argument.
  const kept = { ...call, args: call.args.filter((a) => !drop.includes(a)) };
  const add = appendArgs(ctx.text, kept, extra);
  if (add) edits.push(add);
  return { edits, droppedMeaningful };
}

/** The `eps=` default of a local norm class's __init__, when it has one. */
function localEpsDefault(ctx: FixContext, layer: Layer): string | undefined {
  const cls = layer.localClass && ctx.ir.classes.find((c) => c.name === layer.localClass);
  if (!cls) return undefined;
  const init = /def\s+__init__\s*\(([^)]*)\)/.exec(ctx.text.slice(cls.span.startOffset, cls.span.endOffset));
  const eps = init && /\beps\s*(?::[^=,]+)?=\s*([^,\s)]+)/.exec(init[1]);
  return eps && eps[1] !== 'None' ? eps[1] : undefined;
}

/** The edits converting one layer, or why it cannot be. */
export interface LayerConversion {
  edits: TextEdit[];
  safe: boolean;
  target: string;
  refusal?: string;
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

/**
 * Converts one layer. With the wrapper present the callee becomes the factory (te.* with FP8, torch.nn without);
 * otherwise te.<Class> under the file's TE alias, adding the import when the file has none.
 */
export function convertLayer(ctx: FixContext, layer: Layer): LayerConversion {
  const skip = skipReason(layer);
  const cls = teClass(layer);
  if (skip || !cls) return { edits: [], safe: false, target: '', refusal: `Not converted: ${skip?.sentence ?? 'no te.* equivalent.'}` };
  const stack = stackRefusal(ctx);
  if (stack) return { edits: [], safe: false, target: '', refusal: stack };
  const viaFactory = ctx.hasWrapper;
  const access = teAccess(ctx.ir);
  const target = viaFactory ? FACTORY[layer.kind]! : `${access.prefix}${cls}`;
  const args = planArgs(ctx, layer, viaFactory);
  if (args.refusal) return { edits: [], safe: false, target, refusal: `Not converted: ${args.refusal}` };
  const site = constructorSite(ctx.text, layer);
  const edits = [replace(site.calleeStart, site.calleeEnd, target), ...args.edits];
  if (!viaFactory && access.importLine) edits.push(addImport(ctx.model, access.importLine));
  // A local subclass (custom forward) or a parallel linear (dropped TP options) deserves a look before it is applied.
  // Not for a batch --fix either unless the file already depends on TE unconditionally: adding the first TE import
  // (the fallback wrapper is the way to do that) or using a guarded one (`except ImportError: te = None`: the layer
  // would fail where TE is missing) needs a person. Nor when the file tests isinstance(..., nn.Linear) (init code would
  // skip the converted layer).
  const safe = layer.convertible === true && !args.droppedMeaningful.length && layer.kind !== 'parallel-linear' && !layer.resolved.startsWith('local:')
    && (viaFactory || ctx.ir.teImportUnguarded) && typeTestAt(ctx.text, layer.kind) < 0;
  return { edits, safe, target };
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

/** The quick fix for one layer's PL101/102/103/106 finding. */
export function conversionFix(ctx: FixContext, layer: Layer, code: Fix['codes'][number]): { fix?: Fix; refusal?: string } {
  const conv = convertLayer(ctx, layer);
  if (conv.refusal) return { refusal: conv.refusal };
  const via = ctx.hasWrapper ? ` (${conv.target}: te.${teClass(layer)} with FP8, torch.nn without)` : '';
  const title = ctx.hasWrapper ? `Convert to te.${teClass(layer)}${via}` : `Convert to ${conv.target}`;
  return { fix: { id: `convert:${layerKey(ctx, layer)}`, title, kind: 'quickfix', codes: [code], safe: conv.safe, isPreferred: true, edits: conv.edits } };
}

const CODE_BY_KIND: Partial<Record<Layer['kind'], Fix['codes'][number]>> = { linear: 'PL101', layernorm: 'PL102', rmsnorm: 'PL103', 'parallel-linear': 'PL106' };

/** Layer kinds "convert all" considers at all (convs and others are not candidates, so not "skipped"). */
const CANDIDATE_KINDS = new Set<Layer['kind']>(['linear', 'layernorm', 'rmsnorm', 'parallel-linear', 'embedding']);

/**
 * "Convert all eligible layers" over `layers` (a class, the file or a selection): converts every layer that may be
 * converted and reports how many were skipped and why, e.g. "Convert 4 layers to te.* (skipped 2: lm-head, embedding)".
 */
export function convertAllFix(ctx: FixContext, layers: Layer[], scope: { id: string; where: string }): { fix?: Fix; refusal?: string } {
  const stack = stackRefusal(ctx);
  if (stack) return { refusal: stack };
  const edits: TextEdit[] = [];
  const skipped = new Map<string, number>();
  let converted = 0;
  let safe = true;
  const codes = new Set<Fix['codes'][number]>();
  let importEdit: TextEdit | undefined;
  for (const layer of layers) {
    if (!CANDIDATE_KINDS.has(layer.kind)) continue;
    const conv = convertLayer(ctx, layer);
    if (conv.refusal) {
      const label = skipReason(layer)?.label ?? 'arguments';
      skipped.set(label, (skipped.get(label) ?? 0) + 1);
      continue;
    }
    converted++;
    safe &&= conv.safe;
    codes.add(CODE_BY_KIND[layer.kind]!);
    for (const e of conv.edits) {
      // One import for the whole batch.
      if (e.startOffset === e.endOffset && /^\n?import /.test(e.newText)) importEdit = e; else edits.push(e);
    }
  }
  const skippedCount = [...skipped.values()].reduce((a, b) => a + b, 0);
  const skipText = skippedCount ? ` (skipped ${skippedCount}: ${[...skipped.entries()].map(([l, n]) => (n > 1 ? `${n} ${l}` : l)).join(', ')})` : '';
  if (!converted) return { refusal: `No layer ${scope.where} can be converted${skipText}.` };
  if (importEdit) edits.push(importEdit);
  const noun = converted === 1 ? 'layer' : 'layers';
  return {
    fix: {
      id: `convert-all:${scope.id}`, title: `Convert ${converted} ${noun} ${scope.where} to te.*${skipText}`, kind: 'source',
      codes: [...codes], safe, edits,
    },
  };
}

