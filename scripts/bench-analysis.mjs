#!/usr/bin/env node
// Analysis benchmark of the BUILT code (out/cli.js and its WASM), run by `npm run bench:analysis` after the build.
// Prints figures beside their targets; asserts nothing.
//   (a) full analysis (parse + analyzeTree + rules) of a generated ~20k-line file: median of N runs after warm-up
//   (b) re-analysis after one-character edits at seeded random places in a 2k-line file, through the incremental path
//       (editTree + reparse + analyzeParsed): p50/p95, beside a full re-parse + analysis of the same file
//   (c) `precision-lens check DIR --format json` as a whole process (startup included): lines/s, median of runs
//   (d) huge classes (gen-large-model.mjs --class: 10,000 flat layers, 5,000 multi-line layers with a forward using
//       each, 10,000 after an unclosed parenthesis): check --format json, --fix --unsafe-fixes (on a fresh copy) and
//       --fix --unsafe-fixes --diff as whole processes; with --baseline OUTDIR (another build's out/, e.g. main's)
//       the same commands of that build run interleaved with this one's, A B A B, and the ratio is printed
//   (e) large files (generated model files of about 1 and 2 MB, plus each --large-file PATH): check --format json
//       (with --max-file-size 4 MB, so a lower default still analyses them) and --fix --unsafe-fixes as whole
//       processes, and the parse alone in a fresh process (`__bench parse`: cold WASM, as check sees it); interleaved
//       with --baseline as in (d)
//
//   node scripts/bench-analysis.mjs [PATH...] [--runs N] [--baseline OUTDIR] [--only-large | --only-files] [--large-file PATH]...
// --only-large: (d) and (e) only; --only-files: (e) only.
// PATH defaults to the generated files + test/fixtures + corpus/ (if present). ruff is timed too when installed.
import { spawn, spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { generateLargeClass, generateModelFile } from './gen-large-model.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'out', 'cli.js');
if (!existsSync(cli)) {
  console.error('out/cli.js is missing: run `npm run bench:analysis` (it builds first) or `npm run build`.');
  process.exit(2);
}
const argv = process.argv.slice(2);
const runsIdx = argv.indexOf('--runs');
const RUNS = runsIdx >= 0 ? Number(argv[runsIdx + 1]) : 5;
const baseIdx = argv.indexOf('--baseline');
const BASELINE = baseIdx >= 0 ? resolve(argv[baseIdx + 1], 'cli.js') : undefined;
if (BASELINE && !existsSync(BASELINE)) {
  console.error(`--baseline: ${BASELINE} is missing (give the out/ folder of another build)`);
  process.exit(2);
}
const ONLY_LARGE = argv.includes('--only-large');
const ONLY_FILES = argv.includes('--only-files');
const LARGE_FILES = argv.flatMap((a, i) => (a === '--large-file' && argv[i + 1] ? [resolve(argv[i + 1])] : []));
const paths = argv.filter((a, i) => !a.startsWith('--') && (runsIdx < 0 || i !== runsIdx + 1) && (baseIdx < 0 || i !== baseIdx + 1) && argv[i - 1] !== '--large-file');

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  const pos = (s.length - 1) * q;
  const lo = Math.floor(pos);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (pos - lo);
};
const median = (xs) => quantile(xs, 0.5);
const ms = (x) => `${x.toFixed(1)} ms`;

// Generated inputs live in .bench/ (git-ignored); same seed, same files.
const genDir = join(root, '.bench', 'gen');
mkdirSync(genDir, { recursive: true });
const large = join(genDir, 'large-20k.py');
const medium = join(genDir, 'medium-2k.py');
writeFileSync(large, generateModelFile({ lines: 20000, seed: 1 }));
writeFileSync(medium, generateModelFile({ lines: 2000, seed: 2 }));

