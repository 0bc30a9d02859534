/**
 * Layer constructions: which calls build a layer, under what attribute path they are stored (`self.c_attn`,
 * `transformer.wte`, `layers[*]`), their arguments and dimensions. Factories (local functions returning a layer) are
 * expanded at each call site.
 */
import { stmtOf, type Stmt, type SyntaxNode } from './node';
import type { Layer, LayerArg, LayerKind, Span } from './ir';
import { ctorParams, FLOAT32_CAST_BACK, paramsOf, WEIGHT_CAST, type ClassModel, type ParamInfo } from './classes';
import { argFor, type EvalScope, type Evaluator } from './dims';
import { resolveName, type ImportTable } from './imports';
import { isLibraryName, lookupClassAttribute, teMapping, type ForwardRead, type RoleHint } from './catalogue';
import { FALLBACK_FACTORIES, IN_PARAM, knownCtor, LIKE_FACTORY, OUT_PARAM, SHAPE_PARAM } from './known';
import { positionAt, spanOf, stringValue } from './spans';
import { argListOf, assignedBy, calleeOf, leftOf, rightOf, type AssignRec, type CallRec, type ClassRec, type FuncRec, type WalkResult } from './walk';
import { argsOf } from './calls';

/** What a callee builds. */
export interface CtorInfo {
  kind: LayerKind;
  isTe: boolean;
  /** Parameter names in order (positional binding). */
  params: string[];
  te?: string;
  parallelMode?: 'column' | 'row';
  local?: ClassModel;
  display: string;
  /** An imported factory function that returns a layer (`lora_or_linear`). */
  factory?: string;
  /** A factory of the project's FP8 fallback module (`fp8_linear`). */
  viaFallback?: boolean;
  /** The weight is stored [in, out] (Hugging Face Conv1D). */
  transposedWeight?: boolean;
  /** A model library's own norm class, imported: its resolved name (its forward is not in the file). */
  imported?: string;
  /** The imported norm's forward as the catalogue read it. */
  importedForward?: ForwardRead;
  /** The catalogue's role hint for a library class (a framework's output layer or embedding module). */
  roleHint?: RoleHint;
  /** Why a library Linear or norm class has no te.* twin in place (the catalogue's reason). */
  noTe?: string;
  /** The norm's weight flag when not `elementwise_affine` (the catalogue's). */
  affineFlag?: string;
}

interface Placement {
  base: string;
  segs: string[];
  multi: boolean;
  container?: Layer['container'];
  returned: boolean;
  /** A wrapper that rewrites the layer's parameters and checks its class (`quant_noise(nn.Linear(...))`). */
  wrappedBy?: string;
  /** When that wrapper leaves the module as it is, as code of the wrapper call's scope (`q_noise <= 0`). */
  wrapperOff?: string;
  /** A branch of a conditional whose other branch builds a te.* layer (`fp8_linear(d, h) if c else nn.Linear(d, h)`):
   *  that other branch's callee. */
  alternativeOf?: string;
}

/** Wrappers that reparametrise a layer in place and rely on its class (weight_norm asserts nothing, but rewrites the
 *  weight as g * v / |v|; fairseq's quant_noise asserts isinstance(module, nn.Linear)). */
const CLASS_WRAPPERS = /^(weight_norm|spectral_norm|quant_noise|orthogonal)$/;
/** A function that rewrites modules it is given rather than building one (`replace_linear_with_qlinear`, `convert_to_*`). */
const MODULE_REWRITER = /^(replace|convert|swap|patch|apply|wrap|quantize|prepare|fuse|freeze|load|reset|init)_/i;
/** A callee that builds a te.* layer: TE's own classes, or the generated fallback's factories. */
const TE_BUILDER = /^(te|transformer_engine\.pytorch|transformer_engine)\.[A-Z]\w*$|^fp8_\w+$/;
/** A class's alternate constructor that builds a module from one built before (`ColumnShardedLinear.from_linear(proj,
 *  gang)`, `QLinear.from_float(m)`): no new construction, but it reads the module it is given. */
const ALTERNATE_CTOR = /(^|\.)[A-Z]\w*\.from_\w+$/;

/** Internal layer record, with what roles/verdicts need besides the IR fields. */
export interface LayerRec {
  layer: Layer;
  call: CallRec;
  ctor: CtorInfo;
  scope: EvalScope;
  /** Argument nodes bound to ctor parameter names. */
  argNodes: Map<string, SyntaxNode>;
  /** Texts the out-dim value passed through. */
  outVia: string[];
  /** The statement memo entry this record was built from or stored in (roles and verdicts memoise on it too). */
  snap?: LayerSnap;
  /** For a layer a factory returns: its path inside the factory (`net[*]`). */
  localPath?: string;
}

export interface LayerContext {
  src: string;
  imports: ImportTable;
  classes: Map<string, ClassModel>;
  walk: WalkResult;
  evaluator: Evaluator;
  /** Callee text of walk.calls[i] (identifier or dotted attribute), precomputed. */
  callees: (string | undefined)[];
  /**
   * With the per-statement cache: the dependency signature of a copied statement (what evaluation of its layers may
   * read from outside it). Layer records of a statement are reused while its copy and signature are unchanged.
   */
  memoKey?: (stmt: Stmt) => string;
  /**
   * With the per-statement cache: what callees that are not local classes build, kept across analyses while the
   * file-wide facts it reads (import table, `*linear` function and class names) are unchanged (index.ts memoKeys).
   */
  ctorMemo?: Map<string, { resolved: string; ctor: CtorInfo } | null>;
  /** Counts of layer records reused from memos and built afresh (AnalysisCache statistics). */
  stats?: { layersReused: number; layersBuilt: number };
  /** Top-level functions that return a layer class, and names assigned something that may be a class
   *  (assignedClassCtor), found once per analysis. */
  classMakers?: Map<string, FuncRec>;
  classVars?: Map<string, { start: number; right: SyntaxNode; fn?: FuncRec }[]>;
}

/** A memoised direct layer record: the Layer as built (before roles and verdicts), relative to `Stmt.memoBase`. */
export interface LayerSnap {
  layer: Layer;
  argNodes: Map<string, SyntaxNode>;
  outVia: string[];
  /** For a layer a factory returns (a template): where it sits inside the factory. */
  place?: Placement;
  /** roles.ts / verdict.ts: their results for this record, with the key of what else they read. */
  roleMemo?: { key: string; role: Layer['role']; roleReasons: string[]; tied: boolean; tiedByConfig?: boolean; vocab?: string };
  verdictMemo?: { role: object; facts: string; out: Pick<Layer, 'convertible' | 'reasons' | 'teEquivalent' | 'teArgs' | 'shapeOk' | 'zeroCenteredGamma' | 'convertsWhen' | 'facets'> };
}

function shiftSpan(sp: Span, dOff: number, dLine: number): Span {
  return {
    startLine: sp.startLine + dLine, startColumn: sp.startColumn, endLine: sp.endLine + dLine, endColumn: sp.endColumn,
    startOffset: sp.startOffset + dOff, endOffset: sp.endOffset + dOff,
  };
}

/**
 * A copy of a layer as collectLayers builds it (before roles and verdicts, which set fields of the copy), spans moved
 * by dOff / dLine (a statement moved as a whole keeps its columns). Own keys are kept exactly (deep-equal IR). Parts
 * nothing writes after collectLayers (options, dims, and args and spans when not moved) are shared: the IR is
 * read-only once built.
 */
function copyLayer(l: Layer, dOff: number, dLine: number): Layer {
  const c: Layer = { ...l };
  if (dOff !== 0 || dLine !== 0) {
    c.span = shiftSpan(l.span, dOff, dLine);
    c.calleeSpan = shiftSpan(l.calleeSpan, dOff, dLine);
    c.argsSpan = shiftSpan(l.argsSpan, dOff, dLine);
    const args = new Array<LayerArg>(l.args.length);
    for (let i = 0; i < args.length; i++) { const a = l.args[i]; args[i] = { ...a, span: shiftSpan(a.span, dOff, dLine) }; }
    c.args = args;
    if (l.constructionSpan) c.constructionSpan = shiftSpan(l.constructionSpan, dOff, dLine);
  }
  c.roleReasons = l.roleReasons.slice();
  c.reasons = l.reasons.slice();
  return c;
}

const CONTAINER_LIST = /(^|\.)(ModuleList|Sequential|ParameterList)$/;
const CONTAINER_DICT = /(^|\.)(ModuleDict|ParameterDict)$/;
const DICT_FN = /^(dict|OrderedDict|collections\.OrderedDict)$/;
const WEIGHTLESS = /Rotary|RoPE|Rope|Sinusoidal|PositionalEncoding|Alibi|ALiBi/;

/** Longer callee text than this is no dotted name (`f(x).g` whose `f(x)` spans the file): only its last name is kept. */
const MAX_CALLEE = 256;

export function calleeText(src: string, call: SyntaxNode): { node: SyntaxNode; text: string } | undefined {
  const f = call.childForFieldName('function');
  if (!f || (f.type !== 'identifier' && f.type !== 'attribute')) return undefined;
  if (f.endIndex - f.startIndex > MAX_CALLEE) {
    // After a syntax error the recovered tree can chain every later line into one call whose callee text is the whole
    // prefix: a copy per call would be quadratic in time and memory. The method name is what the analysis reads there.
    const attr = f.type === 'attribute' ? f.childForFieldName('attribute') : null;
    return attr ? { node: f, text: `(...).${src.slice(attr.startIndex, attr.endIndex)}` } : undefined;
  }
  return { node: f, text: src.slice(f.startIndex, f.endIndex).replace(/\s+/g, '') };
}

const ctorCache = new WeakMap<LayerContext, Map<string, { resolved: string; ctor: CtorInfo } | null>>();

/** Resolves a callee to a constructor (cached per analysis), or undefined when it builds no layer. */
export function ctorFor(ctx: LayerContext, text: string): { resolved: string; ctor: CtorInfo } | undefined {
  let cache = ctorCache.get(ctx);
  if (!cache) { cache = new Map(); ctorCache.set(ctx, cache); }
  const hit = cache.get(text);
  if (hit !== undefined) return hit ?? undefined;
  let r: { resolved: string; ctor: CtorInfo } | undefined;
  const memo = ctx.ctorMemo;
  if (memo && !ctx.classes.has(text)) {
    // Not a local class: what it builds depends only on file-wide facts (imports, `*linear` names), see ctorMemo.
    const m = memo.get(text);
    if (m !== undefined) r = m ?? undefined;
    else {
      r = ctorForUncached(ctx, text);
      if (memo.size > 20000) memo.clear();
      memo.set(text, r ?? null);
    }
  } else r = ctorForUncached(ctx, text);
  cache.set(text, r ?? null);
  return r;
}

function ctorForUncached(ctx: LayerContext, text: string): { resolved: string; ctor: CtorInfo } | undefined {
  const local = !text.includes('.') ? ctx.classes.get(text) : undefined;
  if (local && (local.isModule || local.info.layerKind)) {
    const kind = local.info.layerKind ?? 'other';
    let params: string[] = [];
    if (local.init) params = ctorParams(ctx.src, local.init).filter((p) => p.kind === 'plain').map((p) => p.name);
    else {
      // No __init__: the nearest base with one, or the library signature.
      for (const rb of local.info.resolvedBases) {
        const k = rb.startsWith('local:') ? undefined : knownCtor(rb);
        if (k) { params = k.params; break; }
        const base = rb.startsWith('local:') ? ctx.classes.get(rb.slice(6)) : undefined;
        if (base?.init) { params = ctorParams(ctx.src, base.init).filter((p) => p.kind === 'plain').map((p) => p.name); break; }
      }
    }
    return {
      resolved: `local:${text}`,
      ctor: { kind, isTe: local.isTe, params, te: local.teEquivalent, local, display: text },
    };
  }
  const resolved = resolveName(ctx.imports, text);
  const k = knownCtor(resolved);
  if (k) return { resolved, ctor: { ...k } };
  const last = resolved.split('.').pop() ?? '';
  // `ColumnShardedLinear.from_linear(proj, gang)`, `QLinear.from_float(m)`: a class's alternate constructor wraps or
  // converts a module built elsewhere (reported there); its arguments are no sizes, so it is no new construction.
  if (ALTERNATE_CTOR.test(text)) return undefined;
  // The FP8 fallback's factories imported from the project's module: already converted (te.* where FP8 runs).
  const fallback = FALLBACK_FACTORIES[last];
  if (fallback && resolved !== text && !ctx.walk.functions.some((f) => f.name === last)) {
    return { resolved, ctor: { kind: fallback.kind, isTe: true, params: fallback.params, te: fallback.te, display: last, viaFallback: true } };
  }
  // Imported layer factories (`lora_or_linear(dim, out, bias=...)`, `make_linear(...)`): a function named *linear.
  // A bare name or one reached through an import; `self.dense_linear(x)` calls a submodule, it builds nothing.
  const head = text.split('.')[0];
  if (/^[a-z_]\w*linear$/i.test(last) && /^[a-z_]/.test(last) && !MODULE_REWRITER.test(last) && !/^(torch|math|numpy|np)\./.test(resolved) && !ctx.classes.has(last)
    && (!text.includes('.') || ctx.imports.map.has(head)) && !ctx.walk.functions.some((f) => f.name === last)) {
    return { resolved, ctor: { kind: 'linear', isTe: false, params: ['in_features', 'out_features', 'bias'], te: 'te.Linear', display: last, factory: last } };
  }
  if (WEIGHTLESS.test(last) && /^[A-Z]/.test(last) && /Embedding|Encoding|Emb$/.test(last)) {
    return { resolved, ctor: { kind: 'other', isTe: false, params: [], display: last } };
  }
  return importedNormFactory(ctx, text, resolved, last) ?? unknownLibraryCtor(ctx, text, resolved, last) ?? unknownLibraryBlock(ctx, text, resolved, last)
    ?? unknownNormClass(ctx, text, resolved, last);
}

