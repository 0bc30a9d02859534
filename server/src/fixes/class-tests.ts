/**
 * Class tests converted with the layers: code that tests a layer's class (`isinstance(m, nn.Linear)` in weight init,
 * `whitelist_weight_modules = (torch.nn.Linear,)` in a minGPT-style configure_optimizers, `type(m) == nn.LayerNorm`)
 * would skip a layer once it is a te.* module. A conversion extends those tests with the te.* class (through the
 * fallback's stable name, TE_LINEAR, or te.Linear where the file imports TE itself), or is refused with the reason.
 */
import type { Layer, ModelIR } from '../analysis/ir';
import { wrapperRanges } from '../analysis/known';
import { escapeRegExp } from '../analysis/spans';
import { insert, replace, type TextEdit } from './edits';
import { statementAt, statementText, type SourceModel } from './source';

/** One class reference to extend: how the file writes the class, and the names of its te.* twins to add. */
export interface ClassRef {
  /** `nn.Linear`, `torch.nn.Linear`, `Linear`, a local `LayerNorm`. */
  text: string;
  /** `TE_LINEAR` or `te.Linear`; a fused Linear also `TE_LAYERNORM_LINEAR`. */
  teNames: readonly string[];
}

export interface ClassTestPlan {
  edits: TextEdit[];
  /** How many tests are extended (for the title, said once per file). */
  count: number;
  /** The te names the edits use. */
  names: string[];
  refusal?: string;
}

/** The ways the file can write the class a layer was built from (`torch.nn.Linear` through its imports, a local class). */
export function classRefsOf(ir: ModelIR, layer: Layer): string[] {
  const resolved = layer.resolved;
  if (resolved.startsWith('local:')) return [resolved.slice('local:'.length)];
  const out = new Set<string>();
  for (const b of ir.imports) {
    if (resolved === b.target) out.add(b.local);
    else if (resolved.startsWith(`${b.target}.`)) out.add(b.local + resolved.slice(b.target.length));
  }
  return [...out];
}

const IDENT_BEFORE = /[\w.]$/;

/** The offset of the bracket that encloses `at` within its statement, or -1. */
function enclosingOpen(text: string, from: number, at: number): number {
  let depth = 0;
  for (let i = at - 1; i >= from; i--) {
    const c = text[i];
    if (c === ')' || c === ']' || c === '}') depth++;
    else if (c === '(' || c === '[' || c === '{') {
      if (depth === 0) return i;
      depth--;
    }
  }
  return -1;
}

/** Whether `isinstance(` / `issubclass(` opens at `open` and `at` is its second argument. */
function isClassArgOf(text: string, open: number, at: number): boolean {
  if (!/\b(isinstance|issubclass)\s*$/.test(text.slice(Math.max(0, open - 20), open))) return false;
  let depth = 0;
  let commas = 0;
  for (let i = open + 1; i < at; i++) {
    const c = text[i];
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') depth--;
    else if (c === ',' && depth === 0) commas++;
  }
  return commas === 1;
}

/**
 * Extends every class test of `refs` in the file. A reference is extended where it is the class argument of
 * isinstance / issubclass, an element of a tuple or list literal (the classes minGPT groups parameters by), or the
 * right side of `type(m) ==` / `is` / `m.__class__ is`; a `case nn.Linear():` pattern cannot be extended and refuses.
 */
export function extendClassTests(text: string, model: SourceModel, refs: readonly ClassRef[]): ClassTestPlan {
  // Every conversion fix of a file asks for a plan (a fix title per finding): the scan over the references is done
  // once per text and set of references, not once per layer (5,000 layers had made `check --format json` quadratic).
  // Plans are kept per set, as findings of different classes (Linear, LayerNorm) alternate: with one plan kept, every
  // finding scanned the whole text again.
  const key = JSON.stringify(refs);
  if (!lastPlans || lastPlans.text !== text || lastPlans.model !== model) lastPlans = { text, model, plans: new Map() };
  let plan = lastPlans.plans.get(key);
  if (!plan) {
    plan = extendClassTestsUncached(text, model, refs);
    lastPlans.plans.set(key, plan);
  }
  return { ...plan, edits: plan.edits.map((e) => ({ ...e })), names: [...plan.names] };
}

