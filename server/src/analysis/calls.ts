/**
 * Calls that are not layers but matter for FP8: torch.compile, load_state_dict, low-precision casts, optimizers,
 * backward, capability checks, deprecated TE API, float8 casts, precision logging; TE recipes; torchao / accelerate
 * FP8 conversions; weight-tying statements.
 */
import type { SyntaxNode } from './node';
import type { Fp8ConversionCall, NotableCall, QuantizationCall, RecipeCall, Span, WeightTie } from './ir';
import { teAutocastApi } from './autocast';
import { PTQ_CONFIGS } from './ptq-catalogue';
import { resolveName, type ImportTable } from './imports';
import { shortText, spanAt, spanOf, stringValue } from './spans';
import { leftOf, rightOf, argListOf, type AssignRec, type CallRec, type ClassRec, type FuncRec } from './walk';

const OPTIMIZERS = /^(Adam|AdamW|SGD|Adagrad|Adadelta|Adamax|NAdam|RAdam|RMSprop|Rprop|ASGD|LBFGS|SparseAdam|Adafactor|Lion|Muon|LAMB|Lamb|FusedAdam|FusedLAMB|FusedSGD|FusedNovoGrad|AdamW8bit|Adam8bit|PagedAdamW|PagedAdamW8bit|AnyPrecisionAdamW|AdamWFp8|AdamW4bit|AdamW8bitAO|Sophia|Shampoo|DistributedShampoo|ZeroRedundancyOptimizer|Adan|Prodigy|ScheduleFreeAdamW)$/;
const RECIPES = /^(DelayedScaling|Float8CurrentScaling|Float8BlockScaling|MXFP8BlockScaling|NVFP4BlockScaling|CustomRecipe|Float8BlockwiseScaling)$/;
// Also helpers of other libraries by what they are named for (torchao/torchtitan `has_cuda_capability(8, 9)`,
// `is_sm_at_least_89()`, `is_hopper()`), imported or not.
const FP8_CHECK = /^(is_fp8_available|check_fp8_support|get_device_capability|is_mxfp8_available|is_fp8_block_scaling_available|is_nvfp4_available|fp8_available|check_mxfp8_support|is_fp8_supported|has_fp8)$|^\w*(cuda_capability|compute_capability|fp8_avail\w*|fp8_support\w*)$|^is_sm_?(at_least_)?\d+|^is_(hopper|blackwell|ada)\w*$/;
const FLOAT8 = /float8_e4m3fn(uz)?|float8_e5m2(fnuz)?|float8_e8m0fnu/;
const LOW = /\b(bfloat16|float16|half|bf16|fp16)\b/;
const LOG_CALLEE = /^(print|pprint|log|rank0_print|print_rank_0|print0|master_print|tqdm\.write|warnings\.warn|console\.print)$|(^|\.)(logger|logging|log|LOGGER|_logger|LOG)\.(info|warning|warn|debug|error|critical|log|print)$|^(accelerator|self\.accelerator|fabric)\.print$/;
const LOG_TEXT = /fp8|bf16|bfloat16|float8|fp16|float16|precision|e4m3|e5m2|transformer.?engine|te\.|mxfp8|nvfp4/i;

export interface CallFacts {
  calls: NotableCall[];
  recipes: RecipeCall[];
  conversions: Fp8ConversionCall[];
  quantization: QuantizationCall[];
}

export interface Arg { name?: string; node: SyntaxNode; span: Span; text: string }

export function argsOf(src: string, call: SyntaxNode): Arg[] {
  const out: Arg[] = [];
  const a = call.childForFieldName('arguments');
  if (!a) return out;
  for (const c of a.namedChildren) {
    if (!c || c.type === 'comment') continue;
    if (c.type === 'keyword_argument') {
      const n = c.childForFieldName('name');
      const v = c.childForFieldName('value');
      if (n && v) out.push({ name: src.slice(n.startIndex, n.endIndex), node: v, span: spanOf(c), text: src.slice(v.startIndex, v.endIndex) });
    } else out.push({ node: c, span: spanOf(c), text: src.slice(c.startIndex, c.endIndex) });
  }
  return out;
}

function kwRecord(args: Arg[]): { args: Record<string, string>; spans: Record<string, Span> } {
  const r: Record<string, string> = {};
  const s: Record<string, Span> = {};
  let i = 0;
  for (const a of args) {
    const key = a.name ?? `$${i++}`;
    r[key] = a.text.replace(/\s+/g, ' ');
    s[key] = a.span;
  }
  return { args: r, spans: s };
}

/**
 * The offset just after the `)` matching the `(` at `open`, skipping strings (with prefixes, triple quotes and
 * escapes), comments and nested brackets; the text length when unbalanced.
 */
