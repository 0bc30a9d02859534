/**
 * Post-training quantization (PTQ) for inference: ModelOpt `mtq.quantize(model, config, forward_loop)`, torchao
 * `quantize_(model, config, filter_fn)`, and how the quantized model is saved or exported. Pure: syntax nodes and
 * the layers found by layers.ts/roles.ts in, `PtqFacts` out. What the libraries do is data (ptq-catalogue.ts); this
 * module only reads the file: which config (named, copied and changed, or literal), which calibration loop and how
 * many samples it feeds, which lm-heads and embeddings (by role) the config reaches.
 */
import type { SyntaxNode } from './node';
import type { Layer, PtqCalibrationSize, PtqConfig, PtqElement, PtqFacts, PtqForwardLoop, PtqProtectedHit, PtqQuantizeCall, PtqSave, Span } from './ir';
import { argsOf, type Arg } from './calls';
import { resolveName, type ImportTable } from './imports';
import { CALIB_SIZE_NAMES, configEntry, MODELOPT_DEFAULT_DISABLED, ptqFunction, TORCHAO_DTYPE_ARGS, type PtqFunction, type PtqLibrary } from './ptq-catalogue';
import { escapeRegExp, shortText, spanAt, spanOf, stringValue } from './spans';
import { leftOf, rightOf, calleeOf, type AssignRec, type CallRec, type WalkResult } from './walk';

interface PtqInput {
  src: string;
  imports: ImportTable;
  walk: WalkResult;
  callees: (string | undefined)[];
  layers: readonly Layer[];
}

const MODULE_WORDS = /\b(modelopt|torchao|state_dict|onnx)\b/;

