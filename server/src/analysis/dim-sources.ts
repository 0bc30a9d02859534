/**
 * Where else in a file a size can come from (dims.ts uses these): config presets (a list or dict of `dict(...)`,
 * dict literals or config-class instances, as litgpt's `configs = [dict(name=..., n_embd=...), ...]`), argparse
 * defaults (`parser.add_argument("--dim", type=int, default=512)`), and plain `__post_init__` arithmetic.
 */
import type { SyntaxNode } from './node';
import type { ClassModel } from './classes';
import { leftOf, rightOf, type AssignRec, type FuncRec } from './walk';

/** One preset: a named set of config fields (one configuration of the model). */
export interface Preset {
  label: string;
  line: number;
  fields: Map<string, SyntaxNode>;
}

const MAX_PRESETS = 256;

/** 1-based line of an offset. */
export function lineOf(src: string, offset: number): number {
  let n = 1;
  for (let i = src.indexOf('\n'); i >= 0 && i < offset; i = src.indexOf('\n', i + 1)) n++;
  return n;
}

function unquote(t: string): string {
  return t.replace(/^[rbuf]*["']{1,3}|["']{1,3}$/g, '');
}

/** The fields of one preset entry: `dict(a=1)`, `{"a": 1}` or `Config(a=1)` for a config class of the file. */
function entryFields(src: string, node: SyntaxNode, classes: Map<string, ClassModel>): Map<string, SyntaxNode> | undefined {
  const fields = new Map<string, SyntaxNode>();
  if (node.type === 'call') {
    const fn = node.childForFieldName('function');
    const name = fn ? src.slice(fn.startIndex, fn.endIndex) : '';
    if (name !== 'dict' && !(classes.get(name)?.fieldNodes.size)) return undefined;
    for (const a of node.childForFieldName('arguments')?.namedChildren ?? []) {
      if (a?.type !== 'keyword_argument') continue;
      const k = a.childForFieldName('name');
      const v = a.childForFieldName('value');
      if (k && v) fields.set(src.slice(k.startIndex, k.endIndex), v);
    }
  } else if (node.type === 'dictionary') {
    for (const pair of node.namedChildren) {
      if (pair?.type !== 'pair') continue;
      const k = pair.childForFieldName('key');
      const v = pair.childForFieldName('value');
      if (k?.type === 'string' && v) fields.set(unquote(src.slice(k.startIndex, k.endIndex)), v);
    }
  } else return undefined;
  return fields.size >= 2 ? fields : undefined;
}

/** The module-level assignments that hold presets (what the per-statement cache must treat as file-wide). */
export function presetAssigns(src: string, moduleAssigns: readonly AssignRec[], classes: Map<string, ClassModel>): AssignRec[] {
  return moduleAssigns.filter((a) => findPresets(src, [a], classes).length > 0);
}

/** Module-level lists / tuples / dicts of presets. A preset's label is its `name` field, its key, or its position. */
export function findPresets(src: string, moduleAssigns: readonly AssignRec[], classes: Map<string, ClassModel>): Preset[] {
  const out: Preset[] = [];
  for (const a of moduleAssigns) {
    const right = rightOf(a);
    if (!right || (right.type !== 'list' && right.type !== 'tuple' && right.type !== 'dictionary')) continue;
    // A collection longer than any table of presets (data: 200,000 numbers) is not read item by item.
    if (right.namedChild(MAX_PRESETS)) continue;
    const items: { node: SyntaxNode; key?: string }[] = [];
    for (const c of right.namedChildren) {
      if (!c) continue;
      if (c.type === 'pair') {
        const k = c.childForFieldName('key');
        const v = c.childForFieldName('value');
        if (v) items.push({ node: v, key: k ? unquote(src.slice(k.startIndex, k.endIndex)) : undefined });
      } else items.push({ node: c });
    }
    const found: Preset[] = [];
    for (const [i, it] of items.entries()) {
      const fields = entryFields(src, it.node, classes);
      if (!fields) continue;
      const nameNode = fields.get('name');
      const label = nameNode?.type === 'string' ? unquote(src.slice(nameNode.startIndex, nameNode.endIndex)) : it.key ?? `#${i + 1}`;
      found.push({ label: `"${label}"`, line: lineOf(src, it.node.startIndex), fields });
    }
    // A list with one config-like dict is not a set of presets; two or more are.
    if (found.length >= 2) out.push(...found);
    if (out.length >= MAX_PRESETS) break;
  }
  return out.slice(0, MAX_PRESETS);
}

const ADD_ARGUMENT = /\.add_argument\s*\(\s*((?:[rbu]?["'][^"'\n]*["']\s*,\s*)+)([^()]*(?:\([^()]*\)[^()]*)*)\)/g;

/** argparse destinations with an integer default: `--hidden-size` -> hidden_size (or `dest=`). */
export function argparseDefaults(src: string): Map<string, { value: number; flag: string; line: number }> {
  const out = new Map<string, { value: number; flag: string; line: number }>();
  if (!src.includes('add_argument')) return out;
  for (const m of src.matchAll(ADD_ARGUMENT)) {
    const flags = [...m[1].matchAll(/["']([^"']+)["']/g)].map((x) => x[1]);
    const kw = m[2];
    const def = /\bdefault\s*=\s*(\d[\d_]*)\s*(?:[,)]|$)/.exec(kw);
    if (!def) continue;
    const long = flags.find((f) => f.startsWith('--')) ?? flags.find((f) => !f.startsWith('-'));
    const dest = /\bdest\s*=\s*["'](\w+)["']/.exec(kw)?.[1] ?? long?.replace(/^-+/, '').replace(/-/g, '_');
    if (!dest || !/^[A-Za-z_]\w*$/.test(dest)) continue;
    const value = Number(def[1].replace(/_/g, ''));
    if (Number.isInteger(value) && value > 0) out.set(dest, { value, flag: long ?? dest, line: lineOf(src, m.index ?? 0) });
  }
  return out;
}

/**
 * The right side of `self.<field> = ...` in __post_init__ when it is plain: the only assignment to that field, at the
 * top of the method or under `if self.<field> is None:` (then only when the field's default is None). Anything else
 * (other conditions, several assignments, augmented assignment) is run-time logic: undefined.
 */
export function postInitAssign(src: string, cls: ClassModel, field: string): SyntaxNode | undefined {
  const post: FuncRec | undefined = cls.rec.methods.find((m) => m.name === '__post_init__');
  if (!post) return undefined;
  const text = (n: SyntaxNode): string => src.slice(n.startIndex, n.endIndex).replace(/\s+/g, '');
  const mine = post.assigns.filter((a) => {
    const left = leftOf(a);
    return left && text(left) === `self.${field}`;
  });
  const body = src.slice(post.start, post.end);
  const count = [...body.matchAll(new RegExp(`\\bself\\s*\\.\\s*${field}\\s*(?:[-+*/%]|//)?=(?!=)|setattr\\s*\\(\\s*self\\s*,\\s*["']${field}["']`, 'g'))].length;
  if (mine.length !== 1 || count !== 1) return undefined;
  const a = mine[0].node;
  if (a.type !== 'assignment' || src.slice(a.startIndex, a.endIndex).includes('+=')) return undefined;
  const block = a.parent?.parent;
  if (!block || block.type !== 'block') return undefined;
  const owner = block.parent;
  if (owner?.type === 'function_definition') return a.childForFieldName('right') ?? undefined;
  if (owner?.type !== 'if_statement' || owner.parent?.parent?.type !== 'function_definition') return undefined;
  if (owner.namedChildren.some((c) => c?.type === 'else_clause' || c?.type === 'elif_clause')) return undefined;
  const cond = owner.childForFieldName('condition');
  const def = cls.fieldNodes.get(field);
  if (!cond || !def || text(def) !== 'None' || !new RegExp(`^(self\\.${field}isNone|notself\\.${field})$`).test(text(cond))) return undefined;
  return a.childForFieldName('right') ?? undefined;
}
