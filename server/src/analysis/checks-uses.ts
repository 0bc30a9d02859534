/**
 * What the structure checks read besides the layer's own call: how its class uses `self.<attr>` (called, its weight
 * read for a functional op, replaced after construction) and the value of a boolean option (`bias=config.bias`).
 */
import type { EvalScope, Evaluator } from './dims';
import type { LayerRec } from './layers';
import { ctorParams } from './classes';
import { codeOnly } from './spans';

/**
 * How a layer's own class reads its `.weight` besides calling it: a layer never called but read
 * (`F.multi_head_attention_forward(q_proj_weight=self.q_proj.weight, ...)`) gains nothing from te.Linear, whose FP8
 * GEMM runs in its own forward; one also read directly (Mamba's fused fast path) gets FP8 on one path only.
 */
export function weightUse(rec: LayerRec, ev: Evaluator): { convertible: false | 'uncertain' | 'beside-call'; reason: string } | undefined {
  const L = rec.layer;
  const kept = localParamsOnly(rec, ev);
  if (kept) {
    return { convertible: false, reason: `${L.name} is built only for its parameters and never called (\`${kept}\`): te.Linear runs FP8 only in its own forward, so converting it gains nothing and changes the tensors kept. Keep it.` };
  }
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
  const branch = use.params && use.reads ? branchBesideCall(classSource(ev, cls), L.attr, use.reads) : undefined;
  if (branch) {
    return { convertible: 'beside-call', reason: `${cls.info.name} reads self.${L.attr}.weight directly only on the branch \`${branch}\`, whose other branch calls self.${L.attr}: te.Linear runs FP8 on the call, and the direct read gets its high-precision weight (do not combine with fp8_model_init).` };
  }
  if (use.params) {
    return { convertible: 'uncertain', reason: `${cls.info.name} also reads self.${L.attr}.weight directly (a fused kernel or functional op): on that path te.Linear's FP8 does not apply, and its weight may be FP8 under fp8_model_init. Convert only if that path is not used.` };
  }
  return undefined;
}

/**
 * A layer bound to a local name whose every later use in its function reads its weight or bias (`in_proj =
 * nn.Linear(...)`, then `self.in_proj_weight = in_proj.weight`): the module is thrown away, its parameters kept for a
 * functional op (AudioCraft's attention, after torch's MultiheadAttention). Returns the first such read, as written.
 */
const LOCAL_USES_WINDOW = 20_000;
function localParamsOnly(rec: LayerRec, ev: Evaluator): string | undefined {
  const name = rec.layer.name;
  const fn = rec.scope.fn;
  // Bounded: a throwaway module is used within a few lines; a function's rest longer than this is not read (the
  // layer keeps its other checks' verdict), so a file of thousands of local layers stays linear.
  if (!fn || !name || !/^[A-Za-z_]\w*$/.test(name) || fn.end - rec.call.node.endIndex > LOCAL_USES_WINDOW) return undefined;
  const raw = ev.source().slice(rec.call.node.endIndex, fn.end);
  const text = codeOnly(raw);
  let first: string | undefined;
  for (const hit of text.matchAll(new RegExp(`(?<![\\w.])${name}\\b(\\s*\\.\\s*(\\w+))?`, 'g'))) {
    if (hit[2] !== 'weight' && hit[2] !== 'bias') return undefined;
    if (first === undefined) {
      const at = hit.index ?? 0;
      const lineStart = text.lastIndexOf('\n', at) + 1;
      const lineEnd = text.indexOf('\n', at);
      first = raw.slice(lineStart, lineEnd < 0 ? raw.length : lineEnd).trim().slice(0, 80);
    }
  }
  return first;
}

/** How a class uses `self.<attr>`: called or passed (`other`), its weight/bias read as tensors (`params`), replaced. */
interface AttrUse { params: boolean; other: boolean; replaced?: string; replacedText?: string; attrs?: Set<string>; reads?: number[] }
/** Per class (keyed by its node: a statement copy kept across edits keeps it), how each `self.<attr>` is used. */
const attrUseCache = new WeakMap<object, Map<string, AttrUse>>();
const SELF_USE = /self\s*\.\s*([A-Za-z_]\w*)(\s*\.\s*(\w+)|\s*=(?!=))?/g;
/**
 * After `self.x.weight`: initialisation and metadata (`.data`, `.normal_(`, `.shape`, `.requires_grad`), and a test
 * whether it exists (`if self.x.bias is not None:` before initialising it, `bias=self.x.bias is not None`): no compute.
 */
