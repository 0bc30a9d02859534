/**
 * Roles: what each layer does in the model. The lm-head is found by what it does (vocabulary-sized output, weights
 * tied to an embedding, the projection that produces the logits in forward); its name is weaker evidence.
 */
import type { SyntaxNode } from './node';
import type { LayerRole, WeightTie } from './ir';
import { paramsOf, type ClassModel } from './classes';
import type { LayerRec } from './layers';
import { CLASSIFIER_NAME, EXPERTS_NAME, VOCAB_EXPR, VOCAB_NAME } from './known';
import { leftOf, type AssignRec, type CallRec, type FuncRec } from './walk';
import { adapterBottlenecks, conditioningLinears, CONTINUOUS_OUTPUT, pixelOutputs } from './output-roles';
import { classSelections, type ClassSelections } from './router-selection';

export interface RoleContext {
  src: string;
  classes: Map<string, ClassModel>;
  ties: WeightTie[];
  /** `_tied_weights_keys` entries per class name. */
  tiedKeys: Map<string, string[]>;
  /** Construction sites of local classes. */
  ctorSites: (cls: string) => CallRec[];
  /** Names bound to the vocabulary size, filled here. */
  vocabNames: Set<string>;
}

const STRONG_HEAD_NAME = /^(lm_head|output_layer|embed_out|output_projection|lm_logits|logits_proj|lm_head_proj|word_pred|vocab_proj|unembed|W_U|unembedding|to_logits|logit_head)$/i;
const WEAK_HEAD_NAME = /^(output|decoder|proj_out|head|out|generator|final_proj|final_layer|output_proj|out_proj_vocab|predictions|pred|logits|linear_out|fc_out|classifier_head)$/i;
const ATTN_NAME = /^(q|k|v|qkv|query|key|value|wq|wk|wv|wo|wqkv|c_attn|o_proj|q_proj|k_proj|v_proj|qkv_proj|kv_proj|out_proj|in_proj|attn|attention|self_attn|cross_attn|kv|q_a_proj|q_b_proj|kv_a_proj_with_mqa|kv_b_proj|query_key_value|dense_qkv|to_q|to_k|to_v|to_qkv|to_kv|to_out|linear_qkv|linear_proj|qkv_linear|attn_proj|c_q|c_k|c_v|wqkv_proj|o|proj_q|proj_k|proj_v|W_Q|W_K|W_V|W_O)$/i;
const ATTN_CLASS = /Attention|Attn|SelfAttention|MHA|MultiHead/i;
const MLP_NAME = /^(fc1|fc2|fc3|c_fc|gate_proj|up_proj|down_proj|w1|w2|w3|wi|wi_0|wi_1|dense_h_to_4h|dense_4h_to_h|intermediate|ffn|mlp|ff|feed_forward|fc_in|fc_out_mlp|linear1|linear2|gate_up_proj|linear_fc1|linear_fc2|up|down|gate_up|experts|w12|ffn_up|ffn_down|ffn_gate|c_fc2|mlp_fc|proj_in)$/i;
const MLP_CLASS = /MLP|Mlp|FeedForward|FFN|Ffn|DenseActDense|DenseGatedActDense|Expert|SwiGLU|GLU|Intermediate|PositionwiseFeed/;
// `Gate` but not `Gated`: a gated MLP (GatedFF, DenseGatedActDense) has a `gate` projection that is no router.
const MOE_CLASS = /MoE|Moe|Mixture|Sparse|Router|Switch|Expert|Gate(?!d)|Routing/;
/** Output sizes that name a hidden or feed-forward width: a projection with such an output is no router. */
const WIDTH_NAME = /(intermediate|ffn|d_ff|ff_dim|inner|hidden|d_model|model_dim|embed_dim|n_embd|width|mlp_dim)/i;
/** Sizes that name the feed-forward width (`config.intermediate_size`, `d_ff`, `4 * n_embd`): a projection from or to it is
 *  part of the MLP whatever its class is called (`BertOutput.dense`). `inner` and `hidden` alone are not: attention
 *  code uses them too. */
const FFN_WIDTH = /(intermediate|ffn|\bd_ff\b|dim_ff|ff_dim|ff_size|n_inner|mlp_dim|mlp_hidden|mlp_ratio|^4\*|\*4$)/i;
const ROUTER_NAME = /^(gate|router|gating|wg|w_gate|switch|gate_proj_router|router_proj|classifier_router|(shared_)?expert_gate)$/i;

/** Who holds a local class: the owner class and the attribute it is stored under. */
interface Holder { owner: string; attr: string }

/** A role decision: the role and the evidence for it. */
interface RoleCall { role: LayerRole; reasons: string[] }

/** What assignRoles gathers once over all the layers of the file before it classifies any of them. */
interface RoleIndex {
  ctx: RoleContext;
  recs: LayerRec[];
  /** Vocabulary sizes known from embeddings: their values and their (whitespace-free) texts. */
  vocabValues: Set<number>;
  embeddingTexts: Set<string>;
  /** Layers by attribute path (`transformer.wte`, `layers[*]`). */
  byPath: Map<string, LayerRec[]>;
  /** `${class}.${attr}` -> the class whose `_tied_weights_keys` lists that layer's weight. */
  keyTied: Map<string, string>;
  /** Per local class: where it is built (`self.output = SelfOutput(config)` inside an Attention class). */
  heldBy: Map<string, Holder[]>;
  /** Layers tied to an embedding, with the path of the other side of the tie. */
  tiedTo: Map<LayerRec, string>;
  /** Projections that produce the logits in forward, with the reason. */
  lastInForward: Map<LayerRec, string>;
  /** The last Linear of a module whose result a holder's forward names logits (`logits = self.over_arch(x)`, where
   *  OverArch returns `self.model(x)`, an nn.Sequential ending in that Linear), with the reason. */
  logitsThrough: Map<LayerRec, string>;
  /** Per owner class: what its selections (topk, gumbel_softmax) take, scanned once, not once per layer; null when
   * the class selects nothing. */
  selections: Map<string, ClassSelections | null>;
  /** Output projections to patch pixels and bottleneck-adapter Linears, with the reason (output-roles.ts). */
  pixelOut: Map<LayerRec, string>;
  adapters: Map<LayerRec, string>;
  /** Linears on per-sample conditioning rows (timestep / class embedders, adaLN modulation), with the reason. */
  conditioning: Map<LayerRec, string>;
}