function bench(args) {
  const r = spawnSync(process.execPath, [cli, '__bench', ...args], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`__bench ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout);
}

// Rows print as they are measured (a slow phase still shows the earlier figures).
const W0 = 92;
const W1 = 16;
console.log(`Precision Lens analysis benchmark (node ${process.version}, ${process.platform}/${process.arch})`);
console.log(`${'measure'.padEnd(W0)}  ${'measured'.padStart(W1)}  target`);
const row = (what, measured, target) => console.log(`${what.padEnd(W0)}  ${measured.padStart(W1)}  ${target}`);

// (d) huge classes, whole processes; printed first with --only-large, else after (c)
const LIMIT_MS = 30_000;
async function largeClasses() {
  const shapes = [['flat', 10000], ['multiline', 5000], ['broken', 10000]];
  const builds = BASELINE ? [['this build', cli], ['baseline', BASELINE]] : [['this build', cli]];
  console.log(`(d) huge classes, whole processes, wall clock, median of ${RUNS}${BASELINE ? ` (baseline ${BASELINE}, interleaved)` : ''}`);
  for (const [shape, layers] of shapes) {
    const src = join(genDir, `class-${shape}-${layers}.py`);
    writeFileSync(src, generateLargeClass({ layers, shape }));
    for (const [what, extra] of [['check --format json', []], ['check --fix --unsafe-fixes', ['--fix', '--unsafe-fixes']], ['check --fix --unsafe-fixes --diff', ['--fix', '--unsafe-fixes', '--diff']]]) {
      const times = builds.map(() => []);
      // A build that takes over LIMIT_MS once (the old --diff of thousands of changed lines: minutes) is not run again.
      const over = builds.map(() => false);
      for (let i = 0; i < RUNS + 1; i++) {
        builds.forEach(([, js], b) => {
          if (over[b]) return;
          // --fix writes: each run gets a fresh copy in its own folder (the fallback module is created there too).
          const dir = mkdtempSync(join(tmpdir(), 'pl-bench-'));
          const file = join(dir, 'model.py');
          copyFileSync(src, file);
          const elapsed = timedCheck(js, file, dir, extra, what);
          rmSync(dir, { recursive: true, force: true });
          if (elapsed === undefined) { over[b] = true; return; }
          if (i > 0) times[b].push(elapsed);
        });
      }
      compared(`    ${shape} ${layers} layers: ${what}`, times, over);
    }
  }
}

/** One `check FILE --format json` process (cwd `dir`), wall clock; undefined when it ran over LIMIT_MS. */
function timedCheck(js, file, dir, extra, what) {
  const t = performance.now();
  const r = spawnSync(process.execPath, [js, 'check', file, '--format', 'json', '--fail-on', 'none', ...extra], { encoding: 'utf8', maxBuffer: 256 << 20, cwd: dir, timeout: LIMIT_MS });
  const elapsed = performance.now() - t;
  if (r.error || r.signal) return undefined;
  // 1: findings, or --diff with changes; 2: a usage or I/O error.
  if (r.status > 1) console.error(`note: ${what} exited ${r.status}: ${r.stderr.slice(0, 300)}`);
  return elapsed;
}

/** A row of this build's median beside the baseline's (times[0]: this build, times[1]: the baseline). */
function compared(what, times, over = [false, false], target = '< 2 s') {
  const shown = (b) => (over[b] ? `> ${LIMIT_MS / 1000} s` : ms(median(times[b])));
  const ratio = BASELINE && !over[0] ? (over[1] ? ` (< ${(median(times[0]) / LIMIT_MS).toFixed(2)}x)` : ` (${(median(times[0]) / median(times[1])).toFixed(2)}x)`) : '';
  row(what, shown(0), BASELINE ? `baseline ${shown(1)}${ratio}` : target);
}

// (e) large files: generated model files of about 1 and 2 MB and the --large-file inputs; check, --fix, parse alone
async function largeFiles() {
  const builds = BASELINE ? [cli, BASELINE] : [cli];
  const generated = [[24000, 1], [48000, 2]].map(([lines, seed]) => {
    const f = join(genDir, `model-${lines}.py`);
    writeFileSync(f, generateModelFile({ lines, seed }));
    return f;
  });
  console.log(`(e) large files, whole processes, wall clock, median of ${RUNS}${BASELINE ? ` (baseline ${BASELINE}, interleaved)` : ''}`);
  for (const src of [...generated, ...LARGE_FILES]) {
    const size = `${(statSync(src).size / 1048576).toFixed(2)} MB`;
    const name = src.startsWith(root) ? src.slice(root.length + 1) : src.split('/').pop();
    const commands = [
      ['check --format json', ['--max-file-size', String(4 << 20)]],
      ['check --fix --unsafe-fixes', ['--max-file-size', String(4 << 20), '--fix', '--unsafe-fixes']],
    ];
    for (const [what, extra] of commands) {
      const times = builds.map(() => []);
      const over = builds.map(() => false);
      for (let i = 0; i < RUNS + 1; i++) {
        builds.forEach((js, b) => {
          if (over[b]) return;
          const dir = mkdtempSync(join(tmpdir(), 'pl-bench-'));
          const file = join(dir, 'model.py');
          copyFileSync(src, file);
          const elapsed = timedCheck(js, file, dir, extra, what);
          rmSync(dir, { recursive: true, force: true });
          if (elapsed === undefined) { over[b] = true; return; }
          if (i > 0) times[b].push(elapsed);
        });
      }
      compared(`    ${name} (${size}): ${what}`, times, over);
    }
    // The parse alone, in a fresh process (cold WASM included, as check sees it); the runtime's load is not counted.
    const parse = builds.map(() => []);
    for (let i = 0; i < RUNS; i++) {
      builds.forEach((js, b) => {
        const r = spawnSync(process.execPath, [js, '__bench', 'parse', src], { encoding: 'utf8' });
        if (r.status === 0) parse[b].push(JSON.parse(r.stdout).parseMs);
      });
    }
    compared(`    ${name} (${size}): parse alone (fresh process, __bench parse)`, parse, [false, false], '');
  }
}
if (ONLY_FILES) {
  await largeFiles();
  process.exit(0);
}
if (ONLY_LARGE) {
  await largeClasses();
  await largeFiles();
  process.exit(0);
}

// (a) full analysis of ~20k lines
const full = bench(['full', large, '--runs', '15', '--warmup', '3']);
row(`(a) full analysis, ${full.lines} lines (parse + analyzeTree + rules), median of ${full.runs}`, ms(median(full.totalMs)), '< 400 ms');
row('      of which parse', ms(median(full.parseMs)), '');
row('      of which analyzeTree', ms(median(full.analyzeMs)), '');
row('      of which rules', ms(median(full.rulesMs)), '');
row(`      (${full.layers} layers, ${full.findings} findings; WASM + grammar load ${ms(full.initMs)})`, '', '');

// (b) incremental re-analysis on 2k lines
const inc = bench(['incremental', medium, '--edits', '200', '--seed', '7']);
const incP50 = median(inc.incrementalMs);
const fullP50 = median(inc.fullAnalysisMs);
row(`(b) 1-char edit, ${inc.lines} lines, editTree + reparse + analyzeParsed, p50 (${inc.edits} edits)`, ms(incP50), '');
row('    same, p95', ms(quantile(inc.incrementalMs, 0.95)), '< 10 ms');
row('      of which incremental reparse, p50', ms(median(inc.reparseOnlyMs)), '');
row('    floor: re-analysis of the unchanged text (every statement reused), p50', ms(median(inc.sameTextMs)), '');
row('    same, p95', ms(quantile(inc.sameTextMs, 0.95)), '');
row('    baseline: full parse + analyzeParsed of the same file, p50', ms(fullP50), '');
row('      of which full parse, p50', ms(median(inc.fullParseMs)), '');
row('    incremental / full (p50)', `${(incP50 / fullP50).toFixed(2)}x`, '');

// (c) the whole CLI process over a directory
const SKIP = new Set(['.git', '.hg', '.svn', 'node_modules', '__pycache__', '.venv', 'venv', 'site-packages', '.tox', '.nox', '.mypy_cache', '.ruff_cache']);
/** The .py files under a path (what check discovers) and their line count. */
function countLines(p, acc = { files: 0, lines: 0, paths: [] }) {
  const st = statSync(p);
  if (st.isDirectory()) {
    if (existsSync(join(p, 'pyvenv.cfg'))) return acc;
    for (const e of readdirSync(p, { withFileTypes: true })) {
      if (e.isDirectory() && SKIP.has(e.name)) continue;
      if (e.isDirectory() || e.name.endsWith('.py')) countLines(join(p, e.name), acc);
    }
  } else if (st.isFile()) {
    const text = readFileSync(p, 'utf8');
    acc.files++;
    acc.lines += text.split('\n').length - (text.endsWith('\n') ? 1 : 0);
    acc.paths.push(p);
  }
  return acc;
}
const inputs = paths.length
  ? paths.map((p) => resolve(p))
  : [genDir, join(root, 'test', 'fixtures'), join(root, 'corpus')].filter((p) => existsSync(p));
const { files, lines, paths: pyFiles } = inputs.reduce((acc, p) => countLines(p, acc), { files: 0, lines: 0, paths: [] });
function wall(cmd, args) {
  const times = [];
  let last;
  for (let i = 0; i < RUNS + 1; i++) {
    const t = performance.now();
    last = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 256 << 20, cwd: root });
    if (i > 0) times.push(performance.now() - t); // the first run warms the page cache
  }
  return { median: median(times), last };
}
const shown = inputs.map((p) => p.startsWith(root) ? p.slice(root.length + 1) || '.' : p).join(' ');
console.log(`(c) precision-lens check ${shown}: ${files} files, ${lines} lines`);
for (const format of ['json', 'text']) {
  const check = wall(process.execPath, [cli, 'check', ...inputs, '--format', format, '--fail-on', 'none']);
  if (check.last.status !== 0) console.error(`note: check exited ${check.last.status}: ${check.last.stderr.slice(0, 500)}`);
  let diagnostics = '?';
  try { diagnostics = format === 'json' ? JSON.parse(check.last.stdout).diagnostics.length : check.last.stdout.split('\n').length - 2; } catch { /* reported above */ }
  row(`    --format ${format}${format === 'json' ? ' (with fix titles)' : ''}: ${diagnostics} diagnostics, wall clock, median of ${RUNS}`, ms(check.median), '');
  row(`    lines/s, whole process (startup included)`, `${Math.round(lines / (check.median / 1000)).toLocaleString('en-US')}`, '> 50,000');
}
// Floors of the whole process: node + bundle + WASM start on an empty file, and the parse alone of every input in
// one fresh process (cold WASM, as check sees it).
const emptyPy = join(root, '.bench', 'empty.py');
writeFileSync(emptyPy, '');
const empty = wall(process.execPath, [cli, 'check', emptyPy, '--fail-on', 'none']);
row('    floor: the process on an empty file (node + bundle + WASM start)', ms(empty.median), '');
const parses = [];
for (let i = 0; i < RUNS; i++) parses.push(bench(['parse', ...pyFiles]));
const parseOnly = median(parses.map((p) => p.parseMs));
row(`    floor: parse alone of the ${pyFiles.length} files in one fresh process, lines/s`, `${Math.round(lines / (parseOnly / 1000)).toLocaleString('en-US')}`, '');
// The floor of any analysis built on this parser: every core parsing its share of the inputs (balanced by lines) in
// its own fresh process, wall clock until the last one exits, startup included. `check` cannot beat this.
{
  const cores = Math.max(1, availableParallelism());
  const shares = Array.from({ length: cores }, () => ({ files: [], lines: 0 }));
  const sized = pyFiles.map((f) => ({ f, n: readFileSync(f, 'utf8').split('\n').length })).sort((a, b) => b.n - a.n);
  for (const { f, n } of sized) { const s = shares.reduce((a, b) => (b.lines < a.lines ? b : a)); s.files.push(f); s.lines += n; }
  const runOnce = () => new Promise((done) => {
    const t = performance.now();
    let left = shares.filter((s) => s.files.length).length;
    for (const s of shares) {
      if (!s.files.length) continue;
      spawn(process.execPath, [cli, '__bench', 'parse', ...s.files], { stdio: 'ignore' }).on('exit', () => { if (--left === 0) done(performance.now() - t); });
    }
  });
  await runOnce(); // page cache
  const times = [];
  for (let i = 0; i < RUNS; i++) times.push(await runOnce());
  const largest = Math.max(...shares.map((s) => s.lines));
  row(`    floor: parse alone on ${cores} core${cores > 1 ? 's' : ''}, whole processes (largest share ${largest} lines), lines/s`, `${Math.round(lines / (median(times) / 1000)).toLocaleString('en-US')}`, '');
}
const startup = wall(process.execPath, [cli, 'check', medium, '--format', 'json', '--fail-on', 'none']);
row('    one 2k-line file, whole process (startup + WASM load dominate)', ms(startup.median), '');

const ruffProbe = spawnSync('ruff', ['--version'], { encoding: 'utf8' });
if (ruffProbe.status === 0) {
  const ruff = wall('ruff', ['check', '--no-cache', '--exit-zero', '--quiet', ...inputs]);
  row(`    ruff check (${ruffProbe.stdout.trim()}), same inputs, lines/s`, `${Math.round(lines / (ruff.median / 1000)).toLocaleString('en-US')}`, '');
} else {
  row('    ruff: not installed, no comparison', '', '');
}

await largeClasses();
await largeFiles();
