/**
 * Suppressions, as Python linters write them (ruff's and flake8's `noqa`), applied in one place for the CLI and the
 * editor (engine.findingsOf):
 *
 *   x = nn.Linear(768, 768)  # noqa: PL101          one code (or several: `# noqa: PL101, PL201`) on this line
 *   x = nn.Linear(768, 768)  # noqa                 every code on this line (honoured; the docs discourage it)
 *   # precision-lens: noqa                          the whole file (an own-line comment anywhere in it)
 *   # precision-lens: noqa: PL401, PL402            these codes in the whole file
 *
 * A line's `noqa` covers the findings that start on it, and those that start inside a construction spanning several
 * lines whose first line carries it (`self.fc = nn.Linear(\n ...)  ` takes the comment on its first line). Codes that
 * are not ours (`# noqa: E501`) are left to their linter. `[tool.precision-lens] per-file-ignores` turns codes off
 * for the files its globs match. A `noqa` code that suppressed nothing is reported as PL001 (unused-noqa) with a fix
 * that removes it; a bare `noqa` never is (it may be another linter's).
 *
 * Pure: text in, findings out. The comment scan knows Python's strings, so `"# noqa"` inside a string is not one.
 */
import { isRuleCode, type RuleCode, type Severity } from '../../../common/codes';
import type { PrecisionLensSettings } from '../../../common/settings';
import type { Span } from '../analysis/ir';
import type { Finding } from '../rules/types';

/** One `# noqa[: codes]` directive in a trailing or own-line comment. */
export interface NoqaDirective {
  /** 0-based line. */
  line: number;
  /** The codes as written (upper-cased); null for a bare `# noqa`. */
  codes: string[] | null;
  /** Offsets of the directive in the text: from its `#` to the end of its last code (or of `noqa`). */
  start: number;
  end: number;
  /** Where the codes list starts (after `noqa:` and one optional space). */
  codesStart: number;
  /** The comment the directive is in (from its `#` to the end of the line). */
  commentStart: number;
  commentEnd: number;
  /** Offset of the line's start (for columns). */
  lineStart: number;
}

export interface FileSuppressions {
  /** Directives by line. */
  lines: Map<number, NoqaDirective>;
  /** `# precision-lens: noqa` (every code) or its codes; undefined when the file has none. */
  file?: { all: boolean; codes: Set<string> };
  /** Per line: the first line of the logical line it belongs to (brackets, backslashes and strings continue one). */
  logicalStart: number[];
  /** Per line: whether a comment can be appended at its end (not inside a string, no backslash continuation). */
  commentable: boolean[];
  /** Per line: the offset where its text ends (before the line break). */
  lineEnd: number[];
  lineStarts: number[];
}

const LINE_NOQA = /#\s*noqa(?::\s?([A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?/i;
const FILE_NOQA = /^#\s*precision-lens\s*:\s*noqa(?::\s?([A-Z]+[0-9]+(?:[,\s]+[A-Z]+[0-9]+)*))?\s*$/i;

let last: { text: string; result: FileSuppressions } | undefined;

/** Whether `text` may hold a suppression at all (a cheap test before the scan). */
export function mayHaveSuppressions(text: string): boolean {
  return /noqa/i.test(text);
}

/**
 * Reads the comments of a Python text: its `noqa` directives, and for each line where its logical line starts and
 * whether a comment may be added at its end. Linear in the text.
 */