/** Sets role, roleReasons and tied on every layer. */
export function assignRoles(ctx: RoleContext, recs: LayerRec[]): void {
  const { vocabValues, embeddingTexts } = embeddingVocabulary(ctx, recs);
  const ix: RoleIndex = {
    ctx, recs, vocabValues, embeddingTexts,
    byPath: layersByPath(recs),
    keyTied: tiedKeyTargets(ctx, recs),
    heldBy: holdersOf(recs),
    tiedTo: new Map(),
    lastInForward: new Map(),
    logitsThrough: new Map(),
    selections: new Map(),
    pixelOut: pixelOutputs(ctx.src, ctx.classes, recs, (cls) => ctx.ctorSites(cls).length > 0),
    adapters: adapterBottlenecks(recs),
    conditioning: conditioningLinears(recs),
  };
  ix.tiedTo = embeddingTies(ix);
  ix.lastInForward = logitsProjections(ix);
  ix.logitsThrough = logitsThroughModules(ix);
  classifyAll(ix);
  classificationHeads(recs);
}

/** A class named for a head (`...ClassificationHead`, `...Head`) that is neither attention nor an MLP. */
const HEAD_CLASS = /Head$/;

/**
 * A head class that ends in a class-count output (`dense -> tanh -> out_proj(num_labels)`): its other Linears are part
 * of the classification head (they run on the pooled rows and their result is the prediction), kept with it. A head
 * class without a classifier output (a projection head) is left alone. Runs after every layer has its own role, on
 * those roles only, so it is the same whether a role came from the memo or was computed.
 */
function classificationHeads(recs: LayerRec[]): void {
  const byOwner = new Map<string, LayerRec[]>();
  for (const r of recs) {
    const owner = r.layer.ownerClass;
    if (!owner || r.layer.kind !== 'linear' || !HEAD_CLASS.test(owner) || inAttnOrMlp(owner)) continue;
    byOwner.set(owner, [...(byOwner.get(owner) ?? []), r]);
  }
  for (const [owner, rs] of byOwner) {
    const out = rs.find((r) => r.layer.role === 'classifier');
    if (!out) continue;
    for (const r of rs) {
      if (r.layer.role !== 'other' && r.layer.role !== 'mlp') continue;
      setRole(r.layer, 'classifier', [`part of the classification head ${owner} (beside its class-count output ${out.layer.attr ?? out.layer.name})`]);
    }
  }
}

/** Vocabulary sizes known from embeddings (their texts are also recorded in ctx.vocabNames). */
function embeddingVocabulary(ctx: RoleContext, recs: LayerRec[]): { vocabValues: Set<number>; embeddingTexts: Set<string> } {
  const vocabValues = new Set<number>();
  const embeddingTexts = new Set<string>();
  for (const r of recs) {
    if (r.layer.kind !== 'embedding' || !r.layer.inFeatures) continue;
    const t = r.layer.inFeatures.text.replace(/\s+/g, '');
    if (isVocabText(t)) {
      ctx.vocabNames.add(t);
      embeddingTexts.add(t);
      if (r.layer.inFeatures.value !== undefined) vocabValues.add(r.layer.inFeatures.value);
    }
  }
  return { vocabValues, embeddingTexts };
}

/** Layers by the attribute path they are stored under (or the local name they are bound to). */
function layersByPath(recs: LayerRec[]): Map<string, LayerRec[]> {
  const byPath = new Map<string, LayerRec[]>();
  for (const r of recs) {
    const p = r.layer.path || r.localPath || '';
    if (!p) continue;
    const list = byPath.get(p) ?? [];
    list.push(r);
    byPath.set(p, list);
  }
  return byPath;
}

/** The layers a tie statement's side names (`self.lm_head`, `net[0]`, `transformer.wte`). */
function findLayer(ix: RoleIndex, path: string, owner?: string): LayerRec[] {
  const { byPath, recs } = ix;
  const clean = path.replace(/^self\./, '');
  let hit = byPath.get(clean) ?? [];
  // `net[0]` / `net[-1]` of an nn.Sequential: by position among its elements in source order, as long as no
  // element built in a loop or comprehension comes before it (from the end: after it).
  const idx = /^(.*)\[(-?\d+)\]$/.exec(clean);
  if (!hit.length && idx) {
    const elems = (byPath.get(`${idx[1]}[*]`) ?? []).slice().sort((a, b) => a.layer.span.startOffset - b.layer.span.startOffset);
    const k = Number(idx[2]);
    const order = k >= 0 ? elems : elems.slice().reverse();
    const at = k >= 0 ? k : -k - 1;
    const multi = (r: LayerRec) => r.layer.container === 'comprehension' || r.layer.container === 'loop';
    if (at < order.length && !order.slice(0, at + 1).some(multi)) return [order[at]];
    return [];
  }
  if (!hit.length) {
    const last = clean.split('.').pop() ?? '';
    hit = recs.filter((r) => r.layer.attr === last && (!owner || r.layer.ownerClass === owner));
    if (!hit.length) hit = recs.filter((r) => r.layer.attr === last);
  }
  return hit;
}

/**
 * `_tied_weights_keys` entries are dotted paths from the class that lists them (`cls.predictions.decoder.weight`
 * in a masked-LM wrapper): follow each segment through the local classes the attributes are built from.
 */
function tiedKeyTargets(ctx: RoleContext, recs: LayerRec[]): Map<string, string> {
  const childClass = new Map<string, string>();
  for (const r of recs) {
    if (r.layer.ownerClass && r.layer.attr && r.layer.localClass) childClass.set(`${r.layer.ownerClass}.${r.layer.attr}`, r.layer.localClass);
  }
  const keyTied = new Map<string, string>(); // `${class}.${attr}` -> class that lists the key
  for (const [cls, keys] of ctx.tiedKeys) {
    for (const k of keys) {
      if (!/\.weight$/.test(k)) continue;
      const segs = k.replace(/\.weight$/, '').split('.').filter((x) => x && !/^\d+$/.test(x));
      if (!segs.length) continue;
      let at: string | undefined = cls;
      for (const seg of segs.slice(0, -1)) {
        at = at === undefined ? undefined : childClass.get(`${at}.${seg}`);
        if (at === undefined) break;
      }
      if (at !== undefined) keyTied.set(`${at}.${segs[segs.length - 1]}`, cls);
    }
  }
  return keyTied;
}