export function closeParen(src: string, open: number): number {
  let depth = 0;
  const n = src.length;
  for (let i = open; i < n; i++) {
    const c = src.charCodeAt(i);
    if (c === 40 || c === 91 || c === 123) depth++;
    else if (c === 41 || c === 93 || c === 125) { if (--depth === 0) return i + 1; }
    else if (c === 35) { const e = src.indexOf('\n', i); if (e < 0) return n; i = e; }
    else if (c === 34 || c === 39) {
      const triple = src.charCodeAt(i + 1) === c && src.charCodeAt(i + 2) === c;
      if (triple) {
        const q = src.slice(i, i + 3);
        let j = i + 3;
        for (; j < n; j++) { if (src.charCodeAt(j) === 92) { j++; continue; } if (src.startsWith(q, j)) break; }
        i = j + 2;
      } else {
        let j = i + 1;
        for (; j < n; j++) { const d = src.charCodeAt(j); if (d === 92) { j++; continue; } if (d === c || d === 10) break; }
        i = j;
      }
    }
  }
  return n;
}

/** A receiver that names a module (the whole model or a part), not a tensor: `model`, `self.net`, `gpt`, `encoder`. */
export const MODEL_WORD = /^[\w.]*(model|net|module|transformer|encoder|decoder|llm|gpt|bert|llama|policy|backbone|block|layer|head|lm)s?$/i;
/** Also a module built in place: `nn.Linear(16, 16).half()`. */
function isModuleReceiver(r: string): boolean {
  // `model.cuda().half()`, `model.to(device).bfloat16()`: the module the device moves return.
  const base = r.replace(/(\s*\.\s*(cuda|cpu|to|train|eval|requires_grad_)\s*\([^()]*\))+$/, '');
  // `GPT(cfg)`, `model_cls(cfg)`, `build_model(cfg)`: a module built right there.
  return MODEL_WORD.test(base) || /(^|\.)[A-Z]\w*\(.*\)$/.test(base) || /(^|\.)\w*(model|net)\w*\(.*\)$/i.test(base);
}
const RECIPE_FIELDS: Record<string, string[]> = {
  DelayedScaling: ['margin', 'fp8_format', 'amax_history_len', 'amax_compute_algo'],
  Float8CurrentScaling: ['fp8_format'],
};
const CALL_LAST = /^(scaled_dot_product_attention|checkpoint|checkpoint_sequential|checkpoint_wrapper|partial|apply_activation_checkpointing|Float8LinearConfig|FullyShardedDataParallel|FSDP|precompute_float8_dynamic_scale_for_fsdp|gradient_checkpointing_enable|backward|load_state_dict|half|bfloat16|step|compile|to|type|view|copy_|from_pretrained|from_config)$/;
const TORCH_CHECKPOINT_WRAPPER_MODULE = 'torch.distributed.algorithms._checkpoint.checkpoint_wrapper';
const TORCH_CHECKPOINT_WRAPPER = `${TORCH_CHECKPOINT_WRAPPER_MODULE}.checkpoint_wrapper`;
/** The argument given by name or at its position, or possibly through a `**kwargs` splat: as far as the text tells. */
function mayGive(call: NotableCall, name: string, position: string): boolean {
  return call.args[name] !== undefined || call.args[position] !== undefined || Object.values(call.args).some((v) => v.startsWith('**'));
}
const CONVERSION = /^(fp8_for_compile|convert_to_float8_training|convert_model|quantize_|swap_linear_with_float8_linear|Accelerator|convert_to_float8)$/;
const CONTEXT_LAST = /autocast$|fp8_model_init$|quantized_model_init$/;
/** Weight quantization stacks that swap nn.Linear for their own modules (bitsandbytes / QLoRA, GPTQ, AWQ, HQQ). */
const QUANT_LAST = /^(BitsAndBytesConfig|prepare_model_for_kbit_training|Linear4bit|Linear8bitLt|LinearNF4|LinearFP4|replace_with_bnb_linear|GPTQConfig|AwqConfig|HqqConfig)$/;
/** Callee text -> whether collectCalls may record the call at all (a pure function of the text). */
const mayMatterCache = new Map<string, boolean>();

/** The tests of collectCalls that read the callee text only, before anything else: most calls stop here. */
function mayMatter(callee: string): boolean {
  let v = mayMatterCache.get(callee);
  if (v === undefined) {
    const dot = callee.lastIndexOf('.');
    const last = dot < 0 ? callee : callee.slice(dot + 1);
    v = CALL_LAST.test(last) || FP8_CHECK.test(last) || LOG_CALLEE.test(callee) || RECIPES.test(last)
      || (/^[A-Z]/.test(last) && OPTIMIZERS.test(last)) || CONTEXT_LAST.test(last) || CONVERSION.test(last) || QUANT_LAST.test(last);
    if (mayMatterCache.size > 50000) mayMatterCache.clear();
    mayMatterCache.set(callee, v);
  }
  return v;
}

