/**
 * Norms whose output feeds exactly one Linear, read from the text of `forward`: te.LayerNormLinear computes both in one
 * module (normalise and cast to FP8 in one pass), so the pair can be fused without changing what the model computes.
 *
 * Two shapes, both proved from the data flow:
 * - within one class: `self.fc(self.norm(x))`, or `h = self.norm(x)` then `self.fc(h)` with `h` used once;
 * - across two classes: a block calls `self.attn(self.ln_1(x))` (the norm's output the first argument of a submodule
 *   built in the same class from a class of this file), and that class's forward reads its input once, as the first
 *   argument of one Linear (`self.c_attn(x)`), apart from its shape (`B, T, C = x.size()`): nanoGPT's Block.
 * The norm and the module it feeds are each referenced only where they are built and where they are called, so no
 * other path sees the norm's output or the module's input. Norm -> fc1 -> activation -> fc2 within one class is also
 * reported (te.LayerNormMLP), for the rule's by-hand hint.
 *
 * A whole MLP across classes, exactly as te.LayerNormMLP computes it: the block feeds the norm's output only to a child
 * whose forward is one `return [self.drop](self.fc2(act(self.fc1(x)) [* self.up(x)]))` (llama2.c's FeedForward,
 * `w2(F.silu(w1(x)) * w3(x))`; Hugging Face's `down_proj(self.act_fn(gate_proj(x)) * up_proj(x))`), act SiLU, ReLU or
 * GELU's tanh approximation (TE's swiglu / reglu / geglu, silu / relu / gelu: the same functions; the exact GELU is not
 * among them), or a config's `ACT2FN[...]`, which the fallback checks when it fuses.
 *
 * Computed once per IR (the rule and the fixes ask for it).
 */
import { closeParen } from './calls';
import { codeOnly, escapeRegExp } from './spans';
import type { ClassInfo, Layer, ModelIR } from './ir';
import { FUSE_FACTORIES } from './known';

export interface Fusion {
  /** Indexes into ir.layers. */
  norm: number;
  fc1: number;
  /** The class whose forward calls the norm (`Block`), and the forward that proves the flow, for the messages. */
  normClass: string;
  /** Across classes: the submodule the norm feeds (`attn`, built as `CausalSelfAttention(config)`). */
  owner?: { attr: string; className: string };
  /** The Linear's attribute in its class (`c_attn`). */
  linearAttr: string;
  /** The norm's attribute in its class (`ln_1`). */
  normAttr: string;
  /** Norm -> fc1 -> activation -> fc2 within one class (te.LayerNormMLP): fc2's index and TE's activation name. */
  mlp?: { fc2: number; activation: string; activationCall: string; activationLayer?: number };
  /** Across classes, the owner's whole forward is an MLP te.LayerNormMLP computes exactly (fc1 is the activated one). */
  fusedMlp?: FusedMlp;
  /** The assignments that build the norm and the owner (or, within one class, the Linear): `self.x = <value>`, the
   *  value's offsets. The fix wraps whichever is built later. */
  normValue: ValueSpan;
  ownerValue: ValueSpan;
}

export interface FusedMlp {
  fc2: number;
  fc2Attr: string;
  /** The Linear multiplied by the activation's output (gated: `* self.w3(x)`), stacked under fc1 in TE's fc1_weight. */
  up?: number;
  upAttr?: string;
  /** TE's activation name where the file shows it: swiglu, reglu, geglu (gated), silu, relu, gelu. */
  activation?: string;
  /** Otherwise the attribute whose module the config chooses (`self.act_fn = ACT2FN[config.hidden_act]`): the
   *  fallback maps it to TE's name when it fuses, and fuses only where TE computes the same function. */
  activationFrom?: string;
  /** As written: `F.silu`, `self.act`. */
  activationCall: string;
  /** The owner's Dropout applied to the MLP's output (`self.dropout(...)`), kept after the fused module. */
  dropoutAttr?: string;
}