/** Where each local class is built: a helper class with no role evidence of its own takes the role of its holders. */
function holdersOf(recs: LayerRec[]): Map<string, Holder[]> {
  const heldBy = new Map<string, Holder[]>();
  for (const r of recs) {
    const { localClass, ownerClass, attr } = r.layer;
    if (!localClass || !ownerClass || localClass === ownerClass) continue;
    const list = heldBy.get(localClass) ?? [];
    list.push({ owner: ownerClass, attr: attr ?? '' });
    heldBy.set(localClass, list);
  }
  return heldBy;
}

/** The role all the holders of a local class agree on (attention or MLP), if they agree. */
function roleFromHolders(heldBy: Map<string, Holder[]>, cls: string): 'attention' | 'mlp' | undefined {
  const holders = heldBy.get(cls);
  if (!holders?.length) return undefined;
  const roles = new Set(holders.map(holderRole));
  if (roles.size !== 1) return undefined;
  return [...roles][0];
}

/** What one holder says: the attribute name first, then an attention or MLP class that is not a whole block. */
function holderRole(h: Holder): 'attention' | 'mlp' | undefined {
  if (/^(attn|attention|self_attn|cross_attn|self_attention|crossattention|mha)$/i.test(h.attr)) return 'attention';
  if (/^(mlp|ffn|feed_forward|ff|intermediate|feedforward)$/i.test(h.attr)) return 'mlp';
  if (ATTN_CLASS.test(h.owner) && !MLP_CLASS.test(h.owner) && !/Block|Layer$|Decoder|Encoder/.test(h.owner)) return 'attention';
  if (MLP_CLASS.test(h.owner) && !ATTN_CLASS.test(h.owner) && !/Block|Layer$|Decoder|Encoder/.test(h.owner)) return 'mlp';
  return undefined;
}

/** Both sides of every weight tie that involves an embedding, each mapped to the path of the other side. */
function embeddingTies(ix: RoleIndex): Map<LayerRec, string> {
  const tiedTo = new Map<LayerRec, string>();
  // A tie made on `self` in a class means that class's layers (or those of the classes it builds), not every layer
  // of the file with the same attribute name.
  const ownedBy = (hits: LayerRec[], owner: string | undefined): LayerRec[] => {
    const mine = owner ? hits.filter((r) => r.layer.ownerClass === owner) : [];
    return mine.length ? mine : hits;
  };
  for (const t of ix.ctx.ties) {
    const left = t.leftLayer ? ownedBy(findLayer(ix, t.leftLayer, t.ownerClass), t.ownerClass) : [];
    const right = t.rightLayer ? ownedBy(findLayer(ix, t.rightLayer, t.ownerClass), t.ownerClass) : [];
    for (const l of left) for (const r of right) {
      // Weight tying means an output projection sharing the embedding table; a parameter shared between two other
      // layers (`model_b.mlp.fc.weight = model_a.mlp.fc.weight`) says nothing about an lm-head.
      if (l.layer.kind !== 'embedding' && r.layer.kind !== 'embedding') continue;
      tiedTo.set(r, l.layer.path || t.leftLayer);
      tiedTo.set(l, r.layer.path || t.rightLayer);
    }
  }
  for (const r of ix.recs) {
    const emb = r.layer.kind === 'linear' && !tiedTo.has(r) ? builtOnEmbeddingWeight(ix, r) : undefined;
    if (!emb) continue;
    tiedTo.set(r, emb.name);
    for (const e of emb.tables) if (!tiedTo.has(e)) tiedTo.set(e, r.layer.path || r.layer.name || r.layer.constructor);
  }
  return tiedTo;
}

/**
 * A projection built on an embedding's weight (`TiedProjection(embed.weight)`, `TiedLinear(self.wte.weight)`): the
 * weight passed first (or as `weight=`) belongs to an embedding of the file, or to a parameter annotated as one
 * (`embed: Embedding`). Returns the embedding's name.
 */
function builtOnEmbeddingWeight(ix: RoleIndex, r: LayerRec): { name: string; tables: LayerRec[] } | undefined {
  const arg = r.layer.args.find((a) => a.name === 'weight') ?? r.layer.args.find((a) => a.index === 0);
  const m = arg && /^(?:self\.)?([A-Za-z_][\w.]*)\.weight$/.exec(arg.text.replace(/\s+/g, ''));
  if (!m) return undefined;
  const owner = m[1];
  const tables = findLayer(ix, owner, r.layer.ownerClass).filter((e) => e.layer.kind === 'embedding');
  if (tables.length) return { name: owner, tables };
  const fn = r.call.scope.fn;
  if (!fn || owner.includes('.')) return undefined;
  const p = paramsOf(ix.ctx.src, fn).find((x) => x.name === owner);
  return p?.annotation && /(^|\.)\w*Embedding\b/.test(p.annotation) && !/Rotary|Positional|Sinusoid/.test(p.annotation) ? { name: owner, tables: [] } : undefined;
}

/** The last call in a forward whose value is returned or named like logits. */
interface LogitsCall { rec: LayerRec; usage: string; probs?: string }

/**
 * Forward usage: the projection that produces the logits. Position alone is weak evidence, so it only counts for
 * the outermost call whose value is returned (directly or through a local) or stored under a logits-like name, in
 * a class that is a whole language model (it owns an embedding, or nothing else builds it and the output size is
 * unknown or vocabulary-like), and never for a hidden->hidden projection.
 */