export function scanSuppressions(text: string): FileSuppressions {
  if (last && last.text === text) return last.result;
  const lines = new Map<number, NoqaDirective>();
  const logicalStart: number[] = [];
  const commentable: boolean[] = [];
  const lineEnd: number[] = [];
  const lineStarts: number[] = [0];
  let file: FileSuppressions['file'];
  let line = 0;
  let logical = 0;
  let depth = 0;
  let quote = '';
  let triple = false;
  let lineHasCode = false;
  const n = text.length;
  let i = 0;
  const endLine = (at: number, next: number, continued: boolean): void => {
    lineEnd[line] = at;
    logicalStart[line] = logical;
    commentable[line] = !quote && !continued;
    line++;
    lineStarts.push(next);
    if (!quote && depth === 0 && !continued) logical = line;
    lineHasCode = false;
  };
  while (i < n) {
    const c = text[i];
    if (quote) {
      if (c === '\\') { i += text[i + 1] === '\r' && text[i + 2] === '\n' ? 3 : 2; continue; }
      if (c === '\n' || c === '\r') {
        const next = c === '\r' && text[i + 1] === '\n' ? i + 2 : i + 1;
        if (!triple) quote = ''; // an unterminated one-line string ends with its line
        endLine(i, next, false);
        i = next;
        continue;
      }
      if (c === quote && (!triple || (text[i + 1] === quote && text[i + 2] === quote))) {
        i += triple ? 3 : 1;
        quote = '';
        continue;
      }
      i++;
      continue;
    }
    if (c === '#') {
      let e = i;
      while (e < n && text[e] !== '\n' && text[e] !== '\r') e++;
      const comment = text.slice(i, e);
      if (/noqa/i.test(comment)) {
        const own = !lineHasCode;
        const fm = own ? FILE_NOQA.exec(comment) : null;
        if (fm) {
          file ??= { all: false, codes: new Set() };
          if (fm[1]) for (const code of splitCodes(fm[1])) file.codes.add(code);
          else file.all = true;
        } else {
          const m = LINE_NOQA.exec(comment);
          if (m) {
            const start = i + m.index;
            const end = start + m[0].length;
            const codesStart = m[1] ? end - m[1].length : end;
            lines.set(line, {
              line, codes: m[1] ? splitCodes(m[1]) : null, start, end, codesStart,
              commentStart: i, commentEnd: e, lineStart: lineStarts[line],
            });
          }
        }
      }
      i = e;
      continue;
    }
    if (c === '\n' || c === '\r') {
      const next = c === '\r' && text[i + 1] === '\n' ? i + 2 : i + 1;
      endLine(i, next, false);
      i = next;
      continue;
    }
    if (c === '\\' && (text[i + 1] === '\n' || text[i + 1] === '\r')) {
      const next = text[i + 1] === '\r' && text[i + 2] === '\n' ? i + 3 : i + 2;
      endLine(i, next, true);
      i = next;
      continue;
    }
    if (c === '"' || c === "'") {
      triple = text[i + 1] === c && text[i + 2] === c;
      quote = c;
      lineHasCode = true;
      i += triple ? 3 : 1;
      continue;
    }
    if (c === '(' || c === '[' || c === '{') depth++;
    else if ((c === ')' || c === ']' || c === '}') && depth > 0) depth--;
    if (c !== ' ' && c !== '\t' && c !== '\f') lineHasCode = true;
    i++;
  }
  lineEnd[line] = n;
  logicalStart[line] = logical;
  commentable[line] = !quote;
  const result: FileSuppressions = { lines, file, logicalStart, commentable, lineEnd, lineStarts };
  last = { text, result };
  return result;
}

function splitCodes(list: string): string[] {
  return list.split(/[,\s]+/).filter(Boolean).map((c) => c.toUpperCase());
}

/** Whether a directive covers `code`: a bare `noqa` covers every code. */
function covers(d: NoqaDirective | undefined, code: string): boolean {
  return !!d && (d.codes === null || d.codes.includes(code));
}

/** The directive that covers a finding starting on `line`: on that line, or on the first line of its construction. */
function directiveFor(s: FileSuppressions, line: number, code: string): NoqaDirective | undefined {
  const own = s.lines.get(line);
  if (covers(own, code)) return own;
  const first = s.logicalStart[line];
  const head = first !== undefined && first !== line ? s.lines.get(first) : undefined;
  return covers(head, code) ? head : undefined;
}