/** What a stateful non-module is built with: optimizers, schedulers, data loaders and samplers, scalers, RNG states. */
const NON_MODULE_CTOR = /(^|\.)(optim\.\w+|lr_scheduler\.\w+|\w*(DataLoader|Loader|Sampler|Scheduler|Optimizer|Scaler|Dataset|Iterator|Tokenizer|Generator|Stateful\w*))$/;

/**
 * What `name = Ctor(...)` (the last such assignment in `text`) builds: `other` for optimizers, schedulers, data
 * loaders, samplers and the like (their load_state_dict takes no `strict`), `module` for torch.nn / TE / Hugging Face
 * models and local module classes, `unknown` otherwise (`ExponentialMovingAverage(...)` of another library).
 */
function builtAs(text: string, receiver: string, imports: ImportTable, isLocalModule: (name: string) => boolean): 'other' | 'module' | 'unknown' | undefined {
  if (!/^[A-Za-z_][\w.]*$/.test(receiver)) return undefined;
  const re = new RegExp(`(^|\\n)[ \\t]*${receiver.replace(/\./g, '\\s*\\.\\s*')}\\s*(?::[^=\\n]+)?=(?!=)\\s*([A-Za-z_][\\w.]*)\\s*\\(`, 'g');
  let ctor: string | undefined;
  for (const m of text.matchAll(re)) {
    // `model = model.to(...)`, `model = torch.compile(model)`, `model = DDP(model)`: the same object, rewrapped.
    if (m[2].startsWith(`${receiver}.`) || /(^|\.)(compile|DDP|DistributedDataParallel|FSDP|FullyShardedDataParallel|fully_shard|prepare|prepare_model)$/.test(m[2])) continue;
    ctor = m[2];
  }
  if (ctor === undefined) return undefined;
  const last = ctor.slice(ctor.lastIndexOf('.') + 1);
  if (NON_MODULE_CTOR.test(ctor) || (/^[A-Z]/.test(last) && OPTIMIZERS.test(last))) return 'other';
  const resolved = resolveName(imports, ctor);
  if (/^(torch\.nn|transformer_engine|transformers|timm|torchvision\.models)(\.|$)/.test(resolved) || /(^|\.)from_(pretrained|config)$/.test(ctor)
    || isLocalModule(ctor) || /model|^(build|create|make|init|get|load)(_|$)/i.test(last) || (/^[A-Z]/.test(last) && MODEL_WORD.test(last))) return 'module';
  return 'unknown';
}

/** The state of one collectCalls pass. */
interface CallScan {
  src: string;
  imports: ImportTable;
  facts: CallFacts;
  /** Names optimizers are assigned to (`opt = AdamW(...)`): their step / load_state_dict are no module's. */
  optimizerVars: Set<string>;
  fnByName: Map<string, FuncRec>;
  isModuleAt: (receiver: string, rec: CallRec) => boolean;
}

/** One call, classified: what the cheap filters found out about its callee. */
interface CallSite {
  rec: CallRec;
  callee: string;
  /** The callee's last name (what an aliased import names). */
  last: string;
  receiver?: string;
  /** Records the call as notable (with its arguments). */
  push: (kind: NotableCall['kind'], args?: Arg[]) => NotableCall;
}

/** Classifies every call once. */
export function collectCalls(
  src: string, imports: ImportTable, calls: CallRec[], functions: FuncRec[], callees: (string | undefined)[],
  isLocalModule: (name: string) => boolean = () => false,
): CallFacts {
  const facts: CallFacts = { calls: [], recipes: [], conversions: [], quantization: [] };
  const fnByName = new Map<string, FuncRec>();
  for (const f of functions) if (!fnByName.has(f.name)) fnByName.set(f.name, f);
  const scan: CallScan = { src, imports, facts, optimizerVars: new Set(), fnByName, isModuleAt: moduleReceiverTest(src, imports, isLocalModule) };
  for (let i = 0; i < calls.length; i++) {
    const site = callSite(scan, calls[i], callees[i]);
    if (site && !namedCallFact(scan, site)) patternCallFact(scan, site);
  }
  bareCompileDecorators(src, imports, facts);
  for (const imp of imports.teFp8ModuleImports) {
    facts.calls.push({
      span: spanOf(imp), kind: 'te_deprecated', callee: 'transformer_engine.pytorch.fp8',
      text: shortText(src.slice(imp.startIndex, imp.endIndex)), args: {},
    });
  }
  facts.calls.sort((a, b) => a.span.startOffset - b.span.startOffset);
  return facts;
}