function logitsProjections(ix: RoleIndex): Map<LayerRec, string> {
  const lastInForward = new Map<LayerRec, string>();
  const byOwner = new Map<string, LayerRec[]>();
  const ownsEmbedding = new Set<string>();
  for (const r of ix.recs) {
    if (!r.layer.ownerClass) continue;
    if (r.layer.kind === 'embedding') ownsEmbedding.add(r.layer.ownerClass);
    if (r.layer.kind !== 'linear' && r.layer.kind !== 'parallel-linear') continue;
    const list = byOwner.get(r.layer.ownerClass) ?? [];
    list.push(r);
    byOwner.set(r.layer.ownerClass, list);
  }
  for (const cm of ix.ctx.classes.values()) {
    const fwd = cm.forward;
    if (!fwd) continue;
    const own = byOwner.get(cm.info.name);
    if (!own) continue;
    const last = lastLogitsCall(ix.ctx.src, fwd, own);
    if (!last) continue;
    const reason = logitsReason(ix, cm, last, ownsEmbedding.has(cm.info.name));
    if (reason) lastInForward.set(last.rec, reason);
  }
  return lastInForward;
}

/**
 * Linears that produce a model's logits through the modules holding them: a forward names the result of one of its
 * submodules logits (`logits = self.over_arch(x)`), and that submodule is an nn.Sequential ending in a Linear, or a
 * local module class whose forward returns a Linear's result or such a submodule's (followed up to three classes
 * deep). Their output is the prediction itself (torchrec's DLRM over-arch ends in a Linear to `layer_sizes[-1]`, one
 * click logit).
 */
function logitsThroughModules(ix: RoleIndex): Map<LayerRec, string> {
  const out = new Map<LayerRec, string>();
  const { src } = ix.ctx;
  const byOwner = new Map<string, LayerRec[]>();
  for (const r of ix.recs) {
    if (!r.layer.ownerClass) continue;
    const list = byOwner.get(r.layer.ownerClass);
    if (list) list.push(r); else byOwner.set(r.layer.ownerClass, [r]);
  }
  const resultCache = new Map<string, { path: string; usage: string } | null>();
  /** The submodule whose result a class's forward returns or names logits (the last such call), if any. */
  const resultOf = (cls: string): { path: string; usage: string } | undefined => {
    if (resultCache.has(cls)) return resultCache.get(cls) ?? undefined;
    let found: { path: string; usage: string } | null = null;
    const fwd = ix.ctx.classes.get(cls)?.forward;
    for (let i = (fwd?.calls.length ?? 0) - 1; fwd && i >= 0; i--) {
      const c = fwd.calls[i];
      if (src.charCodeAt(c.start) !== 115 /* s */) continue;
      const m = SELF_CALL.exec(src.slice(c.start, c.start + 200));
      if (!m) continue;
      const usage = resultName(src, c.node, fwd);
      if (usage === '<return>' || (usage && LOGITS_NAME.test(usage))) { found = { path: m[1].replace(/\s+/g, ''), usage }; break; }
    }
    resultCache.set(cls, found);
    return found ?? undefined;
  };
  /** The Linear that produces a submodule's result: an nn.Sequential's last element, or through a local class. */
  const producer = (cls: string, path: string, depth: number): { rec: LayerRec; via: string[] } | undefined => {
    const own = byOwner.get(cls) ?? [];
    const seq = own.filter((r) => r.layer.path === `${path}[*]` && r.layer.container === 'Sequential');
    if (seq.length) {
      const last = seq.reduce((a, b) => (b.layer.span.startOffset > a.layer.span.startOffset ? b : a));
      const args = last.call.node.parent;
      const kids = args?.type === 'argument_list' ? args.namedChildren.filter((k) => k !== null && k.type !== 'comment') : [];
      const isLast = kids.length > 0 && kids[kids.length - 1]?.startIndex === last.call.node.startIndex;
      return isLast && last.layer.kind === 'linear' ? { rec: last, via: [`${cls}.${path}`] } : undefined;
    }
    // Inside a held class, the Linear its forward returns (`return self.fc(x)`).
    const direct = depth > 0 ? own.filter((r) => r.layer.path === path && r.layer.kind === 'linear') : [];
    if (direct.length === 1) return { rec: direct[0], via: [`${cls}.${path}`] };
    const held = own.find((r) => r.layer.path === path && r.layer.localClass && r.layer.kind === 'other');
    const inner = held?.layer.localClass;
    if (!inner || depth >= 3) return undefined;
    const res = resultOf(inner);
    if (!res || res.usage !== '<return>') return undefined;
    const p = producer(inner, res.path, depth + 1);
    return p ? { rec: p.rec, via: [`${cls}.${path}`, ...p.via] } : undefined;
  };
  for (const cm of ix.ctx.classes.values()) {
    if (!cm.forward || !byOwner.has(cm.info.name)) continue;
    const res = resultOf(cm.info.name);
    // Named logits, not scores or predictions (attention scores, a denoiser's prediction are no class scores).
    if (!res || !/logit/i.test(res.usage)) continue;
    const p = producer(cm.info.name, res.path, 0);
    if (p && !out.has(p.rec)) out.set(p.rec, `its output is ${res.usage} in ${cm.info.name}.forward (through ${p.via.join(' -> ')})`);
  }
  return out;
}

/** The last call of one of the class's own Linears in forward (document order) whose value is returned or named logits. */
function lastLogitsCall(src: string, fwd: FuncRec, own: LayerRec[]): LogitsCall | undefined {
  // Scan backwards and stop at the first. The instance is forward's first parameter, `self` by convention (RWKV
  // writes `s`).
  const me = paramsOf(src, fwd)[0]?.name ?? 'self';
  const meCall = me === 'self' ? SELF_CALL : new RegExp(`^${me}\\s*\\.\\s*([A-Za-z_]\\w*(?:\\s*\\.\\s*[A-Za-z_]\\w*)*)\\s*\\(`);
  // The first of the class's Linears with a path (what a search of `own` per call found, once per forward).
  const byPath = new Map<string, number>();
  own.forEach((r, i) => { if (r.layer.path !== undefined && !byPath.has(r.layer.path)) byPath.set(r.layer.path, i); });
  for (let i = fwd.calls.length - 1; i >= 0; i--) {
    const c = fwd.calls[i];
    // Callee text from the source: `self.<path>(`.
    if (src.charCodeAt(c.start) !== me.charCodeAt(0) || !src.startsWith(me, c.start)) continue;
    const head = src.slice(c.start, c.start + 200);
    const m = meCall.exec(head);
    // `self.linears[k](out)`: one of several heads in a ModuleList (MusicGen's codebooks, Medusa heads).
    const sub = m ? null : new RegExp(String.raw`^${me}\s*\.\s*([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\[[^\]\n]*\]\s*\(`).exec(head);
    if (!m && !sub) continue;
    const path = m ? m[1].replace(/\s+/g, '') : `${(sub as RegExpExecArray)[1].replace(/\s+/g, '')}[*]`;
    const hit = own[Math.min(byPath.get(path) ?? Infinity, byPath.get(`${me}.${path}`) ?? Infinity)];
    if (!hit) continue;
    const flow: ResultFlow = {};
    const usage = resultName(src, c.node, fwd, flow);
    if (usage === '<return>' || (usage && LOGITS_NAME.test(usage))) return usage ? { rec: hit, usage, probs: flow.probs } : undefined;
  }
  return undefined;
}