export interface ValueSpan {
  start: number;
  end: number;
}

interface CallAt {
  callee: string;
  start: number;
  end: number;
}

const ACTIVATIONS: Record<string, string> = { gelu: 'gelu', relu: 'relu', silu: 'silu', quick_gelu: 'qgelu' };

/** `F.gelu` / `torch.nn.functional.relu` / `torch.relu` -> TE activation name. */
function functionalActivation(callee: string): string | undefined {
  const m = /(?:^|\.)(\w+)$/.exec(callee);
  return m && /^(?:F|torch|torch\.nn\.functional|nn\.functional)\./.test(callee) ? ACTIVATIONS[m[1]] : undefined;
}

function isIdentChar(code: number): boolean {
  return (code >= 48 && code <= 57) || (code >= 65 && code <= 90) || (code >= 97 && code <= 122) || code === 95 || code === 46;
}

/**
 * The call whose sole argument (or, with `first`, whose first positional argument) is the expression [start, end) of
 * `body`, if any.
 */
function enclosingCall(body: string, start: number, end: number, first = false): CallAt | undefined {
  let i = start - 1;
  while (i >= 0 && /[ \t\n]/.test(body[i])) i--;
  if (body[i] !== '(') return undefined;
  const open = i;
  let j = open - 1;
  while (j >= 0 && isIdentChar(body.charCodeAt(j))) j--;
  const callee = body.slice(j + 1, open);
  if (!/^[A-Za-z_][\w.]*$/.test(callee)) return undefined;
  let k = end;
  while (k < body.length && /[ \t\n]/.test(body[k])) k++;
  if (body[k] !== ')' && !(first && body[k] === ',')) return undefined;
  return { callee, start: j + 1, end: closeParen(body, open) };
}

/**
 * Where the value of the expression [start, end) goes when it has exactly one consumer call: directly, or through an
 * assignment `v = EXPR` whose variable is used once (as the argument of a call) before being reassigned.
 */
function soleConsumer(body: string, start: number, end: number, first = false): CallAt | undefined {
  const direct = enclosingCall(body, start, end, first);
  if (direct) return direct;
  const lineStart = body.lastIndexOf('\n', start - 1) + 1;
  const assign = /^[ \t]*([A-Za-z_]\w*)[ \t]*=[ \t]*$/.exec(body.slice(lineStart, start));
  const lineEnd = body.indexOf('\n', end);
  if (!assign || body.slice(end, lineEnd < 0 ? body.length : lineEnd).trim() !== '') return undefined;
  return onlyConsumerOf(body, assign[1], lineEnd < 0 ? body.length : lineEnd + 1, first, false);
}

