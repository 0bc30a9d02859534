/**
 * The fuzzer's mutator: seeded, so a run with the same seed and corpus gives the same inputs. Each mutation is the
 * kind of damage a file takes while being typed or copied: deletions, duplications, truncation, swapped tokens,
 * unbalanced brackets and quotes, odd unicode, other line endings, tabs, NUL bytes, very long lines, deep nesting and
 * very many layers.
 */

/** A small deterministic PRNG (mulberry32). */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export type Random = () => number;
const int = (r: Random, n: number): number => Math.floor(r() * n);
const pick = <T>(r: Random, xs: readonly T[]): T => xs[int(r, xs.length)];

function lineBounds(text: string, r: Random): [number, number] {
  const at = int(r, text.length + 1);
  const start = text.lastIndexOf('\n', at - 1) + 1;
  const nl = text.indexOf('\n', at);
  return [start, nl === -1 ? text.length : nl + 1];
}

function span(text: string, r: Random): [number, number] {
  const a = int(r, text.length + 1);
  return [a, Math.min(text.length, a + 1 + int(r, 200))];
}

const ODD = ['é', '😀', '\u200b', '\ufeff', '\u2028', '\ud800', '\u00a0', '\u0301', 'ℕ', '\t', '\r', '\\'];
const OPENERS = ['(', '[', '{', ')', ']', '}', "'", '"', '"""', "'''", 'f"{', ':', '\\\n', '#'];

/** How large the costly mutations get: `small` keeps every input to a few milliseconds (the CI run). */
export interface MutationScale { layers: number; lineItems: number; parens: number }
export const SCALES: Record<'small' | 'large', MutationScale> = {
  small: { layers: 400, lineItems: 5000, parens: 400 },
  large: { layers: 5000, lineItems: 200000, parens: 3000 },
};
let scale: MutationScale = SCALES.large;
export function useScale(s: MutationScale): void {
  scale = s;
}

/** One mutation; names say what each does (shown when an input fails). */
export const MUTATIONS: Record<string, (text: string, r: Random) => string> = {
  deleteLine: (t, r) => { const [a, b] = lineBounds(t, r); return t.slice(0, a) + t.slice(b); },
  deleteSpan: (t, r) => { const [a, b] = span(t, r); return t.slice(0, a) + t.slice(b); },
  duplicateLines: (t, r) => { const [a] = lineBounds(t, r); const [, b] = lineBounds(t, r); const [x, y] = a <= b ? [a, b] : [b, a]; return t.slice(0, y) + t.slice(x, y) + t.slice(y); },
  truncate: (t, r) => t.slice(0, int(r, t.length + 1)),
  swapTokens: (t, r) => {
    const tokens = t.split(/(\W)/);
    if (tokens.length < 3) return t;
    const i = int(r, tokens.length);
    const j = int(r, tokens.length);
    [tokens[i], tokens[j]] = [tokens[j], tokens[i]];
    return tokens.join('');
  },
  unbalance: (t, r) => { const a = int(r, t.length + 1); return t.slice(0, a) + pick(r, OPENERS) + t.slice(a); },
  oddUnicode: (t, r) => { const a = int(r, t.length + 1); return t.slice(0, a) + pick(r, ODD) + t.slice(a); },
  crlf: (t) => t.replace(/\r?\n/g, '\r\n'),
  crOnly: (t) => t.replace(/\r?\n/g, '\r'),
  tabs: (t, r) => t.replace(/^( {4})+/gm, (m) => (r() < 0.5 ? m.replace(/ {4}/g, '\t') : m)),
  nul: (t, r) => { const a = int(r, t.length + 1); return t.slice(0, a) + '\u0000' + t.slice(a); },
  longLine: (t, r) => { const [a] = lineBounds(t, r); return `${t.slice(0, a)}x = [${'1, '.repeat(scale.lineItems / 10 + int(r, scale.lineItems))}]\n${t.slice(a)}`; },
  deepParens: (t, r) => { const n = 50 + int(r, scale.parens); const [a, b] = lineBounds(t, r); return `${t.slice(0, a)}y = ${'('.repeat(n)}1${r() < 0.5 ? ')'.repeat(n) : ''}\n${t.slice(b)}`; },
  deepBlocks: (t, r) => {
    const n = 20 + int(r, 120);
    let s = '';
    for (let i = 0; i < n; i++) s += `${'    '.repeat(i)}${pick(r, ['if x:', 'with te.autocast(enabled=True):', 'for i in y:', 'def f(', 'class C(nn.Linear):'])}\n`;
    const a = lineBounds(t, r)[0];
    return t.slice(0, a) + s + t.slice(a);
  },
  manyLayers: (t, r) => {
    const m = /^( +)self\.\w+ = nn\.\w+\(.*\)$/m.exec(t);
    const n = scale.layers / 10 + int(r, scale.layers);
    const line = m ? `${m[1]}self.fz{i} = nn.Linear(64, 64)\n` : '        self.fz{i} = nn.Linear(64, 64)\n';
    let block = '';
    for (let i = 0; i < n; i++) block += line.replace('{i}', String(i));
    const at = m ? m.index : t.length;
    return t.slice(0, at) + block + t.slice(at);
  },
};

/** Rare, costly mutations (large outputs) are drawn less often. */
const WEIGHTS: Record<string, number> = { longLine: 0.3, deepParens: 0.5, deepBlocks: 0.5, manyLayers: 0.3, crlf: 0.5, crOnly: 0.5 };
const NAMES = Object.keys(MUTATIONS);

/** 1 to 4 mutations of `text`; returns the mutant and the names of what was applied. */
export function mutate(text: string, r: Random): { text: string; applied: string[] } {
  const applied: string[] = [];
  let out = text;
  const n = 1 + int(r, 4);
  while (applied.length < n) {
    const name = pick(r, NAMES);
    if (r() > (WEIGHTS[name] ?? 1)) continue;
    out = MUTATIONS[name](out, r);
    applied.push(name);
  }
  return { text: out, applied };
}