/** Whether a load_state_dict receiver is a module: by how it is built (in its function, else the module), else by its name. */
function moduleReceiverTest(src: string, imports: ImportTable, isLocalModule: (name: string) => boolean): (receiver: string, rec: CallRec) => boolean {
  // Per receiver and scope: read in the enclosing function (where a local is built), else in the module.
  const nonModule = new Map<string, boolean>();
  const wholeBuilt = new Map<string, 'other' | 'module' | 'unknown' | undefined>();
  return (receiver, rec) => {
    const fn = rec.scope.fn;
    const key = `${fn ? fn.start : -1}\u0001${receiver}`;
    let v = nonModule.get(key);
    if (v === undefined) {
      let how = fn ? builtAs(src.slice(fn.start, fn.end), receiver, imports, isLocalModule) : undefined;
      if (how === undefined) {
        // The module as a whole, once per receiver.
        const whole = `-1\u0001${receiver}`;
        let w = wholeBuilt.get(whole);
        if (!wholeBuilt.has(whole)) { w = builtAs(src, receiver, imports, isLocalModule); wholeBuilt.set(whole, w); }
        how = w;
      }
      v = how === 'module' || (how === undefined && isModuleReceiver(receiver));
      nonModule.set(key, v);
    }
    return v;
  };
}

/** The call's callee split for the filters, or undefined when no filter can match it. */
function callSite(scan: CallScan, rec: CallRec, callee: string | undefined): CallSite | undefined {
  if (!callee) return undefined;
  const { src, imports, facts } = scan;
  // A name imported under an alias (`from transformer_engine.pytorch import fp8_autocast as fa`) is classified by
  // what it imports.
  const dot = callee.lastIndexOf('.');
  const target = dot < 0 ? imports.map.get(callee) : undefined;
  if (!mayMatter(callee) && !(target && mayMatter(target))) return undefined;
  const node = rec.node;
  const last = target ? target.slice(target.lastIndexOf('.') + 1) : dot < 0 ? callee : callee.slice(dot + 1);
  const receiver = dot < 0 ? undefined : callee.slice(0, dot);
  const push = (kind: NotableCall['kind'], args?: Arg[]): NotableCall => {
    const a = args ?? argsOf(src, node);
    const { args: rec2, spans } = kwRecord(a);
    const nc: NotableCall = {
      span: spanOf(node), kind, callee, text: shortText(src.slice(node.startIndex, node.endIndex)), args: rec2, argSpans: spans,
    };
    if (receiver) nc.receiver = receiver;
    if (rec.scope.fn) { nc.ownerFunction = rec.scope.fn.name; nc.ownerSpan = spanOf(rec.scope.fn.node); }
    facts.calls.push(nc);
    return nc;
  };
  return { rec, callee, last, receiver, push };
}