/**
 * A norm class held by an object the analysis cannot type (`config.norm_class(config.n_embd, eps=...)` with `config`
 * unannotated, `cfg.norm_layer(dim)`), where nothing else resolved it (an annotated litgpt Config gives its candidates:
 * libraryAttrCtor): it builds a norm whose class is chosen elsewhere, so it is listed, not converted, saying where to
 * look.
 */
const CONFIGURED_NORM = /^(norm_class|norm_cls|norm_layer|norm_module|norm_fn)$/;
function configuredNormClass(text: string): ClassSite | undefined {
  const m = /^([A-Za-z_]\w*)\.([A-Za-z_]\w*)$/.exec(text);
  if (!m || !CONFIGURED_NORM.test(m[2]) || m[1] === 'self' || m[1] === 'cls') return undefined;
  return { resolved: text, ctor: { kind: 'layernorm', isTe: false, params: ['normalized_shape', 'eps'], display: text,
    noTe: `${text}(...) builds a norm whose class ${text.split('.')[0]} chooses at run time (a LayerNorm, an RMSNorm, another): not converted here. Annotate ${text.split('.')[0]} with its class where it is a library's config (litgpt's Config is known), or convert where the class is chosen.` } };
}

/**
 * The module a class named at a call was imported from (`.common` for `from .common import LayerNorm2d`), for the
 * rules that read an imported class by its name: undefined when the name is not imported by this file, is one of the
 * file's own classes, or resolves to torch or Transformer Engine (relative imports too unless `relative`).
 */
function importedModule(ctx: LayerContext, text: string, resolved: string, last: string, relative: boolean): string | undefined {
  if (resolved === text || (relative ? /^(torch\.|transformer_engine\.|te\.)/ : /^(\.|torch\.|transformer_engine\.|te\.)/).test(resolved)) return undefined;
  if (!ctx.imports.map.has(text.split('.')[0]) || ctx.classes.has(last)) return undefined;
  return resolved.slice(0, resolved.length - last.length - 1);
}

/**
 * A normalization class imported from a module the analysis does not have (a sibling file outside the inputs, a
 * package the catalogue does not know) whose name is not a plain LayerNorm / RMSNorm: SAM's `LayerNorm2d`
 * (channels-first), diffusers' `AdaLayerNormZero` / `AdaLayerNormContinuous` (scale and shift from a conditioning
 * vector, a Linear inside), ConvNeXt-V2's `GlobalResponseNorm`. It builds parameters, so it is listed, not converted:
 * te.LayerNorm / te.RMSNorm replace only a plain norm over the last axis, and its definition would have to show that.
 */
const UNKNOWN_NORM = /^[A-Z]\w*Norm(alization)?(1d|2d|3d|Zero|Continuous|Single|Pruned|Fp32|FP32)*$/;
/** A classification head class (timm's `ClassifierHead`, `NormMlpClassifierHead`): a Linear to class logits inside. */
const UNKNOWN_HEAD = /^([A-Z]\w*)?(Classifier|Cls)(Head)?$/;
function unknownNormClass(ctx: LayerContext, text: string, resolved: string, last: string): { resolved: string; ctor: CtorInfo } | undefined {
  // A catalogued library's class the catalogue does not list (diffusers' AdaLayerNormZero) is reported the same way:
  // the classes it knows were resolved before this point.
  const head = UNKNOWN_HEAD.test(last);
  const module = head || UNKNOWN_NORM.test(last) ? importedModule(ctx, text, resolved, last, true) : undefined;
  if (module === undefined) return undefined;
  if (head) {
    return { resolved, ctor: { kind: 'other', isTe: false, params: [], display: last,
      noTe: `${last} is a classification head defined in ${module}: its Linear maps features to class logits, a small GEMM that gains nothing from FP8 and is precision-sensitive, so it stays in BF16.` } };
  }
  const what = /^Ada/.test(last) ? 'an adaptive norm (scale and shift from a conditioning input, usually through a Linear of its own)'
    : /[123]d$/.test(last) ? 'a norm over channels laid out for convolutions'
    : 'a normalization module';
  return { resolved, ctor: { kind: 'other', isTe: false, params: [], display: last,
    noTe: `${last} is ${what} defined in ${module}, which was not analysed: not converted. te.LayerNorm / te.RMSNorm replace only a plain norm over the last axis; if ${module} is in your project, its classes get their verdicts in its own file.` } };
}

/**
 * A block class imported from a package the catalogue does not know whose name says it builds Linears or weight
 * matrices of its own (torchrec's `MLP`, `LowRankCrossNet`; a framework's `FeedForward`): its layers are built in that
 * package, where the analysis cannot see them. Reported as a module with no te.* equivalent, saying where to convert,
 * instead of nothing (a construction that builds parameters is never silent).
 */
const UNKNOWN_BLOCK = /^([A-Z]\w*)?(MLP|Mlp|FeedForward|FeedForwardNetwork|FFN|Ffn|CrossNet|CrossNetwork|Perceptron)$/;
function unknownLibraryBlock(ctx: LayerContext, text: string, resolved: string, last: string): { resolved: string; ctor: CtorInfo } | undefined {
  const module = UNKNOWN_BLOCK.test(last) && !isLibraryName(resolved) ? importedModule(ctx, text, resolved, last, false) : undefined;
  if (module === undefined) return undefined;
  return { resolved, ctor: { kind: 'other', isTe: false, params: [], display: last,
    noTe: `${last} is defined in ${module}, outside this file and the catalogue: its layers are built there, so they are not converted here. If that module is in your project, its layers are reported in its file; if it is a package's, convert them by hand where they are defined, or keep them in BF16.` } };
}

/**
 * A norm factory imported from another module (`from .layers import create_norm` ... `create_norm(kind, dim)`, AudioCraft's
 * `create_norm_fn(norm, dim)`): it
 * builds a norm whose class is decided in that module, so it is reported, not converted, naming where it is decided.
 */
function importedNormFactory(ctx: LayerContext, text: string, resolved: string, last: string): { resolved: string; ctor: CtorInfo } | undefined {
  if (!/^(create|make|build|get|init|new)_?\w*norm(_layer|_fn|_func|_module)?$/i.test(last) || !/^[a-z]/.test(last) || resolved === text) return undefined;
  if (!ctx.imports.map.has(text.split('.')[0]) || ctx.walk.functions.some((f) => f.name === last) || /^(torch|math|numpy|np)\./.test(resolved)) return undefined;
  const module = resolved.slice(0, resolved.length - last.length - 1) || resolved;
  const kind: LayerKind = /rms/i.test(last) ? 'rmsnorm' : 'layernorm';
  return { resolved, ctor: { kind, isTe: false, params: ['normalized_shape', 'eps'], display: last, factory: last,
    noTe: `${last}() from ${module} builds a norm whose class is chosen in that module: not converted here. Convert the norm classes ${last} returns where they are defined (or build te.LayerNorm / te.RMSNorm there).` } };
}

/**
 * A layer class imported from a package the catalogue does not know (a framework's `ColumnShardedLinear`,
 * `StandardEmbedding`, `OLMORMSNorm`): read by its name, reported with what the facts allow instead of nothing. An
 * embedding is kept; a Linear or norm is not converted, because its forward and parameters live in that package.
 */
const UNKNOWN_LAYER = /^([A-Z]\w*)?(Linear|Projection|Embedding|EmbeddingBag|Embedding[123]D|EmbeddingBag\w*|RMSNorm|LayerNorm|RmsNorm)$/;
function unknownLibraryCtor(ctx: LayerContext, text: string, resolved: string, last: string): { resolved: string; ctor: CtorInfo } | undefined {
  // Relative imports are the project's own modules (the workspace has them); an "embedding" of timesteps, patches,
  // positions or conditions is a module of its own (an MLP, a conv), not a lookup table.
  if (!UNKNOWN_LAYER.test(last)) return undefined;
  // A position embedding named absolute or learned (x-transformers' AbsolutePositionalEmbedding) is a table all the same.
  const learnedPos = /Absolute|Learned|Learnable/.test(last) && !/Sinusoid|Rotary|Fourier/.test(last);
  if (/Embedding/.test(last) && !learnedPos && /Time|Patch|Pos|Guidance|Fourier|Cond|Text|Image|Pixel|Frame|Audio|Caption|Label|Class|Rotary|Sinusoid/.test(last)) return undefined;
  const module = importedModule(ctx, text, resolved, last, false);
  if (module === undefined) return undefined;
  if (/Embedding/.test(last)) {
    return { resolved, ctor: { kind: 'embedding', isTe: false, params: ['num_embeddings', 'embedding_dim'], display: last,
      noTe: `${last} is an embedding class from ${module}, which the catalogue does not know: kept in BF16 (Transformer Engine has no FP8 embedding).` } };
  }
  const norm = /Norm$/.test(last);
  const kind = norm ? (/RMS|Rms/.test(last) ? 'rmsnorm' : 'layernorm') : 'linear';
  return { resolved, ctor: { kind, isTe: false, params: norm ? ['normalized_shape', 'eps'] : ['in_features', 'out_features', 'bias'], display: last,
    noTe: `Unknown class from ${module}: ${last} is not converted, because the catalogue does not know it and its forward and parameters are defined in that package (its own init, sharding or state-dict keys may differ from te.*). Convert it by hand where it is defined, or keep it.` } };
}

/** A statement's memo of layer records, and how far the statement moved since the records were made. */
interface StmtMemo { memo: Map<SyntaxNode, unknown>; dOff: number; dLine: number }

/** A layer built inside a factory function, waiting for the factory's call sites. */
interface Template { rec: LayerRec; place: Placement }

/** The state of one collectLayers pass. */
interface Collector {
  ctx: LayerContext;
  out: LayerRec[];
  /** Per factory function: the layers it builds and returns. */
  templates: Map<FuncRec, Template[]>;
  /** Calls of something that is no layer class: perhaps a factory's call site. */
  pending: { call: CallRec; callee: string }[];
  memos: Map<Stmt, StmtMemo | undefined>;
  reused: number;
  built: number;
}

/** Finds every layer construction. */
export function collectLayers(ctx: LayerContext): LayerRec[] {
  const c: Collector = { ctx, out: [], templates: new Map(), pending: [], memos: new Map(), reused: 0, built: 0 };
  for (let i = 0; i < ctx.walk.calls.length; i++) collectCall(c, i);
  // Factories: `def make_linear(i, o): return nn.Linear(i, o)`; `self.x = make_linear(...)`.
  if (c.templates.size) {
    const used = instantiateFactories(c);
    keepUnusedTemplates(c, used);
    c.out.sort((a, b) => a.layer.span.startOffset - b.layer.span.startOffset);
  }
  if (ctx.stats) { ctx.stats.layersReused = c.reused; ctx.stats.layersBuilt = c.built; }
  return c.out;
}

/**
 * The memo of a statement's layer records, valid while its dependency key is unchanged (reset otherwise), and how
 * far the statement moved since the records were made (offsets, lines).
 */
function memoOf(c: Collector, node: SyntaxNode): StmtMemo | undefined {
  const memoKey = c.ctx.memoKey;
  if (!memoKey) return undefined;
  const stmt = stmtOf(node);
  if (!stmt) return undefined;
  if (c.memos.has(stmt)) return c.memos.get(stmt);
  const key = memoKey(stmt);
  const line = positionAt(stmt.base).row;
  if (stmt.memoKey !== key || !stmt.memo) {
    stmt.memoKey = key;
    stmt.memo = new Map();
    stmt.memoBase = stmt.base;
    stmt.memoLine = line;
  }
  const m = { memo: stmt.memo, dOff: stmt.base - stmt.memoBase, dLine: line - stmt.memoLine };
  c.memos.set(stmt, m);
  return m;
}

/** Records a layer a factory returns, under its factory. */
function addTemplate(c: Collector, fn: FuncRec, rec: LayerRec, place: Placement): void {
  // Its name inside the factory (`net[*]` for `net = nn.Sequential(...); return net`), for ties made there.
  if (place.base) rec.localPath = `${place.base}${place.segs.join('')}${place.multi ? '[*]' : ''}`.replace(/\[[^\]]*\]/g, '[*]');
  const list = c.templates.get(fn);
  if (list) list.push({ rec, place }); else c.templates.set(fn, [{ rec, place }]);
}

