/**
 * Structure checks of the verdict: can the te.* class represent this construction exactly (its arguments, a local
 * subclass's forward, the norm's axis / weight / bias / (1+w) offset, the parallel layout)? `fails`: no; `guarded`:
 * it depends on run time (then the reason says what to do); `ok`: yes. One function per rule of thumb.
 */
import type { Layer } from './ir';
import type { Evaluator } from './dims';
import type { Check, Fact } from './checks';
import { attrUses, branchBesideCall, classSource, optionValue, unitOffset, weightUse } from './checks-uses';
import { teMapping } from './catalogue';
import { argsOf } from './calls';
import { shortText } from './spans';
import type { ClassRec } from './walk';

const isLinear = (k: string): boolean => k === 'linear' || k === 'parallel-linear';
const isNorm = (k: string): boolean => k === 'layernorm' || k === 'rmsnorm';

const ok = (...reasons: string[]): Fact => ({ state: 'ok', reasons });
const guarded = (...reasons: string[]): Fact => ({ state: 'guarded', reasons });
const fails = (...reasons: string[]): Fact => ({ state: 'fails', reasons });

// ---- Any library class ----

/** The catalogue says the library's class has no te.* twin (a framework module TE cannot stand in for). */
const catalogueNoTe: Check = {
  name: 'catalogue-no-te', facet: 'structure',
  run({ rec }) {
    if (!rec.ctor.noTe || rec.ctor.local) return undefined;
    return { ...fails(rec.ctor.noTe), overrides: 'all' };
  },
};

// ---- Linear ----

const linearWeightUse: Check = {
  name: 'weight-read-directly', facet: 'structure',
  run({ rec, ev, L }) {
    if (!isLinear(L.kind)) return undefined;
    const w = weightUse(rec, ev);
    if (!w) return undefined;
    return w.convertible === 'beside-call' ? ok(w.reason) : w.convertible === false ? fails(w.reason) : guarded(w.reason);
  },
};

/** Sizes that are a sequence's length (a token count set by the input, not by the model's width). */
const SEQUENCE_SIZE = /(^|[._])(seq_len|seq_length|sequence_length|max_seq_len|max_seq_length|num_patches|n_patches|patch_count)\)?$/i;

/**
 * A Linear over the token axis (MLP-Mixer's token mixing, gMLP's spatial gating, Linformer's projections): its
 * in_features is the sequence length, which the input sets (196 tokens for 224-px images in 16-px patches) and which
 * the FP8 GEMM rule needs a multiple of 16: decided at run time, not by the model's configuration.
 */
const tokenMixing: Check = {
  name: 'token-mixing', facet: 'structure',
  run({ L }) {
    if (!isLinear(L.kind) || !L.inFeatures) return undefined;
    const seq = [L.inFeatures.text.replace(/\s+/g, '')].find((t) => SEQUENCE_SIZE.test(t));
    if (!seq || (L.inFeatures.value !== undefined && L.inFeatures.value % 16 === 0)) return undefined;
    return guarded(`${L.name} mixes tokens: its in_features is the sequence length (${seq}), which the input sets (196 tokens for 224-px images in 16-px patches) and FP8 needs a multiple of 16; convert once the token count is one.`);
  },
};

const parallelLayout: Check = {
  name: 'parallel-layout', facet: 'structure',
  run({ rec, L }) {
    if (L.kind !== 'parallel-linear' || !L.teArgs?.parallel_mode) return undefined;
    // Named by the class it resolves to (`ColumnParallelLinear` from its framework), never as a torch.nn class.
    const last = (L.resolved ?? '').split('.').pop();
    const shown = /^nn\./.test(rec.ctor.display) && last && !/^torch\.nn\./.test(L.resolved ?? '') ? last : rec.ctor.display;
    return ok(`${shown} maps to te.Linear(parallel_mode=${L.teArgs.parallel_mode}) with the same tensor-parallel group.`);
  },
};

const transposedWeight: Check = {
  name: 'transposed-weight', facet: 'structure',
  run({ rec, L }) {
    if (!isLinear(L.kind) || !rec.ctor.transposedWeight) return undefined;
    const inner = `te.Linear(${L.inFeatures?.text ?? 'nx'}, ${L.outFeatures?.text ?? 'nf'})`;
    const at = L.name ? `${L.name.replace(/^self\./, '')}.` : '';
    if (!L.transposedWeight) return guarded(`${rec.ctor.display} stores its weight transposed ([in_features, out_features]; Conv1D(nf=out, nx=in)): ${inner} computes the same only with the weight transposed, so pretrained checkpoints need weight.t() on load. Convert by hand.`);
    return ok(`${rec.ctor.display} stores its weight transposed ([in_features, out_features]; Conv1D(nf=out, nx=in)): the conversion builds ${inner} inside the fallback's fp8_conv1d_or wrapper, whose state_dict keeps Conv1D's keys and layout (${at}weight as [in, out], ${at}bias; the te.Linear itself is ${at}linear.weight, [out, in]) and whose load_state_dict transposes ${at}weight into it; a loader that sets parameters by name without load_state_dict finds no ${at}weight parameter and reports it. Where FP8 does not run it builds ${rec.ctor.display} as written.`);
  },
};