/** A glob as ruff's per-file-ignores and exclude read it: `*` within a path segment, `**` across them, `?` one char. */
export function globToRegExp(glob: string): RegExp {
  let g = glob.replace(/\\/g, '/').replace(/^\.\//, '');
  // A pattern without a slash matches a file or folder name at any depth (`__init__.py`, `tests`).
  const anywhere = !g.includes('/');
  if (g.endsWith('/')) g = g.slice(0, -1);
  let re = '';
  for (let i = 0; i < g.length; i++) {
    const c = g[i];
    if (c === '*' && g[i + 1] === '*') {
      i++;
      if (g[i + 1] === '/') { i++; re += '(?:.*/)?'; } else re += '.*';
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  // A folder's pattern matches what lies inside it too.
  return new RegExp(`^${anywhere ? '(?:.*/)?' : ''}${re}(?:/.*)?$`);
}

/** Whether `path` (absolute) matches any of the globs, read relative to `root` (the pyproject.toml's folder). */
export function matchesAny(path: string, globs: readonly string[], root: string | undefined): boolean {
  if (!globs.length) return false;
  const rel = relativeTo(path, root);
  return globs.some((g) => globToRegExp(g).test(rel));
}

function relativeTo(path: string, root: string | undefined): string {
  const p = path.replace(/\\/g, '/');
  const r = root?.replace(/\\/g, '/').replace(/\/$/, '');
  return r && p.startsWith(`${r}/`) ? p.slice(r.length + 1) : p.replace(/^\//, '');
}

/** The codes `per-file-ignores` turns off for this file ('*' for all). */
export function perFileIgnored(settings: PrecisionLensSettings, path: string | undefined): Set<string> {
  const out = new Set<string>();
  if (!path) return out;
  const project = settings.project;
  if (!project) return out;
  for (const [glob, codes] of Object.entries(project.perFileIgnores)) {
    if (globToRegExp(glob).test(relativeTo(path, project.root || undefined))) for (const c of codes) out.add(c.toUpperCase() === 'ALL' ? '*' : c.toUpperCase());
  }
  return out;
}

/**
 * Whether `[tool.precision-lens]`'s exclude / extend-exclude leave this file out (the CLI's walk, the editor's
 * diagnostics). Globs match the path relative to the pyproject.toml's folder, or any folder name or file name on it.
 */
export function isExcluded(settings: PrecisionLensSettings, path: string | undefined): boolean {
  const project = settings.project;
  if (!project || !path) return false;
  return matchesAny(path, [...(project.exclude ?? []), ...project.extendExclude], project.root || undefined);
}

/** Codes whose findings depend on other files (PL302 speaks only once the training script is in view). */
const CONTEXT_DEPENDENT = new Set<string>(['PL302']);

/**
 * The findings that survive the file's suppressions, plus a PL001 finding for each `noqa` code that suppressed
 * nothing. `path`: the file's absolute path (per-file-ignores).
 */
export function applySuppressions(findings: Finding[], text: string, settings: PrecisionLensSettings, path?: string, partialFrom?: number): Finding[] {
  const ignored = perFileIgnored(settings, path);
  if (ignored.has('*')) return [];
  let kept = ignored.size ? findings.filter((f) => !ignored.has(f.code)) : findings;
  if (!mayHaveSuppressions(text)) return kept;
  const s = scanSuppressions(text);
  if (s.file?.all) return [];
  if (s.file?.codes.size) kept = kept.filter((f) => !s.file!.codes.has(f.code));
  if (!s.lines.size) return kept;
  const used = new Map<NoqaDirective, Set<string>>();
  const out: Finding[] = [];
  for (const f of kept) {
    const d = directiveFor(s, f.span.startLine, f.code);
    if (!d) { out.push(f); continue; }
    let u = used.get(d);
    if (!u) used.set(d, u = new Set());
    u.add(f.code);
  }
  if (settings.rules.PL001 === 'off' || ignored.has('PL001') || s.file?.codes.has('PL001')) return out;
  for (const d of s.lines.values()) {
    if (!d.codes || covers(d, 'PL001')) continue;
    // Beyond a syntax error the analysis is partial: a code there may be unused only because the rule could not see.
    if (partialFrom !== undefined && d.line >= partialFrom) continue;
    const u = used.get(d) ?? new Set<string>();
    const unused = d.codes.filter((c) => /^PL\d+$/.test(c) && !u.has(c) && !CONTEXT_DEPENDENT.has(c)
      && !(isRuleCode(c) && settings.rules[c as RuleCode] === 'off') && !ignored.has(c));
    if (!unused.length) continue;
    out.push(unusedFinding(d, unused, text, settings.rules.PL001 ?? 'hint'));
  }
  return out;
}

function spanOf(d: NoqaDirective, text: string, start: number, end: number): Span {
  void text;
  return { startLine: d.line, startColumn: start - d.lineStart, endLine: d.line, endColumn: end - d.lineStart, startOffset: start, endOffset: end };
}

/** The PL001 finding for a directive's unused codes, with the edit that removes them. */
function unusedFinding(d: NoqaDirective, unused: string[], text: string, severity: Severity): Finding {
  const keep = d.codes!.filter((c) => !unused.includes(c));
  let edit: { startOffset: number; endOffset: number; newText: string };
  if (keep.length) edit = { startOffset: d.codesStart, endOffset: d.end, newText: keep.join(', ') };
  else {
    const spacesBefore = (at: number): number => {
      while (at > d.lineStart && (text[at - 1] === ' ' || text[at - 1] === '\t')) at--;
      return at;
    };
    let rest = d.end;
    while (rest < d.commentEnd && (text[rest] === ' ' || text[rest] === '\t')) rest++;
    if (d.start > d.commentStart) edit = { startOffset: spacesBefore(d.start), endOffset: d.end, newText: '' }; // `# type: ignore  # noqa: PL101`
    else if (text[rest] === '#') edit = { startOffset: d.start, endOffset: rest, newText: '' }; // `# noqa: PL101  # why`: the rest stays
    // the comment was the directive and its description (as ruff reads the text after the codes): it goes whole
    else edit = { startOffset: spacesBefore(d.start), endOffset: d.commentEnd, newText: '' };
  }
  const list = unused.join(', ');
  return {
    code: 'PL001',
    span: spanOf(d, text, d.start, d.end),
    severity,
    message: `Unused suppression: no ${list} finding here to silence; remove ${unused.length === 1 ? 'it' : 'them'}`,
    explanation: {
      facts: [`The comment suppresses ${list}, but nothing on this line (or the construction it starts) reports ${unused.length === 1 ? 'it' : 'them'}.`],
      consequence: 'A stale suppression would silently hide a real finding that appears here later.',
      fix: keep.length ? `The fix keeps ${keep.join(', ')} and removes ${list}.` : 'The fix removes the suppression comment.',
    },
    suppressionEdit: edit,
  };
}

/**
 * `--add-noqa`: the text with `# noqa: CODES` added (or extended) on the line of each finding. Returns the new text
 * and how many lines it changed; a line where no comment can go (its end inside a string, a backslash continuation)
 * is left alone and counted in `skipped`.
 */
export function addNoqa(text: string, findings: readonly Finding[]): { text: string; added: number; skipped: number } {
  const s = scanSuppressions(text);
  const byLine = new Map<number, Set<string>>();
  let skipped = 0;
  for (const f of findings) {
    if (f.code === 'PL001' || f.code === 'PL002') continue;
    let line = f.span.startLine;
    if (!s.commentable[line]) {
      const first = s.logicalStart[line];
      if (first !== undefined && s.commentable[first] && first !== line) line = first;
      else { skipped++; continue; }
    }
    const set = byLine.get(line) ?? new Set<string>();
    set.add(f.code);
    byLine.set(line, set);
  }
  const edits: Array<{ start: number; end: number; text: string }> = [];
  for (const [line, codes] of byLine) {
    const d = s.lines.get(line);
    if (d && d.codes === null) continue; // a bare noqa already covers everything
    if (d) {
      const missing = [...codes].filter((c) => !d.codes!.includes(c)).sort();
      if (!missing.length) continue;
      edits.push({ start: d.end, end: d.end, text: `, ${missing.join(', ')}` });
    } else {
      const end = s.lineEnd[line];
      let at = end;
      while (at > s.lineStarts[line] && (text[at - 1] === ' ' || text[at - 1] === '\t')) at--;
      edits.push({ start: at, end, text: `  # noqa: ${[...codes].sort().join(', ')}` });
    }
  }
  edits.sort((a, b) => b.start - a.start);
  let out = text;
  for (const e of edits) out = out.slice(0, e.start) + e.text + out.slice(e.end);
  return { text: out, added: edits.length, skipped };
}

/** The edit of the editor's "Ignore PLnnn on this line": the code added to the line's `noqa`, or a new one. */
export function ignoreOnLineEdit(text: string, finding: Finding): { startOffset: number; endOffset: number; newText: string } | undefined {
  const s = scanSuppressions(text);
  let line = finding.span.startLine;
  if (!s.commentable[line]) {
    const first = s.logicalStart[line];
    if (first === undefined || !s.commentable[first]) return undefined;
    line = first;
  }
  const d = s.lines.get(line);
  if (d) {
    if (d.codes === null || d.codes.includes(finding.code)) return undefined;
    return { startOffset: d.end, endOffset: d.end, newText: `, ${finding.code}` };
  }
  const end = s.lineEnd[line];
  let at = end;
  while (at > s.lineStarts[line] && (text[at - 1] === ' ' || text[at - 1] === '\t')) at--;
  return { startOffset: at, endOffset: end, newText: `  # noqa: ${finding.code}` };
}
