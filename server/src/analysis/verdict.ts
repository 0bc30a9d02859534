/**
 * Verdicts: can this layer move to a te.* module, and why (full sentences: fact, consequence, what to do).
 */
import type { Dim } from './ir';
import type { SyntaxNode } from './node';
import type { EvalScope, Evaluator } from './dims';
import { ctorParams } from './classes';
import type { LayerRec, LayerSnap } from './layers';
import { isVocabText } from './roles';

/** FP8 GEMM rule for a Linear weight [out, in]: in % 16 == 0 and out % 8 == 0 (FP8-FACTS.md). */
export function shapeRule(inF?: Dim, outF?: Dim): { ok?: boolean; failing: string[] } {
  const failing: string[] = [];
  if (inF?.value !== undefined && inF.value % 16 !== 0) failing.push(`in_features ${inF.value} is not a multiple of 16`);
  if (outF?.value !== undefined && outF.value % 8 !== 0) failing.push(`out_features ${outF.value} is not a multiple of 8`);
  if (failing.length) return { ok: false, failing };
  if (inF?.value !== undefined && outF?.value !== undefined) return { ok: true, failing };
  return { ok: undefined, failing };
}

function dimWhy(d: Dim | undefined, label: string): string {
  if (!d) return `${label} is not given`;
  if (d.value !== undefined) return `${label} ${d.value}`;
  return d.text;
}

function knownNote(d: Dim | undefined): string | undefined {
  if (d?.value === undefined || !d.note) return undefined;
  return `${d.text} = ${d.value} (${d.note})`;
}

/**
 * How a layer's own class reads its `.weight` besides calling it: a layer never called but read
 * (`F.multi_head_attention_forward(q_proj_weight=self.q_proj.weight, ...)`) gains nothing from te.Linear, whose FP8
 * GEMM runs in its own forward; one also read directly (Mamba's fused fast path) gets FP8 on one path only.
 */
function weightUse(rec: LayerRec, ev: Evaluator): { convertible: false | 'uncertain'; reason: string } | undefined {
  const L = rec.layer;
  const cls = rec.scope.cls;
  if (!cls || L.container || !L.attr || L.name !== `self.${L.attr}`) return undefined;
  const use = attrUses(ev.source(), cls).get(L.attr);
  if (!use) return undefined;
  if (use.replaced) {
    return { convertible: 'uncertain', reason: `${cls.info.name} replaces self.${L.attr}.${use.replaced} after building it (\`${use.replacedText}\`): a weight shared or reparametrised this way must fit te.Linear's own parameter (and its FP8 copy under fp8_model_init), and a tie made there changes what the checkpoint holds. Convert by hand, if at all.` };
  }
  if (use.params && !use.other) {
    return { convertible: false, reason: `${cls.info.name} never calls self.${L.attr}; it only reads its weight/bias (for a functional op): te.Linear runs FP8 only in its own forward, so converting it gains nothing and can break that op (FP8 weights under fp8_model_init). Keep it.` };
  }
  if (use.params) {
    return { convertible: 'uncertain', reason: `${cls.info.name} also reads self.${L.attr}.weight directly (a fused kernel or functional op): on that path te.Linear's FP8 does not apply, and its weight may be FP8 under fp8_model_init. Convert only if that path is not used.` };
  }
  return undefined;
}