/** The i-th call of the file: a layer construction (memoised on its statement), a class chosen elsewhere, or pending. */
function collectCall(c: Collector, i: number): void {
  const { ctx } = c;
  const text = ctx.callees[i];
  const call = ctx.walk.calls[i];
  if (!text) {
    const inline = inlineClassCtor(ctx, call);
    if (inline) {
      const fnode = calleeOf(call) as SyntaxNode;
      const rec = makeLayer(ctx, call, fnode, ctx.src.slice(fnode.startIndex, fnode.endIndex).replace(/\s+/g, ' '), inline.resolved, inline.ctor, scopeOf(ctx, call));
      if (inline.via) rec.layer.classFrom = inline.via;
      else if (inline.candidates) { rec.layer.classCandidates = inline.candidates; if (inline.epsDefaults) rec.layer.classCandidatesEps = inline.epsDefaults; }
      c.built++;
      applyPlacement(rec, placement(ctx, call.node, call), call);
      c.out.push(rec);
    }
    return;
  }
  const found = ctorFor(ctx, text);
  // A function read as a layer factory by its name only (`make_linear(...)`), whose result the statement discards,
  // builds no layer: moshi's `replace_linear_with_qlinear(self.layers[-1])` rewrites a module in place.
  if (found?.ctor.factory && call.node.parent?.type === 'expression_statement') return;
  if (!found) {
    const viaParam: ClassSite | undefined = paramDefaultCtor(ctx, call, text) ?? assignedClassCtor(ctx, call, text) ?? attrClassCtor(ctx, call, text)
      ?? unfilledNormParam(ctx, call, text) ?? configuredNormClass(text);
    if (viaParam) {
      // Rare; not memoised (a returned class depends on another statement): rebuilt at each analysis.
      const rec = makeLayer(ctx, call, calleeOf(call) as SyntaxNode, text, viaParam.resolved, viaParam.ctor, scopeOf(ctx, call));
      if (viaParam.via) rec.layer.classFrom = viaParam.via;
      else if (viaParam.candidates) { rec.layer.classCandidates = viaParam.candidates; if (viaParam.epsDefaults) rec.layer.classCandidatesEps = viaParam.epsDefaults; }
      if (viaParam.param && (rec.layer.kind === 'linear' || rec.layer.kind === 'layernorm' || rec.layer.kind === 'rmsnorm')) rec.layer.classParam = viaParam.param;
      c.built++;
      applyPlacement(rec, placement(ctx, call.node, call), call);
      c.out.push(rec);
      return;
    }
    c.pending.push({ call, callee: text });
    return;
  }
  const m = memoOf(c, call.node);
  const snap = m?.memo.get(call.node) as LayerSnap | undefined;
  if (m && snap) {
    const rec: LayerRec = {
      layer: copyLayer(snap.layer, m.dOff, m.dLine), call, ctor: found.ctor, scope: scopeOf(ctx, call),
      argNodes: snap.argNodes, outVia: snap.outVia.slice(), snap,
    };
    c.reused++;
    if (snap.place && call.scope.fn) addTemplate(c, call.scope.fn, rec, snap.place);
    else c.out.push(rec);
    return;
  }
  const calleeNode = calleeOf(call) as SyntaxNode;
  const rec = makeLayer(ctx, call, calleeNode, text, found.resolved, found.ctor, scopeOf(ctx, call));
  c.built++;
  const place = placement(ctx, call.node, call);
  if (place.returned && call.scope.fn) {
    if (m) {
      rec.snap = { layer: copyLayer(rec.layer, -m.dOff, -m.dLine), argNodes: rec.argNodes, outVia: rec.outVia.slice(), place };
      m.memo.set(call.node, rec.snap);
    }
    addTemplate(c, call.scope.fn, rec, place);
    return;
  }
  applyPlacement(rec, place, call);
  if (m) {
    rec.snap = { layer: copyLayer(rec.layer, -m.dOff, -m.dLine), argNodes: rec.argNodes, outVia: rec.outVia.slice() };
    m.memo.set(call.node, rec.snap);
  }
  c.out.push(rec);
}