/** Why the last logits-like call of a class's forward is its lm-head, or undefined when the class is no whole LM. */
function logitsReason(ix: RoleIndex, cm: ClassModel, last: LogitsCall, ownsEmbedding: boolean): string | undefined {
  const L = last.rec.layer;
  const inV = L.inFeatures?.value;
  const outV = L.outFeatures?.value;
  if (inV !== undefined && inV === outV) return undefined; // hidden -> hidden
  const sameText = !!L.inFeatures && !!L.outFeatures && L.inFeatures.text.replace(/\s+/g, '') === L.outFeatures.text.replace(/\s+/g, '');
  const outText = (L.outFeatures?.text ?? '').replace(/\s+/g, '');
  // An unknown output size counts only in a class that owns an embedding, or when the result is named like logits:
  // a top-level block (a Mamba mixer, an attention module defined alone) returns its out_proj too.
  // A returned (log-)softmax of the projection is the model's output distribution (a character-level LM's head).
  const vocabLike = last.probs !== undefined || (outV === undefined && (ownsEmbedding || last.usage !== '<return>'))
    || (outV !== undefined && ((outV >= 10000 && outV % 1024 !== 0) || ix.vocabValues.has(outV))) || isVocabText(outText);
  const topLevel = ix.ctx.ctorSites(cm.info.name).length === 0;
  if (!ownsEmbedding && !(topLevel && vocabLike)) return undefined;
  if (last.usage === '<return>') {
    return sameText ? undefined : `it is the last projection ${cm.info.name}.forward returns${last.probs ? `, through ${last.probs}` : ''}`;
  }
  return `its output is named ${last.usage} in ${cm.info.name}.forward`;
}

/**
 * Classifies every layer, reusing a record's role from its statement's memo (layers.ts) while the memo key is
 * unchanged: the classification of one layer reads, besides the layer as built, only what that key names.
 */
function classifyAll(ix: RoleIndex): void {
  const { ctx } = ix;
  const embSig = `${[...ix.embeddingTexts].join(',')}|${[...ix.vocabValues].join(',')}`;
  const holderSigs = new Map<string, string>();
  const holderSig = (owner: string): string => {
    let h = holderSigs.get(owner);
    if (h === undefined) {
      h = `${roleFromHolders(ix.heldBy, owner) ?? ''}:${(ix.heldBy.get(owner) ?? []).map((x) => `${x.owner}.${x.attr}`).join(',')}`;
      holderSigs.set(owner, h);
    }
    return h;
  };
  for (const r of ix.recs) {
    const L = r.layer;
    const attr = L.attr ?? '';
    const owner = L.ownerClass ?? '';
    const tie = ix.tiedTo.get(r);
    const keyOwner = ix.keyTied.get(`${owner}.${attr}`)
      ?? ((ctx.tiedKeys.get(owner) ?? []).some((k) => k.replace(/\.weight$/, '').split('.').pop() === attr) ? owner : undefined);
    const fwdUse = `${ix.lastInForward.get(r) ?? ''}\u0002${ix.logitsThrough.get(r) ?? ''}\u0002${ix.pixelOut.get(r) ?? ''}\u0002${ix.adapters.get(r) ?? ''}\u0002${ix.conditioning.get(r) ?? ''}`;
    const key = r.snap ? `${embSig}\u0001${tie ?? ''}\u0001${keyOwner ?? ''}\u0001${fwdUse}\u0001${owner ? holderSig(owner) : ''}` : undefined;
    const hit = r.snap?.roleMemo;
    if (hit && hit.key === key) {
      L.role = hit.role;
      L.roleReasons = hit.roleReasons.slice();
      if (hit.tied) L.tied = true;
      if (hit.tiedByConfig) L.tiedByConfig = true;
      if (hit.vocab !== undefined) ctx.vocabNames.add(hit.vocab);
      continue;
    }
    const vocab = classify(ix, r, { attr, owner, tie, keyOwner });
    if (r.snap && key !== undefined) {
      r.snap.roleMemo = { key, role: L.role, roleReasons: L.roleReasons.slice(), tied: L.tied, tiedByConfig: L.tiedByConfig, vocab };
    }
  }
}

/** `x = self.<attr>(...)` then `topk(x` / `x.topk(` / `gumbel_softmax(x` in the owner class: what picks. */
function selectionUse(ix: RoleIndex, owner: string, attr: string): string | undefined {
  let sel = ix.selections.get(owner);
  if (sel === undefined) {
    const cm = ix.ctx.classes.get(owner);
    const text = cm ? ix.ctx.src.slice(cm.rec.start, cm.rec.end) : '';
    sel = SELECTION.test(text) ? classSelections(text) : null;
    ix.selections.set(owner, sel);
  }
  return sel?.pick(attr);
}

/** One layer's place: its attribute, its owner class, the embedding it is tied to and the class listing its key. */
interface LayerPlace { attr: string; owner: string; tie?: string; keyOwner?: string }

/** The lm-head evidence gathered for one projection. */
interface HeadEvidence {
  score: number;
  reasons: string[];
  /** The vocabulary size the output matches, recorded in ctx.vocabNames. */
  vocab?: string;
  /** Evidence strong enough alone: a vocabulary-sized output, a tie, a `_tied_weights_keys` entry. */
  strong: boolean;
  /** The output size is a class count or tiny (outside attention/MLP classes). */
  classifierLike: boolean;
  /** The output texts: as built and through the locals it came from (whitespace-free). */
  outVia: string[];
}

