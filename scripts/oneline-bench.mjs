#!/usr/bin/env node
// Open and one-character-edit times of the BUILT language server (out/server.js over stdio) on documents with many
// statements on one line (issue 25): `import torch` then `x=1;` repeated to 20/40/80/160 KB, and the same size of an
// unclosed `a if b else (` line. Each size gets a fresh server; the figure is from sending didOpen (didChange) to the
// publish of that version, and the server's CPU time over the same span.
//
//   npm run build && node scripts/oneline-bench.mjs [--sizes 20,40,80,160] [--server out/server.js] [--shapes WORD,...]
// (--shapes: only the shapes whose name contains one of the words)
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuOf, startServer } from './lib/server-process.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const argOf = (name, def) => { const i = process.argv.indexOf(name); return i >= 0 ? process.argv[i + 1] : def; };
const SIZES = argOf('--sizes', '20,40,80,160').split(',').map(Number);
const SERVER = argOf('--server', join(root, 'out', 'server.js'));

const INIT = 'import torch\nimport torch.nn as nn\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n';
const SHAPES = {
  'x=1; on one line': (kb) => 'import torch\n' + 'x=1;'.repeat(Math.round((kb * 1000) / 4)) + '\n',
  'unclosed a if b else (': (kb) => 'import torch\n' + 'a if b else ('.repeat(Math.round((kb * 1000) / 13)) + '\n',
  'layers on one line in a method': (kb) => 'import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        '
    + Array.from({ length: Math.round((kb * 1000) / 32) }, (_, i) => `self.l${i}=nn.Linear(${16 * (1 + (i % 8))},16);`).join('') + '\n',
  // the text test of each `self.x = ...` (layers.ts notClassLikeByText), looked up because of `self.block(...)`
  'self.aN=1; in __init__': (kb) => `${INIT}        ${Array.from({ length: Math.round((kb * 1000) / 10) }, (_, i) => `self.a${i}=1;`).join('')}\n        self.blk=self.block(8)\n`,
  // how the class uses self.fc (checks-uses.ts attrUses): its weight replaced, once per statement
  'self.fc.weight=w; in __init__': (kb) => `${INIT}        self.fc=nn.Linear(1024,1024)\n        ${'self.fc.weight=w;'.repeat(Math.round((kb * 1000) / 17))}\n`,
  // forward calls of N layers on one line (evidence.ts lineSpan per finding)
  'x=self.lN(x); in forward': (kb) => { const n = Math.round((kb * 1000) / 40); return `${INIT}${Array.from({ length: n }, (_, i) => `        self.l${i}=nn.Linear(1024,1024)\n`).join('')}    def forward(self, x):\n        ${Array.from({ length: n }, (_, i) => `x=self.l${i}(x);`).join('')}\n        return x\n`; },
  // a norm feeding a Linear through a variable, N times on one line (rules/fusion.ts soleConsumer)
  'h=self.nN(x);x=self.lN(h); in forward': (kb) => { const n = Math.round((kb * 1000) / 100); return `${INIT}${Array.from({ length: n }, (_, i) => `        self.n${i}=nn.LayerNorm(1024)\n        self.l${i}=nn.Linear(1024,1024)\n`).join('')}    def forward(self, x):\n        ${Array.from({ length: n }, (_, i) => `h=self.n${i}(x);x=self.l${i}(h);`).join('')}\n        return x\n`; },
};
const ONLY = argOf('--shapes', '');

async function measure(text) {
  const { child, conn } = startServer(SERVER);
  const waiters = [];
  conn.onNotification('textDocument/publishDiagnostics', (p) => {
    for (const w of [...waiters]) if ((p.version ?? 0) >= w.version) { waiters.splice(waiters.indexOf(w), 1); w.resolve(); }
  });
  conn.onRequest('workspace/configuration', (p) => p.items.map(() => ({})));
  conn.onNotification(() => {});
  conn.listen();
  await conn.sendRequest('initialize', { processId: process.pid, rootUri: null, workspaceFolders: null, capabilities: { workspace: { configuration: true } } });
  await conn.sendNotification('initialized', {});
  const uri = 'file:///bench/oneline.py';
  const timed = async (version, send) => {
    const cpu0 = cpuOf(child.pid);
    const t0 = performance.now();
    const done = new Promise((resolve) => waiters.push({ version, resolve }));
    await send();
    await done;
    const cpu1 = cpuOf(child.pid);
    return { ms: performance.now() - t0, cpu: cpu1.user + cpu1.system - cpu0.user - cpu0.system };
  };
  const open = await timed(1, () => conn.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'python', version: 1, text } }));
  // one character in the middle of the long line
  const mid = Math.floor(text.length / 2);
  const line = text.slice(0, mid).split('\n').length - 1;
  const character = mid - text.lastIndexOf('\n', mid - 1) - 1;
  const edit = await timed(2, () => conn.sendNotification('textDocument/didChange', {
    textDocument: { uri, version: 2 }, contentChanges: [{ range: { start: { line, character }, end: { line, character } }, text: ' ' }],
  }));
  await Promise.race([conn.sendRequest('shutdown'), new Promise((r) => setTimeout(r, 2000))]);
  child.kill();
  return { open, edit };
}

const f = (x) => `${(x.ms / 1000).toFixed(2)} s (cpu ${x.cpu.toFixed(2)} s)`;
for (const [name, make] of Object.entries(SHAPES)) {
  if (ONLY && !ONLY.split(',').some((w) => name.includes(w))) continue;
  for (const kb of SIZES) {
    const text = make(kb);
    const r = await measure(text);
    console.log(`${name.padEnd(24)} ${String(kb).padStart(4)} KB  open ${f(r.open)}  edit ${f(r.edit)}`);
  }
}