const specialWeights: Check = {
  name: 'special-weights', facet: 'structure',
  run({ rec, L }) {
    const li = rec.ctor.local?.info;
    if (!isLinear(L.kind) || !(li?.grouped || li?.weightReplacedBy || li?.extraParams?.length)) return undefined;
    const what = li.grouped
      ? `holds ${li.grouped}; te.Linear holds one 2-D weight (te.GroupedLinear is TE's module for grouped GEMMs)`
      : li.weightReplacedBy
        ? `replaces its weight with ${li.weightReplacedBy} (a quantized or special weight type) that te.Linear cannot hold`
        : `adds parameters of its own (${li.extraParams!.join(', ')}: an adapter such as LoRA) that te.Linear would drop`;
    return { ...fails(`${L.localClass ?? L.constructor} ${what}. Converting it would change what the layer computes; keep it (convert the base layer inside it by hand if the library supports te.Linear).`), overrides: 'all' };
  },
};

/** A local subclass whose forward does more than its base (casts its weight to the input's dtype, computes in
 *  float32): neither te.* nor the fallback's torch.nn layer would keep that (on the fallback path a converted model
 *  failed with "expected scalar type BFloat16 but found Float"). */
function forwardDoesMore(L: { localClass?: string }, what: string, te: string, torch: string): Fact {
  return { ...fails(`${L.localClass}.forward ${what}: ${te} (and ${torch}, its fallback without FP8) would not, so converting this call changes what the layer computes. Keep it, or move that behaviour into te.* by hand.`), overrides: 'all' };
}

const linearForwardExtra: Check = {
  name: 'forward-does-more', facet: 'structure',
  run({ rec, L, sofar }) {
    const what = rec.ctor.local?.info.forwardExtra;
    if (!isLinear(L.kind) || !what || !L.localClass || sofar === 'fails') return undefined;
    if (L.fallbackKeepsClass) {
      return ok(`${L.localClass}.forward ${what}, as te.Linear does (it casts its weight to the compute dtype); the conversion keeps ${L.localClass} for the fallback without FP8, where torch.nn.Linear would not.`);
    }
    return forwardDoesMore(L, what, 'te.Linear', 'torch.nn.Linear');
  },
};

const normForwardExtra: Check = {
  name: 'norm-forward-does-more', facet: 'structure',
  run({ rec, L, sofar }) {
    const li = rec.ctor.local?.info;
    if (!isNorm(L.kind) || !li?.forwardExtra || li.channelAxis || !L.localClass || sofar === 'fails') return undefined;
    if (L.fallbackKeepsClass) {
      return ok(`${L.localClass}.forward ${li.forwardExtra}, and ${teNorm(L.kind)} computes in float32 inside its kernel (its output has its weights' dtype, float32 by default, or torch.autocast's: not the input's); the conversion keeps ${L.localClass} for the fallback without FP8, where torch.nn's norm would not.`);
    }
    return forwardDoesMore(L, li.forwardExtra, teNorm(L.kind), L.kind === 'rmsnorm' ? 'torch.nn.RMSNorm' : 'torch.nn.LayerNorm');
  },
};

const localLinear: Check = {
  name: 'local-linear-class', facet: 'structure',
  run({ rec, L }) {
    if (!isLinear(L.kind)) return undefined;
    const li = rec.ctor.local?.info;
    if (li?.grouped || li?.weightReplacedBy || li?.extraParams?.length) return undefined;
    const own = li?.ownImplementation;
    if (own) return guarded(`${L.localClass} implements its own Linear (${own.replace(/^a custom Linear: /, '')}): te.Linear replaces it only if nothing in its forward is needed (its own quantised or FP8 weights, parallel communication). Convert its definition by hand, not this call.`);
    if (L.localClass && !L.fallbackKeepsClass) return ok(`${L.localClass} is a local subclass of nn.Linear: te.Linear replaces it only if its extra behaviour is not needed (check its forward).`);
    return undefined;
  },
};

const viaFactory: Check = {
  name: 'built-by-helper', facet: 'structure',
  run({ rec, L }) {
    const li = rec.ctor.local?.info;
    if (!isLinear(L.kind) || !L.viaFactory || li?.grouped || li?.weightReplacedBy || li?.extraParams?.length) return undefined;
    if (L.importedFactory) return ok(`Built by ${L.viaFactory}(), whose body this file does not show: the conversion keeps the call and passes what it returns to fp8_linear_like, which makes a plain torch.nn.Linear a te.Linear holding the same initialised weights and leaves anything else (a LoRA or quantized layer) as it is.`);
    return ok(`Built by the helper ${L.viaFactory}(): converting it there changes every layer that helper builds.`);
  },
};

// ---- Norms ----

/** An expression the converted code can evaluate again where the layer is built: a name or an attribute chain
 *  (`config.bias`, `self.cfg.norm_bias`), optionally with a literal subscript, and no call (no side effect twice). */