/** Instantiates every factory's layers at each of its call sites; returns the factories that were called. */
function instantiateFactories(c: Collector): Set<FuncRec> {
  const { ctx } = c;
  // By name, preferring the method of the calling class (two classes may each define build_fc1).
  const byName = new Map<string, FuncRec[]>();
  for (const fn of c.templates.keys()) { const l = byName.get(fn.name); if (l) l.push(fn); else byName.set(fn.name, [fn]); }
  const used = new Set<FuncRec>();
  const sites = new Map<FuncRec, { informative: boolean; names: Set<string>; instances: LayerRec[] }>();
  for (const { call, callee } of c.pending) {
    const name = callee.replace(/^(self|cls)\./, '');
    const cands = byName.get(name) ?? [];
    const fn = cands.find((f) => f.cls && f.cls === call.scope.cls) ?? cands[cands.length - 1];
    if (!fn || (callee !== name && !fn.cls) || (callee === name && fn.cls)) continue;
    used.add(fn);
    const siteScope = scopeOf(ctx, call);
    const bind = new Map<string, { node: SyntaxNode; scope: EvalScope }>();
    ctorParams(ctx.src, fn).forEach((p, i) => {
      const a = argFor(ctx.src, call.node, p.name, i);
      if (a) bind.set(p.name, { node: a, scope: siteScope });
    });
    const list = c.templates.get(fn) ?? [];
    const before = c.out.length;
    if (!reuseInstances(c, call, list, bind)) buildInstances(c, call, fn, list, bind);
    const instances = c.out.slice(before);
    const s = sites.get(fn) ?? { informative: false, names: new Set<string>(), instances: [] };
    sites.set(fn, s);
    s.instances.push(...instances);
    const place = placement(ctx, call.node, call);
    s.names.add(place.segs.length || place.multi || place.returned ? '' : place.base);
    if (!s.informative && siteInformative(place, list, instances)) s.informative = true;
  }
  // A factory whose call sites add nothing to what it builds (each keeps the result in a local it passes on, and binds
  // no size: fairseq2's `embed = self.create_embedding()` in a builder class) is reported once where it builds the layer.
  const dropped = new Set<LayerRec>();
  for (const [fn, s] of sites) {
    if (s.informative) continue;
    for (const r of s.instances) dropped.add(r);
    const siteName = s.names.size === 1 ? [...s.names][0] : '';
    for (const t of c.templates.get(fn) ?? []) {
      const L = t.rec.layer;
      const local = t.rec.localPath && !/[[.]/.test(t.rec.localPath) ? t.rec.localPath : '';
      L.name = local || (/^[A-Za-z_]\w*$/.test(siteName) ? siteName : '');
      L.path = L.name;
      L.attr = L.name;
      L.viaFactory = fn.name;
      L.container = 'helper';
      c.out.push(t.rec);
    }
  }
  if (dropped.size) c.out = c.out.filter((r) => !dropped.has(r));
  return used;
}

/**
 * Whether a factory's call site says more about a layer than the factory itself: it stores the result somewhere with
 * a path (`self.fc = make_linear(...)`, a container, a list), or its arguments change a size the factory leaves open.
 */
function siteInformative(place: Placement, list: Template[], instances: LayerRec[]): boolean {
  if (place.segs.length || place.multi || place.container !== undefined || place.wrappedBy) return true;
  if (place.base && !/^[A-Za-z_]\w*$/.test(place.base)) return true;
  const dimKey = (l: Layer): string => [l.inFeatures, l.outFeatures, l.normalizedShape]
    .map((d) => (d ? `${d.text}|${d.value ?? ''}|${d.values?.map((v) => v.value).join(',') ?? ''}` : '')).join(';');
  return instances.length !== list.length || instances.some((r, k) => dimKey(r.layer) !== dimKey(list[k].rec.layer)
    || r.outVia.join(',') !== list[k].rec.outVia.join(','));
}

/**
 * The instances at a factory's call site from the site statement's memo, while it and every template it instantiates
 * (their records: the same snapshot objects) are unchanged; false when they must be built.
 */
function reuseInstances(c: Collector, call: CallRec, list: Template[], bind: EvalScope['bind']): boolean {
  const m = memoOf(c, call.node);
  const prev = m?.memo.get(call.node) as { templates: (LayerSnap | undefined)[]; snaps: LayerSnap[] } | undefined;
  if (!m || !prev || prev.templates.length !== list.length || !list.every((t, k) => t.rec.snap !== undefined && t.rec.snap === prev.templates[k])) return false;
  list.forEach((t, k) => {
    const snap = prev.snaps[k];
    // Its span is the call site's; its arguments and callee are the template's (in the factory's statement,
    // which may have moved by another amount): take them from the current records.
    const layer = copyLayer(snap.layer, 0, 0);
    layer.span = spanOf(call.node);
    layer.calleeSpan = t.rec.layer.calleeSpan;
    layer.argsSpan = t.rec.layer.argsSpan;
    layer.args = t.rec.layer.args;
    layer.constructionSpan = t.rec.layer.span;
    c.out.push({ layer, call, ctor: t.rec.ctor, scope: { ...t.rec.scope, bind }, argNodes: snap.argNodes, outVia: snap.outVia.slice(), snap });
    c.reused++;
  });
  return true;
}

/** Builds a factory's layers at one call site, with the site's arguments bound to the factory's parameters. */
function buildInstances(c: Collector, call: CallRec, fn: FuncRec, list: Template[], bind: EvalScope['bind']): void {
  const { ctx } = c;
  const { src } = ctx;
  const m = memoOf(c, call.node);
  const instSnaps: LayerSnap[] = [];
  const place = placement(ctx, call.node, call);
  // A helper that can also return something else (`return nn.Linear(...)` for one layer, `return
  // nn.Sequential(*layers)` otherwise, DINOv2's _build_mlp): which one this call gets is decided at run time.
  const other = fn.returns.map((r) => r.namedChild(0)).find((v) => !!v && v.type === 'call'
    && !list.some((t) => t.rec.call.start >= v.startIndex && t.rec.call.start < v.endIndex));
  const otherText = other ? src.slice(other.startIndex, other.endIndex).replace(/\s+/g, ' ') : undefined;
  for (const t of list) {
    const scope: EvalScope = { ...t.rec.scope, bind };
    const calleeNode = calleeText(src, t.rec.call.node)?.node as SyntaxNode;
    const inst = makeLayer(ctx, t.rec.call, calleeNode, t.rec.layer.constructor, t.rec.layer.resolved, t.rec.ctor, scope);
    inst.layer.span = spanOf(call.node);
    inst.layer.constructionSpan = t.rec.layer.span;
    inst.layer.viaFactory = fn.name;
    inst.layer.ownerClass = call.scope.cls?.name;
    inst.layer.ownerFunction = call.scope.fn?.name;
    inst.call = call;
    const merged: Placement = {
      ...place,
      segs: [...place.segs, ...t.place.segs],
      multi: place.multi || t.place.multi,
      container: place.container ?? t.place.container,
      wrappedBy: place.wrappedBy ?? t.place.wrappedBy,
      wrapperOff: place.wrappedBy ? place.wrapperOff : t.place.wrapperOff,
      alternativeOf: place.alternativeOf ?? t.place.alternativeOf,
    };
    applyPlacement(inst, merged, call);
    inst.layer.container ??= 'helper';
    if (otherText) inst.layer.classFrom = `${fn.name}(), which can also return ${otherText.length > 60 ? `${otherText.slice(0, 57)}...` : otherText}`;
    if (m) {
      inst.snap = { layer: copyLayer(inst.layer, -m.dOff, -m.dLine), argNodes: inst.argNodes, outVia: inst.outVia.slice() };
      instSnaps.push(inst.snap);
    }
    c.built++;
    c.out.push(inst);
  }
  if (m) m.memo.set(call.node, { templates: list.map((t) => t.rec.snap), snaps: instSnaps });
}

/** A factory nobody calls in the file still builds its layers: kept, unnamed, as the helper's. */
function keepUnusedTemplates(c: Collector, used: Set<FuncRec>): void {
  for (const [fn, list] of c.templates) {
    if (used.has(fn)) continue;
    for (const t of list) {
      t.rec.layer.name = '';
      t.rec.layer.path = '';
      t.rec.layer.attr = '';
      t.rec.layer.viaFactory = fn.name;
      t.rec.layer.container = 'helper';
      c.out.push(t.rec);
    }
  }
}

/**
 * `norm_layer(dim)` where `norm_layer` is a parameter of the enclosing function whose default is a layer class or a
 * `functools.partial` of one (`norm_layer: Callable[..., nn.Module] = partial(nn.LayerNorm, eps=1e-6)`, torchvision).
 */
function paramDefaultCtor(ctx: LayerContext, call: CallRec, text: string): { resolved: string; ctor: CtorInfo; via: string; param?: { name: string; defaultClass: string } } | undefined {
  const fn = call.scope.fn;
  if (!fn || !/^[A-Za-z_]\w*$/.test(text)) return undefined;
  const params = paramsOf(ctx.src, fn);
  const p = params.find((x) => x.name === text);
  if (!p?.def) return undefined;
  if (p.def.type === 'none') return passedClassCtor(ctx, fn, params, text);
  const found = classExprCtor(ctx, p.def);
  if (!found || found.ctor.kind === 'other') return undefined;
  const defaultClass = found.chosen ? found.pickClass : found.candidates ? undefined : defaultClassName(ctx, p.def);
  return {
    resolved: found.resolved, ctor: found.ctor, via: `the parameter ${text} (${ctx.src.slice(p.def.startIndex, p.def.endIndex).replace(/\s+/g, ' ')} by default)`,
    ...(defaultClass ? { param: { name: text, defaultClass } } : {}),
  };
}

/**
 * `norm_layer(dim)` where `norm_layer=None` by default: the classes the file's callers pass for it (`Block(dim,
 * norm_layer=nn.LayerNorm)`, by keyword or position; for `__init__`, the class's construction sites). One class, or a
 * run-time choice among those passed; undefined when no caller in the file passes a known layer class.
 */
function passedClassCtor(ctx: LayerContext, fn: FuncRec, params: ParamInfo[], name: string): { resolved: string; ctor: CtorInfo; via: string; param?: { name: string; defaultClass: string } } | undefined {
  const callee = fn.name === '__init__' ? fn.cls?.name : !fn.cls ? fn.name : undefined;
  if (!callee) return undefined;
  const { found } = passedValues(ctx, fn, params, callee, name);
  const pick = chooseAmong(ctx, found);
  if (!pick || (pick.ctor.kind === 'other' && !pick.ctor.isTe)) return undefined;
  const passed = [...new Set(found.map((f) => ctx.src.slice(f.node.startIndex, f.node.endIndex).replace(/\s+/g, ' ')))].join(' or ');
  const shown = `the parameter ${name} (None by default; ${callee}(...) is passed ${passed})`;
  // Other callers (another file) may pass another class: the conversion checks at run time which one was passed.
  const pickClass = pick.pickClass ?? (found.length ? defaultClassName(ctx, found.find((f) => f.c === pick || f.c.ctor === pick.ctor)?.node ?? null) : undefined);
  return { resolved: pick.resolved, ctor: pick.ctor, via: chosenVia(shown, pick), ...(pickClass ? { param: { name, defaultClass: pickClass } } : {}) };
}

/** What the file's calls of a function (or a class's construction sites) pass for one of its parameters: the values
 *  that resolve to a class, and up to three that do not, as written. */
function passedValues(ctx: LayerContext, fn: FuncRec, params: ParamInfo[], callee: string, name: string): { found: { node: SyntaxNode; c: ClassExpr }[]; unresolved: string[] } {
  const plain = params.filter((x) => x.kind === 'plain');
  const pos = plain.findIndex((x) => x.name === name) - (fn.cls ? 1 : 0);
  const found: { node: SyntaxNode; c: ClassExpr }[] = [];
  const unresolved: string[] = [];
  for (let i = 0; i < ctx.walk.calls.length && found.length < 8; i++) {
    if (ctx.callees[i] !== callee) continue;
    const args = ctx.walk.calls[i].node.childForFieldName('arguments');
    if (!args) continue;
    let value: SyntaxNode | null = null;
    let k = 0;
    for (const a of args.namedChildren) {
      if (!a) continue;
      if (a.type === 'keyword_argument') {
        if (ctx.src.slice(a.childForFieldName('name')?.startIndex ?? 0, a.childForFieldName('name')?.endIndex ?? 0) === name) value = a.childForFieldName('value');
      } else if (a.type === 'list_splat' || a.type === 'dictionary_splat') break;
      else if (k++ === pos) value = a;
    }
    const c = value && value.type !== 'none' ? classExprCtor(ctx, value) : undefined;
    if (c && value) found.push({ node: value, c });
    else if (value && value.type !== 'none' && unresolved.length < 3) unresolved.push(ctx.src.slice(value.startIndex, value.endIndex).replace(/\s+/g, ' '));
  }
  return { found, unresolved };
}

/** A parameter that names a norm class (`norm_layer`, `norm_cls`, `final_norm_layer`), not an instance, a function
 *  applied to a tensor (`norm`, `norm_fn`) or a flag. */
const NORM_CLASS_PARAM = /^(\w*norm\w*_(layer|cls|class|factory|module|builder|ctor)|norm_?(layer|cls|class))$/i;

/**
 * `norm_layer(dim)` where `norm_layer=None` by default and the file never resolves which class it is: no caller passes
 * a class for it, callers pass names the analysis does not resolve, or the function assigns it from something else
 * (`if not norm_layer: norm_layer = LayerNorm2d if conv_mlp else LayerNorm`). Reported as a norm of unknown class, not
 * converted, with the reason, instead of nothing.
 */
function unfilledNormParam(ctx: LayerContext, call: CallRec, name: string): ClassSite | undefined {
  const fn = call.scope.fn;
  if (!fn || !NORM_CLASS_PARAM.test(name)) return undefined;
  const params = paramsOf(ctx.src, fn);
  if (params.find((x) => x.name === name)?.def?.type !== 'none') return undefined;
  const callee = fn.name === '__init__' ? fn.cls?.name : !fn.cls ? fn.name : undefined;
  if (!callee) return undefined;
  const { found, unresolved: passed } = passedValues(ctx, fn, params, callee, name);
  // A class passed here that the analysis resolves, but not to a norm or Linear, is another layer: leave it.
  if (found.length) return undefined;
  const kind: LayerKind = /rms/i.test(name) ? 'rmsnorm' : 'layernorm';
  const where = fn.name === '__init__' ? `${callee}(...)` : `${callee}()`;
  const assign = assignmentTo(ctx, fn, name);
  const facts = [`${name} is None by default`];
  if (assign) facts.push(`${fn.name}() assigns it (\`${ctx.src.slice(assign.startIndex, assign.endIndex).replace(/\s+/g, ' ')}\`, line ${assign.startPosition.row + 1})`);
  if (passed.length) facts.push(`calls of ${where} in this file pass ${passed.join(' or ')}, which this file does not resolve to one class`);
  if (!assign && !passed.length) facts.push(`no call of ${where} in this file passes a class for it, so the norm it builds is chosen in another file (or never built while it stays None)`);
  return {
    resolved: `param:${name}`,
    ctor: { kind, isTe: false, params: ['normalized_shape', 'eps'], display: name,
      noTe: `Unknown class: ${facts.join('; ')}. Not converted here: convert where the class is chosen (${name}=nn.LayerNorm or nn.RMSNorm passed in this file converts through a run-time class check).` },
    via: `the parameter ${name} (None by default; its class is not resolved in this file)`,
  };
}

/** The first assignment statement in a function's own body (not in a nested def or lambda) that binds the name. */
function assignmentTo(ctx: LayerContext, fn: FuncRec, name: string): SyntaxNode | undefined {
  const body = fn.node.childForFieldName('body');
  const stack: SyntaxNode[] = body ? [body] : [];
  let seen = 0;
  while (stack.length && seen++ < 20000) {
    const n = stack.pop()!;
    if (n.type === 'function_definition' || n.type === 'lambda' || n.type === 'class_definition') continue;
    if (n.type === 'assignment') {
      const left = n.childForFieldName('left');
      const names = left ? (left.type === 'identifier' ? [left] : left.namedChildren.filter((c): c is SyntaxNode => !!c && c.type === 'identifier')) : [];
      if (names.some((c) => ctx.src.slice(c.startIndex, c.endIndex) === name)) return n;
    }
    const kids = n.namedChildren;
    for (let i = kids.length - 1; i >= 0; i--) {
      const c = kids[i];
      if (c) stack.push(c);
    }
  }
  return undefined;
}

/** The one class a parameter's default names (`nn.LayerNorm`, the class of `partial(nn.LayerNorm, eps=1e-6)`), as a
 *  dotted name, or undefined (a conditional, anything else). */
function defaultClassName(ctx: LayerContext, node: SyntaxNode | null, depth = 0): string | undefined {
  let target = node;
  while (target?.type === 'parenthesized_expression') target = target.namedChild(0);
  if (!target || depth > 4) return undefined;
  if (target.type === 'call') return defaultClassName(ctx, target.childForFieldName('arguments')?.namedChild(0) ?? null, depth + 1);
  const text = ctx.src.slice(target.startIndex, target.endIndex);
  return (target.type === 'identifier' || target.type === 'attribute') && /^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$/.test(text) ? text : undefined;
}

/** A class expression's answer: the constructor, and for a run-time choice every candidate and whether they differ. */
interface ClassExpr {
  resolved: string;
  ctor: CtorInfo;
  /** A conditional picks among classes that convert differently (the branch with a TE equivalent is reported). */
  chosen?: boolean;
  /** Every class the expression can be, as written, with what it converts to (`nn.LayerNorm -> te.LayerNorm`). */
  candidates?: string[];
  /** For a run-time choice (`chosen`): the class reported, by the name written in its branch (`nn.Linear`), when
   *  that branch names one class (or a partial of one): the conversion checks at run time that this class is chosen. */
  pickClass?: string;
  /** Candidates that convert alike but default eps differently, each with its default (`nn.RMSNorm: 1.19e-07`). */
  epsDefaults?: string[];
}

/** What a constructor converts to, as one comparable key and as words for messages. */
function conversionOf(c: CtorInfo): { key: string; words: string } {
  const li = c.local?.info;
  // An imported norm whose forward the catalogue read as the plain one (weight, no offset) converts as torch's does.
  const read = c.importedForward;
  const plainRead = !!read && !read.unitOffset && (read.scaleName ?? 'weight') === 'weight';
  const key = `${c.kind}|${c.isTe}|${c.te ?? ''}|${c.parallelMode ?? ''}|${!!c.transposedWeight}|${!!c.imported && !plainRead}|${read && !plainRead ? `read:${read.scaleName ?? 'weight'}${read.unitOffset ? '+1' : ''}` : ''}|${!!li?.zeroCenteredGamma}|${li?.zeroCenteredConditional ?? ''}|${li?.forwardExtra ?? ''}`;
  const words = c.isTe ? 'already TE' : c.te ? `${c.te}${c.parallelMode ? ` (${c.parallelMode}-parallel)` : ''}${li?.zeroCenteredGamma || c.importedForward?.unitOffset ? ' (zero_centered_gamma)' : ''}` : 'no te.* twin';
  return { key, words };
}

/**
 * Candidates of a run-time class choice (`A if c else B`, a class attribute a subclass overrides): all convert the
 * same way (commit: the first stands for all), or not (`chosen`, the one with a TE equivalent reported).
 */
export function chooseAmong(ctx: LayerContext, found: { node: SyntaxNode | string; c: ClassExpr }[]): ClassExpr | undefined {
  const known = found.filter((f) => f.c.ctor.kind !== 'other' || f.c.ctor.isTe);
  if (!known.length) return undefined;
  const convs = known.map((f) => conversionOf(f.c.ctor));
  const shown = (n: SyntaxNode | string): string => (typeof n === 'string' ? n : ctx.src.slice(n.startIndex, n.endIndex).replace(/\s+/g, ' '));
  const candidates = known.map((f, i) => `${shown(f.node)} -> ${convs[i].words}`);
  const same = convs.every((v) => v.key === convs[0].key) && known.length === found.length;
  const picked = same ? known[0] : (known.find((f) => f.c.ctor.te && !f.c.ctor.isTe) ?? known[0]);
  const pick = picked.c;
  const pickClass = same ? undefined : pick.pickClass ?? (typeof picked.node === 'string' ? undefined : defaultClassName(ctx, picked.node));
  // Norms that convert alike but default eps differently (fla's RMSNorm 1e-5, torch's RMSNorm float32's epsilon): one
  // te.* norm fits both only where the call passes eps (the structure check reads the call).
  const eps = known.map((f) => teMapping(f.c.resolved)?.eps ?? '1e-5');
  const epsDefaults = same && (pick.ctor.kind === 'layernorm' || pick.ctor.kind === 'rmsnorm') && eps.some((e) => e !== eps[0])
    ? known.map((f, i) => `${shown(f.node)}: ${eps[i]}`) : undefined;
  return { resolved: pick.resolved, ctor: pick.ctor, chosen: !same, candidates, ...(epsDefaults ? { epsDefaults } : {}), ...(pickClass ? { pickClass } : {}) };
}

/**
 * A layer class as an expression: `nn.Linear`, `partial(LayerClass, ...)`, `(RMSNorm if rms else nn.LayerNorm)`,
 * `partial(nn.LayerNorm if not rms else RMSNorm, eps=1e-5)` (Mamba). Its constructor, undefined when unknown; for a
 * conditional, its candidates (chooseAmong).
 */
function classExprCtor(ctx: LayerContext, node: SyntaxNode | null, depth = 0, fn?: FuncRec): ClassExpr | undefined {
  let target = node;
  while (target?.type === 'parenthesized_expression') target = target.namedChild(0);
  if (!target || depth > 4) return undefined;
  if (target.type === 'call') {
    const f = target.childForFieldName('function');
    const ft = f ? ctx.src.slice(f.startIndex, f.endIndex).replace(/\s+/g, '') : '';
    if (ft === 'getattr') return getattrClass(ctx, target, fn);
    if (!/(^|\.)partial$/.test(ft)) return undefined;
    return classExprCtor(ctx, target.childForFieldName('arguments')?.namedChild(0) ?? null, depth + 1, fn);
  }
  if (target.type === 'conditional_expression') {
    const found: { node: SyntaxNode; c: ClassExpr }[] = [];
    let unknown = false;
    for (const b of [target.namedChild(0), target.namedChild(2)]) {
      const c = b ? classExprCtor(ctx, b, depth + 1, fn) : undefined;
      if (c && b) found.push({ node: b, c }); else unknown = true;
    }
    const r = chooseAmong(ctx, found);
    // A branch that is no known class (None, a callable) makes the choice open.
    return r && unknown ? { ...r, chosen: true } : r;
  }
  if (target.type !== 'identifier' && target.type !== 'attribute') return undefined;
  const found = ctorFor(ctx, ctx.src.slice(target.startIndex, target.endIndex).replace(/\s+/g, ''));
  return found && !found.ctor.factory ? found : undefined;
}

/**
 * A class looked up by name in a module: `getattr(nn, "LayerNorm")` is nn.LayerNorm; `getattr(nn, norm_layer)` where
 * `norm_layer` is a parameter of the enclosing function with a string default (`norm_layer: str = "LayerNorm"`, Hiera)
 * is that class by default, but a caller may name another one: a run-time choice (`chosen`), never a plain alias,
 * whose `pickClass` is the default's class as the module's attribute (`nn.LayerNorm`): bound to a name and called by
 * it, the layer converts through the run-time class check (`fp8_layernorm_from(norm_layer, nn.LayerNorm, d)`). The
 * module must be one whose attribute the analysis resolves to a layer class (`nn.LayerNorm`); anything else is left.
 */
function getattrClass(ctx: LayerContext, call: SyntaxNode, fn?: FuncRec): ClassExpr | undefined {
  const args = call.childForFieldName('arguments')?.namedChildren.filter((a): a is SyntaxNode => !!a) ?? [];
  if (args.length !== 2 || !['identifier', 'attribute'].includes(args[0].type)) return undefined;
  const mod = ctx.src.slice(args[0].startIndex, args[0].endIndex).replace(/\s+/g, '');
  const nameNode = args[1];
  let name: string | undefined;
  let chosen = false;
  if (nameNode.type === 'string') name = stringValue(ctx.src.slice(nameNode.startIndex, nameNode.endIndex));
  else if (nameNode.type === 'identifier' && fn) {
    const p = paramsOf(ctx.src, fn).find((x) => x.name === ctx.src.slice(nameNode.startIndex, nameNode.endIndex));
    if (p?.def?.type === 'string') { name = stringValue(ctx.src.slice(p.def.startIndex, p.def.endIndex)); chosen = true; }
  }
  if (!name || !/^[A-Za-z_]\w*$/.test(name)) return undefined;
  const found = ctorFor(ctx, `${mod}.${name}`);
  if (!found || found.ctor.factory || found.ctor.kind === 'other') return undefined;
  // The default name's class, written as the module's attribute (`nn.LayerNorm`): getattr(nn, "LayerNorm") is that
  // very object, so a conversion can check at run time that the class looked up (or passed instead) is it.
  return chosen ? { ...found, chosen: true, pickClass: `${mod}.${name}` } : found;
}

/**
 * A call whose callee is a class expression in parentheses: `(RMSNorm if use_rms else nn.LayerNorm)(dim)`,
 * `(partial(nn.LayerNorm, eps=1e-6))(dim)`. Read from the tree only for calls that start with `(`.
 */
/** Where a class chosen at run time among classes that convert differently comes from, with the candidates. */
function chosenVia(shown: string, c: ClassExpr): string {
  return `${shown}, chosen at run time${c.candidates && c.candidates.length > 1 ? ` among classes that convert differently (${c.candidates.join('; ')})` : ''}`;
}

type ClassSite = { resolved: string; ctor: CtorInfo; via?: string; candidates?: string[]; epsDefaults?: string[]; param?: { name: string; defaultClass: string } };

/** A choice among classes that all convert the same way, as a site: its candidates (and their eps defaults, if they differ). */
function candidatesSite(c: ClassExpr): ClassSite {
  return { resolved: c.resolved, ctor: c.ctor, candidates: c.candidates, ...(c.epsDefaults ? { epsDefaults: c.epsDefaults } : {}) };
}

function inlineClassCtor(ctx: LayerContext, call: CallRec): ClassSite | undefined {
  // `getattr(nn, "LayerNorm")(dim)`: the class looked up by name, called at once.
  if (ctx.src.startsWith('getattr', call.start)) {
    const g = calleeOf(call);
    const c = g?.type === 'call' ? classExprCtor(ctx, g, 0, call.scope.fn) : undefined;
    if (!c || !g) return undefined;
    const shown = ctx.src.slice(g.startIndex, g.endIndex).replace(/\s+/g, ' ');
    return c.chosen ? { resolved: c.resolved, ctor: c.ctor, via: chosenVia(shown, c) } : { resolved: c.resolved, ctor: c.ctor, via: shown };
  }
  if (ctx.src.charCodeAt(call.start) !== 40 /* ( */) return undefined;
  const f = calleeOf(call);
  if (f?.type !== 'parenthesized_expression') return undefined;
  const c = classExprCtor(ctx, f);
  if (!c || c.ctor.kind === 'other') return undefined;
  const shown = ctx.src.slice(f.startIndex, f.endIndex).replace(/\s+/g, ' ');
  if (c.chosen) return { resolved: c.resolved, ctor: c.ctor, via: chosenVia(shown, c) };
  if (c.candidates) return candidatesSite(c);
  // `(nn.Linear)(...)` is that class; `(partial(nn.LayerNorm, eps=1e-6))(...)` carries arguments of its own.
  return /^\(\s*[\w.\s]+\)$/.test(shown) ? { resolved: c.resolved, ctor: c.ctor } : { resolved: c.resolved, ctor: c.ctor, via: shown };
}

/**
 * A name bound to a layer class, then called: `lin = nn.Linear` (an alias: exactly that class),
 * `Lin = partial(nn.Linear, bias=False)`, `linear_layer = partial(nn.Conv2d, kernel_size=1) if use_conv else nn.Linear`
 * (timm), `MaybeLora = maybe_lora(args)` where the local function returns layer classes (mistral-inference). In the
 * enclosing function before the call, else at module level. Anything but a plain alias sets `via` (the class is chosen
 * elsewhere or carries arguments of its own).
 */
function assignedClassCtor(ctx: LayerContext, call: CallRec, text: string): ClassSite | undefined {
  if (!/^[A-Za-z_]\w*$/.test(text)) return undefined;
  const { src } = ctx;
  if (!ctx.classVars) {
    // Once per analysis: local functions returning classes, and assignments whose right side may be a class.
    ctx.classMakers = new Map();
    for (const g of ctx.walk.functions) {
      if (g.cls || g.scope.fn || !g.returns.length) continue;
      if (g.returns.some((r) => { const v = r.namedChild(0); return !!v && (v.type === 'identifier' || v.type === 'attribute' || v.type === 'call') && /[A-Z]/.test(src.slice(v.startIndex, v.endIndex)); })) {
        ctx.classMakers.set(g.name, g);
      }
    }
    ctx.classVars = new Map();
    const makers = ctx.classMakers;
    const simple = /([A-Za-z_]\w*)[ \t]*=(?!=)[ \t]*([^\n#]*)/y;
    for (const a of ctx.walk.assigns) {
      if (a.scope.cls && !a.scope.fn) continue; // class attributes are read as self.x, not by name
      // From the text first (the tree is only read for the few candidates): `name = Class`, `= partial(`,
      // `= maker(`, `= A if c else B`.
      simple.lastIndex = a.start;
      const m = simple.exec(src);
      if (!m) continue;
      // `cls = (nn.Linear)`, `cls = (A if c else B)`: the parentheses change nothing.
      const r = m[2].trim().replace(/^\(\s*([^()]*)\s*\)$/, '$1');
      const candidate = (/^[A-Za-z_][\w.]*$/.test(r) && /[A-Z]/.test(r)) || /^((functools\.)?partial|getattr)\s*\(/.test(r)
        || (makers.size > 0 && makers.has(/^([A-Za-z_]\w*)\s*\(/.exec(r)?.[1] ?? '')) || (/\bif\b/.test(r) && /[A-Z]/.test(r)) || r === '' || r.endsWith('(');
      if (!candidate) continue;
      const left = leftOf(a);
      let right = rightOf(a);
      while (right?.type === 'parenthesized_expression' && right.namedChildren.length === 1) right = right.namedChild(0);
      if (left?.type !== 'identifier' || !right) continue;
      if (!['identifier', 'attribute', 'call', 'conditional_expression'].includes(right.type)) continue;
      if (right.type === 'call') {
        const f = right.childForFieldName('function');
        const ft = f ? src.slice(f.startIndex, f.endIndex) : '';
        if (!/(^|\.)partial$/.test(ft) && ft !== 'getattr' && !ctx.classMakers.has(ft)) continue;
      } else if (!/[A-Z]/.test(src.slice(right.startIndex, right.endIndex))) continue;
      const name = src.slice(left.startIndex, left.endIndex);
      const l = ctx.classVars.get(name);
      const e = { start: a.start, right, fn: a.scope.fn };
      if (l) l.push(e); else ctx.classVars.set(name, [e]);
    }
  }
  const list = ctx.classVars.get(text);
  if (!list) return undefined;
  const fn = call.scope.fn;
  let hit: { right: SyntaxNode } | undefined;
  for (const e of list) if (fn && e.fn === fn && e.start < call.start) hit = e;
  if (!hit) for (const e of list) if (!e.fn) hit = e;
  if (!hit) return undefined;
  // Bound on the branches of an if / else (`if rms: cls = nn.RMSNorm` / `else: cls = nn.LayerNorm`): a run-time choice
  // among every class bound there, not the last one written.
  const scopeFn = (hit as { fn?: FuncRec }).fn;
  const inBranch = (n: SyntaxNode): boolean => {
    for (let q: SyntaxNode | null = n.parent; q && q.type !== 'function_definition' && q.type !== 'module'; q = q.parent) {
      if (q.type === 'if_statement' || q.type === 'else_clause' || q.type === 'elif_clause') return true;
    }
    return false;
  };
  const branches = list.filter((e) => e.fn === scopeFn && (!scopeFn || e.start < call.start) && e.right.type !== 'call');
  if (branches.length > 1 && branches.some((e) => inBranch(e.right))) {
    const found = branches.map((e) => ({ node: e.right, c: classExprCtor(ctx, e.right) })).filter((f): f is { node: SyntaxNode; c: ClassExpr } => !!f.c);
    const pick = found.length === branches.length ? chooseAmong(ctx, found) : undefined;
    if (pick && !(pick.ctor.kind === 'other' && !pick.ctor.isTe)) {
      const shown = `${text} = ${branches.map((e) => src.slice(e.right.startIndex, e.right.endIndex).replace(/\s+/g, ' ')).join(' or ')} (if / else)`;
      return pick.chosen ? { resolved: pick.resolved, ctor: pick.ctor, via: chosenVia(shown, pick), ...runTimeCheck(text, pick) } : candidatesSite(pick);
    }
  }
  const right = hit.right;
  const rhs = src.slice(right.startIndex, right.endIndex).replace(/\s+/g, ' ');
  if (right.type === 'conditional_expression') {
    const pick = classExprCtor(ctx, right);
    if (!pick || (pick.ctor.kind === 'other' && !pick.ctor.isTe)) return undefined;
    return pick.chosen ? { resolved: pick.resolved, ctor: pick.ctor, via: chosenVia(`${text} = ${rhs}`, pick), ...runTimeCheck(text, pick) } : candidatesSite(pick);
  }
  if (right.type === 'call') {
    const f = right.childForFieldName('function');
    const ft = f ? src.slice(f.startIndex, f.endIndex) : '';
    const maker = ctx.classMakers?.get(ft);
    if (maker) {
      const found: { node: SyntaxNode; c: ClassExpr }[] = [];
      const shown: string[] = [];
      let open = false;
      for (const r of maker.returns) {
        const v = r.namedChild(0);
        if (!v) return undefined;
        shown.push(src.slice(v.startIndex, v.endIndex).replace(/\s+/g, ' '));
        const c = classExprCtor(ctx, v);
        if (c) found.push({ node: v, c }); else open = true;
      }
      // One kind of layer whatever the branch: that one. Classes that convert differently (a tensor-parallel Linear
      // or nn.Linear, by the arguments): a run-time choice, reported once with every candidate, never silence.
      const pick = chooseAmong(ctx, found);
      if (!pick || (pick.ctor.kind === 'other' && !pick.ctor.isTe)) return undefined;
      const made = `${ft}(), which returns ${shown.join(' or ')}`;
      if (!pick.chosen && !open) return { resolved: pick.resolved, ctor: pick.ctor, via: made };
      // Commit with a run-time check where the class that converts is named in its branch (mistral-inference's
      // maybe_lora returns nn.Linear or partial(LoRALinear, ...)): the call goes through the fallback's *_from
      // factory, which builds te.* only when the class is that one, built plainly, and the class as written otherwise.
      const named = found.find((f) => f.c.resolved === pick.resolved && f.c.ctor === pick.ctor);
      const pickClass = pick.pickClass ?? (named ? defaultClassName(ctx, named.node) : undefined);
      return { resolved: pick.resolved, ctor: pick.ctor, via: chosenVia(made, { ...pick, chosen: true }), ...(pickClass ? { param: { name: text, defaultClass: pickClass } } : {}) };
    }
  }
  const c = classExprCtor(ctx, right, 0, scopeFn);
  if (!c || c.ctor.kind === 'other') return undefined;
  if (c.chosen) return { resolved: c.resolved, ctor: c.ctor, via: chosenVia(`${text} = ${rhs}`, c), ...runTimeCheck(text, c) };
  if (c.candidates) return candidatesSite(c);
  // `if norm_layer is None: norm_layer = partial(nn.LayerNorm, eps=1e-5)` for a parameter that defaults to None
  // (torchvision's Swin): the parameter's default, written in the body; a caller may pass another class, which the
  // conversion checks at run time (fp8_layernorm_from), as for a default in the signature.
  const dflt = scopeFn && noneDefaultAssigned(ctx, scopeFn, text, right) ? defaultClassName(ctx, right) : undefined;
  if (dflt) return { resolved: c.resolved, ctor: c.ctor, via: `the parameter ${text} (${rhs} when None)`, param: { name: text, defaultClass: dflt } };
  return right.type === 'call' ? { resolved: c.resolved, ctor: c.ctor, via: `${text} = ${rhs}` } : { resolved: c.resolved, ctor: c.ctor };
}

/** Whether `right` is assigned to `name` as the body of `if name is None:`, `name` being a parameter of fn whose default is None. */
function noneDefaultAssigned(ctx: LayerContext, fn: FuncRec, name: string, right: SyntaxNode): boolean {
  if (paramsOf(ctx.src, fn).find((p) => p.name === name)?.def?.type !== 'none') return false;
  let q: SyntaxNode | null = right.parent;
  while (q && q.type !== 'if_statement' && q.type !== 'function_definition') {
    if (q.type === 'else_clause' || q.type === 'elif_clause') return false;
    q = q.parent;
  }
  const cond = q?.type === 'if_statement' ? q.childForFieldName('condition') : null;
  return !!cond && new RegExp(`^${name}\\s+is\\s+None$`).test(ctx.src.slice(cond.startIndex, cond.endIndex).trim());
}

/** A class chosen at run time and called by name: the conversion can check at run time that the class reported was chosen. */
function runTimeCheck(name: string, c: ClassExpr): { param?: { name: string; defaultClass: string } } {
  return c.pickClass ? { param: { name, defaultClass: c.pickClass } } : {};
}

function scopeOf(ctx: LayerContext, call: CallRec): EvalScope {
  return { fn: call.scope.fn, cls: call.scope.cls ? ctx.classes.get(call.scope.cls.name) : undefined, pos: call.start };
}

function makeLayer(
  ctx: LayerContext, call: CallRec, calleeNode: SyntaxNode, callee: string, resolved: string, ctor: CtorInfo, scope: EvalScope,
): LayerRec {
  const { src } = ctx;
  const argsNode = argListOf(call) as SyntaxNode;
  const args: LayerArg[] = [];
  const argNodes = new Map<string, SyntaxNode>();
  const options: Record<string, string> = {};
  let index = 0;
  let afterSplat = false;
  for (const a of argsNode?.namedChildren ?? []) {
    if (!a) continue;
    // Each read of a web-tree-sitter node's type or end is a call into WASM: read once.
    const type = a.type;
    if (type === 'comment') continue;
    if (type === 'keyword_argument') {
      const n = a.childForFieldName('name');
      const v = a.childForFieldName('value');
      if (!n || !v) continue;
      const name = src.slice(n.startIndex, n.endIndex);
      const text = src.slice(v.startIndex, v.endIndex);
      args.push({ name, text, span: spanOf(a) });
      argNodes.set(name, v);
      options[name] = text.replace(/\s+/g, ' ');
    } else if (type === 'list_splat' || type === 'dictionary_splat') {
      const span = spanOf(a);
      args.push({ text: src.slice(span.startOffset, span.endOffset), span });
      afterSplat = true;
    } else {
      const span = spanOf(a);
      const text = src.slice(span.startOffset, span.endOffset);
      args.push({ index, text, span });
      const pname = ctor.params[index];
      if (pname && !afterSplat && !argNodes.has(pname)) {
        argNodes.set(pname, a);
        if (index >= 2 || !isDimParam(ctor, pname)) options[pname] = text.replace(/\s+/g, ' ');
      }
      index++;
    }
  }
  const layer: Layer = {
    span: spanOf(call.node),
    constructor: callee,
    resolved,
    calleeSpan: spanOf(calleeNode),
    kind: ctor.kind,
    isTe: ctor.isTe,
    name: '',
    path: '',
    attr: '',
    ownerClass: call.scope.cls?.name,
    ownerFunction: call.scope.fn?.name,
    args,
    argsSpan: argsNode ? spanOf(argsNode) : spanOf(call.node),
    options,
    role: 'other',
    roleReasons: [],
    tied: false,
    convertible: false,
    reasons: [],
  };
  if (ctor.local) layer.localClass = ctor.local.info.name;
  // te.Linear casts its weight to the compute dtype as this class's forward does; torch.nn.Linear would not, so the
  // conversion keeps the class for the fallback without FP8.
  if (ctor.local && ctor.kind === 'linear' && ctor.local.info.forwardExtra === WEIGHT_CAST) layer.fallbackKeepsClass = ctor.local.info.name;
  // A norm subclass computing in float32 and casting back: te.* norms compute in float32 inside their kernels, but
  // return torch.autocast's dtype where it is on, else their weights' (float32 by default: a BF16 input gives float32
  // out, TE 2.20.2 on an H200, bench/results/h200/2026-12-02-gpu-fixes); torch.nn's norm would meet a BF16 input with
  // FP32 weights, so the fallback keeps the class.
  if (ctor.local && (ctor.kind === 'layernorm' || ctor.kind === 'rmsnorm') && ctor.local.info.forwardExtra === FLOAT32_CAST_BACK && !ctor.local.info.channelAxis) {
    layer.fallbackKeepsClass = ctor.local.info.name;
  }
  // A norm that calls its weight otherwise (`scale`): the te.* norm keeps that checkpoint key, the class stays for the
  // fallback without FP8 (whose own norm would call it weight).
  const weightName = (ctor.kind === 'layernorm' || ctor.kind === 'rmsnorm') ? ctor.local?.info.scaleName ?? ctor.importedForward?.scaleName : undefined;
  if (weightName && /^[A-Za-z_]\w*$/.test(weightName)) {
    layer.weightName = weightName;
    layer.fallbackKeepsClass ??= ctor.local?.info.name ?? ctor.display;
  }
  // A Linear whose weight is stored [in, out] (Conv1D): converted through the fallback's wrapper that keeps that
  // layout in checkpoints, the class as written where FP8 does not run.
  if (ctor.transposedWeight && ctor.kind === 'linear' && !ctor.isTe) {
    layer.transposedWeight = true;
    layer.fallbackKeepsClass ??= ctor.local?.info.name ?? ctor.display;
  }
  if (ctor.factory) {
    layer.viaFactory = ctor.factory;
    // An imported function read as a Linear factory by its name: its body is not in the file.
    if (ctor.kind === 'linear' && !ctor.noTe) layer.importedFactory = true;
  }
  // A module that holds weights only under a flag (fairseq's PositionalEmbedding(learned=False) is sinusoidal).
  const weightsFlag = ctor.roleHint?.weightsOnlyWhen;
  if (weightsFlag && options[weightsFlag] === 'False') layer.kind = 'other';
  if (ctor.viaFallback) layer.viaFallback = true;
  const rec: LayerRec = { layer, call, ctor, scope, argNodes, outVia: [] };
  fillDims(ctx, rec);
  return rec;
}

function isDimParam(ctor: CtorInfo, p: string): boolean {
  return IN_PARAM.test(p) || OUT_PARAM.test(p) || SHAPE_PARAM.test(p) || /^(num_embeddings|embedding_dim|input_size|output_size|hidden_size|ffn_hidden_size|nf|nx)$/.test(p)
    || (ctor.local !== undefined && ctor.params.indexOf(p) < 2);
}

function fillDims(ctx: LayerContext, rec: LayerRec): void {
  const { ctor, argNodes, scope, layer } = rec;
  const ev = ctx.evaluator;
  const pick = (names: RegExp, fallbackIndex?: number): SyntaxNode | undefined => {
    for (const [k, v] of argNodes) if (names.test(k)) return v;
    if (fallbackIndex !== undefined) {
      const p = ctor.params[fallbackIndex];
      if (p) return argNodes.get(p);
    }
    return undefined;
  };
  const out = (n: SyntaxNode | undefined): void => {
    if (!n) return;
    const r = ev.dimAndEval(n, scope);
    layer.outFeatures = r.dim;
    rec.outVia = r.e.via;
  };
  switch (ctor.kind) {
    case 'linear':
    case 'parallel-linear': {
      // By position only when the signature can be (in, out): a from-scratch Linear built from a config object
      // (`Gate(args)`) has no size arguments at all.
      const hasNamed = ctor.params.some((p) => IN_PARAM.test(p) || p === 'input_size') || (!!ctor.local?.info.ownImplementation && ctor.params.length < 2);
      const inN = pick(/^(in_features|input_size|in_dim|input_dim|d_in|in_size|in_channels|nx|dim_in|in_f|fan_in|n_in|in_feat)$/, hasNamed ? undefined : 0);
      const outN = pick(/^(out_features|output_size|out_dim|output_dim|d_out|out_size|out_channels|nf|dim_out|out_f|fan_out|n_out|out_feat)$/, hasNamed ? undefined : 1);
      if (inN) layer.inFeatures = ev.dim(inN, scope);
      out(outN);
      if (ctor.local && !hasNamed && ctor.params.length === 0) {
        // A subclass without its own signature: nn.Linear(in, out).
        const a0 = argListOf(rec.call)?.namedChild(0);
        if (a0 && a0.type !== 'keyword_argument') layer.inFeatures = ev.dim(a0, scope);
      }
      break;
    }
    case 'embedding': {
      const n = pick(/^num_embeddings$/, 0);
      const d = pick(/^embedding_dim$/, 1);
      if (n) layer.inFeatures = ev.dim(n, scope);
      if (d) out(d);
      break;
    }
    case 'conv': {
      const i = pick(/^in_channels$/, 0);
      const o = pick(/^out_channels$/, 1);
      if (i) layer.inFeatures = ev.dim(i, scope);
      out(o);
      break;
    }
    case 'layernorm':
    case 'rmsnorm': {
      let s = pick(/^(normalized_shape|hidden_size)$/);
      if (!s) s = pick(SHAPE_PARAM, 0);
      if (s) layer.normalizedShape = ev.dim(s, scope);
      break;
    }
    default: {
      if (ctor.isTe) {
        const h = pick(/^(hidden_size|in_features)$/, 0);
        if (h) layer.inFeatures = ev.dim(h, scope);
        const f = pick(/^(ffn_hidden_size|out_features)$/);
        if (f) out(f);
      }
    }
  }
}

/** The walk up from a layer construction to where its value goes. */
interface PlaceWalk {
  ctx: LayerContext;
  rec: CallRec;
  pl: Placement;
  /** The position of the value in an `a, b = ...` right-hand side, once seen. */
  tupleIndex: number;
  /** The assignment whose right side the call is (walk.ts assignedBy), when it is. */
  owner?: AssignRec;
}

/** A walk step's outcome: the node to continue from, or the final placement. */
type PlaceStep = { next: SyntaxNode } | { done: Placement };

/** Source text of a node without whitespace. */
function compactText(src: string, n: SyntaxNode): string {
  return src.slice(n.startIndex, n.endIndex).replace(/\s+/g, '');
}

/** Where a layer's value goes: attribute path, container, factory return. */
function placement(ctx: LayerContext, call: SyntaxNode, rec: CallRec): Placement {
  const w: PlaceWalk = { ctx, rec, pl: { base: '', segs: [], multi: false, returned: false }, tupleIndex: -1 };
  // `self.fc = nn.Linear(...)`: the parent is the assignment the walk saw just before, its sides already read.
  const owner = call === rec.node ? assignedBy(rec) : undefined;
  if (owner) w.owner = owner;
  let n: SyntaxNode = call;
  for (let guard = 0; guard < 60; guard++) {
    const p = n === call && owner ? owner.node : n.parent;
    if (!p) return w.pl;
    const step = placeStep(w, p, n);
    if ('done' in step) return step.done;
    n = step.next;
  }
  return w.pl;
}

/** One step of the walk: what the parent `p` of the value's node `n` says about where the value goes. */
function placeStep(w: PlaceWalk, p: SyntaxNode, n: SyntaxNode): PlaceStep {
  const { pl } = w;
  const text = (x: SyntaxNode): string => compactText(w.ctx.src, x);
  switch (p.type) {
    case 'argument_list':
      return placeInArguments(w, p, n);
    case 'keyword_argument': {
      const outer = p.parent?.parent;
      const f = outer?.childForFieldName('function');
      const ft = f ? text(f) : '';
      const lastName = ft.split('.').pop() ?? '';
      // dict(wte=...), and a module built with its submodules as keyword arguments (`MoeLayer(gate=nn.Linear(...))`
      // stores it under that name).
      if (DICT_FN.test(ft) || CONTAINER_DICT.test(ft) || (/^[A-Z]/.test(lastName) && !CONTAINER_LIST.test(ft))) {
        const nm = p.childForFieldName('name');
        if (nm) pl.segs.unshift(`.${text(nm)}`);
      }
      return { next: p };
    }
    case 'pair': {
      const k = p.childForFieldName('key');
      const key = k ? stringValue(text(k)) : undefined;
      pl.segs.unshift(key !== undefined && /^[\w-]+$/.test(key) ? `.${key}` : '[*]');
      return { next: p };
    }
    case 'tuple': {
      const first = p.namedChild(0);
      const key = first && first.type === 'string' && first.startIndex !== n.startIndex ? stringValue(text(first)) : undefined;
      if (key !== undefined) pl.segs.unshift(`.${key}`);
      else pl.multi = true;
      return { next: p };
    }
    case 'list':
    case 'set':
      pl.multi = true;
      return { next: p };
    case 'list_comprehension':
    case 'generator_expression':
    case 'set_comprehension':
    case 'dictionary_comprehension':
      pl.container ??= 'comprehension';
      pl.multi = true;
      return { next: p };
    case 'conditional_expression': {
      // `fp8_linear(d, h) if q_noise <= 0 else nn.Linear(d, h)` (a conversion that holds only under a condition):
      // the torch.nn branch is the te.* branch's alternative, never a layer to convert again.
      const [yes, , no] = p.namedChildren;
      const other = yes && n.startIndex === yes.startIndex ? no : no && n.startIndex === no.startIndex ? yes : null;
      const f = other?.type === 'call' ? other.childForFieldName('function') : null;
      if (f && TE_BUILDER.test(text(f))) pl.alternativeOf ??= text(f);
      return { next: p };
    }
    case 'dictionary':
    case 'parenthesized_expression':
    case 'list_splat':
    case 'boolean_operator':
    case 'await':
      return { next: p };
    case 'expression_list': {
      const kids = p.namedChildren;
      w.tupleIndex = kids.findIndex((k) => k !== null && k.startIndex === n.startIndex && k.endIndex === n.endIndex);
      return { next: p };
    }
    case 'attribute': {
      // nn.Linear(...).to(device) / .cuda() / .requires_grad_(False)
      const outer = p.parent;
      if (outer && outer.type === 'call' && p.childForFieldName('object')?.startIndex === n.startIndex) return { next: outer };
      return { done: pl };
    }
    case 'assignment':
    case 'augmented_assignment':
      return { done: placeAssigned(w, p, n) };
    case 'return_statement':
      pl.returned = true;
      return { done: pl };
    case 'lambda': {
      // `self.proj = default(proj, lambda: nn.Linear(d, d_out))` (x-transformers): a default-value helper returns
      // the lambda's result when no value is given, so the layer lands where the helper's result goes.
      const args = p.parent;
      const outer = args?.type === 'argument_list' ? args.parent : null;
      const f = outer?.type === 'call' ? outer.childForFieldName('function') : null;
      if (outer && f && /^(default|maybe|or_else|if_none|value_or|default_to)$/.test(text(f).split('.').pop() ?? '')) return { next: outer };
      return { done: pl };
    }
    default:
      return { done: pl };
  }
}

/** The value is an argument of a call: a container, a dict, `append` / `add_module` / `setattr`, a class wrapper. */
function placeInArguments(w: PlaceWalk, p: SyntaxNode, n: SyntaxNode): PlaceStep {
  const { ctx, rec, pl } = w;
  const text = (x: SyntaxNode): string => compactText(ctx.src, x);
  const outer = p.parent;
  if (!outer || outer.type !== 'call') return { done: pl };
  const f = outer.childForFieldName('function');
  if (!f) return { done: pl };
  const ft = text(f);
  const r = resolveName(ctx.imports, ft);
  const last = ft.split('.').pop() ?? '';
  // `fp8_linear_like(make_linear(d, d))`: what the fallback converts where FP8 runs, and keeps as it is elsewhere. The
  // construction is that layer (named where the result goes), never one to convert again.
  if (ft === LIKE_FACTORY && p.namedChild(0)?.startIndex === n.startIndex) {
    pl.alternativeOf ??= ft;
    return { next: outer };
  }
  if (CONTAINER_LIST.test(r) || CONTAINER_LIST.test(ft)) {
    pl.segs.unshift('[*]');
    pl.multi = false;
    if (pl.container === undefined || pl.container === 'comprehension') pl.container = /Sequential/.test(last) ? 'Sequential' : 'ModuleList';
  } else if (CONTAINER_DICT.test(r) || CONTAINER_DICT.test(ft)) {
    if (pl.container === undefined || pl.container === 'comprehension') pl.container = 'ModuleDict';
  } else if (DICT_FN.test(ft)) {
    // transparent: dict(wte=...) / OrderedDict([...])
  } else if (f.type === 'attribute' && /^(append|extend|insert|add|appendleft)$/.test(last)) {
    const obj = f.childForFieldName('object');
    pl.base = obj ? text(obj) : '';
    pl.segs.unshift('[*]');
    pl.multi = false;
    pl.container ??= rec.scope.loopDepth > 0 ? 'loop' : 'ModuleList';
    return { done: followLocal(ctx, pl, rec, 0) };
  } else if (f.type === 'attribute' && last === 'update' && pl.segs.length && pl.segs[0].startsWith('.')) {
    // `self.transformer.update({"ff_out": nn.Linear(...)})` (OLMo): a ModuleDict entry under its key.
    const obj = f.childForFieldName('object');
    pl.base = obj ? text(obj) : '';
    pl.container ??= 'ModuleDict';
    return { done: pl };
  } else if (f.type === 'attribute' && /^(add_module|register_module)$/.test(last)) {
    const obj = f.childForFieldName('object');
    const first = p.namedChild(0);
    const key = first ? stringValue(text(first)) : undefined;
    pl.base = `${obj ? text(obj) : ''}.${key ?? '*'}`;
    if (rec.scope.loopDepth > 0) pl.container ??= 'loop';
    return { done: pl };
  } else if ((CLASS_WRAPPERS.test(last) || CLASS_WRAPPERS.test(r.split('.').pop() ?? '') || ALTERNATE_CTOR.test(ft)) && p.namedChild(0)?.startIndex === n.startIndex) {
    if (!pl.wrappedBy) {
      pl.wrappedBy = ft;
      const off = wrapperIdentityWhen(ctx.src, r, outer);
      if (off) pl.wrapperOff = off;
    }
  } else if (ft === 'setattr') {
    const obj = p.namedChild(0);
    const keyNode = p.namedChild(1);
    const key = keyNode ? stringValue(text(keyNode)) : undefined;
    pl.base = `${obj ? text(obj) : ''}.${key ?? '*'}`;
    if (rec.scope.loopDepth > 0) pl.container ??= 'loop';
    return { done: pl };
  }
  return { next: outer };
}

/** The value is assigned: the target names it (a local is followed to where it goes next). */
function placeAssigned(w: PlaceWalk, p: SyntaxNode, n: SyntaxNode): Placement {
  const { ctx, rec, pl } = w;
  const own = w.owner && w.owner.node === p ? w.owner : undefined;
  if (own) {
    // assignedBy checked that the right side is the call itself
    if (n !== rec.node) return pl;
  } else {
    const right = p.childForFieldName('right');
    if (!right || right.startIndex !== n.startIndex || right.endIndex !== n.endIndex) return pl;
  }
  let left = own ? leftOf(own) : p.childForFieldName('left');
  if (!left) return pl;
  let leftType = left.type;
  if ((leftType === 'pattern_list' || leftType === 'tuple_pattern') && w.tupleIndex >= 0) {
    left = left.namedChildren.filter((k) => k !== null)[w.tupleIndex] ?? left;
    leftType = left.type;
  }
  pl.base = compactText(ctx.src, left);
  if (!own && p.type === 'augmented_assignment') pl.segs.unshift('[*]');
  if (leftType === 'identifier' && rec.scope.fn) return followLocal(ctx, pl, rec, 0);
  return pl;
}

/** `layer = nn.Linear(...)` then `self.fc = layer` / `self.layers.append(layer)` / `return layer`. */
function followLocal(ctx: LayerContext, pl: Placement, rec: CallRec, hops: number): Placement {
  const fn = rec.scope.fn;
  if (!fn || hops > 3 || !/^[A-Za-z_]\w*$/.test(pl.base)) return pl;
  const { src } = ctx;
  const name = pl.base;
  const text = (n: SyntaxNode): string => src.slice(n.startIndex, n.endIndex).replace(/\s+/g, '');
  if (!pl.wrappedBy) {
    // `fc = nn.Linear(...)` ... `ColumnShardedLinear.from_linear(fc, gang)`: that constructor reads it as a Linear.
    for (const c of fn.calls) {
      const f = c.start > rec.start ? calleeOf(c) : null;
      if (!f || f.type !== 'attribute' || !ALTERNATE_CTOR.test(text(f))) continue;
      const first = argListOf(c)?.namedChildren.find((x) => x !== null && x.type !== 'comment' && x.type !== 'keyword_argument');
      if (first && text(first) === name) { pl = { ...pl, wrappedBy: text(f) }; break; }
    }
  }
  for (const a of fn.assigns) {
    if (a.start <= rec.start) continue;
    const right = rightOf(a);
    const left = leftOf(a);
    if (!right || !left) continue;
    const rt = text(right);
    if (rt === name) {
      return followLocal(ctx, { ...pl, base: text(left) }, { ...rec, start: a.start }, hops + 1);
    }
    // self.layers = nn.ModuleList(layers) / nn.Sequential(*layers)
    if (right.type === 'call') {
      const m = /^([\w.]+)\((\*)?(\w+)\)$/.exec(rt);
      if (m && m[3] === name && (CONTAINER_LIST.test(m[1]) || CONTAINER_DICT.test(m[1]))) {
        const isList = CONTAINER_LIST.test(m[1]);
        return followLocal(ctx, {
          ...pl, base: text(left), container: pl.container ?? (/Sequential/.test(m[1]) ? 'Sequential' : isList ? 'ModuleList' : 'ModuleDict'),
        }, { ...rec, start: a.start }, hops + 1);
      }
    }
  }
  for (const c of fn.calls) {
    if (c.start <= rec.start) continue;
    const f = calleeOf(c);
    if (!f || f.type !== 'attribute') continue;
    const ft = text(f);
    if (!/\.(append|extend|add_module|insert)$/.test(ft)) continue;
    const args = argListOf(c);
    const argTexts = (args?.namedChildren ?? []).filter((x) => x !== null).map((x) => text(x as SyntaxNode));
    if (!argTexts.includes(name)) continue;
    const obj = f.childForFieldName('object');
    if (/add_module$/.test(ft)) {
      const key = stringValue(argTexts[0] ?? '');
      return { ...pl, base: `${obj ? text(obj) : ''}.${key ?? '*'}` };
    }
    return followLocal(ctx, {
      ...pl, base: obj ? text(obj) : '', segs: ['[*]', ...pl.segs], multi: false, container: pl.container ?? (c.scope.loopDepth > 0 ? 'loop' : 'ModuleList'),
    }, { ...rec, start: c.start }, hops + 1);
  }
  for (const r of fn.returns) {
    if (r.startIndex <= rec.start) continue;
    const v = r.namedChild(0);
    if (v && text(v) === name) return { ...pl, returned: true };
  }
  return pl;
}

function applyPlacement(rec: LayerRec, pl: Placement, call: CallRec): void {
  let base = pl.base.replace(/\[\s*(['"])([\w.-]+)\1\s*\]/g, '.$2').replace(/\[[^\]]*\]/g, '[*]');
  if (/\[\*\]/.test(base) && call.scope.loopDepth > 0) pl.container ??= 'loop';
  let name = base + pl.segs.join('') + (pl.multi ? '[*]' : '');
  const nested = pl.segs.length > 0 || pl.multi || pl.container !== undefined || /\[\*\]/.test(base);
  if (nested || !name.startsWith('self.')) name = name.replace(/^self\./, '');
  if (!base && !pl.segs.length) name = '';
  base = name.replace(/^self\./, '');
  rec.layer.name = name;
  rec.layer.path = base;
  const m = /([A-Za-z_]\w*)(\[\*\])*$/.exec(base);
  rec.layer.attr = m ? m[1] : '';
  if (pl.container) rec.layer.container = pl.container;
  else if (call.scope.loopDepth > 0 && name) rec.layer.container = 'loop';
  if (pl.wrappedBy) rec.layer.wrappedBy = pl.wrappedBy;
  if (pl.wrapperOff) rec.layer.wrapperOff = pl.wrapperOff;
  if (pl.alternativeOf) rec.layer.alternativeOf = pl.alternativeOf;
}

/**
 * Wrappers known to leave the module untouched below a threshold of one argument: fairseq's quant_noise(module, p,
 * block_size) returns the module as it is when p <= 0 (no quantization noise, fairseq's default) and only then asserts
 * its class and hooks its weight (fairseq/modules/quant_noise.py, fairseq 0.12.2).
 */
const IDENTITY_BELOW: { name: RegExp; param: string; index: number; when: (v: string) => string }[] = [
  { name: /^fairseq(\.[\w]+)*\.quant_noise$/, param: 'p', index: 1, when: (v) => `${v} <= 0` },
];

/**
 * The condition, as code at the wrapper call, under which the wrapper returns its module as it is: `True` where the
 * argument is a number that always makes it so, undefined where none (or a number that never does).
 */
function wrapperIdentityWhen(src: string, resolved: string, call: SyntaxNode): string | undefined {
  const rule = IDENTITY_BELOW.find((x) => x.name.test(resolved));
  if (!rule) return undefined;
  const args = argsOf(src, call);
  const positional = args.filter((a) => !a.name);
  // By keyword, else by position where no splat comes before it (`quant_noise(m, *rest)` says nothing).
  const arg = args.find((a) => a.name === rule.param)
    ?? (positional.slice(0, rule.index + 1).some((a) => /splat/.test(a.node.type)) ? undefined : positional[rule.index]);
  if (!arg || /splat/.test(arg.node.type) || arg.text.includes('\n')) return undefined;
  const v = arg.text;
  // A number written there decides it now: `p=0.1` always reparametrises (no condition), `p=0` never does.
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(v)) return Number(v) <= 0 ? 'True' : undefined;
  return rule.when(/^[\w.]+$/.test(v) ? v : `(${v})`);
}

/**
 * A class held in an attribute, then called: a class variable (`output_layer_cls = ColumnParallelLinear` in the
 * class body, or `self.output_layer_cls = A if c else B` in a method, called as `self.output_layer_cls(...)`; a local
 * subclass that assigns the attribute too adds a candidate), or a config's class attribute or property
 * (`config.norm_class(...)` where a local class defines `norm_class`). The candidates decide as in chooseAmong.
 */
function attrClassCtor(ctx: LayerContext, call: CallRec, text: string): ClassSite | undefined {
  const m = /^([A-Za-z_]\w*)\.([A-Za-z_]\w*)$/.exec(text);
  if (!m) return undefined;
  const [, head, attr] = m;
  // Most `self.x(...)` / `obj.x(...)` calls build nothing: the answer depends only on the calling class (self) or
  // function (a parameter's annotation), so a miss is remembered for the analysis.
  const self = head === 'self' || head === 'cls';
  const missKey = `${self ? call.scope.cls?.name ?? '' : call.scope.fn?.start ?? -1}\u0001${text}`;
  let misses = attrMisses.get(ctx);
  if (!misses) attrMisses.set(ctx, (misses = new Set()));
  if (misses.has(missKey)) return undefined;
  const r = attrClassCtorUncached(ctx, call, text, head, attr);
  if (!r) misses.add(missKey);
  return r;
}

const attrMisses = new WeakMap<LayerContext, Set<string>>();

function attrClassCtorUncached(ctx: LayerContext, call: CallRec, text: string, head: string, attr: string): ClassSite | undefined {
  const exprs = head === 'self' || head === 'cls' ? selfClassExprs(ctx, call, attr) : configClassExprs(ctx, attr);
  if (!exprs.length) return head === 'self' || head === 'cls' ? undefined : libraryAttrCtor(ctx, call, head, attr);
  const found: { node: SyntaxNode; c: ClassExpr }[] = [];
  let unknown = false;
  for (const e of exprs) {
    const c = classExprCtor(ctx, e);
    if (!c) { unknown = true; continue; }
    // A conditional inside contributes its own candidates as they were decided there.
    if (c.chosen || (c.candidates && c.candidates.length > 1)) return c.chosen ? { resolved: c.resolved, ctor: c.ctor, via: chosenVia(text, c) } : candidatesSite(c);
    found.push({ node: e, c });
  }
  const r = chooseAmong(ctx, found);
  if (!r) return undefined;
  const shown = exprs.map((e) => ctx.src.slice(e.startIndex, e.endIndex).replace(/\s+/g, ' ')).join(' or ');
  if (r.chosen || unknown) return { resolved: r.resolved, ctor: r.ctor, via: chosenVia(`${text} (${shown})`, r) };
  return found.length > 1 ? candidatesSite(r) : { resolved: r.resolved, ctor: r.ctor };
}

/** Whether an assigned expression may be a class (not a call that builds something, except partial). */
function classLike(src: string, n: SyntaxNode): boolean {
  const t = src.slice(n.startIndex, n.endIndex);
  if (!/[A-Z]/.test(t)) return false;
  const type = n.type;
  if (type === 'identifier' || type === 'attribute' || type === 'conditional_expression') return true;
  return type === 'call' && /^(functools\.)?partial\s*\(/.test(t);
}

const SELF_ASSIGN_HEAD = /self\.\w+[ \t]*=(?!=)[ \t]*/y;

/**
 * Whether the text alone shows that `self.<x> = <right>` starting at `at` has no class-like right side (classLike), so
 * the tree need not be read. It does when the statement is that one line (brackets balanced, no backslash, no
 * triple quote) with no capital letter and no `partial` / `functools` start: a class-like right side (a name, an
 * attribute, a conditional or a `partial(...)` call) has a capital letter in it. Anything else (an annotation,
 * several targets, a statement over several lines) is left to the tree.
 */
function notClassLikeByText(src: string, at: number): boolean {
  SELF_ASSIGN_HEAD.lastIndex = at;
  if (!SELF_ASSIGN_HEAD.test(src)) return false;
  const from = SELF_ASSIGN_HEAD.lastIndex;
  PARTIAL_START.lastIndex = from;
  if (PARTIAL_START.test(src)) return false;
  // The right side up to the end of its line or to a `;` outside brackets and strings: the statement's own text. (To
  // the end of the line for each statement, `self.a0=1;self.a1=1;...` on one line was quadratic: 40,000 took 46 s.)
  let depth = 0;
  let quote = 0;
  let blank = true;
  let i = from;
  try {
    for (; i < src.length; i++) {
      const c = src.charCodeAt(i);
      if (c === 10 || c === 13) break;
      // a capital letter (strings and comments included, as before) or a backslash: left to the tree
      if ((c >= 65 && c <= 90) || c === 92) return false;
      if (c !== 32 && c !== 9 && c !== 12) blank = false;
      if (quote) { if (c === quote) quote = 0; continue; }
      if (c === 34 || c === 39) {
        if (src.charCodeAt(i + 1) === c && src.charCodeAt(i + 2) === c) return false; // a triple quote
        quote = c;
      } else if (c === 40 || c === 91 || c === 123) depth++;
      else if (c === 41 || c === 93 || c === 125) depth--;
      else if (c === 59 && depth === 0) break;
    }
  } finally {
    notClassLikeScanned += i - from;
  }
  // The statement ends here only if its brackets and strings close here.
  return !blank && depth === 0 && quote === 0;
}

const PARTIAL_START = /(partial|functools)\b/y;

/** Characters notClassLikeByText has read, over the process (a count for the linearity test, not a timing). */
let notClassLikeScanned = 0;
export function notClassLikeScannedChars(): number {
  return notClassLikeScanned;
}

/** What one assignment statement contributes to selfAttrAssigns (`self.<attr> = <class-like>`: the attribute and the
 *  right side), or null. It reads the statement's own text only, so it is kept on the node: a statement copy reused
 *  across analyses (node.ts) is classified once, not at every edit. */
const selfAssignOfNode = new WeakMap<SyntaxNode, { key: string; right: SyntaxNode } | null>();
function selfAssignOf(src: string, a: AssignRec): { key: string; right: SyntaxNode } | null {
  const node = a.node;
  const hit = selfAssignOfNode.get(node);
  if (hit !== undefined) return hit;
  let r: { key: string; right: SyntaxNode } | null = null;
  if (notClassLikeByText(src, a.start)) { selfAssignOfNode.set(node, r); return r; }
  const left = leftOf(a);
  const right = rightOf(a);
  if (left && right && left.type === 'attribute' && classLike(src, right)) {
    const lt = src.slice(left.startIndex, left.endIndex);
    if (/^self\.\w+$/.test(lt)) r = { key: lt.slice(5), right };
  }
  selfAssignOfNode.set(node, r);
  return r;
}

/** Once per analysis: `self.<attr> = <class-like>` in methods, by attribute, with the class that assigns it. */
const selfAttrCache = new WeakMap<LayerContext, Map<string, { cls: ClassRec; right: SyntaxNode }[]>>();
function selfAttrAssigns(ctx: LayerContext): Map<string, { cls: ClassRec; right: SyntaxNode }[]> {
  let m = selfAttrCache.get(ctx);
  if (m) return m;
  m = new Map();
  const { src } = ctx;
  for (const a of ctx.walk.assigns) {
    if (!a.scope.fn || !a.scope.cls || src.charCodeAt(a.start) !== 115 /* s */ || !src.startsWith('self.', a.start)) continue;
    const s = selfAssignOf(src, a);
    if (!s) continue;
    const list = m.get(s.key);
    if (list) list.push({ cls: a.scope.cls, right: s.right }); else m.set(s.key, [{ cls: a.scope.cls, right: s.right }]);
  }
  selfAttrCache.set(ctx, m);
  return m;
}

/** Once per analysis: the local classes that define each field (class body or dataclass field), in class order. */
const fieldClassesCache = new WeakMap<LayerContext, Map<string, ClassModel[]>>();
function classesWithField(ctx: LayerContext, attr: string): ClassModel[] {
  let m = fieldClassesCache.get(ctx);
  if (!m) {
    m = new Map();
    for (const c of ctx.classes.values()) {
      for (const k of c.fieldNodes.keys()) {
        const l = m.get(k);
        if (l) { if (l[l.length - 1] !== c) l.push(c); } else m.set(k, [c]);
      }
    }
    fieldClassesCache.set(ctx, m);
  }
  return m.get(attr) ?? [];
}

/** Class expressions assigned to `attr` of the calling class: class body, its local bases and subclasses, methods. */
function selfClassExprs(ctx: LayerContext, call: CallRec, attr: string): SyntaxNode[] {
  const owner = call.scope.cls ? ctx.classes.get(call.scope.cls.name) : undefined;
  if (!owner) return [];
  const assigned = selfAttrAssigns(ctx).get(attr);
  const fields = classesWithField(ctx, attr);
  if (!assigned && !fields.length) return [];
  const related = (c: ClassModel): boolean => c === owner || inherits(ctx, owner, c) || inherits(ctx, c, owner);
  const out: SyntaxNode[] = [];
  for (const c of fields) {
    const f = c.fieldNodes.get(attr);
    if (f && related(c) && classLike(ctx.src, f)) out.push(f);
  }
  for (const a of assigned ?? []) {
    const c = ctx.classes.get(a.cls.name);
    if (c && related(c)) out.push(a.right);
  }
  return out;
}

/** Whether `sub` derives from `base` through local classes. */
function inherits(ctx: LayerContext, sub: ClassModel, base: ClassModel, depth = 0): boolean {
  if (depth > 8) return false;
  return sub.info.resolvedBases.some((b) => {
    if (!b.startsWith('local:')) return false;
    const c = ctx.classes.get(b.slice(6));
    return !!c && (c === base || inherits(ctx, c, base, depth + 1));
  });
}

/** `config.<attr>`: a local config class's field default or property of that name (what it returns); by attribute,
 *  found once per analysis. */
const configAttrCache = new WeakMap<LayerContext, Map<string, SyntaxNode[]>>();
function configClassExprs(ctx: LayerContext, attr: string): SyntaxNode[] {
  let m = configAttrCache.get(ctx);
  if (!m) {
    m = new Map();
    const add = (k: string, n: SyntaxNode): void => { const l = m!.get(k); if (l) l.push(n); else m!.set(k, [n]); };
    const configish = (name: string): boolean => /Config|Args|Params/.test(name);
    for (const c of ctx.classes.values()) {
      if (!c.isConfig && !configish(c.info.name)) continue;
      for (const [k, f] of c.fieldNodes) if (classLike(ctx.src, f)) add(k, f);
    }
    for (const fn of ctx.walk.functions) {
      if (!fn.cls || !configish(fn.cls.name)) continue;
      // A property that returns a class in one branch: every return is a candidate (one that is no known class,
      // `getattr(torch.nn, self.norm_class_name)`, leaves the choice open).
      const vals = fn.returns.map((r) => r.namedChild(0)).filter((v): v is SyntaxNode => !!v);
      if (vals.some((v) => classLike(ctx.src, v))) for (const v of vals) add(fn.name, v);
    }
    configAttrCache.set(ctx, m);
  }
  return m.get(attr) ?? [];
}

/**
 * The catalogue's row for a config class's attribute: the class's own, or through the file's subclasses of it
 * (litgpt's lora.py: `class Config(BaseConfig)`, `BaseConfig` being litgpt.config.Config), a few levels deep.
 */
function configAttrRow(ctx: LayerContext, owner: string, attr: string): ReturnType<typeof lookupClassAttribute> {
  let names = [owner];
  for (let depth = 0; depth < 4 && names.length; depth++) {
    for (const name of names) {
      const row = lookupClassAttribute(name, attr);
      if (row) return row;
    }
    names = names.flatMap((n) => ctx.classes.get(n.replace(/^local:/, ''))?.info.resolvedBases ?? []);
  }
  return undefined;
}

/**
 * `config.norm_class(...)` where `config` is a parameter annotated with a library config class whose attribute the
 * catalogue lists (litgpt's Config.norm_class): its candidate classes, a local class standing for the library's own
 * when the file defines one of that name (litgpt's model.py defines RMSNorm).
 */
function libraryAttrCtor(ctx: LayerContext, call: CallRec, head: string, attr: string): ClassSite | undefined {
  const fn = call.scope.fn;
  const ann = fn ? paramsOf(ctx.src, fn).find((p) => p.name === head)?.annotation : undefined;
  if (!ann || !/^[A-Za-z_][\w.]*$/.test(ann)) return undefined;
  const row = configAttrRow(ctx, resolveName(ctx.imports, ann), attr);
  if (!row) return undefined;
  const found: { node: string; c: ClassExpr }[] = [];
  for (const name of row.candidates) {
    const last = name.slice(name.lastIndexOf('.') + 1);
    const c = ctx.classes.has(last) ? ctorFor(ctx, last) : knownCtor(name) ? { resolved: name, ctor: { ...knownCtor(name)! } } : undefined;
    if (c) found.push({ node: name.replace(/^torch\.nn\./, 'nn.'), c });
  }
  const r = chooseAmong(ctx, found);
  if (!r) return undefined;
  const text = `${head}.${attr} (${row.note})`;
  return r.chosen ? { resolved: r.resolved, ctor: r.ctor, via: chosenVia(text, r) } : candidatesSite(r);
}