/** Sets the role of one layer (tied flags included); returns the vocabulary text it matched, if any. */
function classify(ix: RoleIndex, r: LayerRec, at: LayerPlace): string | undefined {
  const L = r.layer;
  const keyTie = at.keyOwner !== undefined;
  if (at.tie || keyTie) L.tied = true;
  // Hugging Face ties the keys it lists only when the config says so (tie_word_embeddings).
  if (!at.tie && keyTie) L.tiedByConfig = true;
  const byKind = roleFromKind(r, at.tie);
  if (byKind) { setRole(L, byKind.role, byKind.reasons); return undefined; }
  const ev = headEvidence(ix, r, at);
  const call = roleFromOutput(ix, r, at, ev) ?? roleFromPlace(ix, r, at, ev.outVia, ev.reasons.length > 0)
    ?? { role: 'other', reasons: ev.reasons.length ? [...ev.reasons, 'not enough evidence for an lm-head'] : [] };
  setRole(L, call.role, call.reasons);
  return ev.vocab;
}

/** Roles that the layer's kind decides alone: catalogue role hints, embeddings, norms, blocks and convolutions. */
function roleFromKind(r: LayerRec, tie: string | undefined): RoleCall | undefined {
  const L = r.layer;
  // A library class that says what it is (an adaptive softmax, a word + position embedding module): the catalogue.
  const hint = r.ctor.roleHint;
  if (hint && (hint.role === 'lm_head' || hint.role === 'embedding') && L.kind === 'other') {
    if (hint.weightsOnlyWhen && L.options[hint.weightsOnlyWhen] === 'False') return { role: 'other', reasons: [] };
    return { role: hint.role, reasons: [tie ? `${hint.note}, weights tied to ${tie}` : `${r.ctor.display} is ${hint.note}`] };
  }
  if (L.kind === 'embedding') {
    return { role: 'embedding', reasons: [tie ? `embedding table, weights tied to ${tie}` : `${r.ctor.display} is a lookup table (embedding)`] };
  }
  if (L.kind === 'layernorm' || L.kind === 'rmsnorm') return { role: 'norm', reasons: [`${L.kind === 'rmsnorm' ? 'RMS' : 'layer'} normalisation`] };
  if (L.kind === 'other' || L.kind === 'conv') {
    // Library blocks say what they are (the catalogue's role hints: TE's attention, timm's Mlp).
    if (hint && (hint.role === 'attention' || hint.role === 'mlp')) return { role: hint.role, reasons: [`${r.ctor.display} is ${hint.note}`] };
    return { role: 'other', reasons: [] };
  }
  return undefined;
}

/** The lm-head evidence of a projection: vocabulary-sized output, a tie, producing the logits, its name. */
function headEvidence(ix: RoleIndex, r: LayerRec, at: LayerPlace): HeadEvidence {
  const L = r.layer;
  const { attr, owner, tie, keyOwner } = at;
  let vocab: string | undefined;
  const reasons: string[] = [];
  let score = 0;
  const outText = (L.outFeatures?.text ?? '').replace(/\s+/g, '');
  const outVia = [outText, ...r.outVia.map((v) => v.replace(/\s+/g, ''))];
  const vocabHit = outVia.find((t) => isVocabText(t) || ix.embeddingTexts.has(t));
  if (vocabHit !== undefined) {
    score += 3;
    // Shown as written (single spaces), not the whitespace-free matching key (`a or b`, not `aorb`).
    const shown = [L.outFeatures?.text ?? '', ...r.outVia].find((t) => t.replace(/\s+/g, '') === vocabHit)?.replace(/\s+/g, ' ').trim();
    reasons.push(`vocabulary-sized output (${shown || vocabHit || outText})`);
    vocab = vocabHit || outText;
    ix.ctx.vocabNames.add(vocab);
  }
  else if (L.outFeatures?.value !== undefined && L.outFeatures.value >= 1000 && ix.vocabValues.has(L.outFeatures.value)
    // A coincidence inside a block (an MLP width that equals the vocabulary size) is no evidence.
    && !ATTN_CLASS.test(owner) && !MLP_CLASS.test(owner) && !/Block|Layer$/.test(owner)) {
    score += 3; reasons.push(`output size ${L.outFeatures.value} equals the embedding's vocabulary size`);
  }
  const keyTie = keyOwner !== undefined;
  if (tie) { score += 3; reasons.push(`weights tied to the embedding ${tie}`); }
  else if (keyTie) { score += 3; reasons.push(`listed in ${keyOwner}._tied_weights_keys: tied to the input embedding when the config ties word embeddings`); }
  const fwd = ix.lastInForward.get(r);
  if (fwd) { score += 2; reasons.push(`produces the logits: ${fwd}`); }
  if (STRONG_HEAD_NAME.test(attr)) { score += 2; reasons.push(`named ${attr}`); }
  else if (WEAK_HEAD_NAME.test(attr)) { score += 1; reasons.push(`named ${attr} (a common lm-head name, weak evidence alone)`); }
  const outVal = L.outFeatures?.value;
  // A small output inside an attention or MLP class is an internal gate (a value-embedding gate, a per-head
  // scale), not a classifier: its role comes from the class below.
  const classifierLike = outVia.some((t) => CLASSIFIER_NAME.test(t)) || (outVal !== undefined && outVal <= 16 && !inAttnOrMlp(owner));
  const strong = vocabHit !== undefined || tie !== undefined || keyTie || reasons.some((x) => x.startsWith('output size'));
  return { score, reasons, vocab, strong, classifierLike, outVia };
}

/**
 * An output size that is the expert count itself (`num_experts`), not a width scaled by a count of experts
 * (`hidden_dim * num_shared_experts`: a shared expert's feed-forward, which one expert's MLP is) nor a count of shared
 * experts (those run on every token; they are not chosen among).
 */
function isExpertCount(t: string): boolean {
  const s = t.replace(/\s+/g, '');
  if (!EXPERTS_NAME.test(s)) return false;
  if (/shared_?experts?\)?$/i.test(s)) return false;
  return !/[*+]|\/\//.test(s.replace(/^\((.*)\)$/, '$1'));
}

