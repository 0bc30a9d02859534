/**
 * Static evaluation of dimension expressions: literals, arithmetic, parameter defaults, local and module constants,
 * `self.x` set in __init__, and config dataclass / class-attribute defaults (`config.n_embd` -> GPTConfig.n_embd).
 * Values known only as defaults that callers may override still count as known; the notes say so.
 */
import type { SyntaxNode } from './node';
import type { Dim, DimSource, DimValue, ExternalDims, ExternalSites } from './ir';
import { ctorParams, paramsOf, type ClassModel } from './classes';
import { leftOf, rightOf, type AssignRec, type CallRec, type FuncRec } from './walk';
import { argparseDefaults, findPresets, postInitAssign, type Preset } from './dim-sources';

export interface EvalScope {
  fn?: FuncRec;
  cls?: ClassModel;
  /** Offset of the use: local assignments after it do not count. */
  pos: number;
  /** Parameter bindings from a call site (factories, local layer classes). */
  bind?: Map<string, Bound>;
}

export interface Bound {
  node: SyntaxNode;
  scope: EvalScope;
}

export interface Evaluated {
  value?: number | boolean;
  notes: string[];
  /** Expression texts the value passed through (`V` -> `config.vocab_size`), for name-based checks. */
  via: string[];
  /** Known only through a default that callers may override. */
  viaDefault?: boolean;
  /** Where the value came from (the strongest source among the parts of an expression). */
  source?: DimSource;
  /** Several possible values (construction sites that disagree, declared lists), each with its source. */
  values?: DimValue[];
  /** The value read a config field that the file's presets set: evaluate once per preset. */
  presets?: boolean;
}

/** Which source wins when an expression combines several (`config.n_embd * 4`: the preset's, not the literal's). */
const SOURCE_RANK: Record<DimSource['kind'], number> = {
  literal: 0, expression: 1, default: 2, 'config-default': 3, argparse: 4, 'config-file': 5, 'config-preset': 6, 'construction-site': 7, declared: 8,
};

function strongest(parts: Evaluated[]): DimSource | undefined {
  let best: DimSource | undefined;
  for (const p of parts) if (p.source && (!best || SOURCE_RANK[p.source.kind] > SOURCE_RANK[best.kind])) best = p.source;
  return best;
}

const MAX_VALUES = 16;

const CONFIG_OBJ = /^(self\.)?(config|cfg|conf|args|params|model_args|margs|hparams|hp|opt|opts|options|dims|settings|c|model_config|gpt_config|text_config|arch|spec|hps)$/;

/** Evaluation steps per analysis (a 20k-line model file takes about 1% of it). */
export const EVAL_STEP_BUDGET = 2_000_000;

export class Evaluator {
  private readonly moduleAssigns = new Map<string, AssignRec[]>();
  private readonly configClasses: ClassModel[];

  constructor(
    private readonly src: string,
    private readonly classes: Map<string, ClassModel>,
    moduleAssigns: AssignRec[],
    /** Construction sites of a local class, with the scope each one is evaluated in. */
    private readonly ctorSites: (cls: string) => { call: CallRec; scope: EvalScope }[],
    /** Sizes from outside the file (the user's declarations, config files beside the code), by name. */
    private readonly external: ExternalDims = {},
    /** Places other analysed files build a class of this file (literal arguments only), by class name. */
    private readonly externalSites: ExternalSites = {},
  ) {
    for (const a of moduleAssigns) {
      const left = leftOf(a);
      if (left && left.type === 'identifier') {
        const name = src.slice(left.startIndex, left.endIndex);
        const list = this.moduleAssigns.get(name);
        if (list) list.push(a); else this.moduleAssigns.set(name, [a]);
      }
    }
    this.configClasses = [...classes.values()].filter((c) => c.fieldNodes.size > 0);
    this.presets = findPresets(src, moduleAssigns, classes);
    for (const p of this.presets) for (const f of p.fields.keys()) this.presetFields.add(f);
  }

  private readonly presets: Preset[];
  private readonly presetFields = new Set<string>();
  /** While evaluating for one preset: its fields stand for the config's. */
  private world: Preset | undefined;
  private argparse: Map<string, { value: number; flag: string; line: number }> | undefined;

  /** External sizes for a name: the user's declarations (`declared`) or the others (config files...). */
  private externalFor(keys: string[], declared: boolean): Evaluated | undefined {
    for (const k of keys) {
      const vs = this.external[k]?.filter((v) => (v.source.kind === 'declared') === declared);
      if (!vs?.length) continue;
      const distinct = uniqValues(vs);
      if (distinct.length === 1) return { value: distinct[0].value, notes: [`${k} = ${distinct[0].value} (${distinct[0].source.detail})`], via: [], source: distinct[0].source };
      return { notes: [`${k} is one of ${distinct.map((v) => v.value).join(', ')} (${distinct[0].source.detail})`], via: [], values: distinct, source: distinct[0].source };
    }
    return undefined;
  }

