#!/usr/bin/env node
// Load test of the BUILT language server (out/server.js over stdio; not part of npm test): opens DOCS documents made
// from the fixtures (model files, training scripts with FP8 autocast, torch.compile), sends EDITS incremental edits
// over SPREAD_MS at random documents, then reports:
//   - edit -> diagnostics latency (until a publish of that document at that version or later), p50 / p95 / max
//   - whether publishes settle after the edits stop, and how many documents still show an older version
//   - the server's RSS at start, with everything open, and after closing every document
//
//   npm run build && node scripts/load-test.mjs [--docs 200] [--edits 2000] [--spread-ms 5000] [--seed 1] [--server out/server.js]
//   LOAD_TEST_PROFILE=DIR: a CPU profile of the server in DIR; LOAD_TEST_MEMORY=DIR: mappings + heap snapshot in DIR
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuOf, quantile, rssOf, sleep, startServer } from './lib/server-process.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, def) => { const i = process.argv.indexOf(name); return i >= 0 ? Number(process.argv[i + 1]) : def; };
const DOCS = arg('--docs', 200);
const EDITS = arg('--edits', 2000);
const SPREAD_MS = arg('--spread-ms', 5000);
let seed = arg('--seed', 1);
/** The server to test (another build's out/server.js, for an A/B run against the build before a change). */
const SERVER = process.argv.includes('--server') ? process.argv[process.argv.indexOf('--server') + 1] : join(root, 'out', 'server.js');
const random = () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);

function pyFiles(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...pyFiles(p));
    else if (name.endsWith('.py') && statSync(p).size < 64 * 1024) out.push(p);
  }
  return out;
}
const seeds = pyFiles(join(root, 'test', 'fixtures')).map((p) => readFileSync(p, 'utf8')).filter((t) => t.includes('torch'));
const TRAIN = 'import torch\nimport transformer_engine.pytorch as te\n\nmodel = torch.compile(torch.nn.Linear(64, 64))\nopt = torch.optim.AdamW(model.parameters())\nwith te.autocast(enabled=True):\n    loss = model(torch.randn(8, 64)).sum()\nloss.backward()\nopt.step()\n';


const nodeArgs = [
  ...(process.env.LOAD_TEST_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.LOAD_TEST_PROFILE}`] : []),
  ...(process.env.LOAD_TEST_MEMORY ? ['--heapsnapshot-signal=SIGUSR2'] : []),
];
const { child, conn } = startServer(SERVER, nodeArgs, { cwd: process.env.LOAD_TEST_MEMORY || undefined });
const published = new Map(); // uri -> latest published version
let publishes = 0;
let lastPublishAt = Date.now();
const waiting = []; // { uri, version, sentAt }
const latencies = [];
/** From the LAST edit a publish covers to that publish: the server's response time once an edit burst ends. */
const sentAtByVersion = new Map(); // `${uri} ${version}` -> sentAt
const responses = [];
conn.onNotification('textDocument/publishDiagnostics', (p) => {
  publishes++;
  lastPublishAt = Date.now();
  published.set(p.uri, p.version ?? 0);
  const sentAt = sentAtByVersion.get(`${p.uri} ${p.version}`);
  if (sentAt !== undefined) { responses.push(Date.now() - sentAt); sentAtByVersion.delete(`${p.uri} ${p.version}`); }
  for (let i = waiting.length - 1; i >= 0; i--) {
    const w = waiting[i];
    if (w.uri === p.uri && (p.version ?? 0) >= w.version) { latencies.push(Date.now() - w.sentAt); waiting.splice(i, 1); }
  }
});
// The analysis time the server reports with each publish (its status line), during the edits only.
const analysisMs = [];
let collectAnalysisMs = false;
conn.onNotification('precisionLens/status', (p) => { if (collectAnalysisMs && typeof p?.lastAnalysisMs === 'number') analysisMs.push(p.lastAnalysisMs); });
conn.onNotification(() => {});
conn.onRequest('workspace/configuration', (p) => p.items.map(() => ({})));
conn.onRequest('client/registerCapability', () => null);
conn.listen();

await conn.sendRequest('initialize', { processId: process.pid, rootUri: null, workspaceFolders: null, capabilities: { workspace: { configuration: true }, textDocument: { publishDiagnostics: { versionSupport: true } } } });
await conn.sendNotification('initialized', {});
await sleep(500);
const rssStart = rssOf(child.pid);
/** Where the server's memory is (precisionLens/memory; a build without the request gives undefined). */
const memoryOf = () => Promise.race([conn.sendRequest('precisionLens/memory').catch(() => undefined), sleep(5000)]);
const memStart = await memoryOf();

const docs = [];
for (let i = 0; i < DOCS; i++) {
  const text = i % 5 === 0 ? TRAIN : seeds[i % seeds.length];
  const uri = `file:///load/doc${i}.py`;
  docs.push({ uri, text, version: 1, lines: text.split('\n') });
  await conn.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'python', version: 1, text } });
}
const openDeadline = Date.now() + 120_000;
while (published.size < DOCS && Date.now() < openDeadline) await sleep(50);
const openedMs = Date.now();