function inAttnOrMlp(owner: string): boolean {
  return ATTN_CLASS.test(owner) || MLP_CLASS.test(owner);
}

/** Roles the output decides: an lm-head, a LoRA adapter, a router (selection or one output per expert), a classifier. */
function roleFromOutput(ix: RoleIndex, r: LayerRec, at: LayerPlace, ev: HeadEvidence): RoleCall | undefined {
  const L = r.layer;
  const { attr, owner } = at;
  if (ev.strong) return { role: 'lm_head', reasons: ev.reasons };
  const segs = (L.path ?? '').split(/[.[\]*]+/).filter(Boolean);
  // A low-rank adapter (LoRA's lora_A / lora_B): neither a classifier nor a block projection.
  if (LORA_NAME.test(attr) || segs.some((x) => LORA_NAME.test(x))) return { role: 'other', reasons: ['low-rank adapter (LoRA)'] };
  const pixels = ix.pixelOut.get(r);
  // An input / output pair alone gives way to an lm-head's evidence (ESPnet's decoder: odim -> d ... d -> odim).
  if (pixels && !(ev.score >= 2 && pixels.includes(CONTINUOUS_OUTPUT))) return { role: 'other', reasons: [`${OUTPUT_PROJECTION}: ${pixels}`] };
  const adapter = ix.adapters.get(r);
  if (adapter) return { role: 'other', reasons: [adapter] };
  const cond = ix.conditioning.get(r);
  if (cond) return { role: 'other', reasons: [cond] };
  // A discrete choice made from the output (top-k, Gumbel-softmax): a router, whatever its name.
  const choice = owner && attr ? selectionUse(ix, owner, attr) : undefined;
  if (choice) return { role: 'router', reasons: [`its output picks discretely (${choice}): a router`] };
  // router (MoE gate): one output per expert outweighs position and name evidence for a head
  const outVal = L.outFeatures?.value;
  const outText = ev.outVia[0];
  const widthOut = (outVal !== undefined && outVal > 512) || ev.outVia.some((t) => WIDTH_NAME.test(t));
  const perExpert = ev.outVia.some(isExpertCount);
  if (perExpert || (ROUTER_NAME.test(attr) && MOE_CLASS.test(owner) && !widthOut)) {
    return { role: 'router', reasons: [perExpert ? `one output per expert (${outText})` : `named ${attr} in ${owner}: the MoE router`] };
  }
  if (ev.score >= 2 && !ev.classifierLike && !inAttnOrMlp(owner) && !/Router|Gate(?!d)|Routing/.test(owner)) return { role: 'lm_head', reasons: ev.reasons };
  if (ev.classifierLike) {
    return { role: 'classifier', reasons: [outVal !== undefined && outVal <= 16 ? `small output (${outVal} features)` : `output size is a class count (${outText})`] };
  }
  // The prediction of a model whose output is no vocabulary (a click logit, a score): a classifier-like head.
  const through = ix.logitsThrough.get(r);
  if (through && !ev.outVia.some((t) => WIDTH_NAME.test(t))) return { role: 'classifier', reasons: [through] };
  return undefined;
}

/**
 * Attention or MLP from where the layer sits: the container names it best (`mlp[*]` inside a ResidualAttentionBlock),
 * then the factory that builds it, its class, its own name, a feed-forward width, the classes that hold its class.
 */
function roleFromPlace(ix: RoleIndex, r: LayerRec, at: LayerPlace, outVia: string[], hasHeadReasons: boolean): RoleCall | undefined {
  const L = r.layer;
  const { attr, owner } = at;
  const segs = (L.path ?? '').split(/[.[\]*]+/).filter(Boolean);
  const outerSegs = segs.slice(0, -1).concat(segs.length > 1 || L.container ? [segs[segs.length - 1]] : []);
  if (outerSegs.some((s) => /^(mlp|ffn|feed_forward|ff|mlp_block|feedforward|dense_relu_dense|intermediate)$/i.test(s))) return { role: 'mlp', reasons: [`inside ${L.path}`] };
  if (outerSegs.some((s) => /^(attn|attention|self_attn|cross_attn|self_attention|mha|encdec_attn)$/i.test(s))) return { role: 'attention', reasons: [`inside ${L.path}`] };
  const blockish = /Block|Layer$|Residual|Decoder|Encoder/.test(owner);
  // Built by a helper function named for what it builds (`def FeedForward(dim): return nn.Sequential(...)`).
  const maker = L.viaFactory ?? '';
  if (maker && MLP_CLASS.test(maker) && !ATTN_CLASS.test(maker)) return { role: 'mlp', reasons: [`built by ${maker}()`] };
  if (maker && ATTN_CLASS.test(maker) && !MLP_CLASS.test(maker)) return { role: 'attention', reasons: [`built by ${maker}()`] };
  if (MLP_CLASS.test(owner) && !(blockish && ATTN_NAME.test(attr))) return { role: 'mlp', reasons: [`inside ${owner}`] };
  if (ATTN_CLASS.test(owner) && !(blockish && MLP_NAME.test(attr))) return { role: 'attention', reasons: [`inside ${owner}`] };
  if (ATTN_NAME.test(attr)) return { role: 'attention', reasons: [`named ${attr}`] };
  if (MLP_NAME.test(attr)) return { role: 'mlp', reasons: [`named ${attr}`] };
  const inText = (L.inFeatures?.text ?? '').replace(/\s+/g, '');
  const ffnIn = inText && FFN_WIDTH.test(inText);
  const ffnOut = outVia.find((t) => t && FFN_WIDTH.test(t));
  if (ffnIn || ffnOut) {
    return { role: 'mlp', reasons: [ffnIn ? `its input is the feed-forward width (${inText})` : `its output is the feed-forward width (${ffnOut})`] };
  }
  const held = owner && !hasHeadReasons ? roleFromHolders(ix.heldBy, owner) : undefined;
  if (held) {
    const by = (ix.heldBy.get(owner) ?? []).map((h) => `${h.owner}.${h.attr}`).join(', ');
    return { role: held, reasons: [`inside ${owner}, held by ${by}`] };
  }
  return undefined;
}