  /** `args.hidden` from `parser.add_argument("--hidden", type=int, default=1024)` in this file. */
  private argparseDefault(field: string): Evaluated | undefined {
    this.argparse ??= argparseDefaults(this.src);
    const a = this.argparse.get(field);
    if (!a) return undefined;
    return { value: a.value, notes: [`${a.flag} defaults to ${a.value} (argparse)`], via: [], viaDefault: true, source: { kind: 'argparse', detail: `${a.flag} default` } };
  }

  private readonly assignIndex = new Map<FuncRec, Map<string, AssignRec[]>>();

  /** Assignments in a function to a name or `self.x` with a right side, in document order (indexed once per function). */
  private assignsTo(fn: FuncRec, target: string): AssignRec[] {
    let idx = this.assignIndex.get(fn);
    if (!idx) {
      idx = new Map();
      for (const a of fn.assigns) {
        const left = leftOf(a);
        const type = left?.type;
        if (!left || (type !== 'identifier' && type !== 'attribute')) continue;
        if (!rightOf(a)) continue;
        const key = this.text(left).replace(/\s+/g, '');
        const list = idx.get(key);
        if (list) list.push(a); else idx.set(key, [a]);
      }
      this.assignIndex.set(fn, idx);
    }
    return idx.get(target) ?? [];
  }

  private text(n: SyntaxNode): string {
    return this.src.slice(n.startIndex, n.endIndex);
  }

  /** The source the evaluator reads. */
  source(): string {
    return this.src;
  }

  /** Evaluates an argument into a Dim (integer values only). */
  dim(node: SyntaxNode, scope: EvalScope): Dim {
    return this.dimAndEval(node, scope).dim;
  }

  /** The Dim and the evaluation it came from (whose `via` tells what names the value passed through). */
  private readonly dimCache = new Map<FuncRec | ClassModel | undefined, Map<string, { dim: Dim; e: Evaluated }>>();

  dimAndEval(node: SyntaxNode, scope: EvalScope): { dim: Dim; e: Evaluated } {
    const r = this.dimAndEvalCached(node, scope);
    if (!r.e.presets || this.world || !this.presets.length) return r;
    return this.perPreset(node, scope, r);
  }

  /** A size that reads preset fields, evaluated once per preset (each preset is one configuration: n_embd and n_head
   *  of the same preset go together). */
  private perPreset(node: SyntaxNode, scope: EvalScope, base: { dim: Dim; e: Evaluated }): { dim: Dim; e: Evaluated } {
    const values: DimValue[] = [];
    for (const p of this.presets.slice(0, MAX_VALUES)) {
      this.world = p;
      try {
        const e = this.eval(node, scope, 0);
        if (typeof e.value === 'number' && Number.isInteger(e.value) && e.value > 0) values.push({ value: e.value, source: { kind: 'config-preset', detail: `preset ${p.label}` } });
      } finally {
        this.world = undefined;
      }
    }
    if (!values.length) return base;
    const dim: Dim = { text: base.dim.text };
    const distinct = uniqValues(values);
    if (distinct.length === 1) {
      dim.value = distinct[0].value;
      dim.source = { kind: 'config-preset', detail: `every preset (${values.length})` };
      dim.note = `${dim.text} = ${dim.value} in every preset of this file`;
    } else {
      dim.values = values;
      dim.source = { kind: 'config-preset', detail: `${values.length} presets` };
      dim.note = `${dim.text} is ${distinct.map((v) => v.value).join(', ')} across the presets of this file`;
    }
    return { dim, e: { ...base.e, value: dim.value } };
  }