/** Calls known by their last name alone (backward, load_state_dict, casts, from_pretrained, step, compile); true if handled. */
function namedCallFact(scan: CallScan, site: CallSite): boolean {
  const { src, imports, facts, optimizerVars } = scan;
  const { rec, callee, receiver, push } = site;
  const node = rec.node;
  // Cheap filter on the last name before resolving anything.
  switch (site.last) {
    case 'backward':
      push('backward');
      return true;
    case 'load_state_dict':
      // A module's load_state_dict: not an optimizer's, a scheduler's or a scaler's, and not a module-level function
      // (`torch.distributed.checkpoint.load_state_dict`, transformers' `load_state_dict(path)`).
      if (receiver && !/optim|sched|scaler|^dcp$|checkpoint|distributed|lr_|^opt$|\.opt$/i.test(receiver) && !imports.map.has(receiver.split('.')[0])
        && !optimizerVars.has(receiver) && scan.isModuleAt(receiver, rec)) push('load_state_dict');
      return true;
    case 'half':
    case 'bfloat16':
      if (receiver && isModuleReceiver(receiver)) push('cast_low_precision');
      return true;
    case 'from_config':
    case 'from_pretrained': {
      // `AutoModelForCausalLM.from_pretrained(..., torch_dtype=torch.bfloat16)`: the weights load in 16-bit.
      const open = src.indexOf('(', rec.start + callee.length);
      const argText = open < 0 ? '' : src.slice(open, closeParen(src, open));
      if (/\bload_in_(4|8)bit\s*=\s*True|\bquantization_config\s*=/.test(argText)) facts.quantization.push({ span: spanOf(node), callee: `${callee}(quantized)` });
      const dtype = /\b(torch_dtype|dtype)\s*=\s*(torch\s*\.\s*)?["']?(bfloat16|float16|half|bf16|fp16)\b["']?/.exec(argText);
      if (dtype && receiver && !/Tokenizer|Processor|Config|FeatureExtractor|Scheduler|Pipeline/.test(receiver)) {
        push('cast_low_precision').text = `${callee}(..., ${dtype[0].replace(/\s+/g, '')})`;
      }
      return true;
    }
    case 'step': {
      if (!receiver || /sched|lr_|scheduler|warmup/i.test(receiver)) return true;
      if (/optim|^opt$|\.opt$|optimizer/i.test(receiver) || optimizerVars.has(receiver) || /scaler$/i.test(receiver)) push('optimizer_step');
      return true;
    }
    case 'scaled_dot_product_attention': {
      // torch's attention function (`F.`, `torch.nn.functional.`, imported bare); not a method of something else.
      const r = resolveName(imports, callee);
      if (r === 'torch.nn.functional.scaled_dot_product_attention' || r === 'torch._C._nn.scaled_dot_product_attention') push('attention');
      return true;
    }
    case 'checkpoint': {
      // torch's activation checkpoint (`torch.utils.checkpoint.checkpoint`, `checkpoint` imported from it, or the module
      // under another name); TE's own (`te.checkpoint`, `te.distributed.checkpoint`) and other libraries' are not it.
      if (resolveName(imports, callee) === 'torch.utils.checkpoint.checkpoint') push('checkpoint');
      return true;
    }
    case 'checkpoint_sequential':
      if (resolveName(imports, callee) === 'torch.utils.checkpoint.checkpoint_sequential') push('checkpoint');
      return true;
    case 'Float8LinearConfig': {
      // torchao's float8 training config asking for float8 all-gather (an FSDP2 feature).
      // Recorded, then left to the pattern checks as before (false).
      if (/^torchao\.float8\.(config\.)?Float8LinearConfig$/.test(resolveName(imports, callee))) {
        const nc = push('float8_allgather');
        if (nc.args.enable_fsdp_float8_all_gather !== 'True') facts.calls.pop();
      }
      return false;
    }
    case 'gradient_checkpointing_enable':
      // Hugging Face's switch: the model's layers then call torch.utils.checkpoint.checkpoint (through
      // _gradient_checkpointing_func) in their forward. A method of a model named plainly (`model.`, `self.model.`);
      // handed through fp8_gradient_checkpointing(model) first, the receiver is a call and this is not reached.
      if (receiver && /^[A-Za-z_][\w.]*$/.test(receiver)) push('checkpoint');
      return true;
    case 'precompute_float8_dynamic_scale_for_fsdp':
      // torchao's one all-reduce for every float8 weight's scale (PL703 asks for it after the optimizer step): the name
      // is torchao's alone, so any call of it counts, imported or reached through a module of the project.
      if (/(^|\.)precompute_float8_dynamic_scale_for_fsdp$/.test(resolveName(imports, callee))) push('float8_precompute');
      return true;
    case 'FSDP':
    case 'FullyShardedDataParallel':
      // FSDP1's wrapper class (FSDP2 is the function fully_shard); then the pattern checks as before (false).
      if (/^torch\.distributed\.fsdp\.(fully_sharded_data_parallel\.)?FullyShardedDataParallel$/.test(resolveName(imports, callee))) push('fsdp1');
      return false;
    case 'checkpoint_wrapper': {
      // torch's module wrapper (FSDP's activation checkpointing): torch's checkpoint unless checkpoint_fn is given.
      if (resolveName(imports, callee) !== TORCH_CHECKPOINT_WRAPPER) return true;
      const nc = push('checkpoint');
      if (mayGive(nc, 'checkpoint_fn', '$2')) facts.calls.pop();
      return true;
    }
    case 'partial': {
      // `partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)`: the wrapper as FSDP recipes hand it
      // to apply_activation_checkpointing (llama-recipes, accelerate), torch's checkpoint unless checkpoint_fn is given.
      if (resolveName(imports, callee) !== 'functools.partial') return true;
      const args = argsOf(src, node);
      if (args[0]?.name !== undefined || !args[0] || resolveName(imports, args[0].text) !== TORCH_CHECKPOINT_WRAPPER) return true;
      const nc = push('checkpoint', args);
      if (mayGive(nc, 'checkpoint_fn', '$3')) facts.calls.pop();
      return true;
    }
    case 'apply_activation_checkpointing': {
      // FSDP's helper wraps the chosen submodules with checkpoint_wrapper_fn, torch's checkpoint_wrapper by default;
      // another function given (a partial bound elsewhere) is judged where it is made.
      if (resolveName(imports, callee) !== `${TORCH_CHECKPOINT_WRAPPER_MODULE}.apply_activation_checkpointing`) return true;
      const nc = push('checkpoint');
      const fn = nc.args.checkpoint_wrapper_fn ?? nc.args.$1;
      const givenOther = fn !== undefined && resolveName(imports, fn) !== TORCH_CHECKPOINT_WRAPPER;
      if (givenOther || Object.values(nc.args).some((v) => v.startsWith('**'))) facts.calls.pop();
      return true;
    }
    case 'compile': {
      const r = resolveName(imports, callee);
      if (r === 'torch.compile' || (receiver && !imports.map.has(receiver.split('.')[0]) && receiver !== 're')) push('compile');
      else if (r.startsWith('torch.')) push('compile');
      return true;
    }
    default:
      return false;
  }
}

/** Calls known by a pattern of their name: dtype casts, FP8 checks, logging, recipes, optimizers, TE contexts, conversions. */
function patternCallFact(scan: CallScan, site: CallSite): void {
  const { src, imports, facts } = scan;
  const { rec, callee, last, receiver, push } = site;
  const node = rec.node;
  if (last === 'to' || last === 'type' || last === 'view' || last === 'copy_') {
    // The argument text, scanned from the source without touching the tree.
    const open = src.indexOf('(', rec.start + callee.length);
    const argText = open < 0 ? '' : src.slice(open, closeParen(src, open));
    if (FLOAT8.test(argText)) push('float8_cast');
    // A model cast, not a tensor's (`torch.randn(...).to(torch.bfloat16)`, `x.to(dtype)`): a plain name or attribute that
    // names a module.
    else if ((last === 'to' || last === 'type') && LOW.test(argText) && /torch\.|dtype|['"]/.test(argText) && receiver && isModuleReceiver(receiver)) push('cast_low_precision');
    return;
  }
  if (FP8_CHECK.test(last)) { push('fp8_check'); return; }
  if (LOG_CALLEE.test(callee)) {
    const open = src.indexOf('(', rec.start + callee.length);
    const t = open < 0 ? '' : src.slice(rec.start, closeParen(src, open));
    if (LOG_TEXT.test(t)) push('log_precision');
    return;
  }
  if (RECIPES.test(last)) {
    const { args, spans } = kwRecord(argsOf(src, node));
    // Positional arguments under their field names (the recipes are dataclasses: DelayedScaling(margin, fp8_format,
    // amax_history_len, amax_compute_algo), Float8CurrentScaling(fp8_format, ...)).
    const fields = RECIPE_FIELDS[last] ?? [];
    fields.forEach((f, k) => {
      if (args[`$${k}`] !== undefined && args[f] === undefined) { args[f] = args[`$${k}`]; spans[f] = spans[`$${k}`]; }
    });
    facts.recipes.push({ span: spanOf(node), recipe: last, args, argSpans: spans });
    return;
  }
  if (/^[A-Z]/.test(last) && OPTIMIZERS.test(last)) {
    const r = resolveName(imports, callee);
    if (!/lr_scheduler/.test(r)) {
      push('optimizer_ctor');
      const p = node.parent;
      if (p && p.type === 'assignment') {
        const l = p.childForFieldName('left');
        if (l) scan.optimizerVars.add(src.slice(l.startIndex, l.endIndex).replace(/\s+/g, ''));
      }
    }
    return;
  }
  if (CONTEXT_LAST.test(last)) {
    const r = resolveName(imports, callee);
    if (/^transformer_engine\./.test(r)) {
      const args = argsOf(src, node);
      if (teAutocastApi(r) === 'fp8_autocast' || /fp8_model_init$/.test(last) || args.some((a) => a.name === 'fp8_recipe' || a.name === 'fp8_group')) {
        push('te_deprecated', args);
      }
    }
    return;
  }
  if (CONVERSION.test(last)) {
    const conv = conversion(src, imports, node, last, callee, scan.fnByName);
    if (conv) facts.conversions.push(conv);
    else if (last === 'quantize_') facts.quantization.push({ span: spanOf(node), callee }); // torchao int4/int8 weights
    return;
  }
  if (QUANT_LAST.test(last)) facts.quantization.push({ span: spanOf(node), callee });
}

/** `@torch.compile` written as a bare decorator (nanoGPT style) is no call, but compiles the function all the same. */
function bareCompileDecorators(src: string, imports: ImportTable, facts: CallFacts): void {
  if (!src.includes('compile')) return;
  for (const m of src.matchAll(/^[ \t]*@[ \t]*((?:torch[ \t]*\.[ \t]*)?compile)[ \t]*(?:#[^\n]*)?$/gm)) {
    const callee = m[1].replace(/[ \t]/g, '');
    if (callee === 'compile' && imports.map.get('compile') !== 'torch.compile') continue;
    const at = (m.index ?? 0) + m[0].indexOf('@');
    facts.calls.push({ span: spanAt(at, at + m[0].trimEnd().length - m[0].indexOf('@')), kind: 'compile', callee, text: `@${callee}`, args: {} });
  }
}

const HEAD_IN_FILTER = /lm_head|output|\bhead\b|vocab|logits|decoder|embed|unembed|classifier|last/i;

function conversion(
  src: string, imports: ImportTable, node: SyntaxNode, last: string, callee: string, fnByName: Map<string, FuncRec>,
): Fp8ConversionCall | undefined {
  const args = argsOf(src, node);
  const resolved = resolveName(imports, callee);
  const filterArg = args.find((a) => a.name !== undefined && /^(module_filter_fn|filter_fn|filter_fqns|module_filter_func|skip_fqn_list|skip_modules|modules_to_not_convert|exclude_modules)$/.test(a.name));
  const conv: Fp8ConversionCall = { span: spanOf(node), callee, hasFilter: false, filterExcludesHead: false };
  if (last === 'fp8_for_compile') return { ...conv, hasFilter: true, filterText: 'its own lm-head and size rules', filterExcludesHead: true, fallback: true };
  if (last === 'Accelerator') {
    const mpArg = args.find((a) => a.name === 'mixed_precision');
    const handlers = args.find((a) => a.name === 'kwargs_handlers');
    // A name is read through its last assignment before the call (`mixed_precision = "fp8"`, `handlers = [...]`).
    const mp = mpArg ? { text: lastAssigned(src, mpArg.text, node.startIndex) ?? mpArg.text } : undefined;
    const ht = handlers ? lastAssigned(src, handlers.text, node.startIndex) ?? handlers.text : '';
    // FP8 by a literal, or by an FP8 recipe handler when the precision comes from a variable (TE's te_llama tutorial).
    if (!(mp && /fp8/i.test(mp.text)) && !(mp && !/^['"]/.test(mp.text.trim()) && /(FP8RecipeKwargs|TERecipeKwargs|AORecipeKwargs|MSAMPRecipeKwargs)/.test(ht))) return undefined;
    if (/AORecipeKwargs|backend\s*=\s*['"]ao['"]/i.test(ht)) {
      conv.hasFilter = true;
      conv.filterText = shortText(ht);
      // accelerate's torchao path skips the first and last Linear unless a filter replaces that rule.
      const m = /module_filter_func\s*=\s*([\w.]+)/.exec(ht);
      conv.filterExcludesHead = m ? filterMentionsHead(src, m[1], fnByName) : true;
    }
    return conv;
  }
  if (last === 'convert_model' && !/accelerate|transformer_engine/.test(resolved) && resolved === 'convert_model' && !imports.map.has('convert_model')) return undefined;
  if (last === 'quantize_') {
    const text = src.slice(node.startIndex, node.endIndex);
    // Inference quantization (PTQ) with a config of the catalogue is ptq.ts's: not a training conversion.
    if (!/float8|fp8|Float8/i.test(text) || PTQ_CONFIGS.some((c) => c.library === 'torchao' && text.includes(c.name))) return undefined;
  }
  if (filterArg) {
    conv.hasFilter = true;
    conv.filterText = shortText(filterArg.text);
    conv.filterExcludesHead = HEAD_IN_FILTER.test(filterArg.text) || (/^\w+$/.test(filterArg.text) && filterMentionsHead(src, filterArg.text, fnByName));
  }
  return conv;
}

/** The right side of the last `name = ...` (one line) before `before`, for a plain name; undefined otherwise. */
function lastAssigned(src: string, name: string, before: number): string | undefined {
  const n = name.trim();
  if (!/^[A-Za-z_]\w*$/.test(n)) return undefined;
  let last: RegExpMatchArray | undefined;
  for (const m of src.slice(0, before).matchAll(new RegExp(String.raw`(?:^|\n)[ \t]*${n}[ \t]*(?::[^=\n]+)?=(?!=)[ \t]*([^\n]+)`, 'g'))) last = m;
  if (!last) return undefined;
  const rhs = last[1].trim();
  // `handlers = (\n [FP8RecipeKwargs(...)] if ... else None\n)`: the bracketed value over several lines.
  if (/^[([]/.test(rhs)) {
    const at = (last.index ?? 0) + last[0].length - last[1].length + last[1].indexOf(rhs[0]);
    return src.slice(at, closeParen(src, at)).replace(/\s+/g, ' ');
  }
  return rhs;
}

function filterMentionsHead(src: string, name: string, fnByName: Map<string, FuncRec>, depth = 0): boolean {
  const short = name.split('.').pop() ?? name;
  const fn = fnByName.get(short);
  if (fn) return HEAD_IN_FILTER.test(src.slice(fn.start, fn.end).replace(/^def\s+\w+/, ''));
  if (depth > 2 || !/^[A-Za-z_]\w*$/.test(short)) return false;
  // A variable bound to the filter: `func = partial(filter_linear_layers, last_layer_name=last)` (accelerate),
  // `fn = lambda mod, fqn: fqn != "lm_head"`: its right side, and the function a partial wraps.
  for (const m of src.matchAll(new RegExp(String.raw`(?:^|\n)[ \t]*${short}[ \t]*=(?!=)[ \t]*([^\n]+)`, 'g'))) {
    const rhs = m[1];
    if (HEAD_IN_FILTER.test(rhs.replace(/^\s*(functools\s*\.\s*)?partial\s*\(\s*[\w.]+/, ''))) return true;
    const wrapped = /^\s*(?:functools\s*\.\s*)?partial\s*\(\s*([\w.]+)/.exec(rhs)?.[1];
    if (wrapped && filterMentionsHead(src, wrapped, fnByName, depth + 1)) return true;
  }
  return false;
}

/** `a.weight = b.weight` statements and `_tie_or_clone_weights(a, b)` calls. */
export function collectTies(src: string, assigns: AssignRec[], calls: CallRec[], callees: (string | undefined)[]): WeightTie[] {
  const ties: WeightTie[] = [];
  // Cheap text test before touching the tree: two `.weight` from the statement's start to the end of its line. The
  // line's `.weight` offsets are found once per line (assignments come in document order), not once per assignment:
  // searching the rest of the line for each was quadratic on many assignments on one line.
  let from = -1;
  let eol = -1;
  let weights: number[] = [];
  let next = 0;
  for (const a of assigns) {
    if (a.start < from || a.start > eol) {
      from = a.start;
      eol = src.indexOf('\n', a.start);
      if (eol < 0) eol = src.length;
      weights = [];
      next = 0;
      const line = src.slice(from, eol);
      for (let w = line.indexOf('.weight'); w >= 0; w = line.indexOf('.weight', w + 7)) weights.push(from + w);
    }
    while (next < weights.length && weights[next] < a.start) next++;
    if (weights.length - next < 2) continue;
    const left = leftOf(a);
    let right = rightOf(a);
    if (!left || !right || left.type !== 'attribute') continue;
    if (right.type === 'call') {
      // nn.Parameter(emb.weight)
      const f = right.childForFieldName('function');
      const ft = f ? src.slice(f.startIndex, f.endIndex) : '';
      if (!/(^|\.)Parameter$/.test(ft)) continue;
      const inner = right.childForFieldName('arguments')?.namedChild(0);
      if (!inner) continue;
      right = inner;
    }
    if (right.type !== 'attribute') continue;
    const l = src.slice(left.startIndex, left.endIndex).replace(/\s+/g, '');
    const r = src.slice(right.startIndex, right.endIndex).replace(/\s+/g, '');
    if (!/\.weight$/.test(l) || !/\.weight$/.test(r)) continue;
    const tie: WeightTie = {
      span: spanOf(a.node), text: shortText(src.slice(a.node.startIndex, a.node.endIndex)),
      left: l.replace(/^self\./, ''), right: r.replace(/^self\./, ''),
      leftLayer: l.replace(/^self\./, '').replace(/\.weight$/, ''), rightLayer: r.replace(/^self\./, '').replace(/\.weight$/, ''),
    };
    if (a.scope.cls && /^self\./.test(l) && /^self\./.test(r)) tie.ownerClass = a.scope.cls.name;
    ties.push(tie);
  }
  for (let i = 0; i < calls.length; i++) {
    const c = callees[i];
    if (!c || !/(^|\.)(_tie_or_clone_weights|tie_weights|_tie_embedding_weights|tie_embeddings)$/.test(c)) continue;
    const args = argListOf(calls[i])?.namedChildren.filter((x): x is SyntaxNode => !!x && x.type !== 'comment') ?? [];
    if (args.length < 2) continue;
    const l = src.slice(args[0].startIndex, args[0].endIndex).replace(/\s+/g, '').replace(/^self\./, '');
    const r = src.slice(args[1].startIndex, args[1].endIndex).replace(/\s+/g, '').replace(/^self\./, '');
    if (!/^[\w.]+$/.test(l) || !/^[\w.]+$/.test(r)) continue;
    ties.push({
      span: spanOf(calls[i].node), text: shortText(src.slice(calls[i].node.startIndex, calls[i].node.endIndex)),
      left: `${l}.weight`, right: `${r}.weight`, leftLayer: l, rightLayer: r,
    });
  }
  return ties;
}

/** `_tied_weights_keys = ["lm_head.weight"]` (list) or `{"lm_head.weight": "model.embed_tokens.weight"}` (dict). */
export function tiedKeys(src: string, classes: ClassRec[]): Map<string, string[]> {
  return classStringList(src, classes, '_tied_weights_keys');
}

/**
 * `_keep_in_fp32_modules = ["wo"]`: module names Hugging Face keeps in float32 whatever the model's dtype (matched
 * against the components of each module's dotted name), per class that lists them.
 */
export function keepFp32Modules(src: string, classes: ClassRec[]): Map<string, string[]> {
  return classStringList(src, classes, '_keep_in_fp32_modules');
}

/** String entries (list/tuple/set items or dict keys) of a class-body attribute, per class. */
function classStringList(src: string, classes: ClassRec[], attr: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const c of classes) {
    for (const a of c.bodyAssigns) {
      const left = leftOf(a);
      if (!left || left.endIndex - left.startIndex !== attr.length || src.slice(left.startIndex, left.endIndex) !== attr) continue;
      const right = rightOf(a);
      if (!right) continue;
      const keys: string[] = [];
      for (const k of right.namedChildren) {
        if (!k) continue;
        const node = k.type === 'pair' ? k.childForFieldName('key') : k;
        const v = node ? stringValue(src.slice(node.startIndex, node.endIndex)) : undefined;
        if (v) keys.push(v);
      }
      if (keys.length) out.set(c.name, keys);
    }
  }
  return out;
}
