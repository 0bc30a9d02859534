/**
 * Two kinds of Linear that do work in a model but gain nothing from FP8 and are kept in high precision, found by
 * structure rather than by attribute name:
 *
 * - the output projection to pixels: its out_features are a product of a patch size and a channel count
 *   (`patch_size * patch_size * out_channels`, DiT / SD3 / MAE decoders) and its result flows to the return of its
 *   class's forward with no other layer of the class after it (the last layer of the model, like an lm-head); with a
 *   patch size of 1 (`nn.Linear(inner_dim, out_channels)`, LTX-Video, Stable Audio) the same in the model's own class
 *   (no other class of the file builds it), its result seen flowing to the return;
 * - the two halves of a bottleneck adapter: a down / up pair in one class (hidden -> r -> hidden) whose inner width
 *   is named as an adapter or bottleneck size (`adapter_attn_dim`, `bottleneck_dim`), or whose class is named so.
 *
 * Both are computed fresh on every run (their evidence lies outside the layer's own statement) and enter the role
 * memo key through the reason strings they return.
 */
import type { SyntaxNode } from './node';
import type { ClassModel } from './classes';
import type { LayerRec } from './layers';
import type { FuncRec } from './walk';

/** A patch-size factor and a channel-count factor multiplied: the pixels of one patch. */
const PATCH = /patch/i;
const CHANNELS = /chan|channel/i;
const PRODUCT = /\*/;

/** Size names of an adapter's inner width (Houlsby / Pfeiffer adapters, wav2vec2-style attention adapters). */
export const ADAPTER_SIZE = /(^|[._])(adapter\w*_(dim|size|width)|bottleneck\w*_(dim|size|width)|adapter_(dim|size)|reduction_factor)\)?$/i;
const ADAPTER_CLASS = /Adapter|Bottleneck/;

const squash = (t: string | undefined): string => (t ?? '').replace(/\s+/g, '');

/** Whether an output size text is patch pixels (`patch_size*patch_size*out_channels`, `patch_size**2*in_chans`). */
export function isPatchPixels(text: string): boolean {
  return PRODUCT.test(text) && PATCH.test(text) && CHANNELS.test(text);
}

function isLinear(r: LayerRec): boolean {
  return r.layer.kind === 'linear' || r.layer.kind === 'parallel-linear';
}

/**
 * Output projections to patch pixels, with the reason (their out size and how their result leaves the model). One
 * whose class's forward feeds the result to another of the class's layers is not the last one, and is not listed.
 */
