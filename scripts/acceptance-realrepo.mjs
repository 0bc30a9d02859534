#!/usr/bin/env node
// Issue 24's acceptance run on a copy of a real repository (default: corpus-timm/, timm's model files read from the
// public index; see docs/realcode.md). Works on temp copies, never on SRC itself:
//   1. baseline: `check --fail-on hint` fails, `check --add-noqa` writes the comments, a second --add-noqa adds nothing,
//      then `check --fail-on hint` (and plain `check`) exit 0; every changed line is the old line plus `  # noqa: ...`
//      (or `, CODE` added to its noqa), every other byte as it was;
//   2. fixes: `check --fix --unsafe-fixes` twice: the second applies nothing and changes no byte;
//   3. fix ranges: the bytes of each file after --fix are compared line by line (bytes, line endings included) with
//      the original; every changed line must lie inside a hunk of the CLI's own `--diff --unsafe-fixes` of a pristine
//      copy, and the files changed are the files that diff names;
//   4. encodings: a latin-1 file (PEP 263 cookie) keeps its bytes (é as 0xE9, no U+FFFD) and a CRLF file keeps CRLF
//      on every line, after --add-noqa and after --fix.
// Usage: npm run build && node scripts/acceptance-realrepo.mjs [SRC] [--latin1 REL] [--crlf REL]
// Exit 0 when every check holds; prints one line per check.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { diffArrays } from 'diff';

const root = resolve(import.meta.dirname, '..');
const cli = join(root, 'out', 'cli.js');
const argv = process.argv.slice(2);
const opt = (name, fallback) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : fallback; };
const src = resolve(argv.find((a, i) => !a.startsWith('--') && !argv[i - 1]?.startsWith('--')) ?? join(root, 'corpus-timm'));
const latin1 = opt('--latin1', 'timm/models/convit_latin1.py');
const crlf = opt('--crlf', 'timm/layers/mlp_crlf.py');
if (!existsSync(cli)) { console.error('build first: npm run build'); process.exit(2); }
if (!existsSync(src)) { console.error(`no ${src}: see docs/realcode.md for how corpus-timm/ is made`); process.exit(2); }

