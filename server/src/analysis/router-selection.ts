/**
 * The MoE-router test's evidence: which projections of a class feed a discrete choice (`topk`, `gumbel_softmax`).
 * One scan of the class text collects every selection and every `name = self.<attr>(...)` assignment; each layer then
 * looks its attribute up. (Asking per layer with regular expressions built from its attribute rescanned the class for
 * every layer: layers x class size, 5 s for `check` on a 127 KB Mixtral mutant with thousands of layers.)
 *
 * What counts, per attribute, exactly as the per-layer expressions read it:
 * - the names assigned from a call of it: `h = self.gate(x)`, `h = F.silu(self.gate(x))` (`(\w+)\s*=\s*(?:[\w.]+\()?\s*self\.gate\s*\(`);
 * - for each name in order, then for the call itself (`self.gate(...)`, arguments without `)`), the first (leftmost)
 *   selection that takes it: `topk(h`, `torch.topk(F.softmax(h`, `gumbel_softmax(h`, `h.topk(`, `h.float().topk(`,
 *   `topk(self.gate(x))`, `self.gate(x).topk(`. The answer is the selecting function.
 */

/** The first selection that takes a name or a call: where it starts and which function selects. */
interface Pick { at: number; fn: string }

export interface ClassSelections {
  /** The selecting function fed by `self.<attr>(...)` in this class, if any. */
  pick(attr: string): string | undefined;
}

/** How many class texts were scanned (a test counts them: once per class, not once per layer). */
export const selectionScans = { classes: 0 };

const SELF_CALL = /\bself\.(\w+)\s*\(/g;
const ASSIGNED_FROM = /(?<=(\w+)\s*=\s*(?:[\w.]+\()?\s*)self\./y;
const SELECT_CALL = /\b(topk|gumbel_softmax)\s*\(\s*/g;
const WORD = /\w+/y;
const SOFTMAX_OPEN = /softmax\s*\(\s*/y;
const SELF_CALL_ARG = /self\.(\w+)\s*\([^)]*\)(?!\w)/y;
/** After a name or a call: `(.method(args))*` then `.topk(`. */
const TOPK_METHOD_AFTER = /(?:\.\w+\([^()]*\))*\s*\.\s*topk\s*\(/y;
const NAME_THEN_TOPK = /\b(\w+)(?=(?:\.\w+\([^()]*\))*\s*\.\s*topk\s*\()/g;

/** Scans `text` (one class) once. */
export function classSelections(text: string): ClassSelections {
  selectionScans.classes++;
  const assigned = new Map<string, string[]>();
  const byName = new Map<string, Pick>();
  const bySelfCall = new Map<string, Pick>();
  // A leftmost match wins; at the same place the function form (topk(...)) comes before the method form (.topk()).
  const keep = (m: Map<string, Pick>, key: string, p: Pick): void => {
    const old = m.get(key);
    if (!old || p.at < old.at) m.set(key, p);
  };
  selfCalls(text, assigned, (attr, at) => keep(bySelfCall, attr, { at, fn: 'topk' }));
  for (const s of text.matchAll(SELECT_CALL)) {
    const site = { at: s.index, fn: s[1] };
    takenBy(text, s.index + s[0].length, (name) => keep(byName, name, site), (attr) => keep(bySelfCall, attr, site));
  }
  for (const m of text.matchAll(NAME_THEN_TOPK)) keep(byName, m[1], { at: m.index, fn: 'topk' });
  return {
    pick(attr) {
      for (const n of assigned.get(attr) ?? []) {
        const p = byName.get(n);
        if (p) return p.fn;
      }
      return bySelfCall.get(attr)?.fn;
    },
  };
}

/**
 * Every `self.<attr>(` call: the name it is assigned to (in order, once each), and whether `.topk(` follows the call
 * (`self.gate(x).topk(`, arguments without `)`).
 */
function selfCalls(text: string, assigned: Map<string, string[]>, topkAfter: (attr: string, at: number) => void): void {
  let close = -1;
  const chainAfter = new Map<number, boolean>();
  for (const m of text.matchAll(SELF_CALL)) {
    const attr = m[1];
    ASSIGNED_FROM.lastIndex = m.index;
    const a = ASSIGNED_FROM.exec(text);
    if (a) {
      const names = assigned.get(attr) ?? [];
      if (!names.includes(a[1])) names.push(a[1]);
      assigned.set(attr, names);
    }
    // the first `)` after the `(`; calls come in order, so a `)` found for an earlier call still holds when it is ahead
    const open = m.index + m[0].length - 1;
    if (close <= open) close = text.indexOf(')', open);
    if (close < 0) { close = text.length; continue; }
    if (close >= text.length) continue;
    let after = chainAfter.get(close);
    if (after === undefined) {
      TOPK_METHOD_AFTER.lastIndex = close + 1;
      chainAfter.set(close, (after = TOPK_METHOD_AFTER.test(text)));
    }
    if (after) topkAfter(attr, m.index);
  }
}

/**
 * What a selection call takes, from just after `topk(`: each word of a dotted chain (`a.b.c`: a, b, c), the argument
 * of a `softmax(` in that chain, and a `self.<attr>(...)` call at any of those places.
 */
function takenBy(text: string, from: number, name: (n: string) => void, call: (attr: string) => void): void {
  const at = (p: number): void => {
    SELF_CALL_ARG.lastIndex = p;
    const c = SELF_CALL_ARG.exec(text);
    if (c) call(c[1]);
  };
  for (let p = from; ;) {
    at(p);
    WORD.lastIndex = p;
    const w = WORD.exec(text);
    SOFTMAX_OPEN.lastIndex = p;
    const s = SOFTMAX_OPEN.exec(text);
    if (s) {
      const q = p + s[0].length;
      at(q);
      WORD.lastIndex = q;
      const arg = WORD.exec(text);
      if (arg) name(arg[0]);
    }
    if (!w) return;
    name(w[0]);
    p += w[0].length;
    if (text[p] !== '.') return;
    p++;
  }
}