export function pixelOutputs(src: string, classes: Map<string, ClassModel>, recs: LayerRec[], builtElsewhere: (cls: string) => boolean): Map<LayerRec, string> {
  const out = new Map<LayerRec, string>();
  // Indexes built once (a class may hold thousands of layers): records by owner class, Linears by owner and out size.
  const byOwner = new Map<string, LayerRec[]>();
  const byOwnerOut = new Map<string, LayerRec[]>();
  for (const x of recs) {
    const o = x.layer.ownerClass;
    if (!o) continue;
    (byOwner.get(o) ?? byOwner.set(o, []).get(o)!).push(x);
    if (!isLinear(x) || !x.layer.attr) continue;
    const k = `${o}\u0001${squash(x.layer.outFeatures?.text)}`;
    (byOwnerOut.get(k) ?? byOwnerOut.set(k, []).get(k)!).push(x);
  }
  for (const r of recs) {
    const L = r.layer;
    if (!isLinear(r) || !L.attr || !L.ownerClass) continue;
    const texts = [squash(L.outFeatures?.text), ...r.outVia.map(squash)];
    const pixels = texts.find(isPatchPixels);
    // Without a patch factor (patch size 1: LTX, Stable Audio), an output size named for channels counts only in the
    // model's own class (no other class of the file builds it) and only when forward is seen returning the result.
    const channels = pixels ? undefined : texts.find((t) => CHANNELS.test(t) && !/\bhidden|inner|mid/i.test(t));
    // The output half of the model's own input / output projection pair (project_in: a -> d, project_out: d -> b).
    const io = pixels || channels ? undefined : ioPairInput(r, byOwnerOut.get(`${L.ownerClass}\u0001${squash(L.inFeatures?.text)}`) ?? []);
    if (!pixels && !((channels || io) && !builtElsewhere(L.ownerClass))) continue;
    const cm = classes.get(L.ownerClass);
    const fwd = cm?.forward;
    // A class of the file that builds no layer and no parameter (k-diffusion's Unpatching: a rearrange) only reshapes.
    const reshapeOnly = (x: LayerRec): boolean => {
      const local = x.ctor.local;
      if (!local) return false;
      const name = local.rec.name;
      return !byOwner.has(name) && !/\bParameter\s*\(|register_buffer|register_parameter/.test(src.slice(local.rec.start, local.rec.end));
    };
    const own = (byOwner.get(L.ownerClass) ?? []).filter((x) => x !== r && x.layer.attr && !reshapeOnly(x)).map((x) => x.layer.attr as string);
    const flow = fwd ? flowsToReturn(src, fwd, L.attr, own) : 'unknown';
    if (flow === false || (!pixels && flow !== true)) continue;
    const shown = (L.outFeatures?.text ?? pixels ?? channels ?? '').replace(/\s+/g, ' ').trim();
    const what = pixels ? `patch pixels (${shown})` : channels ? `the model's output channels (${shown})`
      : `${CONTINUOUS_OUTPUT} (${shown}; ${io} projects the input in to the width ${squash(L.inFeatures?.text)})`;
    out.set(r, flow === 'unknown'
      ? `its output is ${what}`
      : `its output is ${what} and ${L.ownerClass}.forward returns it with no layer after it`);
  }
  return out;
}

/** How a projection found only by its input / output pair is described (an lm-head's evidence outweighs it). */
export const CONTINUOUS_OUTPUT = "the model's continuous output";

/** Names of a hidden (inner) width: a feed-forward's or an attention's, not the model's. */
const INNER_WIDTH = /hidden|inner|mid|ff|intermediate|mlp|head|bottleneck|rank/i;
/** A model-sized class name, not a block's (an MLP's fc1 / fc2 or an attention's in / out are a pair of the same shape). */
const BLOCK_CLASS = /MLP|Mlp|FeedForward|FFN|Ffn|GLU|Expert|Attention|Attn|MHA|MultiHead|Adapter|Bottleneck|LoRA|Lora|Block|Layer$/;
/** An output size that names classes or a vocabulary: a head, decided by the role rules. */
const HEAD_SIZE = /class|label|vocab|token|target|action/i;

/**
 * The input projection of the pair `r` closes (looked for among `sameOwnerOutD`, the Linears of r's class whose output
 * size reads as r's input size): another Linear of r's class that maps some size into r's input width
 * (the model's width: `dim`, `d_model`, not a hidden one), in a class that is not a block (MLP, attention, adapter),
 * while r maps that width out to another size that is not a class count, a vocabulary or the pair's input size. Its
 * attribute, else undefined.
 */
function ioPairInput(r: LayerRec, sameOwnerOutD: LayerRec[]): string | undefined {
  const L = r.layer;
  const d = squash(L.inFeatures?.text);
  const b = squash(L.outFeatures?.text);
  // The width is one name (`dim`, `self.d_model`), not an expression (`4 * dim`: an MLP's widened width).
  if (!d || !b || d === b || !/^[A-Za-z_][\w.]*$/.test(d) || INNER_WIDTH.test(d) || HEAD_SIZE.test(b) || BLOCK_CLASS.test(L.ownerClass ?? '')) return undefined;
  const input = sameOwnerOutD.find((x) => x !== r && x.layer.attr !== L.attr
    && squash(x.layer.outFeatures?.text) === d && !!squash(x.layer.inFeatures?.text) && squash(x.layer.inFeatures?.text) !== d
    // b -> d -> b is a bottleneck or a token model's in / out (ESPnet's odim), not an input space and an output space.
    && squash(x.layer.inFeatures?.text) !== b);
  return input?.layer.attr;
}

/** Identifier names of an assignment target (`x`, `a, b`). */
function targets(src: string, left: SyntaxNode): string[] {
  return src.slice(left.startIndex, left.endIndex).split(',').map((s) => s.trim()).filter((s) => /^[A-Za-z_]\w*$/.test(s));
}

const mentions = (text: string, names: Set<string>): boolean => [...names].some((n) => new RegExp(`\\b${n}\\b`).test(text));

/**
 * Follows the value of `self.<attr>(...)` through forward: the names assigned from it (and from expressions that
 * use them) until a return uses one (true), or another of the class's layers is applied to one (false: not the last
 * layer). 'unknown' when the layer is never called in forward.
 */
function flowsToReturn(src: string, fwd: FuncRec, attr: string, ownAttrs: string[]): boolean | 'unknown' {
  const callAt = fwd.calls.find((c) => new RegExp(`^self\\s*\\.\\s*${attr}\\s*\\(`).test(src.slice(c.start, c.start + attr.length + 40)));
  if (!callAt) return 'unknown';
  let p: SyntaxNode | null = callAt.node;
  let stmt: SyntaxNode | undefined;
  const ownCall = ownAttrs.length ? new RegExp(`^self\\s*\\.\\s*(${ownAttrs.join('|')})\\s*\\(`) : undefined;
  for (let i = 0; p && i < 12; p = p.parent, i++) {
    if (p.type === 'return_statement') return true;
    if (p.type === 'assignment' || p.type === 'augmented_assignment') { stmt = p; break; }
    // Nested in a call of another of the class's layers (`self.post(self.proj(x))`): not the last layer.
    if (i > 0 && p.type === 'call' && ownCall?.test(src.slice(p.startIndex, Math.min(p.endIndex, p.startIndex + 200)))) return false;
  }
  const left = stmt?.childForFieldName('left');
  if (!stmt || !left) return false;
  const tainted = new Set(targets(src, left));
  const layerCall = ownAttrs.length ? new RegExp(`self\\s*\\.\\s*(${ownAttrs.join('|')})\\s*\\(([^)]*)`, 'g') : undefined;
  const events = [
    ...fwd.assigns.filter((a) => a.start > stmt!.endIndex - 1).map((a) => ({ at: a.start, node: a.node, ret: false })),
    ...fwd.returns.filter((n) => n.startIndex > stmt!.endIndex - 1).map((n) => ({ at: n.startIndex, node: n, ret: true })),
  ].sort((a, b) => a.at - b.at);
  for (const e of events) {
    if (!tainted.size) return false;
    const text = src.slice(e.node.startIndex, e.node.endIndex);
    if (layerCall) {
      for (const m of text.matchAll(layerCall)) if (mentions(m[2] ?? '', tainted)) return false;
    }
    if (e.ret) { if (mentions(text, tainted)) return true; continue; }
    const l = e.node.childForFieldName('left');
    const right = e.node.childForFieldName('right');
    if (!l || !right) continue;
    const names = targets(src, l);
    if (mentions(src.slice(right.startIndex, right.endIndex), tainted)) names.forEach((n) => tainted.add(n));
    else names.forEach((n) => tainted.delete(n));
  }
  return false;
}

/**
 * The Linears of bottleneck adapters, with the reason: a pair in one class, down (h -> r) and up (r -> h), where r is
 * named as an adapter or bottleneck width, or the class is named for one.
 */
export function adapterBottlenecks(recs: LayerRec[]): Map<LayerRec, string> {
  const out = new Map<LayerRec, string>();
  const byOwner = new Map<string, LayerRec[]>();
  for (const r of recs) {
    if (!isLinear(r) || !r.layer.ownerClass || !r.layer.inFeatures || !r.layer.outFeatures) continue;
    const list = byOwner.get(r.layer.ownerClass) ?? [];
    list.push(r);
    byOwner.set(r.layer.ownerClass, list);
  }
  const named = (r: LayerRec): boolean => [r.layer.outFeatures?.text, ...r.outVia].some((t) => ADAPTER_SIZE.test(squash(t)));
  for (const [owner, list] of byOwner) {
    // Linear by (in, out) text: the up half of a pair is found in one lookup (a class may hold thousands of layers).
    const byDims = new Map<string, LayerRec>();
    for (const r of list) {
      const key = `${squash(r.layer.inFeatures?.text)}\u0001${squash(r.layer.outFeatures?.text)}`;
      if (!byDims.has(key)) byDims.set(key, r);
    }
    for (const down of list) {
      if (out.has(down)) continue;
      const h = squash(down.layer.inFeatures?.text);
      const inner = squash(down.layer.outFeatures?.text);
      if (!h || !inner || h === inner) continue;
      const up = byDims.get(`${inner}\u0001${h}`);
      if (!up || up === down || out.has(up)) continue;
      // The inner width is the adapter-named one; with only the class name to go by, the smaller (or the first built).
      if (named(up) && !named(down)) continue;
      const byName = named(down);
      if (!byName && !ADAPTER_CLASS.test(owner)) continue;
      const small = down.layer.outFeatures?.value;
      const big = down.layer.inFeatures?.value;
      if (small !== undefined && big !== undefined && small >= big) continue;
      const why = `bottleneck adapter: ${owner} projects ${h} down to ${inner} and back up${byName ? '' : ` (${owner} is named for an adapter)`}`;
      out.set(down, why);
      out.set(up, why);
    }
  }
  return out;
}

/**
 * Names of per-sample conditioning: timestep / noise-level and class / augmentation embedders, global (pooled)
 * conditioning, mapping networks, adaLN modulation. Matched on a whole path segment, attribute or class name word.
 */
const COND_SEGMENT = /^(t|time|timestep|timesteps|temb|sigma|noise_level|aug|augment|global_cond|global|pooled|mapping|adaln|ada_ln|modulation|scale_shift)(_|$)|(^|_)(time_?embed\w*|timestep_?embed\w*|t_embedder|temb\w*|time_in\w*|time_proj\w*|time_mlp|global_cond\w*|global_embed\w*|pooled_proj\w*|adaln\w*|modulation|scale_shift\w*)$/i;
const COND_CLASS = /^(Timestep|Time|Temb|Noise|Sigma|Label|Class|Mapping)\w*(Embed|Embedder|Embedding|Projection|Proj|Mlp|MLP|Network|Block|FeedForward\w*)$|^(Global|Pooled)Cond\w*$|^Ada\w*(Norm|LN)\w*$|Modulation$/;

/**
 * Linears that run on per-sample rows (one row per batch item, not per token): timestep and class embedders,
 * global-condition projections, mapping networks and adaLN modulation. FP8 gains nothing on batch-many rows and these
 * steer every token of the sample, so they stay in BF16. Found by the names of the layer's path, its class, and the
 * classes of the layers that hold it.
 */
export function conditioningLinears(recs: LayerRec[]): Map<LayerRec, string> {
  const out = new Map<LayerRec, string>();
  for (const r of recs) {
    if (!isLinear(r)) continue;
    const L = r.layer;
    const segs = (L.path ?? '').split(/[.[\]*]+/).filter(Boolean);
    const seg = [...segs, L.attr ?? ''].find((s) => s && COND_SEGMENT.test(s));
    const owner = L.ownerClass ?? '';
    if (seg) out.set(r, `per-sample conditioning: ${L.path ?? L.attr} is a conditioning projection (${seg}) run once per sample, not per token`);
    else if (owner && COND_CLASS.test(owner)) out.set(r, `per-sample conditioning: inside ${owner}, which maps the per-sample condition (run once per sample, not per token)`);
  }
  return out;
}
