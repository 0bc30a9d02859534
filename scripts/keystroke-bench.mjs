#!/usr/bin/env node
// Per-keystroke benchmark of the BUILT language server (out/server.js over stdio, real JSON-RPC; not part of npm test):
// for each large document (issue 13's shapes) it opens the document alone, then sends N single-character edits one at
// a time, each after the publish of the previous one, and reports per edit:
//   - edit -> its publish (the 120 ms debounce included), p50 / p95
//   - the analysis time the server reports with the publish (its status line), p50 / p95
//   - the server's CPU time per edit (user + system from /proc, over all N edits)
// beside the CLI's `check` on the same text: `__bench full` (parse + analysis + rules in one process, median) and
// `check FILE --format json` as a whole process (startup included, median). With --baseline DIR (another build's
// out/), that build's server runs the same edits, interleaved A B A B per shape, in the same process (same lock hold).
//
//   npm run build && node scripts/keystroke-bench.mjs [--edits 20] [--rounds 2] [--baseline OUTDIR] [--shapes a,b]
//   KEYSTROKE_PROFILE=DIR: a CPU profile of each server process in DIR
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { generateLargeClass, prng } from './gen-large-model.mjs';
import { cpuOf, quantile, sleep, startServer } from './lib/server-process.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const argv = process.argv.slice(2);
const opt = (name, def) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : def; };
const EDITS = Number(opt('--edits', 20));
const ROUNDS = Number(opt('--rounds', 2));
const BASELINE = opt('--baseline') && resolve(opt('--baseline'));
const SHAPES = opt('--shapes')?.split(',');

/** A class `Block` and a model that builds it over and over: the class name repeated across a file of `bytes`. */
function repeatedClassName(bytes) {
  let s = 'import torch\nimport torch.nn as nn\n\n\nclass Block(nn.Module):\n    def __init__(self, d):\n        super().__init__()\n        self.fc = nn.Linear(d, d)\n\n    def forward(self, x):\n        return self.fc(x)\n\n\nclass Model(nn.Module):\n    def __init__(self, d=64):\n        super().__init__()\n';
  for (let i = 0; s.length < bytes; i++) s += `        self.b${i} = Block(d)\n`;
  return `${s}\n    def forward(self, x):\n        return self.b0(x)\n`;
}

/** n FP8 autocast blocks around a training step, nested 95 deep at most (Python refuses more than 100 levels). */
function nestedAutocast(n) {
  let s = 'import torch\nimport transformer_engine.pytorch as te\n\nmodel = te.Linear(64, 64)\n';
  for (let f = 0; n > 0; f++) {
    s += `\n\ndef step${f}(x):\n`;
    let ind = '    ';
    for (let i = 0; i < Math.min(n, 95); i++) { s += `${ind}with te.autocast(enabled=True):\n`; ind += '    '; }
    s += `${ind}loss = model(x).sum()\n    loss.backward()\n`;
    n -= 95;
  }
  return s;
}

const ALL_SHAPES = {
  'class-20k-layers': () => generateLargeClass({ layers: 20000, shape: 'flat' }),
  'class-name-400kb': () => repeatedClassName(400 * 1024),
  'autocast-200-nested': () => nestedAutocast(200),
  'class-5k-multiline': () => generateLargeClass({ layers: 5000, shape: 'multiline' }),
};
const shapes = Object.entries(ALL_SHAPES).filter(([name]) => !SHAPES || SHAPES.includes(name));

const genDir = join(root, '.bench', 'keystroke');
mkdirSync(genDir, { recursive: true });
const median = (xs) => quantile(xs, 0.5);
/** CPU seconds, user + system. */
const cpuSeconds = (pid) => { const c = cpuOf(pid); return c.user + c.system; };