let lastPlans: { text: string; model: SourceModel; plans: Map<string, ClassTestPlan> } | undefined;

function extendClassTestsUncached(text: string, model: SourceModel, refs: readonly ClassRef[]): ClassTestPlan {
  const edits: TextEdit[] = [];
  const names = new Set<string>();
  let count = 0;
  const own = wrapperRanges(text);
  for (const ref of refs) {
    const re = new RegExp(`${escapeRegExp(ref.text)}(?!\\w)`, 'g');
    for (const m of text.matchAll(re)) {
      const at = m.index!;
      const end = at + ref.text.length;
      if (IDENT_BEFORE.test(text.slice(Math.max(0, at - 1), at)) || text[end] === '.') continue;
      if (own.some(([a, b]) => at >= a && at < b)) continue;
      const stmt = statementAt(model, at);
      if (!stmt) continue;
      const lineStart = text.lastIndexOf('\n', at - 1) + 1;
      const before = text.slice(lineStart, at);
      if (before.includes('#') || /["']/.test(before.replace(/(["'])(?:(?!\1).)*\1/g, ''))) continue; // a comment or a string
      const s = statementText(model, stmt);
      if (/^(class|def|import|from)\s/.test(s)) continue;
      const called = /^\s*\(/.test(text.slice(end, end + 40));
      if (called && !/^case\s/.test(s)) continue; // a construction, not a test
      if (/^case\s/.test(s)) return { edits: [], count: 0, names: [], refusal: `line ${text.slice(0, at).split('\n').length} matches the class in a case pattern, which cannot list the te.* class; extend it by hand.` };
      const rest = text.slice(end, end + 80);
      const open = enclosingOpen(text, stmt.start, at);
      if (open >= 0) {
        const beforeOpen = text.slice(stmt.start, open).trimEnd();
        const isCall = /[\w)\]]$/.test(beforeOpen) && !/\b(in|is|not|and|or|return|yield|else|if|lambda)$/.test(beforeOpen);
        if (isCall && isClassArgOf(text, open, at)) {
          if (new RegExp(`^\\s*[,)]`).test(rest)) { edits.push(replace(at, end, `(${ref.text}, ${ref.teNames.join(', ')})`)); ref.teNames.forEach((n) => names.add(n)); count++; }
          continue;
        }
        if (isCall) continue; // an argument of some other call (a class handed to a helper): not a test
        // An element of a tuple or list literal: add the te.* class after it, once.
        if (!/^\s*[,)\]]/.test(rest)) continue;
        const literalEnd = text.indexOf(text[open] === '(' ? ')' : ']', end);
        // `cls = (nn.Linear)` is the class in parentheses, not a tuple: extending it would bind a tuple to cls.
        if (text[open] === '(' && literalEnd > 0 && !text.slice(open + 1, literalEnd).includes(',')) continue;
        // The names the literal lists already are not added again.
        const missing = ref.teNames.filter((n) => !(literalEnd > 0 && new RegExp(`\\b${escapeRegExp(n)}\\b`).test(text.slice(open, literalEnd))));
        if (!missing.length) continue;
        edits.push(insert(end, `, ${missing.join(', ')}`));
        missing.forEach((n) => names.add(n));
        count++;
        continue;
      }
      const cmp = /(\btype\s*\([^()]*\)|\.__class__)\s*(==|!=|is\s+not|is)\s*$/.exec(text.slice(stmt.start, at));
      if (cmp) {
        const opStart = stmt.start + cmp.index + cmp[1].length;
        const negated = cmp[2] === '!=' || /^is\s+not$/.test(cmp[2]);
        edits.push(replace(opStart, at, ` ${negated ? 'not in' : 'in'} `), replace(at, end, `(${ref.text}, ${ref.teNames.join(', ')})`));
        ref.teNames.forEach((n) => names.add(n));
        count++;
      }
    }
  }
  return { edits, count, names: [...names] };
}