/** How a class uses `self.<attr>`: called or passed (`other`), its weight/bias read as tensors (`params`), replaced. */
interface AttrUse { params: boolean; other: boolean; replaced?: string; replacedText?: string; attrs?: Set<string> }
/** Per class (keyed by its node: a statement copy kept across edits keeps it), how each `self.<attr>` is used. */
const attrUseCache = new WeakMap<object, Map<string, AttrUse>>();
const SELF_USE = /self\s*\.\s*([A-Za-z_]\w*)(\s*\.\s*(\w+)|\s*=(?!=))?/g;
/** After `self.x.weight`: initialisation and metadata (`.data`, `.normal_(`, `.shape`, `.requires_grad`), no compute. */
const PARAM_META = /^\s*\.\s*(data\b|grad\b|requires_grad\b|shape\b|dtype\b|device\b|ndim\b|size\s*\(|numel\s*\(|dim\s*\(|[a-z]\w*_\s*\()/;
/** Before it: an initialiser taking it as the tensor to fill (`nn.init.normal_(self.x.weight`, `trunc_normal_(`). */
const INIT_CALL = /(\binit\s*\.\s*\w+_|\b\w*(normal|uniform|zeros|ones|constant|orthogonal|xavier\w*|kaiming\w*|trunc_normal)_)\s*\(\s*$/;

function attrUses(src: string, cls: { rec: { node: object; start: number; end: number } }): Map<string, AttrUse> {
  let m = attrUseCache.get(cls.rec.node);
  if (m) return m;
  m = new Map();
  const text = src.slice(cls.rec.start, cls.rec.end);
  for (const hit of text.matchAll(SELF_USE)) {
    const attr = hit[1];
    if (hit[2] !== undefined && hit[3] === undefined) continue; // `self.x = ...`: the assignment that builds it
    let u = m.get(attr);
    if (!u) { u = { params: false, other: false }; m.set(attr, u); }
    if (hit[3] !== 'weight' && hit[3] !== 'bias') {
      u.other = true;
      if (hit[3] !== undefined) (u.attrs ??= new Set()).add(hit[3]);
      continue;
    }
    const at = hit.index ?? 0;
    const after = text.slice(at + hit[0].length, at + hit[0].length + 40);
    if (/^\s*=(?!=)/.test(after)) {
      // `self.dec.weight = nn.Parameter(self.enc.weight.t())`: shared or reparametrised after construction.
      const lineEnd = text.indexOf('\n', at);
      u.replaced ??= hit[3];
      u.replacedText ??= text.slice(at, lineEnd < 0 ? text.length : lineEnd).trim().replace(/\s+/g, ' ').slice(0, 80);
      continue;
    }
    if (PARAM_META.test(after) || INIT_CALL.test(text.slice(Math.max(0, at - 60), at))) continue;
    u.params = true;
  }
  // `parametrize.register_parametrization(self.e, "weight", ...)` (minLoRA, orthogonal maps): a reparametrised weight.
  // `nn.utils.weight_norm(self.fc)` applied after construction as well.
  for (const hit of text.matchAll(/(?:register_parametrization\s*\(\s*self\s*\.\s*(\w+)\s*,\s*["'](weight|bias)["']|\b(?:weight_norm|spectral_norm|orthogonal)\s*\(\s*self\s*\.\s*(\w+)\s*[,)])/g)) {
    const attr = hit[1] ?? hit[3];
    let u = m.get(attr);
    if (!u) { u = { params: false, other: false }; m.set(attr, u); }
    u.replaced ??= hit[2] ?? 'weight';
    u.replacedText ??= hit[0].replace(/\s+/g, ' ') + ', ...)';
  }
  attrUseCache.set(cls.rec.node, m);
  return m;
}

/**
 * Sets convertible, reasons, teEquivalent, teArgs, shapeOk and zeroCenteredGamma. Besides the layer as built (its
 * statement memo, layers.ts), a verdict reads only the role fields and the facts of a local class named in the key:
 * a record reused from its memo reuses its verdict while that key is unchanged.
 */
export function decide(rec: LayerRec, ev: Evaluator): void {
  const snap = rec.snap;
  if (!snap) return decideUncached(rec, ev);
  const L = rec.layer;
  // The role fields come from snap.roleMemo (roles.ts sets or reuses it just before): the same memo object means the
  // same role, reasons and ties.
  const role = snap.roleMemo;
  const facts = ctorFacts(rec.ctor);
  const hit = snap.verdictMemo;
  if (hit && role && hit.role === role && hit.facts === facts) {
    const o = hit.out;
    // The same own keys as decideUncached leaves them (the IR is compared deep-equal), arrays and objects copied.
    for (const k of Object.keys(o) as (keyof typeof o)[]) {
      const v = o[k];
      (L as unknown as Record<string, unknown>)[k] = Array.isArray(v) ? v.slice() : v && typeof v === 'object' ? { ...v } : v;
    }
    return;
  }
  decideUncached(rec, ev);
  const out: Record<string, unknown> = {};
  for (const k of ['shapeOk', 'convertible', 'reasons', 'teEquivalent', 'teArgs', 'zeroCenteredGamma'] as const) {
    if (!Object.prototype.hasOwnProperty.call(L, k)) continue;
    const v = L[k];
    out[k] = Array.isArray(v) ? v.slice() : v && typeof v === 'object' ? { ...v } : v;
  }
  if (role) snap.verdictMemo = { role, facts, out: out as NonNullable<LayerSnap['verdictMemo']>['out'] };
}

/** What a verdict reads of the constructor and of a local layer class, as one string (once per constructor object). */
const ctorFactsCache = new WeakMap<object, string>();
function ctorFacts(c: LayerRec['ctor']): string {
  let f = ctorFactsCache.get(c);
  if (f === undefined) {
    const info = c.local?.info;
    f = `${c.kind}\u0001${c.isTe}\u0001${c.te}\u0001${c.display}\u0001${c.parallelMode}\u0001${c.transposedWeight}\u0001${c.imported}\u0001${c.noTe}`
      + (info ? `\u0001${info.layerKindReason}\u0001${info.zeroCenteredGamma}\u0001${info.zeroCenteredConditional}\u0001${info.ownImplementation}\u0001${c.local?.hasBias}`
        + `\u0001${JSON.stringify(info.channelAxis ?? null)}\u0001${JSON.stringify(c.local?.normDefaults ?? null)}\u0001${c.local?.rmsBias}`
        + `\u0001${info.extraParams?.join(',')}\u0001${info.forwardExtra}\u0001${info.weightReplacedBy}\u0001${info.grouped}\u0001${info.extraInputs?.join(',')}\u0001${info.weightless}\u0001${info.scaleName}` : '');
    ctorFactsCache.set(c, f);
  }
  return f;
}

const TE_ISINSTANCE = /\bisinstance\s*\([^,()]+,\s*\(?[^()]*\b(te|transformer_engine|te_pytorch)(\.pytorch)?\.[A-Z]\w*/;

function decideUncached(rec: LayerRec, ev: Evaluator): void {
  const L = rec.layer;
  const c = rec.ctor;
  const reasons: string[] = [];
  if (L.kind === 'linear' || L.kind === 'parallel-linear') {
    const s = shapeRule(L.inFeatures, L.outFeatures);
    L.shapeOk = s.ok;
  }
  if (L.isTe) {
    L.convertible = false;
    const gemm = L.kind === 'linear' || L.kind === 'parallel-linear' || /(Linear|LayerNormMLP|MultiheadAttention|TransformerLayer)$/.test(L.resolved);
    const norm = L.kind === 'layernorm' || L.kind === 'rmsnorm';
    reasons.push(gemm
      ? `${L.constructor} is already a Transformer Engine layer: its GEMMs run in FP8 inside an FP8 autocast region, so there is nothing to convert.`
      : norm
        ? `${L.constructor} is already a Transformer Engine norm: it computes in high precision and can hand FP8 to the next TE layer, so there is nothing to convert.`
        : `${L.constructor} is already a Transformer Engine module, so there is nothing to convert.`);
    if (L.shapeOk === false) {
      const s = shapeRule(L.inFeatures, L.outFeatures);
      reasons.push(`Its shape breaks the FP8 GEMM rule (${s.failing.join('; ')}): under FP8 autocast TE raises an error for it; pad the dimension or keep this layer out of the FP8 region.`);
    }
    if (L.role === 'lm_head') reasons.push('It is the lm-head: run it outside FP8 autocast (or under te.autocast(enabled=False)) to keep the logits in BF16.');
    L.reasons = reasons;
    return;
  }
  if (c.noTe && !c.local && L.role !== 'lm_head' && L.role !== 'embedding') {
    L.convertible = false;
    L.reasons = [c.noTe];
    return;
  }
  switch (L.kind) {
    case 'linear':
    case 'parallel-linear':
      L.teEquivalent = 'te.Linear';
      L.teArgs = teArgsLinear(rec);
      break;
    case 'layernorm':
      L.teEquivalent = 'te.LayerNorm';
      L.teArgs = teArgsNorm(rec);
      break;
    case 'rmsnorm':
      L.teEquivalent = 'te.RMSNorm';
      L.teArgs = teArgsNorm(rec);
      break;
    default:
      break;
  }
  if (L.role === 'lm_head') {
    L.convertible = false;
    L.reasons = [
      `This layer is the lm-head (${L.roleReasons.join('; ')}). Keep it in BF16: the last layer is precision-sensitive, PLaMo-100B found that an FP8 lm-head raised the z-loss and hurt downstream scores, and Transformer Engine's examples and Megatron keep the output layer out of FP8.`,
    ];
    if (L.tied) {
      L.reasons.push(L.tiedByConfig
        ? 'Its weight is declared tied to the token embedding (used when the config sets tie_word_embeddings); when tied, converting it would also quantize the embedding table.'
        : 'Its weight is shared with the token embedding, so converting it would also quantize the embedding table.');
    }
    return;
  }
  if (L.role === 'embedding' || L.kind === 'embedding') {
    L.convertible = false;
    L.reasons = [
      L.roleReasons.some((r) => /tied/.test(r)) || isVocabDim(L.inFeatures)
        ? `${L.constructor} is an embedding table. Transformer Engine has no FP8 embedding module and the token table is precision-sensitive, so keep it in BF16.`
        : `${L.constructor} is an embedding table (a lookup, not a GEMM). Transformer Engine has no FP8 embedding module, so keep it in BF16.`,
    ];
    if (L.tied) L.reasons.push('Its weight is tied to the lm-head; keep both in BF16.');
    return;
  }
  if (L.tied) {
    L.convertible = false;
    L.reasons = ['Its weight is tied to another layer (weight sharing with an embedding): converting it would put the shared weight in FP8 too, so keep it in BF16.'];
    return;
  }
  if (L.roleReasons[0] === 'low-rank adapter (LoRA)' && !L.isTe) {
    L.convertible = false;
    L.reasons = ['A low-rank adapter (LoRA): its rank-r GEMMs are too narrow to gain from FP8, and adapter libraries (PEFT) expect torch.nn.Linear here (merging, reading .weight). Keep it; convert the base layer it adapts instead.'];
    return;
  }
  if (L.role === 'classifier' || L.role === 'router') {
    L.convertible = false;
    const pick = L.role === 'router' ? /^its output picks discretely \((\w+)\)/.exec(L.roleReasons[0] ?? '')?.[1] : undefined;
    const what = pick ? `Its output makes a discrete choice (${pick})` : L.role === 'router' ? 'This is an MoE router (one output per expert)' : 'This is a small output layer (classifier)';
    const sizes = L.inFeatures || L.outFeatures
      ? `${dimWhy(L.inFeatures, 'in')} -> ${dimWhy(L.outFeatures, 'out')} is too small to gain from FP8, and its output`
      : 'a GEMM this narrow gains little from FP8, and its output';
    L.reasons = [`${what}: ${sizes} decides the result directly, so keep it in BF16.`];
    return;
  }
  switch (L.kind) {
    case 'linear':
    case 'parallel-linear': {
      const s = shapeRule(L.inFeatures, L.outFeatures);
      const inV = L.inFeatures?.value;
      const outV = L.outFeatures?.value;
      if (s.ok === false) {
        L.convertible = false;
        reasons.push(`FP8 GEMMs need in_features % 16 == 0 and out_features % 8 == 0, but ${s.failing.join(' and ')}: te.Linear would fail under FP8 autocast. Keep this layer in BF16, or pad ${[inV !== undefined && inV % 16 !== 0 ? 'in_features to a multiple of 16' : '', outV !== undefined && outV % 8 !== 0 ? 'out_features to a multiple of 8' : ''].filter(Boolean).join(' and ')}.`);
      } else if (s.ok) {
        L.convertible = true;
        reasons.push(`${inV} -> ${outV} meets the FP8 rule (in_features % 16 == 0, out_features % 8 == 0), so ${L.constructor} can become te.Linear.`);
        const notes = new Set<string>();
        for (const d of [L.inFeatures, L.outFeatures]) {
          const n = knownNote(d);
          if (n) notes.add(n);
        }
        for (const n of notes) reasons.push(`Known statically: ${n}.`);
        const weight = weightUse(rec, ev);
        if (weight) {
          L.convertible = weight.convertible;
          reasons.push(weight.reason);
        }
      } else {
        L.convertible = 'uncertain';
        const unknown = [...new Set([L.inFeatures, L.outFeatures].filter((d) => d?.value === undefined).map((d) => d?.text ?? 'an argument'))];
        // Each unknown side has its own condition: in_features a multiple of 16, out_features a multiple of 8.
        const conds: string[] = [];
        if (inV === undefined) conds.push(`in_features${L.inFeatures ? ` (${L.inFeatures.text})` : ''} is a multiple of 16`);
        if (outV === undefined) conds.push(`out_features${L.outFeatures ? ` (${L.outFeatures.text})` : ''} is a multiple of 8`);
        // Say why a size that looks static is not (a config field computed in __post_init__, a class of another file).
        const why = [...new Set([L.inFeatures, L.outFeatures].filter((d) => d !== undefined && d.value === undefined && !!d.note && /__post_init__|not defined in this file|different defaults/.test(d.note)).map((d) => d?.note as string))];
        reasons.push(`Whether it meets the FP8 shape rule (in_features % 16 == 0, out_features % 8 == 0) depends on ${unknown.join(' and ')}, unknown statically${why.length ? ` (${why.join('; ')})` : ''}. It can become te.Linear if ${conds.join(' and ')}; check them for your configuration.`);
      }
      if (L.kind === 'parallel-linear' && L.teArgs?.parallel_mode) {
        reasons.push(`${c.display} maps to te.Linear(parallel_mode=${L.teArgs.parallel_mode}) with the same tensor-parallel group.`);
      }
      if (c.transposedWeight) {
        if (L.convertible === true) L.convertible = 'uncertain';
        reasons.push(`${c.display} stores its weight transposed ([in_features, out_features]; Conv1D(nf=out, nx=in)): te.Linear(${L.inFeatures?.text ?? 'nx'}, ${L.outFeatures?.text ?? 'nf'}) computes the same only with the weight transposed, so pretrained checkpoints need weight.t() on load. Convert by hand.`);
      }
      const li = c.local?.info;
      if (li?.grouped || li?.weightReplacedBy || li?.extraParams?.length) {
        L.convertible = false;
        const what = li.grouped
          ? `holds ${li.grouped}; te.Linear holds one 2-D weight (te.GroupedLinear is TE's module for grouped GEMMs)`
          : li.weightReplacedBy
            ? `replaces its weight with ${li.weightReplacedBy} (a quantized or special weight type) that te.Linear cannot hold`
            : `adds parameters of its own (${li.extraParams!.join(', ')}: an adapter such as LoRA) that te.Linear would drop`;
        reasons.length = 0;
        reasons.push(`${L.localClass ?? L.constructor} ${what}. Converting it would change what the layer computes; keep it (convert the base layer inside it by hand if the library supports te.Linear).`);
        break;
      }
      if (li?.forwardExtra && forwardRefusal(rec, 'te.Linear', 'torch.nn.Linear', reasons)) break;
      const own = c.local?.info.ownImplementation;
      if (own) {
        if (L.convertible === true) L.convertible = 'uncertain';
        reasons.push(`${L.localClass} implements its own Linear (${own.replace(/^a custom Linear: /, '')}): te.Linear replaces it only if nothing in its forward is needed (its own quantised or FP8 weights, parallel communication). Convert its definition by hand, not this call.`);
      } else if (L.localClass) reasons.push(`${L.localClass} is a local subclass of nn.Linear: te.Linear replaces it only if its extra behaviour is not needed (check its forward).`);
      if (L.viaFactory) reasons.push(`Built by the helper ${L.viaFactory}(): converting it there changes every layer that helper builds.`);
      break;
    }
    case 'layernorm': {
      const ea = optionValue(rec, ev, 'elementwise_affine');
      const bias = optionValue(rec, ev, 'bias');
      const hasBiasParam = c.local ? c.local.hasBias !== false : true;
      if (ea.text !== undefined && ea.value === undefined) {
        L.convertible = 'uncertain';
        reasons.push(`elementwise_affine=${ea.text} is decided at run time: te.LayerNorm always has a weight and a bias, so it is an exact replacement only when that is True.`);
      } else if (ea.value === false) {
        L.convertible = false;
        reasons.push(`elementwise_affine=${ea.text}${ea.note ? ` (${ea.note})` : ''} means no weight or bias, but te.LayerNorm always has both: it is not an exact replacement. Keep nn.LayerNorm (or accept a learnable affine)${ea.note ? '; layers built with elementwise_affine=True map onto te.LayerNorm' : ''}.`);
      } else if (!hasBiasParam) {
        L.convertible = false;
        reasons.push(`${L.localClass ?? L.constructor} has no bias, but te.LayerNorm always has a weight and a bias: not an exact replacement (te.RMSNorm is not the same computation either).`);
      } else if (bias.value === false) {
        L.convertible = false;
        reasons.push(`bias=${bias.text}${bias.note ? ` (${bias.note})` : ''} gives a LayerNorm without bias, but te.LayerNorm always has a weight and a bias: it is not exactly representable. Keep this norm, or accept a learnable bias${bias.note ? '; if the config sets bias=True the layer maps onto te.LayerNorm' : ''}.`);
      } else if (bias.text !== undefined && bias.value === undefined) {
        L.convertible = 'uncertain';
        reasons.push(`bias=${bias.text} is decided at run time: with bias=False te.LayerNorm (always weight + bias) is not an exact replacement, with bias=True it is.`);
      } else if (c.local?.info.zeroCenteredConditional !== undefined && !unitOffset(rec, ev, c.local.info.zeroCenteredConditional, 'te.LayerNorm', reasons)) {
        L.convertible = 'uncertain';
        reasons.push(`${L.localClass} scales by (1 + weight) only when ${c.local.info.zeroCenteredConditional}: te.LayerNorm needs zero_centered_gamma=True for the layers built that way and not for the others. Convert by hand with the setting that matches how this layer is built.`);
      } else if (c.local?.info.zeroCenteredGamma) {
        L.convertible = true;
        L.zeroCenteredGamma = true;
        reasons.push(`${L.localClass} scales by (1 + weight): it maps onto te.LayerNorm(zero_centered_gamma=True); copy the weight as is.`);
      } else {
        L.convertible = true;
        reasons.push(`${L.localClass ?? L.constructor} can become te.LayerNorm${L.normalizedShape ? `(${L.normalizedShape.text})` : ''}; norms run in high precision inside TE, and where a Linear consumes its output it can later fuse with it (te.LayerNormLinear).`);
        if (bias.note && bias.value === true) reasons.push(`bias is True through ${bias.note}.`);
      }
      normExtras(rec, ev, 'te.LayerNorm', reasons);
      break;
    }
    case 'rmsnorm': {
      L.convertible = true;
      const zc = c.local?.info.zeroCenteredGamma;
      const zcIf = c.local?.info.zeroCenteredConditional;
      const eps = L.options.eps;
      const ea = optionValue(rec, ev, 'elementwise_affine');
      const bias = optionValue(rec, ev, 'bias');
      if (ea.value === false) {
        L.convertible = false;
        reasons.push(`elementwise_affine=${ea.text}${ea.note ? ` (${ea.note})` : ''} means no weight, but te.RMSNorm always has a learnable weight: it is not an exact replacement. Keep this norm${ea.note ? '; layers built with elementwise_affine=True map onto te.RMSNorm' : ''}.`);
      } else if (ea.text !== undefined && ea.value === undefined) {
        L.convertible = 'uncertain';
        reasons.push(`elementwise_affine=${ea.text} is decided at run time: te.RMSNorm always has a weight, so it is an exact replacement only when that is True.`);
      } else if (bias.value === true || (c.local?.rmsBias && bias.value !== false)) {
        L.convertible = false;
        reasons.push(`${bias.value === true ? `bias=${bias.text} gives` : `${L.localClass ?? L.constructor} has`} an RMSNorm with a bias, but te.RMSNorm has none: it is not an exact replacement. Keep this norm.`);
      } else if (bias.text !== undefined && bias.value === undefined) {
        L.convertible = 'uncertain';
        reasons.push(`bias=${bias.text} is decided at run time: te.RMSNorm has no bias, so it is an exact replacement only when that is False.`);
      } else if (zcIf !== undefined && !unitOffset(rec, ev, zcIf, 'te.RMSNorm', reasons)) {
        L.convertible = 'uncertain';
        reasons.push(`${L.localClass ?? L.constructor} scales by (1 + weight) only when ${zcIf}: te.RMSNorm needs zero_centered_gamma=True for the layers built that way and not for the others. Convert by hand with the setting that matches how this layer is built.`);
      } else if (!c.local && /(^|\.)RMSNorm$/.test(L.resolved) && !L.isTe && (eps === undefined || /^None$/.test(eps))) {
        // torch.nn.RMSNorm(eps=None) normalises with torch.finfo(x.dtype).eps; te.RMSNorm has a fixed eps (1e-5).
        L.convertible = 'uncertain';
        reasons.push(`${L.constructor} without eps uses the input dtype's machine epsilon (torch.finfo(dtype).eps: 0.0078125 in BF16, 1.2e-7 in FP32), while te.RMSNorm defaults to eps=1e-5: converting it as is changes the numerics. Pass the eps your model trains with explicitly, then convert.`);
      } else if (zc) {
        L.zeroCenteredGamma = true;
        reasons.push(`${L.localClass ?? L.constructor} scales by (1 + weight): it maps onto te.RMSNorm(zero_centered_gamma=True); copy the weight as is.`);
      } else {
        reasons.push(`${L.localClass ?? L.constructor} can become te.RMSNorm${L.normalizedShape ? `(${L.normalizedShape.text})` : ''}; where a Linear consumes its output it can later fuse with it (te.LayerNormLinear(normalization="RMSNorm")).`);
      }
      if (c.local) reasons.push(`Recognised as ${c.local.info.layerKindReason ?? 'an RMSNorm'}.`);
      if (c.imported && L.convertible === true) {
        L.convertible = 'uncertain';
        reasons.push(`${c.display} is imported from ${c.imported.replace(/\.[^.]+$/, '')}: its forward is not in this file (some scale by 1 + weight, as Gemma's does, which needs zero_centered_gamma=True). Check it before converting.`);
      }
      normExtras(rec, ev, 'te.RMSNorm', reasons);
      break;
    }
    case 'conv':
      L.convertible = false;
      reasons.push(`${L.constructor} is a convolution: Transformer Engine has no FP8 convolution module, so it stays as it is.`);
      break;
    default:
      L.convertible = false;
      if (/(^|\.)MultiheadAttention$/.test(L.resolved) && !L.isTe) {
        reasons.push(`${L.constructor} holds its projections as raw parameters (in_proj_weight, out_proj) and runs them in F.multi_head_attention_forward, so no per-layer conversion applies; te.MultiheadAttention is a different module (its own fused QKV layout and arguments): port the attention block by hand to use it.`);
      } else if (/(^|\.)LazyLinear$/.test(L.resolved) && !L.isTe) {
        reasons.push(`${L.constructor} infers in_features at its first forward; Transformer Engine has no lazy Linear. Build an nn.Linear with an explicit in_features first, then it can be considered for te.Linear.`);
      } else if (/^torch\.nn\.(modules\.\w+\.)?Transformer(Encoder|Decoder)?(Layer)?$/.test(L.resolved) && !L.isTe) {
        reasons.push(`${L.constructor} runs its projections inside PyTorch's own code, so its Linears cannot be converted one by one. te.TransformerLayer (layer_type="encoder" / "decoder") is TE's block, but not a drop-in: other parameter names (map the checkpoint), pre-LN where PyTorch defaults to post-LN (norm_first=False), a different default activation. Port the block by hand to use it.`);
      } else reasons.push(`${L.constructor} has no Transformer Engine equivalent to convert to.`);
  }
  const axis = (L.kind === 'layernorm' || L.kind === 'rmsnorm') ? c.local?.info.channelAxis : undefined;
  if (axis && L.convertible !== false) {
    const te = L.kind === 'rmsnorm' ? 'te.RMSNorm' : 'te.LayerNorm';
    const fmt = L.options.data_format ?? axis.optionDefault;
    const first = axis.when === 'always' || (fmt !== undefined && /channels_first/.test(fmt));
    const last = axis.when === 'option' && fmt !== undefined && /^["']channels_last["']$/.test(fmt.trim());
    // Where the axis decides, the generic "can become" sentence no longer applies.
    if (first || !last) {
      const keep = reasons.filter((r) => !/ can become te\./.test(r));
      reasons.length = 0;
      reasons.push(...keep);
    }
    if (first) {
      L.convertible = false;
      reasons.push(`${L.localClass ?? L.constructor} normalises over the channel axis of NCHW tensors (${axis.when === 'always' ? axis.evidence : `data_format=${fmt}`}), while ${te} always normalises over the last dimension: converting it would normalise the wrong axis (or fail on the shape). Keep it.`);
    } else if (!last) {
      L.convertible = 'uncertain';
      reasons.push(`${L.localClass ?? L.constructor} can normalise over the channel axis (${axis.evidence}), decided by data_format${fmt ? `=${fmt}` : ''} at run time; ${te} always normalises over the last dimension, so convert only the layers built with data_format="channels_last".`);
    }
  }
  if (L.wrappedBy && L.convertible === true) {
    L.convertible = 'uncertain';
    reasons.push(`It is passed to ${L.wrappedBy}(), which reparametrises its weight and may require a torch.nn.Linear (fairseq's quant_noise asserts it): convert only if ${L.wrappedBy} accepts the te.* module.`);
  }
  // Built in a function that tests for TE modules (`if isinstance(module, te.Linear): new = nn.Linear(...)`): a
  // deliberate torch.nn copy, as when converting a TE model back to torch.nn (accelerate's convert_model).
  const fn = rec.scope.fn;
  if (fn && L.convertible !== false && !L.isTe && TE_ISINSTANCE.test(ev.source().slice(fn.start, fn.end))) {
    L.convertible = false;
    reasons.push(`It is built in ${fn.name}(), which tests for Transformer Engine modules (isinstance(..., te.*)): a deliberate torch.nn layer (converting TE modules back to torch.nn), so it stays as it is.`);
  }
  // A TorchScript module (`class M(torch.jit.ScriptModule)` with script methods): TE modules cannot be scripted.
  const owner = rec.scope.cls;
  if (owner && L.convertible === true && !L.isTe
    && (owner.info.resolvedBases.some((b) => /(^|\.)ScriptModule$/.test(b)) || /@\s*(torch\.)?jit\.script_method\b/.test(ev.source().slice(owner.rec.start, owner.rec.end)))) {
    L.convertible = 'uncertain';
    reasons.push(`${owner.info.name} is a TorchScript module (torch.jit.ScriptModule / script_method): Transformer Engine modules cannot be scripted, so convert only after moving it to eager mode.`);
  }
  if (L.classCandidates && L.convertible === true) {
    reasons.push(`Its class is chosen at run time (${L.classCandidates.join('; ')}): every candidate converts the same way, so the conversion holds for either.`);
  }
  if (L.classFrom && L.convertible !== false) {
    L.convertible = 'uncertain';
    reasons.push(`Its class comes from ${L.classFrom}${L.classFrom.includes('chosen at run time') ? '' : ': another class may be chosen at run time'}, so convert where the class is chosen, not this call.`);
  }
  L.reasons = reasons;
}

/**
 * A norm class that scales by (1 + weight) only under a constructor flag (`self.add_unit_offset = add_unit_offset`,
 * then `(1 + self.weight) if self.add_unit_offset else self.weight`): the te.* norm takes the same expression as
 * zero_centered_gamma. Sets the verdict and returns true when the flag's value at this call is known as an expression
 * (the argument passed, or the parameter's default); false leaves the layer to the caller.
 */
function unitOffset(rec: LayerRec, ev: Evaluator, cond: string, te: string, reasons: string[]): boolean {
  const L = rec.layer;
  const local = rec.ctor.local;
  const attr = /^self\.(\w+)$/.exec(cond.trim())?.[1];
  // A class bound elsewhere (`partial(RMSNorm, add_unit_offset=...)`) carries the flag there, not at this call.
  if (!local?.init || !attr || L.classFrom) return false;
  const src = ev.source();
  const initText = src.slice(local.init.start, local.init.end);
  const param = new RegExp(String.raw`self\.${attr}\s*=\s*(\w+)\s*(?:\n|;|#|$)`).exec(initText)?.[1];
  const p = param ? ctorParams(src, local.init).find((x) => x.name === param) : undefined;
  if (!p) return false;
  const arg = rec.argNodes.get(p.name);
  const expr = (arg ? src.slice(arg.startIndex, arg.endIndex) : p.def ? src.slice(p.def.startIndex, p.def.endIndex) : undefined)?.replace(/\s+/g, ' ');
  if (expr === undefined) return false;
  L.convertible = true;
  if (expr === 'False') {
    reasons.push(`${L.localClass} is built with ${p.name}=False (no 1 + weight offset): it maps onto ${te} as is.`);
  } else if (expr === 'True') {
    L.zeroCenteredGamma = true;
    reasons.push(`${L.localClass} is built with ${p.name}=True, so it scales by (1 + weight): it maps onto ${te}(zero_centered_gamma=True); copy the weight as is.`);
  } else {
    L.teArgs = { ...(L.teArgs ?? {}), zero_centered_gamma: expr };
    reasons.push(`${L.localClass} scales by (1 + weight) when ${p.name} is true: it maps onto ${te}(zero_centered_gamma=${expr}), the same expression, so either way the offset matches.`);
  }
  return true;
}

/**
 * A local subclass of a library layer whose forward does more than its base (casts the weight to the input's dtype,
 * computes in float32): te.* would not keep it, nor would the fallback's torch.nn layer, so a converted model can
 * fail on the fallback path ("expected scalar type BFloat16 but found Float"). Refused, with what it does.
 */
function forwardRefusal(rec: LayerRec, te: string, torch: string, reasons: string[]): boolean {
  const L = rec.layer;
  const what = rec.ctor.local?.info.forwardExtra;
  if (!what || !L.localClass) return false;
  L.convertible = false;
  reasons.length = 0;
  reasons.push(`${L.localClass}.forward ${what}: ${te} (and ${torch}, its fallback without FP8) would not, so converting this call changes what the layer computes. Keep it, or move that behaviour into te.* by hand.`);
  return true;
}

/**
 * What makes a norm that TE could represent still not replaceable here: a forward that takes more than the tensor (a
 * gated RMSNorm: te.*Norm.forward takes one input), or a holder that reads it through its weight or attributes
 * instead of calling it (a fused kernel reading `self.norm.variance_epsilon`).
 */
function normExtras(rec: LayerRec, ev: Evaluator, te: string, reasons: string[]): void {
  const L = rec.layer;
  if (L.convertible === false) return;
  if (rec.ctor.local?.info.weightless) {
    L.convertible = false;
    for (let i = reasons.length - 1; i >= 0; i--) if (/ can become te\./.test(reasons[i])) reasons.splice(i, 1);
    reasons.push(`${L.localClass} has no learnable weight (no nn.Parameter), but ${te} always has one: converting it would add parameters and change training and the checkpoint. Keep it.`);
    return;
  }
  const scale = rec.ctor.local?.info.scaleName;
  if (scale && L.convertible === true) {
    L.convertible = 'uncertain';
    const at = L.name ? `${L.name.replace(/^self\./, '')}.` : '';
    reasons.push(`${L.localClass} calls its scale ${scale}, ${te} calls it weight: the state_dict keys change (${at}${scale} -> ${at}weight), so map them when loading a checkpoint (training from scratch is unaffected).`);
  }
  const extra = rec.ctor.local?.info.extraInputs;
  if (extra?.length) {
    L.convertible = false;
    for (let i = reasons.length - 1; i >= 0; i--) if (/ can become te\./.test(reasons[i])) reasons.splice(i, 1);
    reasons.push(`${L.localClass} takes ${extra.join(', ')} besides the input in forward (a gated norm): ${te}.forward takes one tensor, so it is no replacement. Keep it.`);
    return;
  }
  const li = rec.ctor.local?.info;
  if (li?.forwardExtra && !li.channelAxis && forwardRefusal(rec, te, L.kind === 'rmsnorm' ? 'torch.nn.RMSNorm' : 'torch.nn.LayerNorm', reasons)) return;
  const cls = rec.scope.cls;
  if (!cls || L.container || !L.attr || L.name !== `self.${L.attr}`) return;
  const use = attrUses(ev.source(), cls).get(L.attr);
  if (!use) return;
  const odd = [...(use.attrs ?? [])].filter((a) => !/^(weight|bias|eps|normalized_shape|forward|to|cuda|float|half|bfloat16|parameters|named_parameters|state_dict|load_state_dict|register_\w+|apply|train|eval|requires_grad_|reset_parameters)$/.test(a));
  if (use.params || odd.length) {
    L.convertible = 'uncertain';
    reasons.push(`${cls.info.name} also reads ${odd.length ? `self.${L.attr}.${odd[0]}` : `self.${L.attr}.weight`} directly (a fused kernel or functional op)${odd.length ? `, which ${te} does not have` : ''}: convert only together with that code.`);
  }
}

function optionValue(rec: LayerRec, ev: Evaluator, name: string): { text?: string; value?: boolean | number; note?: string } {
  const node = rec.argNodes.get(name);
  if (!node) {
    // The class's own default for that parameter (`def __init__(self, dim, bias: bool = True)`), when a literal.
    const def = rec.ctor.local?.normDefaults?.[name];
    if (def === undefined) return {};
    const v = /^True$/.test(def) ? true : /^False$/.test(def) ? false : undefined;
    return v === undefined ? {} : { text: `${def} (the default of ${rec.ctor.display})`, value: v };
  }
  const text = rec.layer.options[name] ?? name;
  const e = ev.eval(node, rec.scope as EvalScope, 0);
  const note = e.notes.filter((n) => /\bdefault\b|as passed where/.test(n)).join('; ') || undefined;
  return { text, value: e.value, note };
}

function teArgsLinear(rec: LayerRec): Record<string, string> {
  const o = rec.layer.options;
  const a: Record<string, string> = {};
  if (o.bias !== undefined) a.bias = o.bias;
  if (o.dtype !== undefined) a.params_dtype = o.dtype;
  if (o.device !== undefined) a.device = o.device;
  if (rec.ctor.parallelMode) a.parallel_mode = `"${rec.ctor.parallelMode}"`;
  return a;
}

function teArgsNorm(rec: LayerRec): Record<string, string> {
  const o = rec.layer.options;
  const a: Record<string, string> = {};
  if (o.eps !== undefined) a.eps = o.eps;
  if (o.dtype !== undefined) a.params_dtype = o.dtype;
  if (o.device !== undefined) a.device = o.device;
  if (rec.ctor.local?.info.zeroCenteredGamma) a.zero_centered_gamma = 'True';
  return a;
}

/**
 * Hugging Face's `_keep_in_fp32_modules`: the model author keeps these modules in float32 even when the rest of the
 * model runs in half precision (T5 keeps its `wo` projections there because their activations overflow FP16), so
 * moving them to FP8 goes against the model's own precision contract. Applies to the Linear layers of the file whose
 * attribute or any component of the module path is listed, as Hugging Face matches names.
 */
export function keepInFp32(recs: LayerRec[], lists: Map<string, string[]>): void {
  if (!lists.size) return;
  const byName = new Map<string, string>();
  for (const [cls, names] of lists) for (const n of names) if (!byName.has(n)) byName.set(n, cls);
  for (const r of recs) {
    const L = r.layer;
    if (L.isTe || (L.kind !== 'linear' && L.kind !== 'parallel-linear') || L.convertible === false) continue;
    const segs = [L.attr ?? '', ...(L.path ?? '').split(/[.[\]*]+/)].filter(Boolean);
    const hit = segs.find((s) => byName.has(s));
    if (hit === undefined) continue;
    L.convertible = false;
    L.reasons = [
      `${byName.get(hit)}._keep_in_fp32_modules lists "${hit}": the model keeps this layer in float32 even when the rest runs in half precision (typically because its activations overflow in lower precision), so keep it out of FP8 and in high precision.`,
    ];
  }
}

/**
 * A torch.nn layer assigned to the same attribute of the same class as a te.* layer (`if use_te and te is not None:
 * self.norm = te.LayerNorm(d) else: self.norm = nn.LayerNorm(d)`, llm-foundry): the deliberate fallback for when
 * Transformer Engine is off or missing. Converting it would make the fallback need TE too, so it stays.
 */
export function keepTorchFallbacks(recs: LayerRec[]): void {
  const te = new Map<string, LayerRec>();
  for (const r of recs) {
    const L = r.layer;
    if (L.isTe && L.ownerClass && L.name) te.set(`${L.ownerClass}\u0001${L.name}`, r);
  }
  if (!te.size) return;
  for (const r of recs) {
    const L = r.layer;
    if (L.isTe || !L.ownerClass || !L.name || L.convertible === false) continue;
    const twin = te.get(`${L.ownerClass}\u0001${L.name}`);
    // Elements of one container (`nn.Sequential(te.LayerNorm(d), nn.Linear(d, h))`) share their path but are
    // siblings, not alternatives; and a fallback is the same kind of layer as its te.* twin.
    if (!twin || sameContainer(r, twin) || !twinKind(twin.layer.kind, L.kind)) continue;
    L.convertible = false;
    L.fallbackFor = `${twin.layer.constructor} (line ${twin.layer.span.startLine + 1})`;
    L.reasons = [
      `${L.name} is also built as ${twin.layer.constructor} (line ${twin.layer.span.startLine + 1}) in ${L.ownerClass}: this ${L.constructor} is the fallback for when Transformer Engine is off or missing, so it stays as it is.`,
    ];
  }
}

/** Whether two layers are elements of the same container call (nn.Sequential / nn.ModuleList / a list literal). */
function sameContainer(a: LayerRec, b: LayerRec): boolean {
  if (!a.layer.container || !b.layer.container) return false;
  for (let p = a.call.node.parent, i = 0; p && i < 12; p = p.parent, i++) {
    if (p.type === 'assignment' || p.type === 'expression_statement' || p.type === 'return_statement') break;
    if ((p.type === 'call' || p.type === 'list' || p.type === 'tuple') && p.startIndex <= b.call.node.startIndex && b.call.node.endIndex <= p.endIndex) {
      // A conditional that picks one of the two is a choice, not a container.
      return !hasConditionalBetween(p, a.call.node, b.call.node);
    }
  }
  return false;
}

function hasConditionalBetween(top: SyntaxNode, a: SyntaxNode, b: SyntaxNode): boolean {
  for (const n of [a, b]) for (let p = n.parent; p && p !== top; p = p.parent) if (p.type === 'conditional_expression') return true;
  return false;
}

/** A torch.nn fallback has the kind of its te.* twin (te.LayerNormLinear and whole blocks accept any). */
function twinKind(te: string, torch: string): boolean {
  const norm = (k: string): string => (k === 'layernorm' || k === 'rmsnorm' ? 'norm' : k === 'parallel-linear' ? 'linear' : k);
  return te === 'other' || norm(te) === norm(torch);
}

function isVocabDim(d: Dim | undefined): boolean {
  return !!d && isVocabText(d.text.replace(/\s+/g, ''));
}