/** One server process: open `text`, wait for its publish, then EDITS single-character edits, one after the other. */
async function serverRun(serverJs, text, seed, label) {
  const profile = process.env.KEYSTROKE_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${resolve(process.env.KEYSTROKE_PROFILE)}`, `--cpu-prof-name=${label}.cpuprofile`] : [];
  const { child, conn } = startServer(serverJs, profile);
  let want = null; // { version, resolve }
  let lastDiagnostics = -1;
  const analysisMs = [];
  conn.onNotification('textDocument/publishDiagnostics', (p) => {
    lastDiagnostics = p.diagnostics.length;
    if (want && (p.version ?? 0) >= want.version) { const w = want; want = null; w.resolve(); }
  });
  conn.onNotification('precisionLens/status', (p) => { if (typeof p?.lastAnalysisMs === 'number') analysisMs.push(p.lastAnalysisMs); });
  conn.onNotification(() => {});
  conn.onRequest('workspace/configuration', (p) => p.items.map(() => ({})));
  conn.onRequest('client/registerCapability', () => null);
  conn.listen();
  await conn.sendRequest('initialize', { processId: process.pid, rootUri: null, workspaceFolders: null, capabilities: { workspace: { configuration: true }, textDocument: { publishDiagnostics: { versionSupport: true } } } });
  await conn.sendNotification('initialized', {});
  const uri = 'file:///keystroke/doc.py';
  const published = (version) => new Promise((r) => { want = { version, resolve: r }; });
  let version = 1;
  const opened = published(1);
  const t0 = performance.now();
  await conn.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'python', version, text } });
  await opened;
  const openMs = performance.now() - t0;
  const lines = text.split('\n');
  const random = prng(seed);
  const latencies = [];
  analysisMs.length = 0;
  const cpu0 = cpuSeconds(child.pid);
  for (let e = 0; e < EDITS; e++) {
    // a space at the end of a seeded line that has code (what typing at a line's end does)
    let line = Math.floor(random() * lines.length);
    while (!lines[line].trim()) line = (line + 1) % lines.length;
    const character = lines[line].length;
    lines[line] += ' ';
    version++;
    const done = published(version);
    const sent = performance.now();
    await conn.sendNotification('textDocument/didChange', { textDocument: { uri, version }, contentChanges: [{ range: { start: { line, character }, end: { line, character } }, text: ' ' }] });
    await done;
    latencies.push(performance.now() - sent);
  }
  const cpuPerEdit = ((cpuSeconds(child.pid) - cpu0) / EDITS) * 1000;
  await conn.sendRequest('shutdown');
  await conn.sendNotification('exit');
  await Promise.race([new Promise((r) => child.once('exit', r)), sleep(10000)]);
  conn.dispose();
  child.kill();
  return { openMs, latencies, analysisMs: [...analysisMs], cpuPerEdit, diagnostics: lastDiagnostics };
}

/** The CLI on the same text: in-process analysis (`__bench full`) and `check --format json` as a whole process. */
function cliRun(outDir, file) {
  const cli = join(outDir, 'cli.js');
  const bench = spawnSync(process.execPath, [cli, '__bench', 'full', file, '--runs', '3', '--warmup', '1'], { encoding: 'utf8', maxBuffer: 256 << 20 });
  const full = bench.status === 0 ? median(JSON.parse(bench.stdout).totalMs) : NaN;
  const wall = [];
  for (let i = 0; i < 3; i++) {
    const a = performance.now();
    spawnSync(process.execPath, [cli, 'check', file, '--format', 'json'], { encoding: 'utf8', maxBuffer: 256 << 20 });
    wall.push(performance.now() - a);
  }
  return { full, check: median(wall) };
}

const builds = [['this build', join(root, 'out')], ...(BASELINE ? [['baseline', BASELINE]] : [])];
const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : 'n/a');
console.log(`Precision Lens per-keystroke benchmark: ${EDITS} single-character edits per run, ${ROUNDS} round(s)${BASELINE ? `, interleaved with ${BASELINE}` : ''} (node ${process.version})`);
console.log(`${'shape'.padEnd(22)} ${'build'.padEnd(11)} ${'edit->publish p50/p95 ms'.padStart(25)} ${'analysis p50/p95 ms'.padStart(20)} ${'CPU/edit ms'.padStart(12)} ${'open ms'.padStart(8)} ${'CLI full ms'.padStart(12)} ${'CLI check ms'.padStart(13)} diags`);
for (const [name, make] of shapes) {
  const text = make();
  const file = join(genDir, `${name}.py`);
  writeFileSync(file, text);
  const results = new Map(builds.map(([b]) => [b, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const [build, dir] of builds) results.get(build).push(await serverRun(join(dir, 'server.js'), text, 7 + round, `${name}-${build.replace(/ /g, '-')}-${round}`));
  }
  for (const [build, dir] of builds) {
    const runs = results.get(build);
    const lat = runs.flatMap((r) => r.latencies);
    const an = runs.flatMap((r) => r.analysisMs);
    const cli = cliRun(dir, file);
    console.log(`${name.padEnd(22)} ${build.padEnd(11)} ${`${f1(quantile(lat, 0.5))} / ${f1(quantile(lat, 0.95))}`.padStart(25)} ${`${f1(quantile(an, 0.5))} / ${f1(quantile(an, 0.95))}`.padStart(20)} ${runs.map((r) => r.cpuPerEdit.toFixed(0)).join('-').padStart(12)} ${f1(median(runs.map((r) => r.openMs))).padStart(8)} ${f1(cli.full).padStart(12)} ${f1(cli.check).padStart(13)} ${runs[0].diagnostics}`);
  }
  console.log(`  (${name}: ${(text.length / 1024).toFixed(0)} KB, ${text.split('\n').length} lines; ${pathToFileURL(file).href})`);
}