/** Collects the file's PTQ calls, saves and summaries. Files that name neither library nor a save pay one text test. */
export function collectPtq(input: PtqInput): PtqFacts {
  const facts: PtqFacts = { quantizeCalls: [], saves: [], summaries: [] };
  if (!MODULE_WORDS.test(input.src)) return facts;
  const { walk, callees, imports } = input;
  for (let i = 0; i < walk.calls.length; i++) {
    const callee = callees[i];
    if (!callee) continue;
    const resolved = resolveName(imports, callee);
    const fn = ptqFunction(resolved);
    const rec = walk.calls[i];
    if (fn?.kind === 'quantize') facts.quantizeCalls.push(quantizeCall(input, rec, callee, fn));
    else if (fn?.kind === 'summary') facts.summaries.push(spanOf(rec.node));
    else if (fn && /^(export|save|modelopt-state)/.test(fn.kind)) facts.saves.push(saveOf(input.src, rec, fn.kind as PtqSave['kind']));
    else if (resolved === 'torch.save') {
      const text = input.src.slice(rec.node.startIndex, rec.node.endIndex);
      const sd = /\(\s*([\w.]+)\s*\.\s*state_dict\s*\(\s*\)/.exec(text);
      if (sd) facts.saves.push({ span: spanOf(rec.node), kind: 'torch-save-state-dict', text: shortText(text), receiver: sd[1] });
    }
  }
  return facts;
}

function saveOf(src: string, rec: CallRec, kind: PtqSave['kind']): PtqSave {
  const text = shortText(src.slice(rec.node.startIndex, rec.node.endIndex));
  const first = /\(\s*([\w.]+)/.exec(text)?.[1];
  return first ? { span: spanOf(rec.node), kind, text, receiver: first } : { span: spanOf(rec.node), kind, text };
}

/** The argument at a catalogue position (positional index, keyword name). */
function argAt(args: Arg[], at: [number, string] | undefined): Arg | undefined {
  if (!at) return undefined;
  return args.find((a) => a.name === at[1]) ?? args.filter((a) => a.name === undefined)[at[0]];
}

/**
 * The condition of the `if` (or `elif`) whose body holds the call and that tests the GPU's compute capability
 * (`torch.cuda.get_device_capability()`, `is_sm89_or_later()`-style helpers aside): the format is then chosen at run time.
 */
function capabilityGuard(src: string, node: SyntaxNode): string | undefined {
  let child: SyntaxNode = node;
  for (let p = node.parent, i = 0; p && i < 12; child = p, p = p.parent, i++) {
    if (p.type === 'function_definition' || p.type === 'class_definition') return undefined;
    if (p.type !== 'if_statement' && p.type !== 'elif_clause') continue;
    const cond = p.childForFieldName('condition');
    // In the body of this branch, not its else (which runs exactly where the test fails).
    const body = p.childForFieldName('consequence');
    if (!cond || !body || child.startIndex < body.startIndex || child.endIndex > body.endIndex) continue;
    const text = src.slice(cond.startIndex, cond.endIndex);
    if (/get_device_capability\s*\(/.test(text)) return shortText(text, 120);
  }
  return undefined;
}

function quantizeCall(input: PtqInput, rec: CallRec, callee: string, fn: PtqFunction): PtqQuantizeCall {
  const { src } = input;
  const library = fn.library as PtqLibrary;
  const args = argsOf(src, rec.node);
  const model = args.filter((a) => a.name === undefined)[0]?.text ?? args.find((a) => a.name === 'model')?.text ?? '';
  const call: PtqQuantizeCall = { span: spanOf(rec.node), library, callee, model: shortText(model, 80), protectedHits: [] };
  if (rec.scope.fn) call.ownerFunction = rec.scope.fn.name;
  const guard = capabilityGuard(src, rec.node);
  if (guard) call.capabilityGuard = guard;
  const configArg = argAt(args, fn.config);
  if (configArg) call.config = readConfig(input, library, configArg.node, rec);
  const loopArg = argAt(args, fn.loop);
  if (loopArg && loopArg.text.trim() !== 'None') call.forwardLoop = readLoop(input, loopArg, model);
  const filterArg = argAt(args, fn.filter);
  if (filterArg && filterArg.text.trim() !== 'None') call.filter = shortText(filterArg.text);
  call.protectedHits = protectedHits(input, call, filterArg);
  return call;
}

// ---------------------------------------------------------------------------------------------------------------
// Configs

function emptyConfig(node: SyntaxNode, src: string): PtqConfig {
  return { text: shortText(src.slice(node.startIndex, node.endIndex), 120), span: spanOf(node), kvCache: false, disabled: [], evidence: [] };
}

/** Starts a config from a catalogue entry. */
function fromEntry(cfg: PtqConfig, library: PtqLibrary, name: string): boolean {
  const e = configEntry(library, name);
  if (!e) return false;
  Object.assign(cfg, { base: e.name, format: e.format, fp8: e.fp8, scales: e.scales, kvCache: !!e.kvCache, gpus: e.gpus, needs: e.needs, sm: e.sm });
  if (e.weights) cfg.weights = e.weights;
  if (e.activations) cfg.activations = e.activations;
  if (library === 'modelopt' && !e.kvCache) cfg.disabled.push(...MODELOPT_DEFAULT_DISABLED);
  return true;
}

/** The last assignment `name = ...` before `before`, in the function holding `rec` or at module level. */
function lastAssignment(walk: WalkResult, src: string, name: string, rec: CallRec): AssignRec | undefined {
  let found: AssignRec | undefined;
  for (const a of walk.assigns) {
    if (a.start >= rec.start) break;
    if (a.scope.fn && a.scope.fn !== rec.scope.fn) continue;
    const left = leftOf(a);
    if (left && left.type === 'identifier' && src.slice(left.startIndex, left.endIndex) === name) found = a;
  }
  return found;
}

function readConfig(input: PtqInput, library: PtqLibrary, node: SyntaxNode, rec: CallRec, depth = 0): PtqConfig {
  const { src, walk } = input;
  const cfg = emptyConfig(node, src);
  if (node.type === 'identifier' && depth < 3) {
    const name = src.slice(node.startIndex, node.endIndex);
    const assign = lastAssignment(walk, src, name, rec);
    const right = assign?.node.childForFieldName('right');
    if (!assign || !right) { cfg.opaque = `${name} is not assigned in this function or module`; return cfg; }
    const base = readConfig(input, library, right, rec, depth + 1);
    Object.assign(cfg, { ...base, text: cfg.text, span: cfg.span, evidence: [spanOf(assign.node), ...base.evidence] });
    applyChanges(input, cfg, name, assign.start, rec);
    return cfg;
  }
  readExpression(input, library, cfg, node, rec, depth);
  return cfg;
}

/** A config expression: a named config, a copy of one, a config class call (torchao), or a dict literal (ModelOpt). */
function readExpression(input: PtqInput, library: PtqLibrary, cfg: PtqConfig, node: SyntaxNode, rec: CallRec, depth: number): void {
  const { src, imports } = input;
  const text = src.slice(node.startIndex, node.endIndex);
  if (node.type === 'attribute' || node.type === 'identifier') {
    const last = resolveName(imports, text).split('.').pop() ?? '';
    if (!fromEntry(cfg, library, last)) cfg.opaque = `${shortText(text, 60)} is not a config the analysis knows`;
    return;
  }
  if (node.type === 'call') {
    const fnNode = node.childForFieldName('function');
    const fnText = fnNode ? src.slice(fnNode.startIndex, fnNode.endIndex) : '';
    const last = resolveName(imports, fnText).split('.').pop() ?? '';
    const args = argsOf(src, node);
    // copy.deepcopy(mtq.FP8_DEFAULT_CFG), dict(X), X.copy()
    if (/^(deepcopy|copy|dict)$/.test(last) && args[0] && args[0].name === undefined) {
      const inner = readConfig(input, library, args[0].node, rec, depth + 1);
      Object.assign(cfg, { ...inner, text: cfg.text, span: cfg.span });
      return;
    }
    if (last === 'copy' && fnNode?.type === 'attribute') {
      const obj = fnNode.childForFieldName('object');
      if (obj) { const inner = readConfig(input, library, obj, rec, depth + 1); Object.assign(cfg, { ...inner, text: cfg.text, span: cfg.span }); return; }
    }
    if (library === 'torchao' && fromEntry(cfg, library, last)) {
      for (const a of args) readTorchaoDtype(cfg, a);
      return;
    }
    cfg.opaque = `the config comes from ${shortText(fnText, 60)}(...)`;
    return;
  }
  if (node.type === 'dictionary' && library === 'modelopt') { readDict(input, cfg, node, rec, depth); return; }
  cfg.opaque = `${shortText(text, 60)} is not a config the analysis can read`;
}

function readTorchaoDtype(cfg: PtqConfig, a: Arg): void {
  const which = a.name ? TORCHAO_DTYPE_ARGS[a.name] : undefined;
  if (!which) return;
  const el: PtqElement | undefined = /float8_e5m2/.test(a.text) ? 'e5m2' : /float8_e4m3/.test(a.text) ? 'e4m3' : undefined;
  if (!el) return;
  cfg[which] = el;
  if (el === 'e5m2') cfg.e5m2At ??= a.span;
}

/** `{"quant_cfg": {...}, "algorithm": ...}`, with `**mtq.FP8_DEFAULT_CFG["quant_cfg"]` splats. */
function readDict(input: PtqInput, cfg: PtqConfig, node: SyntaxNode, rec: CallRec, depth: number): void {
  const { src } = input;
  for (const child of node.namedChildren) {
    if (!child) continue;
    if (child.type === 'dictionary_splat') {
      const inner = child.namedChild(0);
      if (inner) splat(input, cfg, inner, rec, depth);
      continue;
    }
    if (child.type !== 'pair') continue;
    const key = keyOf(src, child);
    const value = child.childForFieldName('value');
    if (!value) continue;
    if (key === 'quant_cfg') {
      if (value.type === 'dictionary' || value.type === 'list') readQuantCfg(input, cfg, value, rec, depth);
      else splat(input, cfg, value, rec, depth);
    } else if (key === 'algorithm' && value.type === 'none' && cfg.scales === 'static') cfg.scales = 'dynamic';
  }
}

/** A splatted or referenced part of another config (`mtq.FP8_DEFAULT_CFG["quant_cfg"]`): its facts join this one. */
function splat(input: PtqInput, cfg: PtqConfig, node: SyntaxNode, rec: CallRec, depth: number): void {
  const base = node.type === 'subscript' ? node.childForFieldName('value') : node;
  if (!base) return;
  const inner = readConfig(input, 'modelopt', base, rec, depth + 1);
  if (inner.opaque && !inner.base) { cfg.opaque ??= inner.opaque; return; }
  cfg.base ??= inner.base;
  cfg.format ??= inner.format;
  cfg.fp8 = cfg.fp8 || inner.fp8;
  cfg.weights ??= inner.weights;
  cfg.activations ??= inner.activations;
  cfg.scales ??= inner.scales;
  cfg.kvCache = cfg.kvCache || inner.kvCache;
  cfg.gpus ??= inner.gpus;
  cfg.needs ??= inner.needs;
  cfg.sm ??= inner.sm;
  cfg.disabled.push(...inner.disabled);
}

function keyOf(src: string, pair: SyntaxNode): string | undefined {
  const k = pair.childForFieldName('key');
  return k ? stringValue(src.slice(k.startIndex, k.endIndex)) : undefined;
}

/** quant_cfg as a dict `{wildcard: attributes}` (ModelOpt < 0.47) or a list of entries (0.47: `{"quantizer_name": ...}`). */
function readQuantCfg(input: PtqInput, cfg: PtqConfig, node: SyntaxNode, rec: CallRec, depth: number): void {
  for (const child of node.namedChildren) {
    if (!child) continue;
    if (child.type === 'dictionary_splat' || child.type === 'list_splat') { const inner = child.namedChild(0); if (inner) splat(input, cfg, inner, rec, depth); continue; }
    if (node.type === 'list' && child.type === 'dictionary') { applyListEntry(input.src, cfg, child); continue; }
    if (child.type !== 'pair') continue;
    const key = keyOf(input.src, child);
    const value = child.childForFieldName('value');
    if (key !== undefined && value) applyEntry(input.src, cfg, key, value);
  }
}

/** One entry of a list-form quant_cfg: `{"quantizer_name": "*lm_head*", "enable": False}`, `{..., "cfg": {...}}`. */
function applyListEntry(src: string, cfg: PtqConfig, entry: SyntaxNode): void {
  const fields = new Map<string, SyntaxNode>();
  for (const p of entry.namedChildren) {
    const k = p && p.type === 'pair' ? keyOf(src, p) : undefined;
    const v = p?.childForFieldName('value');
    if (k !== undefined && v) fields.set(k, v);
  }
  const nameNode = fields.get('quantizer_name');
  const name = nameNode ? stringValue(src.slice(nameNode.startIndex, nameNode.endIndex)) : undefined;
  // `"*"` first disables everything the later entries do not enable; parent_class entries act by class, not name.
  if (name === undefined || fields.has('parent_class')) return;
  if (fields.get('enable')?.type === 'false') { if (name !== '*') applyEntry(src, cfg, name, entry); return; }
  const attrs = fields.get('cfg');
  if (attrs) applyEntry(src, cfg, name, attrs);
}

/** One quant_cfg entry: a wildcard and its quantizer attributes. */
function applyEntry(src: string, cfg: PtqConfig, key: string, value: SyntaxNode): void {
  const attrs = new Map<string, SyntaxNode>();
  if (value.type === 'dictionary') {
    for (const p of value.namedChildren) {
      if (!p || p.type !== 'pair') continue;
      const k = keyOf(src, p);
      const v = p.childForFieldName('value');
      if (k !== undefined && v) attrs.set(k, v);
    }
  }
  const enable = attrs.get('enable');
  const off = enable !== undefined && enable.type === 'false';
  if (off) {
    cfg.disabled.push(key);
    if (/input_quantizer$/.test(key) && cfg.scales === 'static') cfg.scales = 'weight-only';
    return;
  }
  const bits = attrs.get('num_bits');
  const el = bits ? elementOf(src.slice(bits.startIndex, bits.endIndex)) : undefined;
  if (/\[kv\]_bmm_quantizer|[kv]_bmm_quantizer/.test(key)) cfg.kvCache = true;
  if (el) {
    cfg.fp8 = true;
    if (/weight_quantizer$/.test(key)) cfg.weights = el;
    else if (/input_quantizer$/.test(key)) cfg.activations = el;
    if (el === 'e5m2' && bits) cfg.e5m2At ??= spanOf(bits);
    cfg.gpus ??= ['ada', 'hopper', 'blackwell'];
    cfg.needs ??= 'SM >= 8.9';
    cfg.sm ??= { min: [8, 9] };
  }
  if (/input_quantizer$/.test(key)) {
    const type = attrs.get('type');
    const dynamic = type && stringValue(src.slice(type.startIndex, type.endIndex)) === 'dynamic';
    cfg.scales = dynamic ? 'dynamic' : 'static';
  }
  cfg.format ??= el ? `FP8 (${el.toUpperCase()})` : undefined;
}

/** `(4, 3)` -> e4m3, `(5, 2)` -> e5m2; integers and other formats -> undefined. */
function elementOf(text: string): PtqElement | undefined {
  const t = text.replace(/\s+/g, '');
  if (t === '(4,3)' || t === '[4,3]') return 'e4m3';
  if (t === '(5,2)' || t === '[5,2]') return 'e5m2';
  return undefined;
}

/**
 * Changes made to the config variable between its assignment and the quantize call:
 * `cfg["quant_cfg"]["*lm_head*"] = {"enable": False}`, `cfg["quant_cfg"]["*weight_quantizer"]["num_bits"] = (5, 2)`,
 * `cfg["quant_cfg"].update({...})` / `.update(mtq.FP8_KV_CFG["quant_cfg"])` (dict form), `cfg["quant_cfg"].append({...})` /
 * `.extend(mtq.FP8_KV_CFG["quant_cfg"])` (list form).
 */
function applyChanges(input: PtqInput, cfg: PtqConfig, name: string, from: number, rec: CallRec): void {
  const { src, walk } = input;
  for (const a of walk.assigns) {
    if (a.start <= from || a.start >= rec.start || (a.scope.fn && a.scope.fn !== rec.scope.fn)) continue;
    const left = leftOf(a);
    const right = rightOf(a);
    if (!left || !right || left.type !== 'subscript') continue;
    const keys = subscriptKeys(src, left, name);
    if (!keys) continue;
    cfg.evidence.push(spanOf(a.node));
    if (keys.length === 2 && keys[0] === 'quant_cfg') applyEntry(src, cfg, keys[1], right);
    else if (keys.length === 3 && keys[0] === 'quant_cfg') {
      const el = keys[2] === 'num_bits' ? elementOf(src.slice(right.startIndex, right.endIndex)) : undefined;
      if (el && /weight_quantizer$/.test(keys[1])) cfg.weights = el;
      if (el && /input_quantizer$/.test(keys[1])) cfg.activations = el;
      if (el === 'e5m2') cfg.e5m2At ??= spanOf(right);
      if (keys[2] === 'enable' && right.type === 'false') cfg.disabled.push(keys[1]);
    }
  }
  for (const c of walk.calls) {
    if (c.start <= from || c.start >= rec.start || (c.scope.fn && c.scope.fn !== rec.scope.fn)) continue;
    const f = calleeOf(c);
    if (!f || f.type !== 'attribute') continue;
    const attr = f.childForFieldName('attribute');
    const obj = f.childForFieldName('object');
    const method = attr ? src.slice(attr.startIndex, attr.endIndex) : '';
    if (!obj || !/^(update|append|extend)$/.test(method)) continue;
    const keys = obj.type === 'subscript' ? subscriptKeys(src, obj, name) : undefined;
    if (!keys || keys[0] !== 'quant_cfg' || keys.length !== 1) continue;
    const arg = argsOf(src, c.node)[0];
    if (!arg) continue;
    cfg.evidence.push(spanOf(c.node));
    if (method === 'append' && arg.node.type === 'dictionary') applyListEntry(src, cfg, arg.node);
    else if (arg.node.type === 'dictionary' || arg.node.type === 'list') readQuantCfg(input, cfg, arg.node, rec, 1);
    else splat(input, cfg, arg.node, rec, 1);
  }
}

/** `name["a"]["b"]` -> ['a', 'b'] when rooted at `name` with string keys; undefined otherwise. */
function subscriptKeys(src: string, node: SyntaxNode, name: string): string[] | undefined {
  const keys: string[] = [];
  let n: SyntaxNode | null = node;
  while (n && n.type === 'subscript') {
    const sub = n.childForFieldName('subscript');
    const k = sub ? stringValue(src.slice(sub.startIndex, sub.endIndex)) : undefined;
    if (k === undefined) return undefined;
    keys.unshift(k);
    n = n.childForFieldName('value');
  }
  return n && n.type === 'identifier' && src.slice(n.startIndex, n.endIndex) === name ? keys : undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// Calibration loops

function paramsOf(src: string, fn: SyntaxNode): string[] {
  const p = fn.childForFieldName('parameters');
  if (!p) return [];
  return p.namedChildren.filter((c): c is SyntaxNode => !!c).map((c) => {
    const id = c.type === 'identifier' ? c : c.childForFieldName('name') ?? c.namedChild(0);
    return id ? src.slice(id.startIndex, id.endIndex) : '';
  }).filter((n) => n && n !== 'self');
}


/** Whether a body runs `name`: calls it (or its forward/generate), or hands it to another call or object. */
function runs(body: string, name: string): boolean {
  if (!name) return false;
  const n = escapeRegExp(name);
  return new RegExp(String.raw`(?<![\w.])${n}\s*(\.\s*(forward|generate|__call__)\s*)?\(|[(,=]\s*${n}\s*[,)]|=\s*${n}\s*$`, 'm').test(body);
}

function readLoop(input: PtqInput, arg: Arg, model: string): PtqForwardLoop {
  const { src, walk } = input;
  const loop: PtqForwardLoop = { text: shortText(arg.text, 80), span: arg.span };
  let node = arg.node;
  // functools.partial(calibrate, loader=val_loader): the wrapped function
  if (node.type === 'call') {
    const first = argsOf(src, node)[0];
    if (first && first.name === undefined && /partial$/.test(src.slice(node.startIndex, node.endIndex).split('(')[0])) node = first.node;
  }
  if (node.type === 'lambda') {
    const body = node.childForFieldName('body');
    const params = paramsOf(src, node);
    const bodyText = body ? src.slice(body.startIndex, body.endIndex) : '';
    loop.runsModel = params.length ? runs(bodyText, params[0]) || runs(bodyText, model) : runs(bodyText, model);
    return loop;
  }
  if (node.type !== 'identifier') return loop;
  const name = src.slice(node.startIndex, node.endIndex);
  const fn = walk.functions.filter((f) => f.name === name && f.start < arg.span.startOffset).pop() ?? walk.functions.find((f) => f.name === name);
  if (!fn) return loop;
  loop.fnName = name;
  loop.fnSpan = spanOf(fn.node);
  const bodyNode = fn.node.childForFieldName('body');
  const body = bodyNode ? src.slice(bodyNode.startIndex, bodyNode.endIndex) : '';
  const params = paramsOf(src, fn.node);
  loop.runsModel = (params.length > 0 && runs(body, params[0])) || runs(body, model);
  const size = calibrationSize(src, body, bodyNode?.startIndex ?? fn.start);
  if (size) loop.size = size;
  return loop;
}

/** An int literal, or a module-level `NAME = 512`. */
function intValue(src: string, text: string): number | undefined {
  const t = text.trim();
  if (/^\d[\d_]*$/.test(t)) return Number(t.replace(/_/g, ''));
  if (!/^[A-Za-z_]\w*$/.test(t)) return undefined;
  const m = new RegExp(String.raw`^${escapeRegExp(t)}\s*(?::\s*int\s*)?=\s*(\d[\d_]*)\s*(#.*)?$`, 'm').exec(src);
  return m ? Number(m[1].replace(/_/g, '')) : undefined;
}

/** Patterns that bound a calibration loop, in the order they are tried: [regex, unit]. Group 1 is the count. */
const SIZE_PATTERNS: [RegExp, 'samples' | 'batches'][] = [
  [/\bislice\s*\([^,()]+(?:\([^()]*\))?\s*,\s*([\w]+)\s*\)/, 'batches'],
  [/\bif\s+\w+\s*(?:>=|==|>)\s*([\w]+)\s*:\s*(?:\n\s*)?break\b/, 'batches'],
  [/\bfor\s+\w+\s+in\s+range\s*\(\s*([\w]+)\s*\)/, 'batches'],
  [/\.select\s*\(\s*range\s*\(\s*([\w]+)\s*\)\s*\)/, 'samples'],
  [/\.take\s*\(\s*([\w]+)\s*\)/, 'samples'],
  [/\[\s*:\s*([\w]+)\s*\]/, 'samples'],
];

function calibrationSize(src: string, body: string, bodyStart: number): PtqCalibrationSize | undefined {
  const spanIn = (at: number, len: number): Span => spanAt(bodyStart + at, bodyStart + at + len);
  for (const [re, unit] of SIZE_PATTERNS) {
    const m = re.exec(body);
    if (!m) continue;
    const count = intValue(src, m[1]);
    if (count === undefined) continue;
    const size: PtqCalibrationSize = { count, unit, text: shortText(m[0], 60), span: spanIn(m.index, m[0].length) };
    if (unit === 'batches') {
      const bs = batchSize(src, body);
      if (bs) size.batchSize = bs;
    }
    return size;
  }
  // A size named for what it is (calib_size=512) anywhere in the file.
  for (const m of src.matchAll(/\b(\w+)\s*=\s*(\d[\d_]*)\b/g)) {
    if (!CALIB_SIZE_NAMES.test(m[1])) continue;
    return { count: Number(m[2].replace(/_/g, '')), unit: 'samples', text: shortText(m[0], 60), span: spanAt(m.index ?? 0, (m.index ?? 0) + m[0].length) };
  }
  return undefined;
}

/** The batch size of the loader the body iterates (`for batch in val_loader` and `val_loader = DataLoader(..., batch_size=8)`). */
function batchSize(src: string, body: string): number | undefined {
  const inline = /\bbatch_size\s*=\s*([\w]+)/.exec(body);
  if (inline) return intValue(src, inline[1]);
  const it = /\bfor\s+[\w, ()]+\s+in\s+(?:enumerate\s*\(\s*)?(?:islice\s*\(\s*)?([A-Za-z_][\w.]*)/.exec(body);
  if (!it) return undefined;
  const loader = it[1].split('.').pop() as string;
  const m = new RegExp(String.raw`\b${escapeRegExp(loader)}\s*=\s*[\w.]*DataLoader\s*\([^\n]*?\bbatch_size\s*=\s*(\w+)`).exec(src);
  return m ? intValue(src, m[1]) : undefined;
}

// ---------------------------------------------------------------------------------------------------------------
// Which protected layers (lm-head, embedding: by role) a call quantizes

/** fnmatch as Python's (`*`, `?`, `[seq]`), case-sensitive as on POSIX. */
export function fnmatch(name: string, pattern: string): boolean {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*') re += '.*';
    else if (c === '?') re += '.';
    else if (c === '[') {
      const close = pattern.indexOf(']', i + 2);
      if (close < 0) { re += '\\['; continue; }
      let body = pattern.slice(i + 1, close);
      if (body.startsWith('!')) body = `^${body.slice(1)}`;
      re += `[${body.replace(/\\/g, '\\\\')}]`;
      i = close;
    } else re += escapeRegExp(c);
  }
  return new RegExp(`^${re}$`, 's').test(name);
}

/** The module name a layer path has in `named_modules()` (`layers[*]` -> `layers.0`). */
function moduleName(layer: Layer): string | undefined {
  const path = layer.path ?? layer.name.replace(/^self\./, '');
  if (!path) return undefined;
  return path.replace(/\[\*\]|\[(\d+)\]/g, (_m, d) => `.${d ?? 0}`);
}

function protectedHits(input: PtqInput, call: PtqQuantizeCall, filterArg: Arg | undefined): PtqProtectedHit[] {
  const cfg = call.config;
  if (!cfg || cfg.fp8 === false) return [];
  const hits: PtqProtectedHit[] = [];
  input.layers.forEach((layer, layerIndex) => {
    if (layer.isTe) return;
    if (layer.role === 'lm_head' && (layer.kind === 'linear' || layer.kind === 'parallel-linear')) {
      const why = call.library === 'modelopt' ? modeloptReaches(cfg, layer) : torchaoReaches(input, filterArg, layer);
      if (why) hits.push({ layerIndex, why });
    } else if (layer.role === 'embedding' && call.library === 'torchao' && filterArg && filterIncludesEmbeddings(input.src, filterArg)) {
      hits.push({ layerIndex, why: `filter_fn ${shortText(filterArg.text, 50)} selects embeddings` });
    }
  });
  return hits;
}

function modeloptReaches(cfg: PtqConfig, head: Layer): string | undefined {
  const name = moduleName(head);
  if (!name || cfg.opaque) return undefined;
  const quantizer = `${name}.weight_quantizer`;
  const match = cfg.disabled.find((p) => fnmatch(quantizer, p) || fnmatch(`model.${quantizer}`, p));
  if (match) return undefined;
  return `no disabled wildcard of the config matches ${quantizer}`;
}

function filterIncludesEmbeddings(src: string, filterArg: Arg): boolean {
  return /\bEmbedding\b/.test(filterBody(src, filterArg));
}

/** The filter's text: a lambda, or the body of the function it names. */
function filterBody(src: string, filterArg: Arg): string {
  if (filterArg.node.type !== 'identifier') return filterArg.text;
  const name = filterArg.text.trim();
  const m = new RegExp(String.raw`^([ \t]*)def\s+${escapeRegExp(name)}\s*\([\s\S]*?(?=^\1\S|(?![\s\S]))`, 'm').exec(src);
  return m ? m[0] : filterArg.text;
}

function torchaoReaches(input: PtqInput, filterArg: Arg | undefined, head: Layer): string | undefined {
  if (!filterArg) return 'quantize_ without filter_fn quantizes every nn.Linear';
  const body = filterBody(input.src, filterArg);
  const attr = head.attr ?? moduleName(head)?.split('.').pop();
  // Excluded by name, by the vocabulary-sized output, or by identity with the head module.
  if (attr && new RegExp(String.raw`\b${escapeRegExp(attr)}\b`).test(body)) return undefined;
  if (/vocab|out_features|lm_head|is_tied|data_ptr|_pl_keep|keep_high_precision/i.test(body)) return undefined;
  return `filter_fn ${shortText(filterArg.text, 50)} does not exclude ${attr ?? 'it'}`;
}