const PARAM_META = /^\s*(\.\s*(data\b|grad\b|requires_grad\b|shape\b|dtype\b|device\b|ndim\b|size\s*\(|numel\s*\(|dim\s*\(|[a-z]\w*_\s*\()|(is(\s+not)?|[!=]=)\s*None\b)/;
/**
 * Before it: an initialiser taking it as the tensor to fill (`nn.init.normal_(self.x.weight`, `trunc_normal_(`), or a
 * project's own in-place initialiser named for it (xLSTM's `small_init_init_(self.proj_up.weight, dim=...)`,
 * `wang_init_(...)`): te.Linear's weight is a parameter of the same shape, which it fills the same way.
 */
const INIT_CALL = /(\binit\s*\.\s*\w+_|\b\w*(normal|uniform|zeros|ones|constant|orthogonal|xavier\w*|kaiming\w*|trunc_normal)_|\b\w*init\w*_)\s*\(\s*$/;

export function attrUses(src: string, cls: { rec: { node: object; start: number; end: number } }): Map<string, AttrUse> {
  let m = attrUseCache.get(cls.rec.node);
  if (m) return m;
  m = new Map();
  // Comments and strings blanked: `# self.linear.weight: (384, 128)` or a docstring naming it reads nothing.
  const raw = src.slice(cls.rec.start, cls.rec.end);
  const text = codeOnly(raw);
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
      u.replaced ??= hit[3];
      // the line's end looked for once per attribute, not per assignment (thousands on one line read it again each)
      if (u.replacedText === undefined) {
        const lineEnd = text.indexOf('\n', at);
        u.replacedText = raw.slice(at, lineEnd < 0 ? raw.length : lineEnd).trim().replace(/\s+/g, ' ').slice(0, 80);
      }
      continue;
    }
    if (PARAM_META.test(after) || INIT_CALL.test(text.slice(Math.max(0, at - 60), at))) continue;
    u.params = true;
    (u.reads ??= []).push(at);
  }
  // `parametrize.register_parametrization(self.e, "weight", ...)` (minLoRA, orthogonal maps): a reparametrised weight.
  // `nn.utils.weight_norm(self.fc)` applied after construction as well.
  // Read in the text as written (the parameter's name is a string), where the call itself is code.
  for (const hit of raw.matchAll(/(?:register_parametrization\s*\(\s*self\s*\.\s*(\w+)\s*,\s*["'](weight|bias)["']|\b(?:weight_norm|spectral_norm|orthogonal)\s*\(\s*self\s*\.\s*(\w+)\s*[,)])/g)) {
    if (text[hit.index ?? 0] !== raw[hit.index ?? 0]) continue;
    const attr = hit[1] ?? hit[3];
    let u = m.get(attr);
    if (!u) { u = { params: false, other: false }; m.set(attr, u); }
    u.replaced ??= hit[2] ?? 'weight';
    u.replacedText ??= hit[0].replace(/\s+/g, ' ') + ', ...)';
  }
  attrUseCache.set(cls.rec.node, m);
  return m;
}


export function optionValue(rec: LayerRec, ev: Evaluator, name: string): { text?: string; value?: boolean | number; note?: string } {
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

/**
 * A norm class that scales by (1 + weight) only under a constructor flag (`self.add_unit_offset = add_unit_offset`,
 * then `(1 + self.weight) if self.add_unit_offset else self.weight`): the te.* norm takes the same expression as
 * zero_centered_gamma. Sets the te.* arguments and returns the reason when the flag's value at this call is known as an expression
 * (the argument passed, or the parameter's default); undefined leaves the layer to the caller.
 */
export function unitOffset(rec: LayerRec, ev: Evaluator, cond: string, te: string): string | undefined {
  const L = rec.layer;
  const local = rec.ctor.local;
  const attr = /^self\.(\w+)$/.exec(cond.trim())?.[1];
  // A class bound elsewhere (`partial(RMSNorm, add_unit_offset=...)`) carries the flag there, not at this call.
  if (!local?.init || !attr || L.classFrom) return undefined;
  const src = ev.source();
  const initText = src.slice(local.init.start, local.init.end);
  const param = new RegExp(String.raw`self\.${attr}\s*=\s*(\w+)\s*(?:\n|;|#|$)`).exec(initText)?.[1];
  const p = param ? ctorParams(src, local.init).find((x) => x.name === param) : undefined;
  if (!p) return undefined;
  const arg = rec.argNodes.get(p.name);
  const expr = (arg ? src.slice(arg.startIndex, arg.endIndex) : p.def ? src.slice(p.def.startIndex, p.def.endIndex) : undefined)?.replace(/\s+/g, ' ');
  if (expr === undefined) return undefined;
  if (expr === 'False') return `${L.localClass} is built with ${p.name}=False (no 1 + weight offset): it maps onto ${te} as is.`;
  if (expr === 'True') {
    L.zeroCenteredGamma = true;
    return `${L.localClass} is built with ${p.name}=True, so it scales by (1 + weight): it maps onto ${te}(zero_centered_gamma=True); copy the weight as is.`;
  }
  L.teArgs = { ...(L.teArgs ?? {}), zero_centered_gamma: expr };
  return `${L.localClass} scales by (1 + weight) when ${p.name} is true: it maps onto ${te}(zero_centered_gamma=${expr}), the same expression, so either way the offset matches.`;
}

/** The text of a layer's class. */
export function classSource(ev: Evaluator, cls: { rec: { start: number; end: number } }): string {
  return ev.source().slice(cls.rec.start, cls.rec.end);
}

const BRANCH_HEAD = /^\s*(if|elif|else)\b/;
const BLOCK_HEAD = /^\s*(for|while|with|try|except|finally|async)\b/;
/** The line that closes a header's parenthesised condition (`):`, `) -> None:` is a def's and never reaches here). */
const CLOSES_HEADER = /^\s*\)\s*:/;
const indentOf = (line: string): number => line.length - line.trimStart().length;
const isBlank = (line: string): boolean => /^\s*(#.*)?$/.test(line);

/**
 * When every direct read of `self.<attr>.weight` (offsets into the class text) sits in one branch of an if / elif /
 * else whose sibling branch calls `self.<attr>(`, the header of the first such branch (`if self.pretraining_tp > 1`):
 * a path picked at run time beside the module call. By indentation over the class's lines: linear in its size.
 */
export function branchBesideCall(text: string, attr: string, reads: number[]): string | undefined {
  const lines = text.split('\n');
  const starts: number[] = [];
  let o = 0;
  for (const l of lines) { starts.push(o); o += l.length + 1; }
  const lineOf = (at: number): number => { let lo = 0, hi = starts.length - 1; while (lo < hi) { const m = (lo + hi + 1) >> 1; if (starts[m] <= at) lo = m; else hi = m - 1; } return lo; };
  const call = new RegExp(String.raw`self\s*\.\s*${attr}\s*\(`);
  let first: string | undefined;
  for (const at of reads) {
    const head = enclosingBranch(lines, lineOf(at));
    if (head === undefined) return undefined;
    const branches = ifChain(lines, head);
    if (!branches) return undefined;
    const mine = branches.find(([a, b]) => a <= lineOf(at) && lineOf(at) < b);
    const others = branches.filter((x) => x !== mine);
    if (!mine || !others.some(([a, b]) => call.test(lines.slice(a, b).join('\n')))) return undefined;
    first ??= lines[mine[0]].trim().replace(/\s+/g, ' ').slice(0, 80);
  }
  return first;
}

/** The line of the if / elif / else header whose block holds line `li` (through loops and continuation lines). */
function enclosingBranch(lines: string[], li: number): number | undefined {
  let cur = indentOf(lines[li]);
  for (let j = li - 1; j >= 0; j--) {
    if (isBlank(lines[j]) || indentOf(lines[j]) >= cur) continue;
    // `):` closing a header whose condition spans lines (`if (\n    a\n    and b\n):`): the header is the line at
    // the same indent that opened it.
    if (CLOSES_HEADER.test(lines[j])) { cur = indentOf(lines[j]) + 1; continue; }
    if (BRANCH_HEAD.test(lines[j])) return j;
    if (!BLOCK_HEAD.test(lines[j]) && /^\s*(def|class)\b/.test(lines[j])) return undefined;
    cur = indentOf(lines[j]);
  }
  return undefined;
}

/** The [start, end) line ranges of each branch of the if / elif / else chain that has a header at line `h`. */
function ifChain(lines: string[], h: number): [number, number][] | undefined {
  const ind = indentOf(lines[h]);
  const atLevel = (j: number): boolean => !isBlank(lines[j]) && indentOf(lines[j]) === ind;
  let start = h;
  while (!/^\s*if\b/.test(lines[start])) {
    let j = start - 1;
    while (j >= 0 && (isBlank(lines[j]) || indentOf(lines[j]) > ind)) j--;
    if (j < 0 || !atLevel(j) || !BRANCH_HEAD.test(lines[j]) || /^\s*else\b/.test(lines[j])) return undefined;
    start = j;
  }
  const out: [number, number][] = [];
  let a = start;
  for (let j = start + 1; j <= lines.length; j++) {
    const end = j === lines.length || (!isBlank(lines[j]) && indentOf(lines[j]) <= ind && !CLOSES_HEADER.test(lines[j]));
    if (!end) continue;
    out.push([a, j]);
    if (j < lines.length && atLevel(j) && /^\s*(elif|else)\b/.test(lines[j])) { a = j; continue; }
    break;
  }
  return out;
}
