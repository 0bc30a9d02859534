/**
 * Construction sites of a file's classes in OTHER files (`ViT(dim=1024, mlp_dim=4096)` in train.py for `class ViT` in
 * model.py), for the analysis (AnalysisOptions.sites): the CLI passes the other inputs of the run, the server the
 * workspace's Python files its scan found. Only literal integer arguments are read, from the text (no parse): the
 * analysis evaluates nothing of the other file. Bounded: files, bytes, calls and sites per class are capped.
 */
import { readFileSync, statSync } from 'node:fs';
import type { ExternalSite, ExternalSites } from './analysis/ir';

const MAX_FILES = 200;
const MAX_BYTES = 512 * 1024;
const MAX_SITES_PER_CLASS = 16;
/** Characters read after `ClassName(` to find its closing parenthesis. */
const MAX_CALL_CHARS = 4000;

/** The classes a file defines at any indentation (`class ViT(nn.Module):`). */
export function classNamesOf(text: string): Set<string> {
  const out = new Set<string>();
  for (const m of text.matchAll(/^[ \t]*class[ \t]+([A-Za-z_]\w*)/gm)) out.add(m[1]);
  return out;
}

/** The top-level arguments of the call whose `(` is at `open` (undefined: unbalanced within the bound). */
function callArgs(text: string, open: number): string[] | undefined {
  const args: string[] = [];
  let depth = 0;
  let start = open + 1;
  const end = Math.min(text.length, open + MAX_CALL_CHARS);
  for (let i = open; i < end; i++) {
    const c = text[i];
    if (c === '#') { const nl = text.indexOf('\n', i); i = nl < 0 ? end : nl; continue; }
    if (c === '"' || c === "'") { const close = text.indexOf(c, i + 1); if (close < 0) return undefined; i = close; continue; }
    if (c === '(' || c === '[' || c === '{') depth++;
    else if (c === ')' || c === ']' || c === '}') {
      depth--;
      if (depth === 0) { args.push(text.slice(start, i)); return args.map((a) => a.replace(/#.*$/gm, '').trim()).filter((a) => a.length > 0); }
    } else if (c === ',' && depth === 1) { args.push(text.slice(start, i)); start = i + 1; }
  }
  return undefined;
}

const INT = /^\d[\d_]*$/;
const literal = (v: string): number | null => (INT.test(v) ? Number(v.replace(/_/g, '')) : null);

/** One call's arguments as a site. */
function siteOf(args: string[], at: string): ExternalSite {
  const site: ExternalSite = { at, keywords: {}, positional: [] };
  for (const a of args) {
    const kw = /^([A-Za-z_]\w*)[ \t]*=(?!=)\s*([\s\S]*)$/.exec(a);
    if (kw) site.keywords[kw[1]] = literal(kw[2].trim());
    else if (a.startsWith('*')) site.splat = true;
    else if (!site.splat) site.positional.push(literal(a));
  }
  return site;
}

/**
 * The calls of `classes` in one other file's text, `shown` naming the file in the sites' `file:line` (pure). A
 * definition (`class ViT(`, `def ViT(`) is not a call; `models.ViT(` is.
 */
export function sitesInText(shown: string, text: string, classes: ReadonlySet<string>, into: ExternalSites = {}): ExternalSites {
  if (!classes.size) return into;
  const call = /(^|[^\w])((?:[A-Za-z_]\w*\.)*)([A-Za-z_]\w*)[ \t]*\(/g;
  let line = 1;
  let counted = 0;
  for (const m of text.matchAll(call)) {
    const name = m[3];
    if (!classes.has(name)) continue;
    const at = m.index! + m[1].length;
    const lineStart = text.lastIndexOf('\n', at) + 1;
    const before = text.slice(lineStart, at);
    if (/\b(class|def)[ \t]+$/.test(before) || before.includes('#')) continue;
    const list = (into[name] ??= []);
    if (list.length >= MAX_SITES_PER_CLASS) continue;
    const args = callArgs(text, text.indexOf('(', at + m[2].length + name.length));
    if (!args) continue;
    for (; counted < at; counted++) if (text.charCodeAt(counted) === 10) line++;
    list.push(siteOf(args, `${shown}:${line}`));
  }
  return into;
}

const textCache = new Map<string, { mtime: number; text: string | undefined; at: number }>();
/** A file is stat'ed again at most this often (the editor analyses on every keystroke). */
const RECHECK_MS = 2000;

function readSmall(path: string): string | undefined {
  const now = Date.now();
  const hit = textCache.get(path);
  if (hit && now - hit.at < RECHECK_MS) return hit.text;
  let text: string | undefined;
  let mtime = -1;
  try {
    const s = statSync(path);
    mtime = s.mtimeMs;
    if (hit && hit.mtime === mtime) { hit.at = now; return hit.text; }
    if (s.isFile() && s.size <= MAX_BYTES) text = readFileSync(path, 'utf8');
  } catch {
    // unreadable: no sites
  }
  if (textCache.size > 2 * MAX_FILES) textCache.clear();
  textCache.set(path, { mtime, text, at: now });
  return text;
}

/** Sites of the classes `text` (the file at `path`) defines, in the other files (each `{ path, shown }`). */
export function sitesForFile(path: string, text: string, others: readonly { path: string; shown: string }[]): ExternalSites {
  const classes = classNamesOf(text);
  const out: ExternalSites = {};
  if (!classes.size) return out;
  for (const o of others.filter((f) => f.path !== path && f.path.endsWith('.py')).slice(0, MAX_FILES)) {
    const other = readSmall(o.path);
    if (other === undefined) continue;
    // A file that defines a class of the same name builds its own.
    const own = classNamesOf(other);
    sitesInText(o.shown, other, own.size ? new Set([...classes].filter((c) => !own.has(c))) : classes, out);
  }
  for (const k of Object.keys(out)) if (!out[k].length) delete out[k];
  return out;
}