/** Reads of a tensor that only look at its shape or place: the same before and after a norm. */
const METADATA_READ = /^\s*\.\s*(?:size\s*\(|shape\b|dim\s*\(|ndim\b|device\b)/;

/**
 * The one call that reads variable `name` from offset `from` of `body` until it is reassigned (a reassignment's own
 * right-hand side still reads the old value, as in `h = self.fc1(h)`); with `metadata`, reads of its shape (`x.size()`,
 * `x.shape`, `len(x)`) do not count. Undefined when any other read exists.
 */
function onlyConsumerOf(body: string, name: string, from: number, first: boolean, metadata: boolean): CallAt | undefined {
  const useRe = new RegExp(`(?<![\\w.])${escapeRegExp(name)}\\b(?!\\s*=[^=])`, 'g');
  const defRe = new RegExp(`^[ \\t]*${escapeRegExp(name)}[ \\t]*=(?!=)`);
  let consumer: CallAt | undefined;
  for (let ls = from; ls < body.length;) {
    const le = body.indexOf('\n', ls);
    const stop = le < 0 ? body.length : le;
    const line = body.slice(ls, stop);
    const def = defRe.exec(line);
    useRe.lastIndex = 0;
    for (let m = useRe.exec(line); m; m = useRe.exec(line)) {
      if (def && m.index < def[0].length) continue;
      const after = line.slice(m.index + name.length);
      if (metadata && (METADATA_READ.test(after) || /len\s*\(\s*$/.test(line.slice(0, m.index)) && /^\s*\)/.test(after))) continue;
      if (consumer) return undefined;
      consumer = enclosingCall(body, ls + m.index, ls + m.index + name.length, first);
      if (!consumer) return undefined;
    }
    if (def) break;
    ls = stop + 1;
  }
  return consumer;
}

/** Every `self.<attr>(` call in `body`. */
function callsOf(body: string, attr: string): CallAt[] {
  const out: CallAt[] = [];
  const re = new RegExp(`\\bself\\.${escapeRegExp(attr)}\\s*\\(`, 'g');
  for (let m = re.exec(body); m; m = re.exec(body)) {
    const open = m.index + m[0].length - 1;
    out.push({ callee: `self.${attr}`, start: m.index, end: closeParen(body, open) });
  }
  return out;
}

/** How often `self.<attr>` appears in the class's text (as itself, not a prefix of a longer name). */
function mentions(classText: string, attr: string): number {
  return classText.match(new RegExp(`\\bself\\.${escapeRegExp(attr)}(?![\\w])`, 'g'))?.length ?? 0;
}

/** The value of the one `self.<attr> = <value>` statement of the class (offsets in the file), if there is one. */
function assignedValue(text: string, cls: ClassInfo, attr: string): ValueSpan | undefined {
  const classText = text.slice(cls.span.startOffset, cls.span.endOffset);
  const re = new RegExp(`^[ \\t]*self\\.${escapeRegExp(attr)}[ \\t]*(?::[^=\\n]+)?=(?!=)[ \\t]*`, 'gm');
  const hits = [...classText.matchAll(re)];
  if (hits.length !== 1) return undefined;
  const start = cls.span.startOffset + hits[0].index! + hits[0][0].length;
  // The value ends at the end of its logical line: brackets balanced, no backslash continuation.
  let depth = 0;
  let i = start;
  for (; i < cls.span.endOffset; i++) {
    const c = text[i];
    if (c === '#' && depth === 0) break;
    if (c === '"' || c === "'") {
      const close = text.indexOf(c, i + 1);
      if (close < 0 || text.slice(i + 1, close).includes('\n')) return undefined;
      i = close;
      continue;
    }
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') depth--;
    else if (c === '\\') return undefined;
    else if (c === '\n' && depth === 0) break;
    else if (c === ';' && depth === 0) return undefined;
  }
  let end = i;
  while (end > start && /\s/.test(text[end - 1])) end--;
  return end > start ? { start, end } : undefined;
}

function selfAttr(layer: Layer): string | undefined {
  return layer.container ? undefined : /^self\.(\w+)$/.exec(layer.name)?.[1];
}

/** A Linear the fusion may take: a plain Linear that converts, or one built by the fallback already (te.Linear where
 *  FP8 runs; the fallback's layers read as te.*). */
function fusableLinear(layer: Layer | undefined): boolean {
  // A Conv1D (weight stored [in, out]) converts through its own wrapper, which fp8_fuse_norm does not fuse into.
  return !!layer && layer.kind === 'linear' && !layer.transposedWeight && (layer.viaFallback || (!layer.isTe && layer.convertible === true)) && layer.role !== 'lm_head' && !layer.tied;
}

function fusableNorm(layer: Layer): boolean {
  return (layer.kind === 'layernorm' || layer.kind === 'rmsnorm') && !layer.container
    && (!!layer.viaFallback || (!layer.isTe && layer.convertible !== false));
}

/** The Linears a fusion takes: fc1, or an MLP's fc1, up and fc2. */
export function fusedLinears(f: Fusion): number[] {
  return f.fusedMlp ? [f.fc1, ...(f.fusedMlp.up !== undefined ? [f.fusedMlp.up] : []), f.fusedMlp.fc2] : [f.fc1];
}

/** The owner's forward as written, compactly (`self.dropout(self.w2(F.silu(self.w1(x)) * self.w3(x)))`). */
export function mlpExpression(f: Fusion): string {
  const m = f.fusedMlp;
  if (!m) return '';
  const core = `self.${m.fc2Attr}(${m.activationCall}(self.${f.linearAttr}(x))${m.upAttr ? ` * self.${m.upAttr}(x)` : ''})`;
  return m.dropoutAttr ? `self.${m.dropoutAttr}(${core})` : core;
}

const memo = new WeakMap<ModelIR, Fusion[]>();

/** Every norm -> Linear pair of the file that te.LayerNormLinear computes exactly (see the file comment). */
export function findFusions(ir: ModelIR, text: string): Fusion[] {
  let out = memo.get(ir);
  if (!out) memo.set(ir, out = computeFusions(ir, text));
  return out;
}

const FUSED_ALREADY = new RegExp(`^(?:${Object.values(FUSE_FACTORIES).join('|')})\\s*\\(`);

/** Whether the value is built through one of the fallback's fusers (the fix ran already). */
function fusedAlready(text: string, value: ValueSpan): boolean {
  return FUSED_ALREADY.test(text.slice(value.start, value.end));
}

function computeFusions(ir: ModelIR, raw: string): Fusion[] {
  const text = codeOnly(raw);
  const byClass = new Map<string, Map<string, number>>();
  ir.layers.forEach((layer, i) => {
    const attr = selfAttr(layer);
    if (!layer.ownerClass || !attr) return;
    const m = byClass.get(layer.ownerClass) ?? new Map<string, number>();
    if (m.has(attr)) m.set(attr, -1); // built twice (branches): not one module
    else m.set(attr, i);
    byClass.set(layer.ownerClass, m);
  });
  const classes = new Map(ir.classes.map((c) => [c.name, c]));
  const out: Fusion[] = [];
  for (const cls of ir.classes) {
    const attrs = byClass.get(cls.name);
    if (!attrs || !cls.forwardSpan) continue;
    const body = text.slice(cls.forwardSpan.startOffset, cls.forwardSpan.endOffset);
    const classText = text.slice(cls.span.startOffset, cls.span.endOffset);
    for (const [normAttr, normIndex] of attrs) {
      if (normIndex < 0 || !fusableNorm(ir.layers[normIndex])) continue;
      const uses = callsOf(body, normAttr);
      if (uses.length !== 1 || mentions(classText, normAttr) !== 2) continue;
      const normValue = assignedValue(text, cls, normAttr);
      if (!normValue || fusedAlready(text, normValue)) continue;
      const found = sameClass(ir, text, body, classText, attrs, uses[0], cls, normAttr, normIndex, normValue)
        ?? acrossClasses(ir, text, body, classText, byClass, classes, uses[0], cls, normAttr, normIndex, normValue);
      if (found) out.push(found);
    }
  }
  return out;
}

function sameClass(ir: ModelIR, text: string, body: string, classText: string, attrs: Map<string, number>, use: CallAt, cls: ClassInfo,
  normAttr: string, norm: number, normValue: ValueSpan): Fusion | undefined {
  const fc1Call = soleConsumer(body, use.start, use.end);
  const fc1Attr = fc1Call && /^self\.(\w+)$/.exec(fc1Call.callee)?.[1];
  const fc1 = fc1Attr !== undefined ? attrs.get(fc1Attr) : undefined;
  if (fc1Attr === undefined || fc1 === undefined || fc1 < 0 || !fusableLinear(ir.layers[fc1]) || callsOf(body, fc1Attr).length !== 1
    || mentions(classText, fc1Attr) !== 2) return undefined;
  const ownerValue = assignedValue(text, cls, fc1Attr);
  if (!ownerValue) return undefined;
  const fusion: Fusion = { norm, fc1, normClass: cls.name, linearAttr: fc1Attr, normAttr, normValue, ownerValue };
  // norm -> fc1 -> activation -> fc2: te.LayerNormMLP (by hand).
  const actCall = soleConsumer(body, fc1Call!.start, closeParen(body, body.indexOf('(', fc1Call!.start)));
  const actAttr = actCall && /^self\.(\w+)$/.exec(actCall.callee)?.[1];
  const actLayer = actAttr !== undefined ? attrs.get(actAttr) : undefined;
  const activation = actCall && (functionalActivation(actCall.callee)
    ?? (actAttr && actLayer === undefined ? ACTIVATIONS[actAttr.replace(/^act(?:ivation)?_?/, '') || ''] : undefined)
    ?? (actLayer !== undefined && actLayer >= 0 ? ACTIVATIONS[ir.layers[actLayer].constructor.replace(/^.*\./, '').toLowerCase()] : undefined));
  if (activation && actCall) {
    const fc2Call = soleConsumer(body, actCall.start, actCall.end);
    const fc2Attr = fc2Call && /^self\.(\w+)$/.exec(fc2Call.callee)?.[1];
    const fc2 = fc2Attr !== undefined ? attrs.get(fc2Attr) : undefined;
    if (fc2Attr !== undefined && fc2 !== undefined && fc2 >= 0 && fusableLinear(ir.layers[fc2]) && callsOf(body, fc2Attr).length === 1) {
      fusion.mlp = { fc2, activation, activationCall: actCall.callee, ...(actLayer !== undefined && actLayer >= 0 ? { activationLayer: actLayer } : {}) };
    }
  }
  return fusion;
}

function acrossClasses(ir: ModelIR, text: string, body: string, classText: string, byClass: Map<string, Map<string, number>>,
  classes: Map<string, ClassInfo>, use: CallAt, cls: ClassInfo, normAttr: string, norm: number, normValue: ValueSpan): Fusion | undefined {
  const call = soleConsumer(body, use.start, use.end, true);
  const ownerAttr = call && /^self\.(\w+)(?:\.forward)?$/.exec(call.callee)?.[1];
  const ownerLayer = ownerAttr ? byClass.get(cls.name)?.get(ownerAttr) : undefined;
  // The submodule is a module of this file (recorded as an `other` construction), not a layer the analysis knows.
  if (!ownerAttr || (ownerLayer !== undefined && (ownerLayer < 0 || ir.layers[ownerLayer].kind !== 'other')) || callsOf(body, ownerAttr).length + callsOf(body, `${ownerAttr}.forward`).length !== 1
    || mentions(classText, ownerAttr) !== 2) return undefined;
  const ownerValue = assignedValue(text, cls, ownerAttr);
  const built = ownerValue && /^([A-Za-z_]\w*)\s*\(/.exec(text.slice(ownerValue.start, ownerValue.end));
  const target = built ? classes.get(built[1]) : undefined;
  if (!ownerValue || !target || target === cls || !target.forwardSpan || closeParen(text, ownerValue.start + built![0].length - 1) !== ownerValue.end) return undefined;
  const targetBody = text.slice(target.forwardSpan.startOffset, target.forwardSpan.endOffset);
  const base = { norm, normClass: cls.name, owner: { attr: ownerAttr, className: target.name }, normAttr, normValue, ownerValue };
  const mlp = wholeMlp(ir, text, targetBody, target, byClass.get(target.name));
  if (mlp) return { ...base, ...mlp };
  const sig = /^\s*(?:async\s+)?def\s+forward\s*\(\s*self\s*,\s*([A-Za-z_]\w*)\b[^)]*?\)[^:]*:/.exec(targetBody)
    ?? /^\s*(?:async\s+)?def\s+forward\s*\(\s*self\s*,\s*([A-Za-z_]\w*)/.exec(targetBody);
  if (!sig) return undefined;
  const open = targetBody.indexOf('(', targetBody.indexOf('forward'));
  const bodyStart = targetBody.indexOf(':', closeParen(targetBody, open));
  if (bodyStart < 0) return undefined;
  const linCall = onlyConsumerOf(targetBody, sig[1], bodyStart + 1, true, true);
  const linAttr = linCall && /^self\.(\w+)$/.exec(linCall.callee)?.[1];
  const targetAttrs = byClass.get(target.name);
  const fc1 = linAttr !== undefined ? targetAttrs?.get(linAttr) : undefined;
  const targetText = text.slice(target.span.startOffset, target.span.endOffset);
  if (linAttr === undefined || fc1 === undefined || fc1 < 0 || !fusableLinear(ir.layers[fc1]) || callsOf(targetBody, linAttr).length !== 1
    || mentions(targetText, linAttr) !== 2) return undefined;
  return { ...base, fc1, linearAttr: linAttr };
}

/** Activations TE's fused MLP computes exactly, by the name torch gives them: gated (`* up(x)`) and plain. */
const GATED_TE: Record<string, string> = { silu: 'swiglu', relu: 'reglu', gelu: 'geglu' };
const PLAIN_TE: Record<string, string> = { silu: 'silu', relu: 'relu', gelu: 'gelu' };
/** Activation modules TE computes exactly: SiLU, ReLU, and GELU's tanh approximation (TE's gelu). */
const MODULE_ACTIVATION = /^(?:(?:torch\.)?nn\.)?(?:(SiLU|ReLU)\(\)|(GELU)\(approximate=["']tanh["']\))$/;
/** An activation chosen by the config (`ACT2FN[config.hidden_act]`): which one, the fallback reads when it fuses. */
const CONFIG_ACTIVATION = /^(?:ACT2FN\[|get_activation\()/;

/** `self.<attr>(<inner>)` spanning all of `e` (no spaces): the attribute and the inner text. */
function selfCall(e: string): { attr: string; inner: string } | undefined {
  const m = /^self\.(\w+)\(/.exec(e);
  if (!m || closeParen(e, m[0].length - 1) !== e.length) return undefined;
  return { attr: m[1], inner: e.slice(m[0].length, -1) };
}

/** Whether `expr` is one logical line: no newline or `;` outside brackets, no backslash continuation. */
function oneLogicalLine(expr: string): boolean {
  let depth = 0;
  for (const c of expr) {
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') depth--;
    else if ((c === '\n' || c === ';') && depth === 0) return false;
    else if (c === '\\') return false;
  }
  return depth === 0;
}

/** `e` split at its top-level `*` (not `**`). */
function factors(e: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let from = 0;
  for (let i = 0; i < e.length; i++) {
    const c = e[i];
    if (c === '(' || c === '[') depth++;
    else if (c === ')' || c === ']') depth--;
    else if (c === '*' && depth === 0) {
      if (e[i + 1] === '*' || e[i - 1] === '*') return [e];
      out.push(e.slice(from, i));
      from = i + 1;
    }
  }
  out.push(e.slice(from));
  return out;
}

/**
 * The owner's forward as a whole MLP te.LayerNormMLP computes exactly (the file comment), or undefined: one parameter
 * besides self, one return statement, each Linear built once and called once, plain Linears that convert.
 */
function wholeMlp(ir: ModelIR, text: string, body: string, target: ClassInfo, attrs: Map<string, number> | undefined): Pick<Fusion, 'fc1' | 'linearAttr' | 'fusedMlp'> | undefined {
  const sig = /^\s*def\s+forward\s*\(\s*self\s*,\s*([A-Za-z_]\w*)\s*(?::[^,()=]*)?,?\s*\)[^:]*:/.exec(body);
  if (!sig || !attrs) return undefined;
  const statements = body.slice(sig[0].length).replace(/^\s*("""|\'\'\'|"|')\s*\1/, '').trim();
  // `return EXPR`, or `v = EXPR` then `return v` (Hugging Face's `down_proj = ...; return down_proj`).
  const expr = /^return\s+([\s\S]+)$/.exec(statements)?.[1]
    ?? /^([A-Za-z_]\w*)[ \t]*=(?!=)[ \t]*([\s\S]+?)\n[ \t]*return[ \t]+\1$/.exec(statements)?.[2];
  if (!expr || !oneLogicalLine(expr)) return undefined;
  let e = expr.replace(/\s+/g, '');
  const x = sig[1];
  const targetText = text.slice(target.span.startOffset, target.span.endOffset);
  const built = (attr: string): string => {
    const v = assignedValue(text, target, attr);
    return v ? text.slice(v.start, v.end).replace(/\s+/g, '') : '';
  };
  let dropoutAttr: string | undefined;
  const outer = selfCall(e);
  if (outer && /^(?:(?:torch\.)?nn\.)?Dropout\(/.test(built(outer.attr)) && mentions(targetText, outer.attr) === 2) {
    dropoutAttr = outer.attr;
    e = outer.inner;
  }
  const down = selfCall(e);
  if (!down) return undefined;
  const parts = factors(down.inner);
  if (parts.length > 2) return undefined;
  let fc1Attr: string | undefined;
  let upAttr: string | undefined;
  let act: { name?: string; from?: string; call: string } | undefined;
  for (const part of parts) {
    const plainCall = selfCall(part);
    if (plainCall && plainCall.inner === x && parts.length === 2) {
      if (upAttr !== undefined) return undefined;
      upAttr = plainCall.attr;
      continue;
    }
    // act(self.fc1(x)): F.silu / F.relu, a module attribute built as one TE computes exactly, or the config's choice.
    const m = /^([A-Za-z_][\w.]*)\((self\.\w+\(\w+\))\)$/.exec(part);
    const inner = m ? selfCall(m[2]) : undefined;
    if (!m || !inner || inner.inner !== x || fc1Attr !== undefined) return undefined;
    const attrAct = /^self\.(\w+)$/.exec(m[1])?.[1];
    if (attrAct) {
      const value = built(attrAct);
      const known = MODULE_ACTIVATION.exec(value);
      if (mentions(targetText, attrAct) !== 2 || !(known || CONFIG_ACTIVATION.test(value))) return undefined;
      act = known ? { name: (known[1] ?? known[2]).toLowerCase(), call: m[1] } : { from: attrAct, call: m[1] };
    } else {
      // F.gelu is the exact (erf) GELU, which TE does not have.
      const name = functionalActivation(m[1]);
      if (name !== 'silu' && name !== 'relu') return undefined;
      act = { name, call: m[1] };
    }
    fc1Attr = inner.attr;
  }
  const activation = act?.name !== undefined ? (upAttr !== undefined ? GATED_TE : PLAIN_TE)[act.name] : undefined;
  if (!fc1Attr || !act || (!activation && !act.from)) return undefined;
  const index = (attr: string | undefined): number | undefined => {
    const i = attr === undefined ? undefined : attrs.get(attr);
    return i !== undefined && i >= 0 && fusableLinear(ir.layers[i]) && mentions(targetText, attr!) === 2 ? i : undefined;
  };
  const fc1 = index(fc1Attr);
  const fc2 = index(down.attr);
  const up = upAttr === undefined ? undefined : index(upAttr);
  if (fc1 === undefined || fc2 === undefined || (upAttr !== undefined && up === undefined)) return undefined;
  const names = [fc1Attr, down.attr, upAttr, dropoutAttr, act.from].filter(Boolean);
  if (new Set(names).size !== names.length) return undefined;
  return {
    fc1, linearAttr: fc1Attr,
    fusedMlp: {
      fc2, fc2Attr: down.attr, ...(up !== undefined ? { up, upAttr } : {}), ...(activation ? { activation } : { activationFrom: act.from }),
      activationCall: act.call, ...(dropoutAttr ? { dropoutAttr } : {}),
    },
  };
}
