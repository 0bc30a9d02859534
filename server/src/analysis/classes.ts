/**
 * Classes defined in the file: bases, config-style field defaults, and what they behave as when they are layers
 * (local subclasses of nn.Linear/LayerNorm, custom RMSNorm and LayerNorm classes by name and by structure).
 */
import type { SyntaxNode } from './node';
import type { ClassInfo, LayerKind } from './ir';
import { knownCtor } from './known';
import { resolveName, type ImportTable } from './imports';
import { spanOf } from './spans';
import { leftOf, rightOf, type ClassRec, type FuncRec } from './walk';

export interface ParamInfo {
  name: string;
  /** Default value node, if any. */
  def?: SyntaxNode;
  /** Annotation text, if any (`GPTConfig`). */
  annotation?: string;
  kind: 'plain' | 'star' | 'kwstar';
}

export interface ClassModel {
  rec: ClassRec;
  info: ClassInfo;
  /** Field name -> default value node (dataclass fields, class attributes). */
  fieldNodes: Map<string, SyntaxNode>;
  /** Fields `__post_init__` assigns (gpt-fast's `self.head_dim = self.dim // self.n_head`): their defaults lie. */
  postInit?: Set<string>;
  init?: FuncRec;
  forward?: FuncRec;
  /** Layer kind and whether it derives from a te.* class. */
  isTe: boolean;
  /** The te.* equivalent when the class is a layer. */
  teEquivalent?: string;
  /** Whether a custom LayerNorm class has (or may have) a bias. */
  hasBias?: boolean;
  /** A norm class's defaults for its affine options, as written (`bias` -> `False`, `elementwise_affine` -> `True`). */
  normDefaults?: Record<string, string>;
  /** A custom RMSNorm class that always creates a bias parameter (te.RMSNorm has none). */
  rmsBias?: boolean;
  isConfig: boolean;
  isModule: boolean;
}

/** Keyed by the function's node: a statement copy kept across edits (node.ts) keeps its parameters too. */
const paramCache = new WeakMap<SyntaxNode, ParamInfo[]>();

/** Parameters of a function (cached per node; callers do not modify the list). */
export function paramsOf(src: string, fn: FuncRec): ParamInfo[] {
  const hit = paramCache.get(fn.node);
  if (hit) return hit;
  const out: ParamInfo[] = [];
  const ps = fn.node.childForFieldName('parameters');
  if (ps) {
    for (const p of ps.namedChildren) {
      if (!p) continue;
      const t = p.type;
      if (t === 'identifier') out.push({ name: src.slice(p.startIndex, p.endIndex), kind: 'plain' });
      else if (t === 'default_parameter' || t === 'typed_default_parameter' || t === 'typed_parameter') {
        const n = p.childForFieldName('name') ?? p.namedChild(0);
        const ty = p.childForFieldName('type');
        const v = p.childForFieldName('value') ?? undefined;
        if (n && n.type === 'identifier') out.push({
          name: src.slice(n.startIndex, n.endIndex), def: v, kind: 'plain',
          annotation: ty ? src.slice(ty.startIndex, ty.endIndex) : undefined,
        });
        else if (n && n.type === 'list_splat_pattern') out.push({ name: src.slice(n.startIndex + 1, n.endIndex), kind: 'star' });
        else if (n && n.type === 'dictionary_splat_pattern') out.push({ name: src.slice(n.startIndex + 2, n.endIndex), kind: 'kwstar' });
      } else if (t === 'list_splat_pattern') out.push({ name: src.slice(p.startIndex + 1, p.endIndex), kind: 'star' });
      else if (t === 'dictionary_splat_pattern') out.push({ name: src.slice(p.startIndex + 2, p.endIndex), kind: 'kwstar' });
    }
  }
  paramCache.set(fn.node, out);
  return out;
}

/** Parameters without the leading self/cls of a method. */
export function ctorParams(src: string, fn: FuncRec): ParamInfo[] {
  const ps = paramsOf(src, fn);
  return fn.cls && ps.length && (ps[0].name === 'self' || ps[0].name === 'cls') ? ps.slice(1) : ps;
}

const RMS_NAME = /RMSNorm|RmsNorm|^T5LayerNorm$|RMSLayerNorm|^RMSNorm|ScaleNorm$|^SimpleRMSNorm/;
const LN_NAME = /LayerNorm$|^LN$|^Fp32LayerNorm$/;
const MODULE_BASE = /(^|\.)(Module|[A-Z]\w*Module|[A-Z]\w*Layer|PreTrainedModel|[A-Z]\w*Model|GradientCheckpointingLayer|MegatronModule)$/;
const CONFIG_NAME = /(Config|Configuration|Args|Arguments|Params|Parameters|Dimensions|Dims|HParams|Hparams|Hyperparameters|Settings|Options)$/;