const REPEATABLE = /^[A-Za-z_]\w*(\s*\.\s*[A-Za-z_]\w*|\[\s*(["'][\w-]*["']|\d+)\s*\])*$/;

/**
 * Norm flags decided at run time (`bias=config.bias`, `elementwise_affine=affine`), each with the value te.* needs
 * (te.LayerNorm: weight and bias always; te.RMSNorm: a weight, no bias). Where every such flag is an expression the
 * code can evaluate again, the conversion checks them when it builds the layer (L.convertsWhen, the fallback's
 * `when=`): te.* only while they hold, the norm as written otherwise. Otherwise the layer stays guarded, with why.
 */
function runTimeFlags(L: Layer, flags: [string, { text?: string; value?: boolean | number; note?: string }, boolean][]): { reasons: string[]; refusal?: string } {
  // Unknown here, or known only through a default (a config field's): another config may set it otherwise.
  const open = flags.filter(([, v, want]) => v.text !== undefined && (v.value === undefined || (v.note !== undefined && v.value === want)));
  if (!open.length) return { reasons: [] };
  const te = L.kind === 'layernorm' ? 'te.LayerNorm' : 'te.RMSNorm';
  const has = L.kind === 'layernorm' ? 'a weight and a bias' : 'a weight and no bias';
  const said = open.map(([name, v]) => `${name}=${v.text}${v.note ? ` (${v.note})` : ''}`).join(' and ');
  const bad = open.find(([, v]) => !REPEATABLE.test(v.text!.trim()));
  if (bad) return { reasons: [], refusal: `${said} ${open.length > 1 ? 'are' : 'is'} decided at run time: ${te} always has ${has}, so it is an exact replacement only for some values, and ${bad[1].text} cannot be checked again where the layer is built. Bind it to a name first, then convert.` };
  const conds = open.map(([, v, want]) => (want ? v.text!.trim() : `not ${v.text!.trim()}`));
  L.convertsWhen = conds.join(' and ');
  const wanted = open.map(([name, , want]) => `${name} is ${want ? 'True' : 'False'}`).join(' and ');
  return { reasons: [`${said} ${open.length > 1 ? 'are' : 'is'} decided at run time: ${te} always has ${has}, so it is exact only while ${wanted}. The conversion checks that where it builds the layer (when=${L.convertsWhen}) and builds the norm as written otherwise.`] };
}

const layerNormArgs: Check = {
  name: 'layernorm-args', facet: 'structure',
  run({ rec, ev, L }) {
    if (L.kind !== 'layernorm') return undefined;
    const c = rec.ctor;
    const flag = c.affineFlag ?? 'elementwise_affine';
    const ea = optionValue(rec, ev, flag);
    const bias = optionValue(rec, ev, 'bias');
    const hasBiasParam = c.local ? c.local.hasBias !== false : true;
    const runTime = runTimeFlags(L, [[flag, ea, true], ['bias', bias, true]]);
    if (runTime.refusal) return guarded(runTime.refusal);
    if (ea.value === false) {
      return fails(`${flag}=${ea.text}${ea.note ? ` (${ea.note})` : ''} means no weight or bias, but te.LayerNorm always has both: it is not an exact replacement. Keep ${c.display} (or accept a learnable affine)${ea.note ? `; layers built with ${flag}=True map onto te.LayerNorm` : ''}.`);
    }
    if (!hasBiasParam) return fails(`${L.localClass ?? L.constructor} has no bias, but te.LayerNorm always has a weight and a bias: not an exact replacement (te.RMSNorm is not the same computation either).`);
    if (bias.value === false) {
      return fails(`bias=${bias.text}${bias.note ? ` (${bias.note})` : ''} gives a LayerNorm without bias, but te.LayerNorm always has a weight and a bias: it is not exactly representable. Keep this norm, or accept a learnable bias${bias.note ? '; if the config sets bias=True the layer maps onto te.LayerNorm' : ''}.`);
    }
    const zcIf = c.local?.info.zeroCenteredConditional;
    // A flag that switches the (1 + weight) offset maps to zero_centered_gamma=<the same expression>.
    const offset = zcIf !== undefined ? unitOffset(rec, ev, zcIf, 'te.LayerNorm') : undefined;
    if (zcIf !== undefined && !offset) {
      return guarded(`${L.localClass} scales by (1 + weight) only when ${zcIf}: te.LayerNorm needs zero_centered_gamma=True for the layers built that way and not for the others. Convert by hand with the setting that matches how this layer is built.`);
    }
    if (!offset && c.local?.info.zeroCenteredGamma) {
      L.zeroCenteredGamma = true;
      return ok(`${L.localClass} scales by (1 + weight): it maps onto te.LayerNorm(zero_centered_gamma=True); copy the weight as is.`, ...runTime.reasons);
    }
    const f = ok(...(offset ? [offset] : []), `${L.localClass ?? L.constructor} can become te.LayerNorm${L.normalizedShape ? `(${L.normalizedShape.text})` : ''}; norms run in high precision inside TE, and where a Linear consumes its output it can later fuse with it (te.LayerNormLinear).`);
    if (bias.note && bias.value === true && !L.convertsWhen) f.reasons.push(`bias is True through ${bias.note}.`);
    f.reasons.push(...runTime.reasons);
    return f;
  },
};

const rmsNormArgs: Check = {
  name: 'rmsnorm-args', facet: 'structure',
  run({ rec, ev, L }) {
    if (L.kind !== 'rmsnorm') return undefined;
    const c = rec.ctor;
    const zcIf = c.local?.info.zeroCenteredConditional;
    const eps = L.options.eps;
    const flag = c.affineFlag ?? 'elementwise_affine';
    const ea = optionValue(rec, ev, flag);
    const bias = optionValue(rec, ev, 'bias');
    const name = L.localClass ?? L.constructor;
    if (ea.value === false) return fails(`${flag}=${ea.text}${ea.note ? ` (${ea.note})` : ''} means no weight, but te.RMSNorm always has a learnable weight: it is not an exact replacement. Keep this norm${ea.note ? `; layers built with ${flag}=True map onto te.RMSNorm` : ''}.`);
    if (bias.value === true || (c.local?.rmsBias && bias.value !== false)) {
      return fails(`${bias.value === true ? `bias=${bias.text} gives` : `${name} has`} an RMSNorm with a bias, but te.RMSNorm has none: it is not an exact replacement. Keep this norm.`);
    }
    const runTime = runTimeFlags(L, [[flag, ea, true], ['bias', bias, false]]);
    if (runTime.refusal) return guarded(runTime.refusal);
    const offset = zcIf !== undefined ? unitOffset(rec, ev, zcIf, 'te.RMSNorm') : undefined;
    if (zcIf !== undefined && !offset) return guarded(`${name} scales by (1 + weight) only when ${zcIf}: te.RMSNorm needs zero_centered_gamma=True for the layers built that way and not for the others. Convert by hand with the setting that matches how this layer is built.`);
    const lead = offset ? [offset] : [];
    // torch.nn.RMSNorm itself, or a local subclass of it that keeps its __init__ (the eps default stays None).
    const torchRms = !c.local ? /^torch\.nn\.(modules\.normalization\.)?RMSNorm$/.test(L.resolved) : !c.local.init && c.local.info.resolvedBases.some((b) => /^torch\.nn\.(modules\.normalization\.)?RMSNorm$/.test(b));
    if (torchRms && (eps === undefined || /^None$/.test(eps))) {
      // torch documents eps=None as torch.finfo(x.dtype).eps, but ATen takes the epsilon of the type it computes in:
      // float32 for BF16 / FP16 / FP32 inputs, 2**-23 = 1.1920928955078125e-07 (measured with torch 2.13 on the CPU:
      // BF16 and FP16 outputs equal a float64 reference with that eps bit for bit, and differ by ~3 with
      // finfo(bf16).eps; ATen's composite rms_norm reads numeric_limits<float>::epsilon(); the CUDA fused kernel was
      // not measured here). te.RMSNorm defaults to 1e-5 and computes in float32, so passing float32's epsilon keeps
      // the numerics; the catalogue's eps for torch.nn.RMSNorm is what the conversion passes.
      const epsNode = rec.argNodes.get('eps');
      const byPosition = epsNode !== undefined && epsNode.parent?.type !== 'keyword_argument';
      const carried = !c.local && !L.classFrom && !L.viaFactory && !byPosition ? teMapping(L.resolved)?.eps : undefined;
      if (carried) {
        L.teArgs = { ...(L.teArgs ?? {}), eps: carried };
        return ok(...lead, ...runTime.reasons, `${L.constructor} without eps normalises with the epsilon of float32, the type it computes in for BF16, FP16 and FP32 inputs (torch.finfo(torch.float32).eps = ${carried}; torch's documentation says torch.finfo(x.dtype).eps), while te.RMSNorm defaults to eps=1e-5: the conversion passes eps=${carried} explicitly, which is exact (te.RMSNorm computes in float32 too).`,
          `${L.constructor} can become te.RMSNorm${L.normalizedShape ? `(${L.normalizedShape.text}, eps=${carried})` : `(eps=${carried})`}; where a Linear consumes its output it can later fuse with it (te.LayerNormLinear(normalization="RMSNorm")).`);
      }
      return guarded(...lead, `${L.constructor} without eps normalises with the epsilon of the type it computes in (float32's, 1.19e-7, for BF16, FP16 and FP32 inputs; torch's documentation says torch.finfo(dtype).eps), while te.RMSNorm defaults to eps=1e-5, and this construction does not let the conversion pass eps: converting it as is changes the numerics. Pass the eps your model trains with explicitly (eps=torch.finfo(torch.float32).eps keeps today's), then convert.`);
    }
    if (!offset && c.local?.info.zeroCenteredGamma) {
      L.zeroCenteredGamma = true;
      return ok(`${name} scales by (1 + weight): it maps onto te.RMSNorm(zero_centered_gamma=True); copy the weight as is.`, ...runTime.reasons);
    }
    return ok(...lead, `${name} can become te.RMSNorm${L.normalizedShape ? `(${L.normalizedShape.text})` : ''}; where a Linear consumes its output it can later fuse with it (te.LayerNormLinear(normalization="RMSNorm")).`, ...runTime.reasons);
  },
};

const recognisedNorm: Check = {
  name: 'recognised-norm-class', facet: 'structure',
  run({ rec, L }) {
    if (L.kind !== 'rmsnorm' || !rec.ctor.local) return undefined;
    return ok(`Recognised as ${rec.ctor.local.info.layerKindReason ?? 'an RMSNorm'}.`);
  },
};

const importedNorm: Check = {
  name: 'imported-norm-class', facet: 'structure',
  run({ rec, L, sofar }) {
    if (L.kind !== 'rmsnorm' || !rec.ctor.imported || sofar !== 'ok') return undefined;
    const read = rec.ctor.importedForward;
    if (read?.unitOffset) {
      L.zeroCenteredGamma = true;
      return ok(`${rec.ctor.display}'s forward is an RMSNorm over the last axis scaled by (1 + weight) (read in ${read.from}): it maps onto te.RMSNorm(zero_centered_gamma=True), whose weight is stored and initialised the same way.`);
    }
    if (read) return ok(`${rec.ctor.display}'s forward is a plain RMSNorm over the last axis (read in ${read.from}).`);
    return guarded(`${rec.ctor.display} is imported from ${rec.ctor.imported.replace(/\.[^.]+$/, '')}: its forward is not in this file (some scale by 1 + weight, as Gemma's does, which needs zero_centered_gamma=True). Check it before converting.`);
  },
};

const teNorm = (k: string): string => (k === 'rmsnorm' ? 'te.RMSNorm' : 'te.LayerNorm');

const weightlessNorm: Check = {
  name: 'weightless-norm', facet: 'structure',
  run({ rec, L, sofar }) {
    if (!isNorm(L.kind) || sofar === 'fails' || !rec.ctor.local?.info.weightless) return undefined;
    return { ...fails(`${L.localClass} has no learnable weight (no nn.Parameter), but ${teNorm(L.kind)} always has one: converting it would add parameters and change training and the checkpoint. Keep it.`), overrides: 'can-become' };
  },
};

/**
 * A norm class that builds its weight on some paths only (OLMo's LayerNormBase: `register_parameter("weight", None)`
 * unless its config or elementwise_affine asks for one): te.* norms always have a weight, so whether the conversion is
 * exact depends on how each norm is built, which the class decides at run time.
 */
const optionalWeight: Check = {
  name: 'norm-weight-optional', facet: 'structure',
  run({ rec, L, sofar }) {
    const line = rec.ctor.local?.info.weightOptional;
    if (!isNorm(L.kind) || sofar === 'fails' || !line) return undefined;
    return guarded(`${L.localClass ?? rec.ctor.display} has a weight only on some paths (\`${line}\` on the others), while ${teNorm(L.kind)} always has one: the conversion is exact only for norms built with their weight, which this class decides at run time. Convert by hand where it always has one.`);
  },
};

/**
 * A norm whose weight parameter has another name (`self.scale = nn.Parameter(torch.ones(d))`: k-diffusion, torchtune):
 * te.* computes the same, but its parameter is `weight` and the conversion cannot keep the state_dict key, so it stays
 * guarded and the reason names the keys that change.
 */
const scaleName: Check = {
  name: 'norm-scale-name', facet: 'structure',
  run({ rec, L, sofar }) {
    const scale = rec.ctor.local?.info.scaleName ?? rec.ctor.importedForward?.scaleName;
    if (!isNorm(L.kind) || !scale || sofar !== 'ok') return undefined;
    const at = L.name ? `${L.name.replace(/^self\./, '')}.` : '';
    if (!L.weightName) return guarded(`${L.localClass ?? rec.ctor.display} names its weight parameter ${scale}, ${teNorm(L.kind)} names it weight, and the conversion cannot keep the name: the state_dict keys change (${at}${scale} -> ${at}weight), so map them when loading a checkpoint (training from scratch is unaffected), then convert.`);
    return ok(`${L.localClass ?? rec.ctor.display} names its weight parameter ${scale}, ${teNorm(L.kind)} names it weight: the conversion keeps the checkpoint key ${at}${scale} (the te.* norm's state_dict saves its weight as ${at}${scale} and load_state_dict reads it from there, through state-dict hooks; .${scale} reads the weight), and builds ${L.localClass ?? rec.ctor.display} as written where FP8 does not run. A loader that bypasses load_state_dict finds no ${scale} parameter and reports it.`);
  },
};

/**
 * A norm whose forward transforms its own weight before scaling by it (`torch.exp(self.scale)`, `self.g.clamp(...)`,
 * `0.5 * self.scale`, `self.scale[:, None, None]` broadcasting a per-head gain over another axis; classes.ts finds
 * the line): te.* multiplies the normalised input by its weight as stored, so it computes something else.
 */
const normWeightTransformed: Check = {
  name: 'norm-weight-transformed', facet: 'structure',
  run({ rec, L, sofar }) {
    const info = rec.ctor.local?.info;
    if (!isNorm(L.kind) || sofar === 'fails' || !info?.weightTransformed || info.channelAxis) return undefined;
    return { ...fails(`${L.localClass}.forward transforms its weight before scaling by it (\`${info.weightTransformed}\`), while ${teNorm(L.kind)} multiplies by its weight as stored: not the same computation (nor the same parameter in a checkpoint). Keep it.`), overrides: 'can-become' };
  },
};

const gatedNorm: Check = {
  name: 'norm-extra-inputs', facet: 'structure',
  run({ rec, L, sofar }) {
    const extra = rec.ctor.local?.info.extraInputs;
    if (!isNorm(L.kind) || sofar === 'fails' || !extra?.length) return undefined;
    return { ...fails(`${L.localClass} takes ${extra.join(', ')} besides the input in forward (a gated norm): ${teNorm(L.kind)}.forward takes one tensor, so it is no replacement. Keep it.`), overrides: 'can-become' };
  },
};

/**
 * A norm its class calls with more than the input (`self.mlp_norm(hidden_states, residual, True)`: fla's RMSNorm fusing
 * a residual add, apex-style prenorm flags): te.LayerNorm / te.RMSNorm.forward take one tensor, so the converted call
 * would fail or drop what those arguments do.
 */
const normCalledWithMore: Check = {
  name: 'norm-called-with-more', facet: 'structure',
  run({ rec, ev, L, sofar }) {
    const cls = rec.scope.cls;
    if (!isNorm(L.kind) || sofar === 'fails' || !cls || L.container || !L.attr || L.name !== `self.${L.attr}`) return undefined;
    const shown = callsWithMore(ev, cls).get(L.attr);
    if (!shown) return undefined;
    return { ...fails(`${cls.info.name} calls it with more than the input (\`${shown}\`), while ${teNorm(L.kind)}.forward takes one tensor: the converted call would fail or drop what the other arguments do. Keep it.`), overrides: 'can-become' };
  },
};

/**
 * Per class (its node), the first call `self.<attr>(a, b, ...)` with more than one argument, by attribute: read once,
 * from the calls the walk collected in the class's methods and their arguments as the tree has them.
 */
const callsWithMoreCache = new WeakMap<object, Map<string, string>>();

function callsWithMore(ev: Evaluator, cls: { rec: ClassRec }): Map<string, string> {
  let m = callsWithMoreCache.get(cls.rec.node);
  if (m) return m;
  m = new Map();
  const src = ev.source();
  for (const fn of cls.rec.methods) {
    for (const call of fn.calls) {
      const f = call.node.childForFieldName('function');
      const obj = f?.type === 'attribute' ? f.childForFieldName('object') : null;
      const attr = f?.childForFieldName('attribute');
      if (!obj || !attr || src.slice(obj.startIndex, obj.endIndex) !== 'self') continue;
      const name = src.slice(attr.startIndex, attr.endIndex);
      const args = m.has(name) ? [] : argsOf(src, call.node);
      if (args.length > 1) m.set(name, shortText(`self.${name}(${args.map((x) => (x.name ? `${x.name}=${x.text}` : x.text)).join(', ')})`.replace(/\s+/g, ' '), 100));
    }
  }
  callsWithMoreCache.set(cls.rec.node, m);
  return m;
}

const NORM_PLAIN_ATTRS = /^(weight|bias|eps|normalized_shape|forward|to|cuda|float|half|bfloat16|parameters|named_parameters|state_dict|load_state_dict|register_\w+|apply|train|eval|requires_grad_|reset_parameters)$/;

const normReadDirectly: Check = {
  name: 'norm-read-directly', facet: 'structure',
  run({ rec, ev, L, sofar }) {
    const cls = rec.scope.cls;
    if (!isNorm(L.kind) || sofar === 'fails' || !cls || L.container || !L.attr || L.name !== `self.${L.attr}`) return undefined;
    const use = attrUses(ev.source(), cls).get(L.attr);
    if (!use) return undefined;
    const odd = [...(use.attrs ?? [])].filter((a) => !NORM_PLAIN_ATTRS.test(a));
    if (!use.params && !odd.length) return undefined;
    // Read only on a branch whose other branch calls the norm (flash-attn's Block: `if not self.fused_dropout_add_ln:
    // self.norm1(...)`, else its fused kernel reads self.norm1.weight): the conversion serves the call, as for a Linear.
    const branch = !odd.length && use.reads ? branchBesideCall(classSource(ev, cls), L.attr, use.reads) : undefined;
    if (branch) {
      return ok(`${cls.info.name} reads self.${L.attr}.weight directly only on the branch \`${branch}\`, whose other branch calls self.${L.attr}: the conversion serves the call; that branch would hand ${teNorm(L.kind)}'s weight to its own kernel, so keep it off or convert it with that code.`);
    }
    return guarded(`${cls.info.name} also reads ${odd.length ? `self.${L.attr}.${odd[0]}` : `self.${L.attr}.weight`} directly (a fused kernel or functional op)${odd.length ? `, which ${teNorm(L.kind)} does not have` : ''}: convert only together with that code.`);
  },
};

/**
 * A norm whose weight or bias its class replaces after building it: `self.norm_1.bias = None` (MPT keeps Hub
 * checkpoints without a bias this way) leaves a LayerNorm without bias, which te.LayerNorm always has; another value
 * (a shared or reparametrised parameter) must fit te.*'s own parameter.
 */
const normParamReplaced: Check = {
  name: 'norm-param-replaced', facet: 'structure',
  run({ rec, ev, L, sofar }) {
    const cls = rec.scope.cls;
    if (!isNorm(L.kind) || sofar === 'fails' || !cls || L.container || !L.attr || L.name !== `self.${L.attr}`) return undefined;
    const use = attrUses(ev.source(), cls).get(L.attr);
    if (!use?.replaced) return undefined;
    const te = teNorm(L.kind);
    if (/=\s*None\s*$/.test(use.replacedText ?? '')) {
      const gone = use.replaced === 'bias' ? 'without a bias' : 'without a weight';
      const has = use.replaced === 'bias' && L.kind === 'rmsnorm' ? undefined : `${te} always has one`;
      if (has) return { ...fails(`${cls.info.name} sets self.${L.attr}.${use.replaced} = None after building it, leaving a norm ${gone}; ${has}, so it is no exact replacement. Keep it.`), overrides: 'can-become' };
      return undefined;
    }
    return { ...guarded(`${cls.info.name} replaces self.${L.attr}.${use.replaced} after building it (\`${use.replacedText}\`): the replacement must fit ${te}'s own parameter. Convert by hand, if at all.`), overrides: 'can-become' };
  },
};

// ---- Other kinds ----

const noTeTwin: Check = {
  name: 'no-te-twin', facet: 'structure',
  run({ L }) {
    if (isLinear(L.kind) || isNorm(L.kind)) return undefined;
    if (L.kind === 'conv') return fails(`${L.constructor} is a convolution: Transformer Engine has no FP8 convolution module, so it stays as it is.`);
    if (/(^|\.)MultiheadAttention$/.test(L.resolved)) {
      return fails(`${L.constructor} holds its projections as raw parameters (in_proj_weight, out_proj) and runs them in F.multi_head_attention_forward, so no per-layer conversion applies; te.MultiheadAttention is a different module (its own fused QKV layout and arguments): port the attention block by hand to use it.`);
    }
    if (/(^|\.)LazyLinear$/.test(L.resolved)) {
      return fails(`${L.constructor} infers in_features at its first forward; Transformer Engine has no lazy Linear. Build an nn.Linear with an explicit in_features first, then it can be considered for te.Linear.`);
    }
    if (/^torch\.nn\.(modules\.\w+\.)?Transformer(Encoder|Decoder)?(Layer)?$/.test(L.resolved)) {
      return fails(`${L.constructor} runs its projections inside PyTorch's own code, so its Linears cannot be converted one by one. te.TransformerLayer (layer_type="encoder" / "decoder") is TE's block, but not a drop-in: other parameter names (map the checkpoint), pre-LN where PyTorch defaults to post-LN (norm_first=False), a different default activation. Port the block by hand to use it.`);
    }
    return fails(`${L.constructor} has no Transformer Engine equivalent to convert to.`);
  },
};

// ---- Any kind ----

const channelAxis: Check = {
  name: 'norm-channel-axis', facet: 'structure',
  run({ rec, L, sofar }) {
    const axis = isNorm(L.kind) ? rec.ctor.local?.info.channelAxis : undefined;
    if (!axis || sofar === 'fails') return undefined;
    const te = teNorm(L.kind);
    const fmt = L.options.data_format ?? axis.optionDefault;
    const first = axis.when === 'always' || (fmt !== undefined && /channels_first/.test(fmt));
    const last = axis.when === 'option' && fmt !== undefined && /^["']channels_last["']$/.test(fmt.trim());
    if (first) {
      return { ...fails(`${L.localClass ?? L.constructor} normalises over the channel axis of NCHW tensors (${axis.when === 'always' ? axis.evidence : `data_format=${fmt}`}), while ${te} always normalises over the last dimension: converting it would normalise the wrong axis (or fail on the shape). Keep it.`), overrides: 'can-become' };
    }
    if (last) return undefined;
    return { ...guarded(`${L.localClass ?? L.constructor} can normalise over the channel axis (${axis.evidence}), decided by data_format${fmt ? `=${fmt}` : ''} at run time; ${te} always normalises over the last dimension, so convert only the layers built with data_format="channels_last".`), overrides: 'can-become' };
  },
};

/** A class's alternate constructor taking a module (`ColumnShardedLinear.from_linear(proj, gang)`). */
const ALTERNATE_CTOR = /(^|\.)[A-Z]\w*\.from_\w+$/;

const reparametrisingWrapper: Check = {
  name: 'reparametrising-wrapper', facet: 'structure',
  run({ L, sofar }) {
    if (!L.wrappedBy || sofar !== 'ok') return undefined;
    if (L.wrapperOff === 'True') return ok(`It is passed to ${L.wrappedBy}(), which returns it as it is with the argument written there: the te.* layer goes through unchanged.`);
    if (L.wrapperOff) return ok(`It is passed to ${L.wrappedBy}(), which returns it as it is when ${L.wrapperOff} and otherwise reparametrises its weight (asserting a torch.nn.Linear): the conversion builds the FP8 layer only when ${L.wrapperOff}, and the layer as written otherwise.`);
    if (ALTERNATE_CTOR.test(L.wrappedBy)) return guarded(`It is passed to ${L.wrappedBy}(), which builds another module from it and may require a torch.nn.Linear: convert only if it accepts the te.* module.`);
    return guarded(`It is passed to ${L.wrappedBy}(), which reparametrises its weight and may require a torch.nn.Linear (fairseq's quant_noise asserts it): convert only if ${L.wrappedBy} accepts the te.* module.`);
  },
};

const TE_ISINSTANCE = /\bisinstance\s*\([^,()]+,\s*\(?[^()]*\b(te|transformer_engine|te_pytorch)(\.pytorch)?\.[A-Z]\w*/;
const SCRIPT_METHOD = /@\s*(torch\.)?jit\.script_method\b/;

/**
 * Whether `re` matches the source between two offsets, tested once per function or class and analysis: every layer
 * of a 10,000-layer class asks about the same class (a scan per layer made the analysis quadratic in the class).
 */
const spanTests = new WeakMap<Evaluator, Map<string, boolean>>();
function spanMatches(ev: Evaluator, re: RegExp, start: number, end: number): boolean {
  let memo = spanTests.get(ev);
  if (!memo) spanTests.set(ev, (memo = new Map()));
  const key = `${re.source.length}:${start}:${end}`;
  let hit = memo.get(key);
  if (hit === undefined) memo.set(key, (hit = re.test(ev.source().slice(start, end))));
  return hit;
}

// Built in a function that tests for TE modules (`if isinstance(module, te.Linear): new = nn.Linear(...)`): a
// deliberate torch.nn copy, as when converting a TE model back to torch.nn (accelerate's convert_model).
const teToTorchCopy: Check = {
  name: 'te-to-torch-copy', facet: 'structure',
  run({ rec, ev, sofar }) {
    const fn = rec.scope.fn;
    if (!fn || sofar === 'fails' || !spanMatches(ev, TE_ISINSTANCE, fn.start, fn.end)) return undefined;
    return fails(`It is built in ${fn.name}(), which tests for Transformer Engine modules (isinstance(..., te.*)): a deliberate torch.nn layer (converting TE modules back to torch.nn), so it stays as it is.`);
  },
};

// A TorchScript module (`class M(torch.jit.ScriptModule)` with script methods): TE modules cannot be scripted.
const torchScript: Check = {
  name: 'torchscript-owner', facet: 'structure',
  run({ rec, ev, sofar }) {
    const owner = rec.scope.cls;
    if (!owner || sofar !== 'ok') return undefined;
    const scripted = owner.info.resolvedBases.some((b) => /(^|\.)ScriptModule$/.test(b))
      || spanMatches(ev, SCRIPT_METHOD, owner.rec.start, owner.rec.end);
    if (!scripted) return undefined;
    return guarded(`${owner.info.name} is a TorchScript module (torch.jit.ScriptModule / script_method): Transformer Engine modules cannot be scripted, so convert only after moving it to eager mode.`);
  },
};

const classCandidatesAgree: Check = {
  name: 'class-candidates-agree', facet: 'structure',
  run({ L, sofar }) {
    if (!L.classCandidates || sofar !== 'ok') return undefined;
    if (L.classCandidatesEps && L.options.eps === undefined) {
      return guarded(`Its class is chosen at run time (${L.classCandidates.join('; ')}), and the candidates default eps differently (${L.classCandidatesEps.join(', ')}): one te.* norm fits both only with eps passed. Pass eps= to the call, then convert.`);
    }
    return ok(`Its class is chosen at run time (${L.classCandidates.join('; ')}): every candidate converts the same way, so the conversion holds for either.`);
  },
};

const classChosenAtRunTime: Check = {
  name: 'class-chosen-at-run-time', facet: 'structure',
  run({ L, sofar }) {
    if (!L.classFrom || sofar === 'fails') return undefined;
    if (L.classParam && (isNorm(L.kind) || L.kind === 'linear')) {
      const te = L.kind === 'linear' ? 'te.Linear' : teNorm(L.kind);
      return ok(`Its class comes from ${L.classFrom}: the conversion checks at run time that the class is ${L.classParam.defaultClass} (or torch.nn's ${te.slice(3)}) built plainly, and builds ${te} only then; any other class is built as written.`);
    }
    return guarded(`Its class comes from ${L.classFrom}${L.classFrom.includes('chosen at run time') ? '' : ': another class may be chosen at run time'}, so convert where the class is chosen, not this call.`);
  },
};

/** In order; each sees the state of the checks before it. */
export const STRUCTURE_CHECKS: readonly Check[] = [
  catalogueNoTe, linearWeightUse, tokenMixing, parallelLayout, transposedWeight, specialWeights, linearForwardExtra, localLinear, viaFactory,
  layerNormArgs, rmsNormArgs, recognisedNorm, importedNorm, weightlessNorm, optionalWeight, normWeightTransformed, scaleName, gatedNorm, normCalledWithMore, normForwardExtra, normReadDirectly, normParamReplaced,
  noTeTwin, channelAxis, reparametrisingWrapper, teToTorchCopy, torchScript, classCandidatesAgree, classChosenAtRunTime,
];