const work = mkdtempSync(join(tmpdir(), 'pl-acceptance-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));
const copy = (name) => { const to = join(work, name); cpSync(src, to, { recursive: true }); return to; };
const check = (dir, ...args) => {
  const r = spawnSync(process.execPath, [cli, 'check', '.', ...args], { cwd: dir, encoding: 'utf8', maxBuffer: 256 << 20 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
};
/** Every file under dir, relative path -> bytes. */
const snapshot = (dir) => {
  const out = new Map();
  const walk = (d) => { for (const e of readdirSync(d, { withFileTypes: true })) { const p = join(d, e.name); if (e.isDirectory()) walk(p); else out.set(relative(dir, p), readFileSync(p)); } };
  walk(dir);
  return out;
};
/** Lines with their terminators, bytes as latin-1 characters (one character per byte: nothing is decoded). */
const linesOf = (buf) => buf.toString('latin1').match(/[^\n]*\n|[^\n]+$/g) ?? [];

let failures = 0;
const results = [];
const ok = (cond, what, detail = '') => {
  results.push(`${cond ? 'ok  ' : 'FAIL'} ${what}${detail ? `: ${detail}` : ''}`);
  if (!cond) failures++;
};

const original = snapshot(src);
const pyFiles = [...original.keys()].filter((p) => p.endsWith('.py'));
console.log(`${src}: ${pyFiles.length} .py files, ${[...original.values()].reduce((n, b) => n + b.length, 0)} bytes`);

// 1. baseline
const a = copy('baseline');
const before = check(a, '--fail-on', 'hint', '--statistics');
ok(before.status === 1, 'check --fail-on hint fails before the baseline', `exit ${before.status}; ${before.stdout.trim().split('\n').map((l) => l.trim().replace(/^(\d+)\t(\w+).*$/, '$1 $2')).join(', ')}`);
const added = check(a, '--add-noqa');
const addedLine = added.stderr.match(/added (\d+) noqa directives? in (\d+) files?/);
ok(added.status !== 2 && !!addedLine && Number(addedLine[1]) > 0, 'check --add-noqa', addedLine?.[0] ?? added.stderr.trim());
const again = check(a, '--add-noqa');
ok(/added 0 noqa directives in 0 files/.test(again.stderr), 'a second --add-noqa adds nothing', again.stderr.trim().split('\n').pop());
const strict = check(a, '--fail-on', 'hint');
ok(strict.status === 0, 'then check --fail-on hint exits 0', `exit ${strict.status}; ${strict.stdout.trim().split('\n').pop()}`);
ok(check(a).status === 0, 'and plain check exits 0');
const baselined = snapshot(a);
let noqaLines = 0;
const badNoqa = [];
for (const [rel, bytes] of original) {
  const after = baselined.get(rel);
  if (!after) { badNoqa.push(`${rel} gone`); continue; }
  if (after.equals(bytes)) continue;
  const was = linesOf(bytes);
  const now = linesOf(after);
  if (was.length !== now.length) { badNoqa.push(`${rel}: ${was.length} -> ${now.length} lines`); continue; }
  for (let i = 0; i < was.length; i++) {
    if (was[i] === now[i]) continue;
    const eol = (s) => s.match(/\r?\n$/)?.[0] ?? '';
    const body = (s) => s.slice(0, s.length - eol(s).length);
    const rest = body(now[i]).startsWith(body(was[i]).trimEnd()) ? body(now[i]).slice(body(was[i]).trimEnd().length) : undefined;
    if (eol(was[i]) !== eol(now[i]) || rest === undefined || !/^( {2}# noqa: [A-Z0-9]+(, [A-Z0-9]+)*|, [A-Z0-9]+(, [A-Z0-9]+)*)$/.test(rest)) {
      badNoqa.push(`${rel}:${i + 1}: ${JSON.stringify(was[i]).slice(0, 80)} -> ${JSON.stringify(now[i]).slice(0, 100)}`);
    } else noqaLines++;
  }
}
ok(badNoqa.length === 0, 'every line --add-noqa changed is the old line plus its noqa, line ending kept', badNoqa.length ? badNoqa.slice(0, 5).join('; ') : `${noqaLines} lines`);

// 2. --fix --unsafe-fixes twice
const f = copy('fixed');
const first = check(f, '--fix', '--unsafe-fixes');
const applied = first.stderr.match(/applied (\d+) fix(?:es)? in (\d+) files?/);
ok(first.status !== 2 && !!applied, 'check --fix --unsafe-fixes', `${applied?.[0] ?? first.stderr.trim()}`);
const fixed = snapshot(f);
const second = check(f, '--fix', '--unsafe-fixes');
ok(/applied 0 fixes in 0 files/.test(second.stderr), 'a second --fix --unsafe-fixes applies nothing', second.stderr.trim().split('\n').filter((l) => /applied/.test(l)).join(' '));
const refixed = snapshot(f);
const moved = [...refixed].filter(([rel, b]) => !fixed.get(rel)?.equals(b)).map(([rel]) => rel);
ok(moved.length === 0 && refixed.size === fixed.size, 'and changes no byte', moved.join(', '));
const left = check(f, '--fix', '--unsafe-fixes', '--format', 'json', '--fail-on', 'none');
try {
  const summary = JSON.parse(left.stdout).summary;
  results.push(`info after --fix --unsafe-fixes: ${JSON.stringify(summary)}`);
} catch { /* reported above */ }

// 3. fix ranges: bytes outside the CLI's own --diff hunks never change
const d = copy('diffed');
const diff = check(d, '--diff', '--unsafe-fixes').stdout;
const hunks = new Map(); // rel -> [[oldStart0, oldEnd0Exclusive]]
let current;
for (const line of diff.split('\n')) {
  const file = line.match(/^\+\+\+ b\/(.*)$/);
  if (file) { current = file[1].replace(/^\.\//, ''); continue; }
  const h = line.match(/^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@/);
  if (h && current) {
    const start = Number(h[1]) - (h[2] === '0' ? 0 : 1);
    const len = h[2] === undefined ? 1 : Number(h[2]);
    if (!hunks.has(current)) hunks.set(current, []);
    hunks.get(current).push([start, start + len]);
  }
}
const outside = [];
const changedFiles = [];
for (const [rel, bytes] of original) {
  const after = fixed.get(rel);
  if (!after || after.equals(bytes)) continue;
  changedFiles.push(rel);
  const ranges = hunks.get(rel) ?? [];
  let line = 0;
  for (const part of diffArrays(linesOf(bytes), linesOf(after))) {
    if (!part.added && !part.removed) { line += part.count; continue; }
    const from = line;
    const to = part.removed ? line + part.count : line;
    if (!ranges.some(([s, e]) => s <= from && to <= e)) outside.push(`${rel}:${from + 1}-${to} (${part.added ? 'added' : 'removed'} ${part.count})`);
    if (part.removed) line += part.count;
  }
}
const created = [...fixed.keys()].filter((rel) => !original.has(rel));
const inDiff = [...hunks.keys()].filter((rel) => original.has(rel)).sort();
ok(JSON.stringify(changedFiles.sort()) === JSON.stringify(inDiff), 'the files --fix changed are the files --diff names', `${changedFiles.length} changed, ${inDiff.length} in the diff${created.length ? `; created ${created.join(', ')}` : ''}`);
ok(outside.length === 0, 'no byte changed outside the --diff hunks (line endings and encoding included)', outside.slice(0, 5).join('; '));

// 4. encodings
const hasCrlfOnly = (b) => { const s = b.toString('latin1'); return s.includes('\r\n') && !/(^|[^\r])\n/.test(s); };
const latinOk = (b) => b.includes(Buffer.from('St\u00e9phane', 'latin1')) && !b.includes(Buffer.from([0xef, 0xbf, 0xbd])) && /coding: latin-1/.test(b.toString('latin1'));
for (const [name, snap] of [['--add-noqa', baselined], ['--fix --unsafe-fixes', fixed]]) {
  if (original.has(latin1)) ok(latinOk(snap.get(latin1)), `${latin1} is still latin-1 after ${name}`, `${original.get(latin1).equals(snap.get(latin1)) ? 'unchanged' : 'changed'}, é = 0xE9`);
  if (original.has(crlf)) ok(hasCrlfOnly(snap.get(crlf)), `${crlf} keeps CRLF on every line after ${name}`, original.get(crlf).equals(snap.get(crlf)) ? 'unchanged' : 'changed');
}

console.log(results.join('\n'));
console.log(failures ? `${failures} check(s) failed` : 'all checks passed');
process.exit(failures ? 1 : 0);