/** Builds ClassModels and works out which local classes are layers. */
export function analyzeClasses(src: string, recs: ClassRec[], imports: ImportTable): Map<string, ClassModel> {
  const byName = new Map<string, ClassModel>();
  for (const rec of recs) byName.set(rec.name, classModel(src, rec));
  // Resolve bases after every class is known (a base may be defined below its subclass).
  for (const m of byName.values()) {
    m.info.resolvedBases = m.info.bases.map((b) => (byName.has(b) ? `local:${b}` : resolveName(imports, b)));
  }
  const visiting = new Set<string>();
  const decide = (m: ClassModel): void => {
    // (Through a function: a narrowing of layerKind here would outlive kindFromBases, which sets it.)
    if (kindDecided(m) || visiting.has(m.info.name)) return;
    visiting.add(m.info.name);
    const kindFromBase = kindFromBases(m, byName, decide);
    if (!m.info.layerKind && m.isModule) structural(src, m);
    if (!m.info.layerKind && m.isModule) m.info.layerKind = 'other';
    if ((m.info.layerKind === 'linear' || m.info.layerKind === 'layernorm' || m.info.layerKind === 'rmsnorm') && !m.isTe) {
      layerSubclassFacts(src, m, kindFromBase);
    }
    if (m.info.layerKind === 'layernorm' || m.info.layerKind === 'rmsnorm') normClassFacts(src, m, byName);
    visiting.delete(m.info.name);
  };
  for (const m of byName.values()) decide(m);
  return byName;
}

function kindDecided(m: ClassModel): boolean {
  return m.info.layerKind !== undefined;
}

/** The bases as written: names and attributes, and the class of a subscripted generic base (`Base[T]`). */
function basesOf(src: string, rec: ClassRec): string[] {
  const basesNode = rec.node.childForFieldName('superclasses');
  const bases: string[] = [];
  if (basesNode) {
    for (const b of basesNode.namedChildren) {
      if (b && (b.type === 'identifier' || b.type === 'attribute')) bases.push(src.slice(b.startIndex, b.endIndex).replace(/\s+/g, ''));
      else if (b && b.type === 'subscript') {
        const v = b.childForFieldName('value');
        if (v) bases.push(src.slice(v.startIndex, v.endIndex).replace(/\s+/g, ''));
      }
    }
  }
  return bases;
}

/** Class-body fields with their default values (`n_embd: int = 768`, `dataclasses.field(default=768)`). */
function fieldsOf(src: string, rec: ClassRec): { fieldNodes: Map<string, SyntaxNode>; fieldDefaults: Record<string, string> } {
  const fieldNodes = new Map<string, SyntaxNode>();
  const fieldDefaults: Record<string, string> = {};
  for (const a of rec.bodyAssigns) {
    const left = leftOf(a);
    let right = rightOf(a);
    if (!left || left.type !== 'identifier' || !right) continue;
    // dataclasses.field(default=768)
    if (right.type === 'call') {
      const f = right.childForFieldName('function');
      if (f && /(^|\.)field$/.test(src.slice(f.startIndex, f.endIndex))) {
        const d = keywordArg(src, right, 'default');
        if (!d) continue;
        right = d;
      }
    }
    const name = src.slice(left.startIndex, left.endIndex);
    fieldNodes.set(name, right);
    fieldDefaults[name] = src.slice(right.startIndex, right.endIndex);
  }
  return { fieldNodes, fieldDefaults };
}

