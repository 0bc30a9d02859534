/**
 * Construction sites of a file's classes in OTHER files (`ViT(dim=1024, mlp_dim=4096)` in train.py for `class ViT` in
 * model.py), for the analysis (AnalysisOptions.sites): the CLI passes the other inputs of the run, the server the
 * workspace's Python files its scan found. Only literal integer arguments are read, from the text (no parse): the
 * analysis evaluates nothing of the other file. Bounded: files, bytes, calls and sites per class are capped.
 */
import { readFileSync, statSync } from 'node:fs';
import type { ExternalSite, ExternalSites } from '../analysis/ir';
import { splitCallArgs, type CallArgs } from '../fixes/source';

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

const INT = /^\d[\d_]*$/;
const literal = (v: string): number | null => (INT.test(v) ? Number(v.replace(/_/g, '')) : null);

/** One call's arguments as a site. */
function siteOf(call: CallArgs, at: string): ExternalSite {
  const site: ExternalSite = { at, keywords: {}, positional: [] };
  for (const a of call.args) {
    if (a.name) site.keywords[a.name] = literal(a.value.trim());
    else if (a.value.startsWith('*')) site.splat = true;
    else if (!site.splat) site.positional.push(literal(a.value.trim()));
  }
  return site;
}

/**
 * The calls of `classes` (a set, or a test on the name) in one other file's text, `shown` naming the file in the
 * sites' `file:line` (pure). A definition (`class ViT(`, `def ViT(`) is not a call; `models.ViT(` is.
 */
export function sitesInText(shown: string, text: string, classes: ReadonlySet<string> | ((name: string) => boolean), into: ExternalSites = {}): ExternalSites {
  const wanted = typeof classes === 'function' ? classes : (n: string) => classes.has(n);
  if (typeof classes !== 'function' && !classes.size) return into;
  const call = /(^|[^\w])((?:[A-Za-z_]\w*\.)*)([A-Za-z_]\w*)[ \t]*\(/g;
  let line = 1;
  let counted = 0;
  for (const m of text.matchAll(call)) {
    const name = m[3];
    if (!wanted(name)) continue;
    const at = m.index! + m[1].length;
    const lineStart = text.lastIndexOf('\n', at) + 1;
    const before = text.slice(lineStart, at);
    if (/\b(class|def)[ \t]+$/.test(before) || before.includes('#')) continue;
    const list = (into[name] ??= []);
    if (list.length >= MAX_SITES_PER_CLASS) continue;
    const args = splitCallArgs(text, text.indexOf('(', at + m[2].length + name.length), MAX_CALL_CHARS);
    if (!args) continue;
    for (; counted < at; counted++) if (text.charCodeAt(counted) === 10) line++;
    list.push(siteOf(args, `${shown}:${line}`));
  }
  return into;
}

interface FileSites {
  mtime: number;
  at: number;
  /** Calls of CamelCase names (how model classes are named), by name; the classes the file defines itself. */
  sites: ExternalSites;
  own: Set<string>;
}

const fileCache = new Map<string, FileSites>();
/** A file is stat'ed again at most this often (the editor analyses on every keystroke). */
const RECHECK_MS = 2000;
const CLASS_LIKE = (n: string): boolean => /^_*[A-Z]/.test(n);

/** One other file's calls, read once per change of the file (whichever analysed file asks). */
function sitesOfFile(path: string): FileSites | undefined {
  const now = Date.now();
  const hit = fileCache.get(path);
  if (hit && now - hit.at < RECHECK_MS) return hit;
  let entry: FileSites = { mtime: -1, at: now, sites: {}, own: new Set() };
  try {
    const s = statSync(path);
    if (hit && hit.mtime === s.mtimeMs) { hit.at = now; return hit; }
    entry.mtime = s.mtimeMs;
    if (s.isFile() && s.size <= MAX_BYTES) {
      const text = readFileSync(path, 'utf8');
      // `at` is kept as `:line`: each asker names the file its own way (relative to its directory).
      entry = { ...entry, sites: sitesInText('', text, CLASS_LIKE), own: classNamesOf(text) };
    }
  } catch {
    // unreadable: no sites
  }
  if (fileCache.size > 4 * MAX_FILES) fileCache.clear();
  fileCache.set(path, entry);
  return entry;
}

/** Drops what was read from `path` (the watcher says it changed or went): the next analysis reads it again. */
export function forgetSites(path: string): void {
  fileCache.delete(path);
}

/**
 * Sites of the classes `text` (the file at `path`) defines, in the other files (each `{ path, shown }`): CamelCase
 * class names only (each other file's calls are read once and kept per file, so many analysed files cost little).
 */
export function sitesForFile(path: string, text: string, others: readonly { path: string; shown: string }[]): ExternalSites {
  const classes = [...classNamesOf(text)].filter(CLASS_LIKE);
  const out: ExternalSites = {};
  if (!classes.length) return out;
  for (const o of others.filter((f) => f.path !== path && f.path.endsWith('.py')).slice(0, MAX_FILES)) {
    const other = sitesOfFile(o.path);
    if (!other) continue;
    for (const c of classes) {
      // A file that defines a class of the same name builds its own.
      const list = other.own.has(c) ? undefined : other.sites[c];
      if (!list?.length) continue;
      const into = (out[c] ??= []);
      for (const site of list) if (into.length < MAX_SITES_PER_CLASS) into.push({ ...site, at: o.shown + site.at });
    }
  }
  return out;
}