function setRole(L: LayerRec['layer'], role: LayerRole, reasons: string[]): void {
  L.role = role;
  L.roleReasons = reasons;
}

export function isVocabText(t: string): boolean {
  return VOCAB_NAME.test(t) || VOCAB_EXPR.test(t);
}

/** The role reason that marks the output projection to pixels (checks-role.ts reads it). */
export const OUTPUT_PROJECTION = 'output projection to pixels';
const LORA_NAME = /^(lora_[AB]|lora_(down|up|a|b)|lora[AB])$/i;
const SELECTION = /\b(topk|gumbel_softmax)\s*\(/;
const SELF_CALL = /^self\s*\.\s*([A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*)\s*\(/;
const LOGITS_NAME = /logit|scores|lm_output|prediction/i;
const PASS_METHOD = /^(float|to|type|contiguous|view|reshape|half|bfloat16|squeeze|unsqueeze|transpose|permute|flatten)$/;

/**
 * What the value of a call becomes when the call is the outermost expression of its statement: an identifier name,
 * `<return>` (also when the name it is assigned to is then returned as is), or undefined when it feeds another call
 * or expression. Casts and reshapes of the value (`.float()`, `[:, -1]`) and conditional branches are transparent.
 */
/** What resultName saw on the way: `probs`, the softmax the value went through (`F.log_softmax`, `.softmax`). */
interface ResultFlow { probs?: string }
const SOFTMAX_FN = /(^|\.)(log_softmax|softmax)$/;

/** Per function's assignments: the sorted offsets at which each plain name is assigned (built once per text). */
const nameAssigns = new WeakMap<readonly AssignRec[], { src: string; starts: Map<string, number[]> }>();

/**
 * Whether `name` is assigned (`name = ...`) in `fn` strictly between two offsets. A forward of 5,000 `x = self.lN(x)`
 * asked this once per call, and a scan of every assignment each time made the lm-head search quadratic.
 */
function assignedBetween(src: string, fn: FuncRec, name: string, after: number, before: number): boolean {
  let index = nameAssigns.get(fn.assigns);
  if (!index || index.src !== src) {
    const starts = new Map<string, number[]>();
    for (const a of fn.assigns) {
      const l = leftOf(a);
      if (!l || l.type !== 'identifier') continue;
      const key = src.slice(l.startIndex, l.endIndex);
      const list = starts.get(key);
      if (list) list.push(a.start); else starts.set(key, [a.start]);
    }
    for (const list of starts.values()) list.sort((x, y) => x - y);
    nameAssigns.set(fn.assigns, index = { src, starts });
  }
  const list = index.starts.get(name);
  if (!list) return false;
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid] <= after) lo = mid + 1; else hi = mid;
  }
  return lo < list.length && list[lo] < before;
}

function resultName(src: string, call: SyntaxNode, fn?: FuncRec, flow?: ResultFlow): string | undefined {
  let n: SyntaxNode = call;
  for (let i = 0; i < 8; i++) {
    const p = n.parent;
    if (!p) return undefined;
    switch (p.type) {
      case 'assignment': {
        const right = p.childForFieldName('right');
        if (!right || right.startIndex !== n.startIndex || right.endIndex !== n.endIndex) return undefined;
        const left = p.childForFieldName('left');
        if (!left) return undefined;
        const name = src.slice(left.startIndex, left.endIndex);
        if (fn && left.type === 'identifier' && !LOGITS_NAME.test(name)) {
          for (const r of fn.returns) {
            if (r.startIndex <= p.startIndex) continue;
            const v = r.namedChild(0);
            if (!v || src.slice(v.startIndex, v.endIndex) !== name) continue;
            // Returned as is only if nothing assigns the name in between (`x = self.fc2(x); x = residual + x;
            // return x` returns the residual sum, not the projection).
            const reassigned = assignedBetween(src, fn, name, p.startIndex, r.startIndex) || new RegExp(`\\b${name}\\s*(\\+|-|\\*|/|@)=`).test(src.slice(p.endIndex, r.startIndex));
            if (!reassigned) return '<return>';
          }
        }
        return name;
      }
      case 'return_statement':
        return '<return>';
      case 'parenthesized_expression':
        break;
      case 'expression_list':
      case 'tuple': {
        // `return logits, loss`: the first of the returned values (later ones are usually losses or states).
        if (p.namedChild(0)?.startIndex !== n.startIndex || p.parent?.type !== 'return_statement') return undefined;
        break;
      }
      case 'argument_list': {
        // `F.log_softmax(self.out(h), dim=-1)`: the distribution over the projection's outputs; `torch.stack([...])`
        // of several heads' outputs.
        const outer = p.parent;
        const f = outer?.type === 'call' ? outer.childForFieldName('function') : null;
        const ft = f ? src.slice(f.startIndex, f.endIndex).replace(/\s+/g, '') : '';
        if (!outer || p.namedChild(0)?.startIndex !== n.startIndex) return undefined;
        if (SOFTMAX_FN.test(ft)) { if (flow) flow.probs = ft; } else if (!/^torch\.(stack|cat)$/.test(ft)) return undefined;
        n = outer;
        continue;
      }
      case 'list_comprehension':
      case 'list':
        // `[self.linears[k](out) for k in range(n)]`, `[h(x) for h in self.heads]`: the element, as a whole list.
        if (p.namedChild(0)?.startIndex !== n.startIndex) return undefined;
        break;
      case 'conditional_expression':
        // A branch (`self.out(h) if self.out else h`), not the condition.
        if (p.namedChild(1)?.startIndex === n.startIndex) return undefined;
        break;
      case 'subscript':
        if (p.childForFieldName('value')?.startIndex !== n.startIndex) return undefined;
        break;
      case 'attribute': {
        const outer = p.parent;
        const attr = p.childForFieldName('attribute');
        const method = attr ? src.slice(attr.startIndex, attr.endIndex) : '';
        if (!outer || outer.type !== 'call' || !attr) return undefined;
        if (SOFTMAX_FN.test(method)) { if (flow) flow.probs = `.${method}()`; } else if (!PASS_METHOD.test(method)) return undefined;
        n = outer;
        continue;
      }
      default:
        return undefined;
    }
    n = p;
  }
  return undefined;
}