/** One class's model before its bases are resolved: bases, fields, methods, config-ness, `__post_init__` fields. */
function classModel(src: string, rec: ClassRec): ClassModel {
  const bases = basesOf(src, rec);
  const { fieldNodes, fieldDefaults } = fieldsOf(src, rec);
  const info: ClassInfo = {
    name: rec.name, span: spanOf(rec.node), bases, resolvedBases: [], methods: rec.methods.map((m) => m.name),
    fieldDefaults,
  };
  const init = rec.methods.find((m) => m.name === '__init__');
  const forward = rec.methods.find((m) => m.name === 'forward' || m.name === '__call__');
  if (forward) info.forwardSpan = spanOf(forward.node);
  const isConfig = rec.decorators.some((d) => /dataclass|attr\.s|define|frozen/.test(d)) || CONFIG_NAME.test(rec.name)
    || bases.some((b) => /BaseModel|NamedTuple|PretrainedConfig|Config$/.test(b));
  const model: ClassModel = { rec, info, fieldNodes, init, forward, isTe: false, isConfig, isModule: false };
  const post = rec.methods.find((m) => m.name === '__post_init__');
  if (post && fieldNodes.size) {
    const set = new Set<string>();
    for (const x of src.slice(post.start, post.end).matchAll(/\bself\s*\.\s*([A-Za-z_]\w*)\s*(?:[-+*/%]|\/\/)?=(?!=)/g)) set.add(x[1]);
    // `setattr(self, "n_local_heads", ...)`
    for (const x of src.slice(post.start, post.end).matchAll(/\bsetattr\s*\(\s*self\s*,\s*["']([A-Za-z_]\w*)["']/g)) set.add(x[1]);
    if (set.size) model.postInit = set;
  }
  return model;
}

/**
 * The layer kind a class inherits: from a local base (decided first, through `decide`) or a known library class.
 * Sets isModule on the way; returns whether the kind came from a library base.
 */
function kindFromBases(m: ClassModel, byName: Map<string, ClassModel>, decide: (m: ClassModel) => void): boolean {
  for (const rb of m.info.resolvedBases) {
    if (rb.startsWith('local:')) {
      const base = byName.get(rb.slice(6));
      if (!base) continue;
      decide(base);
      if (base.isModule) m.isModule = true;
      if (base.info.layerKind && base.info.layerKind !== 'other') {
        m.info.layerKind = base.info.layerKind;
        m.info.layerKindReason = `subclass of local ${base.info.name} (${base.info.layerKindReason ?? base.info.layerKind})`;
        m.info.zeroCenteredGamma = base.info.zeroCenteredGamma;
        m.info.zeroCenteredConditional = base.info.zeroCenteredConditional;
        m.info.ownImplementation = base.info.ownImplementation;
        m.isTe = base.isTe;
        m.teEquivalent = base.teEquivalent;
        m.hasBias = base.hasBias;
        return false;
      }
    } else {
      const k = knownCtor(rb);
      if (/^torch\.nn\.(modules\.)?\w*Module$/.test(rb) || MODULE_BASE.test(rb)) m.isModule = true;
      if (k && k.kind !== 'other') {
        m.isModule = true;
        m.info.layerKind = k.kind;
        m.info.layerKindReason = `subclass of ${rb}`;
        m.isTe = k.isTe;
        m.teEquivalent = k.isTe ? undefined : k.te;
        return true;
      } else if (k) m.isModule = true;
    }
  }
  return false;
}

/** A norm class's channel axis, bias (its own or a base's), affine defaults and, for an RMSNorm, whether it has a bias. */
function normClassFacts(src: string, m: ClassModel, byName: Map<string, ClassModel>): void {
  const axis = channelAxisOf(src, m);
  if (axis) m.info.channelAxis = axis;
  // A bias created in a local base class (`LayerNormBase.__init__`, OLMo) is the subclass's bias too.
  if (m.hasBias === false && baseDefinesBias(src, m, byName)) m.hasBias = true;
  const optional = weightRemoval(src, m, byName);
  if (optional) m.info.weightOptional = optional;
  if (m.init) {
    for (const p of ctorParams(src, m.init)) {
      if ((p.name === 'bias' || p.name === 'elementwise_affine' || p.name === 'affine') && p.def) {
        (m.normDefaults ??= {})[p.name] = src.slice(p.def.startIndex, p.def.endIndex);
      }
    }
  }
  if (m.info.layerKind === 'rmsnorm' && !m.info.ownImplementation) {
    const initText = m.init ? src.slice(m.init.start, m.init.end) : '';
    // `self.bias = nn.Parameter(...)` not under a condition of the same line (`... if bias else None`).
    // A shift under another name (`self.beta = nn.Parameter(...)`, ConvNeXt-V2's GRN) is a bias too.
    m.rmsBias = /self\.(?:bias|beta|shift)\s*=\s*(?:nn\.|torch\.nn\.)?Parameter\s*\([^\n]*$/m.test(initText) && !/self\.(?:bias|beta|shift)\s*=[^\n]*\bif\b/.test(initText)
      && !/^\s*if\b[^\n]*:\s*\n\s*self\.(?:bias|beta|shift)\s*=/m.test(initText);
  }
}

const channelAxisCache = new WeakMap<SyntaxNode, ClassInfo['channelAxis'] | null>();

/**
 * Whether a norm class normalises over the channel axis (dim 1 of NCHW) rather than the last one, from its own text:
 * forward reduces over dim 1 or permutes / transposes around the norm (timm LayerNorm2d, RmsNorm2d, torchaudio's
 * wav2vec2 LayerNorm), or a `channels_first` data
 * format option (ConvNeXt's LayerNorm). te.LayerNorm / te.RMSNorm always normalise over the last dimension.
 */
function channelAxisOf(src: string, m: ClassModel): ClassInfo['channelAxis'] | undefined {
  const hit = channelAxisCache.get(m.rec.node);
  if (hit !== undefined) return hit ?? undefined;
  let out: ClassInfo['channelAxis'] | undefined;
  const classText = src.slice(m.rec.start, m.rec.end);
  const fwd = m.forward ? src.slice(m.forward.start, m.forward.end) : '';
  if (/\bdata_format\b|channels_(first|last)/.test(classText)) {
    const init = m.init ? src.slice(m.init.start, m.init.end) : '';
    const def = /\bdata_format\s*(?::[^=,)]+)?=\s*(["'][^"']*["'])/.exec(init)?.[1];
    out = { when: 'option', evidence: 'its data_format option: "channels_first" normalises over dim 1', optionDefault: def };
  } else if (fwd) {
    // ... or names dim=1 among other arguments (ConvNeXt-V2's GRN: `torch.norm(x, p=2, dim=1, keepdim=True)`).
    const dim1 = /\.\s*(mean|var|std|var_mean|norm|sum|amax)\s*\(\s*(?:dim\s*=\s*)?[([]?\s*1\s*[,)\]]|torch\s*\.\s*(mean|var|var_mean|std)\s*\([^,()]+,\s*(?:dim\s*=\s*)?[([]?\s*1\s*[,)\]]|\b(mean|var|std|var_mean|norm|vector_norm|sum|amax)\s*\([^()]*\bdim\s*=\s*[([]?\s*1\s*[,)\]]/.exec(fwd);
    // ... or swaps the last two axes around it (torchaudio's wav2vec2 LayerNorm over (batch, channels, time)).
    const permute = /\.\s*permute\s*\(\s*0\s*,\s*2\s*,\s*3\s*,\s*1\b|\bmovedim\s*\(\s*1\s*,\s*-1|rearrange\s*\([^)]*['"]\s*b\s+c\s+h\s+w\s*->\s*b\s+h\s+w\s+c|\.\s*transpose\s*\(\s*(?:-2\s*,\s*-1|-1\s*,\s*-2|1\s*,\s*2|2\s*,\s*1|1\s*,\s*-1|-1\s*,\s*1)\s*\)/.exec(fwd);
    if (dim1) out = { when: 'always', evidence: `forward reduces over dim 1 (\`${dim1[0].replace(/\s+/g, '')}\`)` };
    else if (permute) {
      const how = /transpose/.test(permute[0]) ? 'forward swaps the last two axes around the norm' : 'forward moves the channel axis last around the norm';
      out = { when: 'always', evidence: `${how} (\`${permute[0].replace(/\s+/g, '')}\`)` };
    }
  }
  channelAxisCache.set(m.rec.node, out ?? null);
  return out;
}

/**
 * The line where `m` or a local base of it removes its weight on some path (`self.register_parameter("weight", None)`,
 * `self.weight = None`) while building it on another (a Parameter assigned to self.weight): the weight is optional.
 */
function weightRemoval(src: string, m: ClassModel, byName: Map<string, ClassModel>, depth = 0): string | undefined {
  if (depth > 4) return undefined;
  const text = src.slice(m.rec.start, m.rec.end);
  const removed = /self\.register_parameter\(\s*["']weight["']\s*,\s*None\s*\)|self\.weight\s*=\s*None\b/.exec(text);
  if (removed && /self\.weight\s*=\s*(?:nn\.|torch\.nn\.)?Parameter\s*\(/.test(text)) return removed[0].replace(/\s+/g, ' ');
  for (const rb of m.info.resolvedBases) {
    if (!rb.startsWith('local:')) continue;
    const base = byName.get(rb.slice(6));
    if (!base || base === m) continue;
    const hit = weightRemoval(src, base, byName, depth + 1);
    if (hit) return hit;
  }
  return undefined;
}

/** Whether a local base class of `m` creates a bias parameter (`self.bias = nn.Parameter(...)`). */
function baseDefinesBias(src: string, m: ClassModel, byName: Map<string, ClassModel>, depth = 0): boolean {
  if (depth > 4) return false;
  for (const rb of m.info.resolvedBases) {
    if (!rb.startsWith('local:')) continue;
    const base = byName.get(rb.slice(6));
    if (!base || base === m) continue;
    if (/self\.bias\s*=\s*(?:nn\.|torch\.nn\.)?Parameter\s*\(|register_parameter\s*\(\s*["']bias["']\s*,\s*(?:nn\.|torch\.nn\.)?Parameter/.test(src.slice(base.rec.start, base.rec.end))) return true;
    if (baseDefinesBias(src, base, byName, depth + 1)) return true;
  }
  return false;
}

interface StructuralResult {
  layerKind?: LayerKind;
  layerKindReason?: string;
  zeroCenteredGamma?: boolean;
  zeroCenteredConditional?: string;
  ownImplementation?: string;
  teEquivalent?: string;
  hasBias?: boolean;
}

/**
 * What `structuralUncached` finds depends on the class's own text only: memoised per class node (a statement copy
 * kept across edits, node.ts, keeps it).
 */
const structuralCache = new WeakMap<SyntaxNode, StructuralResult>();

function structural(src: string, m: ClassModel): void {
  let r = structuralCache.get(m.rec.node);
  if (!r) {
    const info = m.info;
    const before = { layerKind: info.layerKind, layerKindReason: info.layerKindReason, zeroCenteredGamma: info.zeroCenteredGamma, zeroCenteredConditional: info.zeroCenteredConditional, ownImplementation: info.ownImplementation, teEquivalent: m.teEquivalent, hasBias: m.hasBias };
    structuralUncached(src, m);
    r = {};
    if (info.layerKind !== before.layerKind) r.layerKind = info.layerKind;
    if (info.layerKindReason !== before.layerKindReason) r.layerKindReason = info.layerKindReason;
    if (info.zeroCenteredGamma !== before.zeroCenteredGamma) r.zeroCenteredGamma = info.zeroCenteredGamma;
    if (info.zeroCenteredConditional !== before.zeroCenteredConditional) r.zeroCenteredConditional = info.zeroCenteredConditional;
    if (info.ownImplementation !== before.ownImplementation) r.ownImplementation = info.ownImplementation;
    if (m.teEquivalent !== before.teEquivalent) r.teEquivalent = m.teEquivalent;
    if (m.hasBias !== before.hasBias) r.hasBias = m.hasBias;
    structuralCache.set(m.rec.node, r);
    return;
  }
  if (r.layerKind !== undefined) m.info.layerKind = r.layerKind;
  if (r.layerKindReason !== undefined) m.info.layerKindReason = r.layerKindReason;
  if (r.zeroCenteredGamma !== undefined) m.info.zeroCenteredGamma = r.zeroCenteredGamma;
  if (r.zeroCenteredConditional !== undefined) m.info.zeroCenteredConditional = r.zeroCenteredConditional;
  if (r.ownImplementation !== undefined) m.info.ownImplementation = r.ownImplementation;
  if (r.teEquivalent !== undefined) m.teEquivalent = r.teEquivalent;
  if (r.hasBias !== undefined) m.hasBias = r.hasBias;
}

/** Recognises custom RMSNorm and LayerNorm classes by name and by what their forward computes. */
function structuralUncached(src: string, m: ClassModel): void {
  const classText = src.slice(m.rec.start, m.rec.end);
  const fwd = m.forward ? src.slice(m.forward.start, m.forward.end) : '';
  const hasParam = /\bParameter\s*\(/.test(classText);
  // In the body only: the header of `class Linear(nn.Module):` builds nothing.
  const body = m.rec.node.childForFieldName('body');
  const bodyText = body ? src.slice(body.startIndex, body.endIndex) : classText;
  const buildsLinear = /\b(Linear|Conv[123]d|Embedding|ModuleList|Sequential)\s*\(/.test(bodyText);
  const meanSquare = /(\.pow\(\s*2(\.0)?\s*\)|\*\*\s*2\b|\.square\(\s*\)|torch\.square\()[\s\S]{0,80}?\.?mean\(|mean\([^()]*(\.pow\(\s*2|\*\*\s*2|square\()|torch\.mean\(\s*[\w.]+\s*\*\s*[\w.]+/.test(fwd);
  const root = /\brsqrt\(|\bsqrt\(|\*\*\s*-?0\.5\b|\*\*\s*\(\s*-?0\.5\s*\)/.test(fwd);
  const normCall = /(\.norm\(|torch\.norm\(|linalg\.(vector_)?norm\()/.test(fwd);
  const rmsFn = /\brms_norm\(/.test(fwd);
  const lnFn = /\blayer_norm\(/.test(fwd);
  const meanVar = /\.var\(|torch\.var\(|var_mean\(/.test(fwd) && /mean\(/.test(fwd) && root;
  // Centred: the mean is subtracted (`x - x.mean(-1)`, `u = x.mean(-1); (x - u)`): a LayerNorm, whatever squares follow.
  const firstMoments = [...fwd.matchAll(/^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*([^\n]*)$/gm)]
    .filter((x) => /\bmean\s*\(/.test(x[2]) && !/pow\s*\(|\*\*|square\s*\(|\*\s*[\w.]+\s*\)?\s*\.?\s*mean|var\s*\(/.test(x[2])).map((x) => x[1]);
  const centered = /-\s*(?:[\w.]+\s*\.\s*)?mean\s*\(|-\s*torch\s*\.\s*mean\s*\(/.test(fwd)
    || firstMoments.some((n) => new RegExp(String.raw`-\s*${n}\b`).test(fwd));
  const rmsStruct = hasParam && !buildsLinear && !centered && (rmsFn || (meanSquare && root) || (normCall && /\//.test(fwd)));
  const lnStruct = hasParam && !buildsLinear && (lnFn || meanVar || (centered && root && (meanSquare || /mean\s*\(/.test(fwd))));
  const name = m.info.name;
  // A Linear or an Embedding implemented from scratch: a weight parameter applied with linear()/embedding() (F., the
  // functional module, or a helper of the file, as DeepSeek-V3 does with its own FP8 GEMM) or a matmul on it.
  // Also through a local alias (`weight = self.weight` ... `F.linear(x, weight)`, gemma_pytorch).
  const aliases = [...fwd.matchAll(/^\s*([A-Za-z_]\w*)\s*=\s*self\.(?:weight|w|W|kernel)\b/gm)].map((x) => x[1]);
  const weightArg = String.raw`(self\.(weight|w|W|kernel)` + aliases.map((a) => `|${a}`).join('') + String.raw`)\b`;
  const ownLinear = hasParam && !buildsLinear && (new RegExp(String.raw`\blinear\s*\(\s*[^,()]+,\s*` + weightArg).test(fwd)
    || new RegExp(String.raw`@\s*` + weightArg + String.raw`(\.t\(\)|\.T\b|\.transpose\()?`).test(fwd)
    || new RegExp(String.raw`\bmatmul\s*\(\s*[^,()]+,\s*` + weightArg).test(fwd));
  const ownEmbedding = hasParam && !buildsLinear && new RegExp(String.raw`\bembedding\s*\(\s*[^,()]+,\s*` + weightArg).test(fwd);
  if (ownEmbedding && !ownLinear) {
    m.info.layerKind = 'embedding';
    m.info.layerKindReason = `a custom Embedding: ${name} holds a weight parameter and looks rows up with embedding() in forward`;
    m.info.ownImplementation = m.info.layerKindReason;
    return;
  }
  if (ownLinear && !meanSquare && !lnFn && !rmsFn) {
    m.info.layerKind = 'linear';
    m.info.layerKindReason = `a custom Linear: ${name} holds a weight parameter and applies it with a GEMM in forward`;
    m.info.ownImplementation = m.info.layerKindReason;
    m.teEquivalent = 'te.Linear';
    return;
  }
  if (lnFn && hasParam && !buildsLinear) {
    m.info.layerKind = 'layernorm';
    m.info.layerKindReason = `a custom LayerNorm: ${name} holds weight parameters and calls layer_norm in forward`;
  } else if (rmsStruct || (RMS_NAME.test(name) && !buildsLinear && !lnStruct)) {
    m.info.layerKind = 'rmsnorm';
    m.info.layerKindReason = rmsStruct
      ? `a custom RMSNorm: ${name} holds a weight parameter and normalises by the root mean square in forward`
      : `a custom RMSNorm, by its name (${name})`;
  } else if (lnStruct || (LN_NAME.test(name) && !buildsLinear)) {
    m.info.layerKind = 'layernorm';
    m.info.layerKindReason = lnStruct
      ? `a custom LayerNorm: ${name} holds weight parameters and normalises by mean and variance in forward${centered && !lnFn && !meanVar ? ' (it subtracts the mean, so it is no RMSNorm)' : ''}`
      : `a custom LayerNorm, by its name (${name})`;
  }
  if (m.info.layerKind === 'rmsnorm') {
    m.teEquivalent = 'te.RMSNorm';
    zeroCentred(fwd, m);
  } else if (m.info.layerKind === 'layernorm') {
    m.teEquivalent = 'te.LayerNorm';
    zeroCentred(fwd, m);
    const initParams = m.init ? ctorParams(src, m.init).map((p) => p.name) : [];
    m.hasBias = initParams.includes('bias') || /self\.bias\s*=|self\.(beta|b|shift)\s*=\s*\w*\.?Parameter/.test(classText);
  }
}

const ZERO_CENTRED = /\(\s*1(\.0*)?\s*\+\s*(self\.)?\w*(weight|scale|gamma|gain|g|w)\b|(self\.)?\w*(weight|scale|gamma|gain)\w*(\.\w+\(\))?\s*\+\s*1(\.0*)?\b|\b1(\.0*)?\s*\+\s*self\.\w+/;

/**
 * A norm whose forward scales by (1 + weight) (Gemma's RMSNorm, Nemotron's LayerNorm1P passing `self.weight + 1` to
 * F.layer_norm): TE's zero_centered_gamma=True. Under a condition (`if self.add_unit_offset`) no single setting fits.
 */
function zeroCentred(fwd: string, m: ClassModel): void {
  const hit = ZERO_CENTRED.exec(fwd);
  if (!hit) return;
  const te = m.info.layerKind === 'layernorm' ? 'te.LayerNorm' : 'te.RMSNorm';
  const lineStart = fwd.lastIndexOf('\n', hit.index) + 1;
  const lineEnd = fwd.indexOf('\n', hit.index);
  const line = fwd.slice(lineStart, lineEnd < 0 ? fwd.length : lineEnd);
  const ifLine = /^\s*(if|elif|else)\b/m.test(fwd.slice(0, hit.index)) ? fwd.slice(0, hit.index).match(/^\s*(?:if|elif)\b([^\n:]*)/m) : null;
  const cond = /\bif\b(.*?)\belse\b/.exec(line)?.[1]?.trim() ?? (ifLine ? ifLine[1].trim() || 'a condition' : undefined);
  if (cond !== undefined) {
    m.info.zeroCenteredConditional = cond;
    m.info.layerKindReason = `${m.info.layerKindReason ?? ''}; it scales by (1 + weight) only when ${cond}`;
  } else {
    m.info.zeroCenteredGamma = true;
    m.info.layerKindReason = `${m.info.layerKindReason ?? ''}; it scales by (1 + weight), so ${te} needs zero_centered_gamma=True`;
  }
}

const subclassCache = new WeakMap<SyntaxNode, Pick<ClassInfo, 'extraParams' | 'weightReplacedBy' | 'grouped' | 'extraInputs' | 'weightless' | 'scaleName' | 'weightTransformed' | 'zeroCenteredGamma' | 'zeroCenteredConditional' | 'layerKindReason' | 'forwardExtra'>>();

/**
 * What a library subclass's own forward adds to its base's that te.* and torch.nn would drop, in words, or undefined
 * (it only calls the base, or does what other checks read: a (1 + weight) offset, the channel axis). Casting the weight to the input's dtype (Whisper's Linear, modded-nanogpt's
 * CastedLinear) and computing in float32 then casting back (fairseq's Fp32LayerNorm) are named: te.* and the
 * fallback's torch.nn layer do neither, and a BF16 input then meets an FP32 weight.
 */
/** forwardExtra for a weight cast to the input's dtype: te.Linear does the same (it casts its weight to the compute dtype). */
export const WEIGHT_CAST = "casts its weight to the input's dtype before computing";
/**
 * forwardExtra for a norm computed in float32 and cast back: te.* norms compute in float32 inside their kernels too,
 * but return their weights' dtype (float32 by default) or torch.autocast's, not the input's (TE 2.20.2, H200).
 */
export const FLOAT32_CAST_BACK = 'computes in float32 and casts the result back to the input dtype';

function forwardExtraOf(fwd: string): string | undefined {
  const colon = fwd.indexOf(':', fwd.indexOf(')'));
  const body = fwd.slice(colon + 1).replace(/#[^\n]*/g, '').replace(/("""|''')[\s\S]*?\1/g, '').trim();
  if (!body || /^return\s+super\(\s*(\w+\s*,\s*self\s*)?\)\.forward\(\s*[\w\s,*]*\)$/.test(body)) return undefined;
  const weightCast = /self\.(weight|bias)\s*\.\s*(to|type_as|type|half|bfloat16|float)\s*\(/.test(body);
  const upcast = /\.\s*float\s*\(\s*\)|torch\.float32|dtype\s*=\s*torch\.float\b/.test(body);
  const castBack = /\.\s*(type_as|to|type)\s*\(\s*(dtype\s*=\s*)?[\w.]+\s*\)/.test(body);
  if (upcast && castBack) return FLOAT32_CAST_BACK;
  if (weightCast) return WEIGHT_CAST;
  // Other forwards are read by the checks that know them: (1 + weight), the channel axis, gates, adapters.
  return undefined;
}

/**
 * What a local Linear or norm class adds to what TE's module can carry, from its own text: parameters of its own
 * (LoRA's lora_A / lora_B), a weight replaced by another type (bitsandbytes Params4bit), a 3-D weight (one matrix per
 * expert), forward inputs besides the tensor (a gated norm's `gate`), and for a subclass of a torch norm with its own
 * forward, a (1 + weight) scale.
 */
function layerSubclassFacts(src: string, m: ClassModel, kindFromBase: boolean): void {
  let r = subclassCache.get(m.rec.node);
  if (!r) {
    const info = m.info;
    const before = { zc: info.zeroCenteredGamma, zcIf: info.zeroCenteredConditional, reason: info.layerKindReason };
    r = {};
    const text = src.slice(m.rec.start, m.rec.end);
    const fwd = m.forward ? src.slice(m.forward.start, m.forward.end) : '';
    const kind = info.layerKind;
    if (kind === 'linear') {
      const extra = [...new Set([...text.matchAll(/self\.(\w+)\s*=\s*(?:nn\.|torch\.nn\.)?Parameter\s*\(/g)].map((x) => x[1]).filter((n) => n !== 'weight' && n !== 'bias'))];
      if (extra.length) r.extraParams = extra;
      const replaced = /self\.weight\s*=\s*(?!(?:nn\.|torch\.nn\.)?Parameter\s*\()([A-Za-z_][\w.]*)\s*\(/.exec(text);
      if (replaced && !/^(self|torch\.empty|torch\.zeros)/.test(replaced[1])) r.weightReplacedBy = replaced[1];
      const g = /self\.weight\s*=\s*(?:nn\.|torch\.nn\.)?Parameter\s*\(\s*torch\.(?:empty|zeros|ones|randn|rand)\s*\(\s*([^,()=]+),\s*[^,()=]+,\s*[^,()=]+\s*[,)]/.exec(text)
        ?? /(?:nn\.|torch\.nn\.)?Parameter\s*\(\s*torch\.(?:empty|zeros|ones|randn|rand)\s*\(\s*([^,()=]+),\s*[^,()=]+,\s*[^,()=]+\s*[,)]/.exec(text);
      if (g && /\bself\.weight\s*\[|linear\s*\([^,()]+,\s*self\.weight\s*\[/.test(fwd)) r.grouped = `a 3-D weight (${g[1].trim()}, out, in), one matrix per ${/expert/i.test(text) ? 'expert' : 'group'}`;
      else if (g && /self\.weight\s*=/.test(g[0])) r.grouped = `a 3-D weight (${g[1].trim()}, out, in)`;
    } else if ((kind === 'layernorm' || kind === 'rmsnorm') && m.forward) {
      const params = paramsOf(src, m.forward).map((p) => p.name).filter((n) => n !== 'self');
      if (params.length > 1) r.extraInputs = params.slice(1);
      const own = [...text.matchAll(/self\.(\w+)\s*=\s*(?:nn\.|torch\.nn\.)?Parameter\s*\(/g)].map((x) => x[1]);
      if (own.length && !own.includes('weight')) r.scaleName = own.find((n) => n !== 'bias') ?? own[0];
      const transformed = weightTransformedIn(fwd, r.scaleName ?? 'weight');
      if (transformed) r.weightTransformed = transformed;
      // `class RMSNorm(nn.Module): def forward(self, x): return F.rms_norm(x, (x.size(-1),))` (modded-nanogpt).
      if (!kindFromBase && !m.info.resolvedBases.some((b) => b.startsWith('local:')) && !/Parameter\s*\(|register_parameter|self\.(weight|scale|gamma|g|w)\s*=|(LayerNorm|RMSNorm|RmsNorm)\s*\(\s*[^)]/.test(text.slice(text.indexOf(':') + 1))) r.weightless = true;
      if (kindFromBase && info.zeroCenteredGamma === undefined && info.zeroCenteredConditional === undefined) {
        zeroCentred(fwd, m);
        if (info.zeroCenteredGamma !== before.zc) r.zeroCenteredGamma = info.zeroCenteredGamma;
        if (info.zeroCenteredConditional !== before.zcIf) r.zeroCenteredConditional = info.zeroCenteredConditional;
        if (info.layerKindReason !== before.reason) r.layerKindReason = info.layerKindReason;
      }
    }
    if (kindFromBase && m.forward) {
      const extra = forwardExtraOf(fwd);
      if (extra) r.forwardExtra = extra;
    }
    subclassCache.set(m.rec.node, r);
  }
  Object.assign(m.info, r);
}

/**
 * The forward line where a norm transforms its own weight before scaling by it, or undefined: inside a nonlinear
 * function (`torch.exp(0.5 * self.scale)`), times or over a number, subtracted or divided by, indexed to another shape
 * (`[:, None, None]`: a per-head gain broadcast over another axis), or changed in place. The (1 + weight) offset,
 * casts (`.to(x.dtype)`, `.float()`) and metadata (`.shape`, `.dtype`) are not transforms.
 */
const TRANSFORM_BEFORE = /(\b(exp|exp2|softplus|sigmoid|tanh|abs|log|sqrt|clamp|clip|pow|square)\s*\([^()]*|(^|[^\w.])\d[\d.]*(e[-+]?\d+)?\s*[*/]\s*|[-/]\s*)$/;
const TRANSFORM_AFTER = /^\s*(\[|\.\s*(exp|exp2|softplus|sigmoid|tanh|abs|log|sqrt|clamp|clip|pow|square|unsqueeze|expand|repeat)\s*\(|\*\*|[*/]\s*\d|\.\s*\w+_\s*\()/;
function weightTransformedIn(fwd: string, param: string): string | undefined {
  const code = fwd.replace(/#[^\n]*/g, '');
  const use = new RegExp(String.raw`self\s*\.\s*${param}\b(?!\s*\.\s*(shape|dtype|device|ndim|size|numel|dim)\b)`, 'g');
  for (const m of code.matchAll(use)) {
    const before = code.slice(Math.max(0, m.index - 80), m.index);
    const after = code.slice(m.index + m[0].length, m.index + m[0].length + 40);
    if (!TRANSFORM_BEFORE.test(before) && !TRANSFORM_AFTER.test(after)) continue;
    const end = code.indexOf('\n', m.index);
    return code.slice(code.lastIndexOf('\n', m.index) + 1, end < 0 ? code.length : end).trim();
  }
  return undefined;
}

/** A keyword argument's value node in a call. */
export function keywordArg(src: string, call: SyntaxNode, name: string): SyntaxNode | undefined {
  const args = call.childForFieldName('arguments');
  if (!args) return undefined;
  for (const a of args.namedChildren) {
    if (a && a.type === 'keyword_argument') {
      const n = a.childForFieldName('name');
      if (n && src.slice(n.startIndex, n.endIndex) === name) return a.childForFieldName('value') ?? undefined;
    }
  }
  return undefined;
}

/** Kind of a local class (undefined when not a module class). */
export function localKind(m: ClassModel | undefined): LayerKind | undefined {
  return m?.info.layerKind;
}