  private dimAndEvalCached(node: SyntaxNode, scope: EvalScope): { dim: Dim; e: Evaluated } {
    const raw = this.text(node);
    // The same expression in the same function means the same value unless a local is reassigned in between:
    // cache only expressions without bare local names (literals, config.x, self.x, arithmetic on those).
    const cacheable = !scope.bind && !/(^|[^.\w])(?!self\b|config\b|args\b|cfg\b|params\b)[A-Za-z_]\w*(?![\w.]*\s*\()(?=\s*($|[^\w.(]))/.test(raw);
    const owner = scope.fn ?? scope.cls;
    if (cacheable) {
      const hit = this.dimCache.get(owner)?.get(raw);
      if (hit) return { dim: { ...hit.dim }, e: { ...hit.e, notes: [...hit.e.notes], via: [...hit.e.via] } };
    }
    const r = this.dimAndEvalUncached(node, raw, scope);
    if (cacheable) {
      let m = this.dimCache.get(owner);
      if (!m) { m = new Map(); this.dimCache.set(owner, m); }
      m.set(raw, { dim: { ...r.dim }, e: { ...r.e, notes: [...r.e.notes], via: [...r.e.via] } });
    }
    return r;
  }

  private dimAndEvalUncached(node: SyntaxNode, raw: string, scope: EvalScope): { dim: Dim; e: Evaluated } {
    const text = raw.replace(/\s+/g, ' ');
    const e = this.eval(node, scope, 0);
    const d: Dim = { text };
    if (e.values?.length) {
      d.values = e.values;
      d.source = e.source;
      d.note = `${text} is ${uniqValues(e.values).map((v) => v.value).join(', ')} (${e.source?.detail ?? 'several sources'})`;
    } else if (typeof e.value === 'number' && Number.isInteger(e.value) && e.value > 0) {
      d.value = e.value;
      const isLiteral = node.type === 'integer';
      d.source = isLiteral ? { kind: 'literal', detail: text } : e.source ?? { kind: e.viaDefault ? 'default' : 'expression', detail: text };
      if (!isLiteral) {
        const notes = [...e.notes];
        if (e.viaDefault) notes.push('a default: callers may pass another value');
        d.note = notes.length ? uniq(notes).join('; ') : `${text} = ${e.value}`;
      }
    } else {
      const notes = e.notes.filter((n) => /not known|unknown|set by|depends|__post_init__/.test(n));
      d.note = notes.length ? uniq(notes).join('; ') : `depends on ${text}, unknown statically`;
    }
    return { dim: d, e };
  }

  /**
   * Evaluation steps left for this analysis. Each parameter is evaluated once (paramCache, inProgress), so this is
   * only reached on inputs far beyond real code; the analysis then says it is incomplete (exhausted).
   */
  private stepsLeft = EVAL_STEP_BUDGET;
  get exhausted(): boolean {
    return this.stepsLeft <= 0;
  }

  eval(node: SyntaxNode, scope: EvalScope, depth: number): Evaluated {
    if (depth > 24) return { notes: ['too deep to evaluate'], via: [] };
    if (--this.stepsLeft < 0) return { notes: ['not evaluated: the analysis reached its work budget'], via: [] };
    switch (node.type) {
      case 'integer': {
        const t = this.text(node).replace(/_/g, '').replace(/[lL]$/, '');
        const v = /^0[xX]/.test(t) ? parseInt(t, 16) : /^0[oO]/.test(t) ? parseInt(t.slice(2), 8) : /^0[bB]/.test(t) ? parseInt(t.slice(2), 2) : Number(t);
        return { value: Number.isFinite(v) ? v : undefined, notes: [], via: [] };
      }
      case 'float': {
        const v = Number(this.text(node).replace(/_/g, ''));
        return { value: Number.isFinite(v) ? v : undefined, notes: [], via: [] };
      }
      case 'true': return { value: true, notes: [], via: [] };
      case 'false': return { value: false, notes: [], via: [] };
      case 'parenthesized_expression': {
        const inner = node.namedChild(0);
        return inner ? this.eval(inner, scope, depth + 1) : { notes: [], via: [] };
      }
      case 'unary_operator': {
        const arg = node.childForFieldName('argument');
        const op = node.child(0)?.type;
        if (!arg) return { notes: [], via: [] };
        const e = this.eval(arg, scope, depth + 1);
        if (typeof e.value === 'number') e.value = op === '-' ? -e.value : op === '~' ? ~e.value : e.value;
        return e;
      }
      case 'binary_operator': return this.binary(node, scope, depth);
      case 'call': return this.call(node, scope, depth);
      case 'identifier': return this.identifier(node, scope, depth);
      case 'attribute': return this.attribute(node, scope, depth);
      case 'conditional_expression': {
        const a = node.namedChild(0);
        const b = node.namedChild(2);
        if (a && b) {
          const ea = this.eval(a, scope, depth + 1);
          const eb = this.eval(b, scope, depth + 1);
          if (ea.value !== undefined && ea.value === eb.value) return merge(ea.value, [ea, eb]);
        }
        return { notes: [`${shortExpr(this.text(node))} depends on a condition, unknown statically`], via: [] };
      }
      default:
        return { notes: [], via: [] };
    }
  }

  private binary(node: SyntaxNode, scope: EvalScope, depth: number): Evaluated {
    const l = node.childForFieldName('left');
    const r = node.childForFieldName('right');
    const op = node.childForFieldName('operator');
    if (!l || !r || !op) return { notes: [], via: [] };
    const a = this.eval(l, scope, depth + 1);
    const b = this.eval(r, scope, depth + 1);
    const parts = [a, b];
    if (a.values || b.values) return this.binaryValues(op.type, a, b);
    if (typeof a.value !== 'number' || typeof b.value !== 'number') {
      return { notes: [...a.notes, ...b.notes], via: [...a.via, ...b.via], presets: a.presets || b.presets };
    }
    return merge(arith(op.type, a.value, b.value), parts);
  }

  /** Arithmetic on several possible values (one side a list, the other one value or a list): each combination. */
  private binaryValues(op: string, a: Evaluated, b: Evaluated): Evaluated {
    const side = (e: Evaluated): DimValue[] | undefined => e.values ?? (typeof e.value === 'number' ? [{ value: e.value, source: e.source ?? { kind: 'literal', detail: String(e.value) } }] : undefined);
    const xs = side(a);
    const ys = side(b);
    if (!xs || !ys) return { notes: [...a.notes, ...b.notes], via: [...a.via, ...b.via] };
    const out: DimValue[] = [];
    for (const x of xs) for (const y of ys) {
      const v = arith(op, x.value, y.value);
      if (typeof v === 'number' && out.length < MAX_VALUES) out.push({ value: v, source: SOURCE_RANK[x.source.kind] >= SOURCE_RANK[y.source.kind] ? x.source : y.source });
    }
    return { notes: uniq([...a.notes, ...b.notes]), via: [...a.via, ...b.via], values: out, source: strongest([a, b]) };
  }

  private call(node: SyntaxNode, scope: EvalScope, depth: number): Evaluated {
    const f = node.childForFieldName('function');
    const args = node.childForFieldName('arguments');
    if (!f || !args) return { notes: [], via: [] };
    const name = this.text(f);
    const pos = args.namedChildren.filter((a): a is SyntaxNode => !!a && a.type !== 'keyword_argument' && a.type !== 'comment');
    if (/^(int|round|math\.floor|math\.ceil|abs|max|min|math\.trunc)$/.test(name) && pos.length) {
      const vals = pos.map((p) => this.eval(p, scope, depth + 1));
      if (vals.some((v) => typeof v.value !== 'number')) return { notes: vals.flatMap((v) => v.notes), via: vals.flatMap((v) => v.via) };
      const ns = vals.map((v) => v.value as number);
      let v: number;
      switch (name) {
        case 'int': case 'math.trunc': v = Math.trunc(ns[0]); break;
        case 'round': v = Math.round(ns[0]); break;
        case 'math.floor': v = Math.floor(ns[0]); break;
        case 'math.ceil': v = Math.ceil(ns[0]); break;
        case 'abs': v = Math.abs(ns[0]); break;
        case 'max': v = Math.max(...ns); break;
        default: v = Math.min(...ns);
      }
      return merge(v, vals);
    }
    if (name === 'getattr' && pos.length >= 2) {
      const attrText = this.text(pos[1]).replace(/^['"]|['"]$/g, '');
      const objText = this.text(pos[0]);
      if (/^\w+$/.test(attrText)) {
        const viaCfg = this.configField(objText, attrText, scope, depth);
        if (viaCfg) return viaCfg;
      }
      if (pos.length >= 3) {
        const d = this.eval(pos[2], scope, depth + 1);
        if (d.value !== undefined) d.notes.push(`getattr default of ${objText}.${attrText}`);
        return d;
      }
    }
    return { notes: [], via: [] };
  }

  private identifier(node: SyntaxNode, scope: EvalScope, depth: number): Evaluated {
    const name = this.text(node);
    const bound = scope.bind?.get(name);
    if (bound) {
      const e = this.eval(bound.node, bound.scope, depth + 1);
      e.via.push(this.text(bound.node));
      return e;
    }
    // Local assignments in this function and enclosing ones, the last one before the use.
    for (let fn = scope.fn, pos = scope.pos; fn; pos = fn.start, fn = fn.scope.fn) {
      let best: AssignRec | undefined;
      for (const a of this.assignsTo(fn, name)) {
        if (a.start >= pos) break;
        best = a;
      }
      if (best) {
        const right = rightOf(best) as SyntaxNode;
        const e = this.eval(right, { ...scope, fn, pos: best.start, bind: fn === scope.fn ? scope.bind : undefined }, depth + 1);
        e.via.push(this.text(right));
        return e;
      }
      const param = paramsOf(this.src, fn).find((p) => p.name === name);
      if (param) return this.param(fn, param.name, param.def, scope, depth);
    }
    const mod = this.moduleAssigns.get(name);
    if (mod && mod.length) {
      const a = [...mod].reverse().find((m) => m.start < scope.pos) ?? mod[mod.length - 1];
      const right = rightOf(a);
      if (right) {
        const e = this.eval(right, { pos: a.start }, depth + 1);
        e.via.push(this.text(right));
        if (e.value !== undefined && right.type !== 'integer') e.notes.push(`${name} = ${shortExpr(this.text(right))}`);
        return e;
      }
    }
    return this.externalFor([name], true) ?? this.externalFor([name], false) ?? { notes: [`${name} is not known statically`], via: [] };
  }

  /** A function parameter: the class's single construction site, or the default. */
  private readonly paramCache = new Map<FuncRec, Map<string, Evaluated>>();
  /** Parameters being evaluated: a class built inside its own __init__ with its own parameters (or broken code that
   * reads so) would otherwise re-evaluate them at every site, recursively (time and memory exponential in the sites). */
  private readonly inProgress = new Map<FuncRec, Set<string>>();

  private param(fn: FuncRec, name: string, def: SyntaxNode | undefined, scope: EvalScope, depth: number): Evaluated {
    // A parameter's value does not depend on where in the function it is read: cache it.
    if (this.world) return this.paramUncached(fn, name, def, scope, depth);
    let perFn = this.paramCache.get(fn);
    const hit = perFn?.get(name);
    if (hit) return { ...hit, notes: [...hit.notes], via: [...hit.via] };
    let busy = this.inProgress.get(fn);
    if (busy?.has(name)) return { notes: [`${name} depends on itself (where ${fn.cls?.name ?? fn.name} is built)`], via: [] };
    if (!busy) this.inProgress.set(fn, (busy = new Set()));
    busy.add(name);
    let e: Evaluated;
    try {
      e = this.paramUncached(fn, name, def, scope, depth);
    } finally {
      busy.delete(name);
    }
    if (!perFn) { perFn = new Map(); this.paramCache.set(fn, perFn); }
    perFn.set(name, { ...e, notes: [...e.notes], via: [...e.via] });
    return e;
  }

  private paramUncached(fn: FuncRec, name: string, def: SyntaxNode | undefined, scope: EvalScope, depth: number): Evaluated {
    const declared = this.externalFor([name], true);
    if (declared) return declared;
    const sited = this.fromSites(fn, name, def, depth) ?? this.fromOtherFiles(fn, name, def, depth);
    if (sited) return sited;
    if (def) {
      const e = this.eval(def, { pos: fn.start }, depth + 1);
      if (e.value !== undefined) {
        e.notes.push(`default of parameter ${name} (${shortExpr(this.text(def))})`);
        e.viaDefault = true;
        e.source ??= { kind: 'default', detail: `default of parameter ${name}` };
      }
      e.via.push(this.text(def));
      return e;
    }
    const owner = fn.cls ? `${fn.cls.name}.${fn.name}` : fn.name;
    return this.externalFor([name], false) ?? { notes: [`${name} is a parameter of ${owner}, set by the caller`], via: [] };
  }

  /** An __init__ parameter from the places the class is built in this file (undefined: none, or nothing said). */
  private fromSites(fn: FuncRec, name: string, def: SyntaxNode | undefined, depth: number): Evaluated | undefined {
    if (fn.name === '__init__' && fn.cls && depth < 16) {
      const sites = this.ctorSites(fn.cls.name);
      if (sites.length) {
        const params = ctorParams(this.src, fn);
        const idx = params.findIndex((p) => p.name === name);
        const results: Evaluated[] = [];
        let passed = 0;
        for (const s of sites.slice(0, 8)) {
          const arg = argFor(this.src, s.call.node, name, idx);
          if (!arg) {
            const d = def ? this.eval(def, { pos: fn.start }, depth + 1) : { notes: [], via: [] };
            if (def) d.viaDefault = true;
            results.push(d);
            continue;
          }
          passed++;
          const e = this.eval(arg, s.scope, depth + 1);
          e.via.push(this.text(arg));
          results.push(e);
        }
        const first = results[0];
        // Position-free (memoised records survive edits above): the function the site is in.
        const siteSource = (i: number): DimSource => ({ kind: 'construction-site', detail: `${fn.cls!.name}(...) in ${sites[i].scope.fn ? `${sites[i].scope.fn!.name}()` : 'the module'}` });
        if (passed > 0 && results.every((r) => typeof r.value === 'number' || r.values) && results.some((r) => r.value !== first.value)) {
          // The sites disagree, each with a known size: every one is a possible value.
          const values: DimValue[] = results.flatMap((r, i) => (r.values ?? [{ value: r.value as number, source: r.viaDefault ? { kind: 'default' as const, detail: `default of parameter ${name}` } : siteSource(i) }]));
          return { notes: [`${name} differs between the places ${fn.cls.name} is built`], via: results.flatMap((r) => r.via), values: values.slice(0, MAX_VALUES), source: siteSource(0) };
        }
        if (first && first.value !== undefined && results.every((r) => r.value === first.value)) {
          const notes = uniq(results.flatMap((r) => r.notes));
          const n = Math.min(sites.length, 8);
          notes.push(passed === 0
            ? `${name} left at its default where ${fn.cls.name} is built`
            : n === 1 ? `${name} as passed where ${fn.cls.name} is built` : passed === n ? `${name} as passed at all ${n} places ${fn.cls.name} is built` : `${name} the same at all ${n} places ${fn.cls.name} is built (passed at ${passed}, the default elsewhere)`);
          const source = passed > 0 ? (first.source && SOURCE_RANK[first.source.kind] >= SOURCE_RANK['construction-site'] ? first.source : siteSource(0)) : first.source;
          return { value: first.value, notes, via: results.flatMap((r) => r.via), viaDefault: results.some((r) => r.viaDefault), source, presets: results.some((r) => r.presets) };
        }
        // A caller passes a value not known statically (or the callers disagree): the default says nothing then.
        if (results.length && (passed > 0 || !def) && (results.some((r) => r.value === undefined) || results.some((r) => r.value !== first?.value))) {
          const ext = this.externalFor([name], false);
          return ext ?? { notes: uniq(results.flatMap((r) => r.notes)).concat(`${name} is set by the caller of ${fn.cls.name}`), via: results.flatMap((r) => r.via), presets: results.some((r) => r.presets) };
        }
      }
    }
    return undefined;
  }

  /**
   * An __init__ parameter from the places other analysed files build the class (used when this file builds it
   * nowhere): every site passes a literal or leaves the default, and the value holds for all of them or each is a
   * possible value with its `file:line`. A site passing something not literal says nothing about the size.
   */
  private fromOtherFiles(fn: FuncRec, name: string, def: SyntaxNode | undefined, depth: number): Evaluated | undefined {
    const cls = fn.cls?.name;
    const sites = fn.name === '__init__' && cls ? this.externalSites[cls]?.slice(0, MAX_VALUES) : undefined;
    if (!sites?.length || !cls) return undefined;
    const idx = ctorParams(this.src, fn).findIndex((p) => p.name === name);
    const values: DimValue[] = [];
    let dflt: Evaluated | undefined;
    for (const site of sites) {
      const passed = name in site.keywords ? site.keywords[name] : idx >= 0 && idx < site.positional.length ? site.positional[idx] : undefined;
      if (passed === null || (passed === undefined && (site.splat || !def))) {
        return this.externalFor([name], false) ?? { notes: [`${name} is set by the caller of ${cls} at ${site.at} (not a literal)`], via: [] };
      }
      if (passed !== undefined) {
        values.push({ value: passed, source: { kind: 'construction-site', detail: `${cls}(${name}=${passed}) at ${site.at}` } });
        continue;
      }
      dflt ??= this.eval(def!, { pos: fn.start }, depth + 1);
      if (typeof dflt.value !== 'number') return undefined;
      values.push({ value: dflt.value, source: { kind: 'default', detail: `default of parameter ${name} (${cls} built at ${site.at})` } });
    }
    if (!values.some((v) => v.source.kind === 'construction-site')) return undefined;
    const distinct = uniqValues(values);
    const source = values.find((v) => v.source.kind === 'construction-site')!.source;
    if (distinct.length === 1) {
      const at = sites[values.indexOf(values.find((v) => v.source === source)!)].at;
      const more = values.length > 1 ? ` and ${values.length - 1} other place${values.length > 2 ? 's' : ''}` : '';
      return { value: distinct[0].value, notes: [`${name} as passed where ${cls} is built at ${at}${more}`], via: [], source };
    }
    return { notes: [`${name} differs between the places other files build ${cls}`], via: [], values: distinct, source };
  }

  private attribute(node: SyntaxNode, scope: EvalScope, depth: number): Evaluated {
    const text = this.text(node).replace(/\s+/g, '');
    const obj = node.childForFieldName('object');
    const attr = node.childForFieldName('attribute');
    if (!obj || !attr) return { notes: [], via: [] };
    const attrName = this.text(attr);
    const objText = this.text(obj).replace(/\s+/g, '');
    if (objText === 'self' && scope.cls) {
      const e = this.selfAttr(scope.cls, attrName, scope, depth, new Set());
      if (e) return e;
      return { notes: [`${text} is not known statically`], via: [] };
    }
    const viaCfg = this.configField(objText, attrName, scope, depth);
    if (viaCfg) return viaCfg;
    return { notes: [`${text} is not known statically`], via: [] };
  }

  private selfAttr(cls: ClassModel, attrName: string, scope: EvalScope, depth: number, seen: Set<string>): Evaluated | undefined {
    if (seen.has(cls.info.name)) return undefined;
    seen.add(cls.info.name);
    if (this.inPostInit === cls || (this.world && cls.fieldNodes.has(attrName))) {
      // In __post_init__ (or for one preset) `self.x` of a config class is the field's value in that configuration.
      return this.configFieldOf([cls], 'self', attrName, depth);
    }
    const methods = cls.init ? [cls.init, ...cls.rec.methods.filter((m) => m !== cls.init)] : cls.rec.methods;
    for (const m of methods) {
      let best: AssignRec | undefined;
      for (const a of this.assignsTo(m, `self.${attrName}`)) {
        if (m === scope.fn && a.start >= scope.pos) break;
        best = a;
      }
      if (best) {
        const right = rightOf(best);
        if (!right) continue;
        const e = this.eval(right, { fn: m, cls, pos: best.start, bind: m === scope.fn ? scope.bind : undefined }, depth + 1);
        e.via.push(this.text(right));
        return e;
      }
    }
    const field = cls.postInit?.has(attrName) ? undefined : cls.fieldNodes.get(attrName);
    if (field) {
      const e = this.eval(field, { pos: cls.rec.start }, depth + 1);
      e.via.push(this.text(field));
      if (e.value !== undefined) e.notes.push(`${cls.info.name}.${attrName} = ${shortExpr(this.text(field))}`);
      return e;
    }
    for (const rb of cls.info.resolvedBases) {
      if (!rb.startsWith('local:')) continue;
      const base = this.classes.get(rb.slice(6));
      if (base) {
        const e = this.selfAttr(base, attrName, scope, depth, seen);
        if (e) return e;
      }
    }
    return undefined;
  }

  /** `config.n_embd`: the annotated config class of that parameter, or the config classes of the file. */
  private configField(objText: string, field: string, scope: EvalScope, depth: number): Evaluated | undefined {
    const objName = objText.replace(/^self\./, '');
    const declared = this.externalFor([`${objName}.${field}`, field], true);
    if (declared) return declared;
    const r = this.configFieldInFile(objText, objName, field, scope, depth);
    if (r && (r.value !== undefined || r.values)) return r;
    if (!r && !CONFIG_OBJ.test(objText) && !/config|args|cfg|params|dims|hparams/i.test(objName)) return undefined;
    // Not known in the file's config classes: a config file beside the code, then an argparse default.
    const outside = this.externalFor([`${objName}.${field}`, field], false) ?? this.argparseDefault(field);
    if (!outside) return r;
    if (r?.notes.length) outside.notes.push(...r.notes.filter((n) => /__post_init__/.test(n)));
    return outside;
  }

  private configFieldInFile(objText: string, objName: string, field: string, scope: EvalScope, depth: number): Evaluated | undefined {
    const inWorld = this.worldField(field, depth);
    if (inWorld) return inWorld;
    let candidates: ClassModel[] = [];
    // An annotated parameter (`config: GPTConfig`) names its class.
    for (let fn = scope.fn; fn; fn = fn.scope.fn) {
      const p = paramsOf(this.src, fn).find((q) => q.name === objName);
      if (p?.annotation) {
        const ann = p.annotation.replace(/["'\s]/g, '').replace(/^Optional\[(.*)\]$/, '$1');
        const c = this.classes.get(ann);
        if (c) candidates = [c];
        else return { notes: [`${objText}.${field} comes from ${ann}, not defined in this file`], via: [], presets: this.presetFields.has(field) };
      }
      if (p) break;
    }
    let cacheKey: string;
    if (!candidates.length) {
      if (!CONFIG_OBJ.test(objText) && !/config|args|cfg|params|dims|hparams/i.test(objName)) return undefined;
      candidates = this.configClasses.filter((c) => c.fieldNodes.has(field));
      const cfg = candidates.filter((c) => c.isConfig);
      if (cfg.length) candidates = cfg;
      cacheKey = `*.${field}`;
    } else cacheKey = `${candidates[0].info.name}.${field}`;
    if (this.world) cacheKey += `\u0001${this.world.label}\u0001${this.world.line}`;
    const cached = this.configCache.get(cacheKey);
    if (cached) return { ...cached, notes: [...cached.notes], via: [...cached.via] };
    const r = this.configFieldOf(candidates, objText, field, depth);
    if (this.presetFields.has(field)) r.presets = true;
    this.configCache.set(cacheKey, { ...r, notes: [...r.notes], via: [...r.via] });
    return r;
  }

  private readonly configCache = new Map<string, Evaluated>();
  /** While evaluating a plain __post_init__ assignment: `self.x` there reads the field's default (or preset). */
  private inPostInit: ClassModel | undefined;

  /** A config field that __post_init__ sets: known when the assignment is plain arithmetic (dim-sources.ts). */
  private postInitField(c: ClassModel, field: string, depth: number): Evaluated {
    const right = postInitAssign(this.src, c, field);
    const post = c.rec.methods.find((m) => m.name === '__post_init__');
    const unknown: Evaluated = { notes: [`${c.info.name}.${field} is computed in __post_init__ at run time`], via: [] };
    if (!right || !post || this.inPostInit) return unknown;
    this.inPostInit = c;
    try {
      const e = this.eval(right, { fn: post, cls: c, pos: post.end }, depth + 1);
      if (typeof e.value !== 'number') return { ...unknown, presets: e.presets };
      e.notes.push(`${c.info.name}.__post_init__ sets ${field} = ${shortExpr(this.text(right))}`);
      e.via.push(this.text(right));
      e.source ??= { kind: 'config-default', detail: `${c.info.name}.__post_init__` };
      e.viaDefault = true;
      return e;
    } finally {
      this.inPostInit = undefined;
    }
  }

  /** The field's value in the preset being evaluated, if it sets it. */
  private worldField(field: string, depth: number): Evaluated | undefined {
    const node = this.world?.fields.get(field);
    if (!node || !this.world) return undefined;
    const e = this.eval(node, { pos: node.startIndex }, depth + 1);
    e.via.push(this.text(node));
    e.presets = true;
    e.source = { kind: 'config-preset', detail: `preset ${this.world.label}` };
    return e;
  }

  private configFieldOf(candidates: ClassModel[], objText: string, field: string, depth: number): Evaluated {
    const inWorld = this.worldField(field, depth);
    if (inWorld) return inWorld;
    const withField = candidates.filter((c) => c.fieldNodes.has(field));
    if (!withField.length) return { notes: [`${objText}.${field} is not known statically`], via: [] };
    const post = withField.find((c) => c.postInit?.has(field) && this.inPostInit !== c);
    if (post) return this.postInitField(post, field, depth);
    const results = withField.map((c) => {
      const node = c.fieldNodes.get(field) as SyntaxNode;
      const e = this.eval(node, { pos: c.rec.start, cls: c }, depth + 1);
      e.via.push(this.text(node));
      return { c, e, node };
    });
    const first = results[0];
    if (first.e.value === undefined) {
      return { notes: [`${first.c.info.name}.${field} has no static default`], via: first.e.via };
    }
    if (!results.every((r) => r.e.value === first.e.value)) {
      return { notes: [`${objText}.${field} has different defaults in ${withField.map((c) => c.info.name).join(', ')}, unknown statically`], via: [] };
    }
    const valText = typeof first.e.value === 'boolean' ? (first.e.value ? 'True' : 'False') : String(first.e.value);
    return {
      value: first.e.value,
      notes: [...first.e.notes.filter((n) => !n.startsWith(`${first.c.info.name}.`)), `${first.c.info.name}.${field} default ${valText}`],
      via: first.e.via,
      viaDefault: true,
      source: first.e.source && SOURCE_RANK[first.e.source.kind] > SOURCE_RANK['config-default'] ? first.e.source : { kind: 'config-default', detail: `${first.c.info.name}.${field} default` },
      presets: first.e.presets,
    };
  }
}

/** The argument node bound to a parameter at a call site (keyword first, then position). */
export function argFor(src: string, call: SyntaxNode, name: string, index: number): SyntaxNode | undefined {
  const args = call.childForFieldName('arguments');
  if (!args) return undefined;
  let i = 0;
  let positional: SyntaxNode | undefined;
  for (const a of args.namedChildren) {
    if (!a || a.type === 'comment') continue;
    if (a.type === 'keyword_argument') {
      const n = a.childForFieldName('name');
      if (n && src.slice(n.startIndex, n.endIndex) === name) return a.childForFieldName('value') ?? undefined;
    } else if (a.type === 'list_splat' || a.type === 'dictionary_splat') {
      i = Number.POSITIVE_INFINITY;
    } else {
      if (i === index) positional = a;
      i++;
    }
  }
  return positional;
}

function merge(v: number | boolean | undefined, parts: Evaluated[]): Evaluated {
  const e: Evaluated = {
    value: v,
    notes: uniq(parts.flatMap((p) => p.notes)),
    via: parts.flatMap((p) => p.via),
    viaDefault: parts.some((p) => p.viaDefault),
  };
  const source = strongest(parts);
  if (source) e.source = source;
  if (parts.some((p) => p.presets)) e.presets = true;
  return e;
}

/** Python arithmetic on two numbers (undefined for a division by zero or an operator not evaluated). */
function arith(op: string, x: number, y: number): number | undefined {
  switch (op) {
    case '+': return x + y;
    case '-': return x - y;
    case '*': return x * y;
    case '/': return y === 0 ? undefined : x / y;
    case '//': return y === 0 ? undefined : Math.floor(x / y);
    case '%': return y === 0 ? undefined : ((x % y) + y) % y;
    case '**': return x ** y;
    case '<<': return x << y;
    case '>>': return x >> y;
    default: return undefined;
  }
}

/** The distinct values of a list, first source kept. */
function uniqValues(vs: DimValue[]): DimValue[] {
  const seen = new Map<number, DimValue>();
  for (const v of vs) if (!seen.has(v.value)) seen.set(v.value, v);
  return [...seen.values()];
}

function uniq(xs: string[]): string[] {
  return [...new Set(xs)];
}

function shortExpr(s: string): string {
  const t = s.replace(/\s+/g, ' ');
  return t.length > 60 ? `${t.slice(0, 57)}...` : t;
}