// Edits: append a character to a random line of a random document (what typing does).
const cpuBefore = cpuOf(child.pid);
collectAnalysisMs = true;
const t0 = Date.now();
for (let e = 0; e < EDITS; e++) {
  const due = t0 + (e * SPREAD_MS) / EDITS;
  if (due > Date.now()) await sleep(due - Date.now());
  const d = docs[Math.floor(random() * docs.length)];
  const line = Math.floor(random() * d.lines.length);
  const character = d.lines[line].length;
  d.lines[line] += ' ';
  d.version++;
  waiting.push({ uri: d.uri, version: d.version, sentAt: Date.now() });
  sentAtByVersion.set(`${d.uri} ${d.version}`, Date.now());
  await conn.sendNotification('textDocument/didChange', { textDocument: { uri: d.uri, version: d.version }, contentChanges: [{ range: { start: { line, character }, end: { line, character } }, text: ' ' }] });
}
const editsDone = Date.now();
// Settled: every document published at its current version and no publish for 2 s (or 120 s passed).
const settleDeadline = editsDone + 120_000;
while (Date.now() < settleDeadline) {
  const stale = docs.filter((d) => (published.get(d.uri) ?? 0) < d.version).length;
  if (stale === 0 && Date.now() - lastPublishAt > 2000) break;
  await sleep(100);
}
const settledMs = Date.now() - editsDone;
collectAnalysisMs = false;
const cpuAfter = cpuOf(child.pid);
const cpuUser = cpuAfter.user - cpuBefore.user;
const cpuSystem = cpuAfter.system - cpuBefore.system;
const stale = docs.filter((d) => (published.get(d.uri) ?? 0) < d.version).length;
const publishesBefore = publishes;
await sleep(2000);
const publishesAfterSettle = publishes - publishesBefore;
const rssOpen = rssOf(child.pid);
const memOpen = await memoryOf();

for (const d of docs) await conn.sendNotification('textDocument/didClose', { textDocument: { uri: d.uri } });
await sleep(5000);
const rssClosed5 = rssOf(child.pid);
await sleep(10000);
const rssClosed15 = rssOf(child.pid);
const memClosed = await memoryOf();

// LOAD_TEST_MEMORY=1: where the RSS after closing is (the largest mappings; a WASM memory is one anonymous mapping), and
// a heap snapshot of the server (node --heapsnapshot-signal) in its working directory.
let mappings = '';
if (process.env.LOAD_TEST_MEMORY) {
  const maps = readFileSync(`/proc/${child.pid}/smaps`, 'utf8').split(/\n(?=[0-9a-f]+-[0-9a-f]+ )/).map((m) => {
    const [range, , , , , name = '[anon]'] = m.split('\n')[0].split(/\s+/);
    const [a, b] = range.split('-').map((x) => parseInt(x, 16));
    return { name, sizeMb: (b - a) / 1048576, rssMb: Number(/^Rss:\s+(\d+)/m.exec(m)?.[1] ?? 0) / 1024 };
  }).sort((x, y) => y.rssMb - x.rssMb).slice(0, 6);
  mappings = maps.map((m) => `${m.name} ${m.rssMb.toFixed(0)} MB resident of ${m.sizeMb.toFixed(0)} MB`).join('; ');
  process.kill(child.pid, 'SIGUSR2');
  await sleep(8000);
}

const answered = EDITS - waiting.length;
console.log(`Precision Lens language server load test: ${DOCS} documents (${Math.ceil(DOCS / 5)} training scripts with FP8 autocast), ${EDITS} edits over ${SPREAD_MS} ms`);
console.log(`  opened and published all documents in ${openedMs - (openDeadline - 120_000)} ms`);
console.log(`  edits answered: ${answered}/${EDITS}; edit -> diagnostics p50 ${quantile(latencies, 0.5)} ms, p95 ${quantile(latencies, 0.95)} ms, max ${Math.max(...latencies)} ms (debounce 120 ms included)`);
console.log(`  last edit covered -> its publish: p50 ${quantile(responses, 0.5)} ms, p95 ${quantile(responses, 0.95)} ms (${responses.length} publishes; an edit followed within the debounce by another edit of the same document waits for that one)`);
console.log(`  analysis time per publish as the server reports it: p50 ${quantile(analysisMs, 0.5)?.toFixed(1)} ms, p95 ${quantile(analysisMs, 0.95)?.toFixed(1)} ms, max ${Math.max(...analysisMs).toFixed(1)} ms (${analysisMs.length} publishes)`);
console.log(`  server CPU time from the first edit until settled: ${(cpuUser + cpuSystem).toFixed(2)} s (user ${cpuUser.toFixed(2)} s, system ${cpuSystem.toFixed(2)} s)`);
console.log(`  settled ${settledMs} ms after the last edit; documents showing an older version: ${stale}; publishes in the 2 s after settling: ${publishesAfterSettle}`);
console.log(`  RSS: ${rssStart.toFixed(0)} MB at start, ${rssOpen.toFixed(0)} MB with all open, ${rssClosed5.toFixed(0)} MB 5 s after closing all, ${rssClosed15.toFixed(0)} MB after 15 s`);
const MB = (n) => (n / 1048576).toFixed(0);
const where = (m) => m ? `JS heap ${MB(m.process.heapUsed)} used of ${MB(m.process.heapTotal)} (young generation ${MB(m.process.newSpace)}), external ${MB(m.process.external)}, WASM ${MB(m.wasmBytes)} MB; ${m.documents} documents, ${m.trees} trees, ${m.cachedStatements} memoised statements, ${m.parserRuntimes} parser runtimes loaded, ${m.releases} releases` : 'not reported by this build';
console.log(`  memory at start: ${where(memStart)}\n  memory with all open: ${where(memOpen)}\n  memory 15 s after closing: ${where(memClosed)}`);
if (mappings) console.log(`  largest mappings after closing: ${mappings}`);
// A server that no longer answers must not keep the load test waiting.
await Promise.race([conn.sendRequest('shutdown').catch(() => {}), sleep(5000)]);
await conn.sendNotification('exit');
// Let the server exit by itself (a CPU profile is written at exit), then make sure it is gone.
await Promise.race([new Promise((r) => child.once('exit', r)), sleep(10000)]);
conn.dispose();
child.kill();
