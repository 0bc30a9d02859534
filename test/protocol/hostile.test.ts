/**
 * The language server under hostile input and traffic (issue 25), over real JSON-RPC streams (out/server.js): many
 * statements on one line, unanswered requests to the client, malformed requests, a second initialize, requests
 * after shutdown.
 */
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, TestClient } from './lsp-client';

const MODEL = `import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(768, 3072)
`;

before(() => {
  if (!existsSync(join(ROOT, 'out', 'server.js'))) execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit' });
});

describe('hostile input: many statements on one line (out/server.js)', function () {
  this.timeout(90000);
  let client: TestClient;
  beforeEach(async () => { client = new TestClient(); await client.initialize(); });
  afterEach(() => client.stop());

  it('opens and re-analyses 320 KB of `x=1;` on one line while another document still answers', async () => {
    // Before: quadratic in mirrorWalkNodes, 8.8 s to open 160 KB and 20 s per keystroke, the whole server frozen meanwhile.
    const big = 'file:///ws/oneline.py';
    const text = `import torch\n${'x=1;'.repeat(80000)}\n`;
    await client.open('file:///ws/model.py', MODEL);
    await client.diagnostics('file:///ws/model.py', (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    await client.open(big, text);
    await client.diagnostics(big, (p) => p.version === 1, 20000);
    await client.change(big, 2, [{ range: { start: { line: 1, character: 160000 }, end: { line: 1, character: 160000 } }, text: ' ' }]);
    const hover = client.connection.sendRequest('textDocument/hover', { textDocument: { uri: 'file:///ws/model.py' }, position: { line: 7, character: 20 } });
    await client.diagnostics(big, (p) => p.version === 2, 20000);
    assert.ok(await hover, 'hover on the other document answered');
  });
});

describe('waits on the client have deadlines (out/server.js)', function () {
  this.timeout(60000);
  let client: TestClient;
  beforeEach(async () => { client = new TestClient(); await client.initialize(); });
  afterEach(() => client.stop());

  it('one unanswered workspace/configuration request does not stop analysis: defaults after the deadline, logged', async () => {
    // Before: the analysis queue waited for the reply for good; no document was analysed again.
    let dropped = 0;
    client.connection.onRequest('workspace/configuration', (p: { items: unknown[] }) => {
      if (dropped++ === 0) return new Promise(() => {}); // never answered
      return p.items.map(() => ({}));
    });
    await client.open('file:///ws/first.py', MODEL);
    await client.open('file:///ws/second.py', MODEL.replace('Block', 'Other'));
    await client.diagnostics('file:///ws/second.py', (p) => p.diagnostics.some((d) => d.code === 'PL101'), 15000);
    await client.diagnostics('file:///ws/first.py', (p) => p.diagnostics.some((d) => d.code === 'PL101'), 15000);
    await client.notification((n) => n.method === 'window/logMessage'
      && /workspace\/configuration for file:\/\/\/ws\/first\.py: no answer from the client in \d+ ms, going on with the defaults/.test((n.params as { message: string }).message));
    assert.ok(dropped >= 2);
  });

  it('a configuration answer that comes after the deadline is applied when it comes', async () => {
    let asked = 0;
    const settings = { rules: { PL101: 'off' } };
    client.connection.onRequest('workspace/configuration', (p: { items: unknown[] }) => {
      const answer = p.items.map(() => settings);
      return asked++ === 0 ? new Promise((resolve) => setTimeout(() => resolve(answer), 4500)) : answer;
    });
    await client.open('file:///ws/late.py', MODEL);
    // the defaults first (PL101 on), then the late settings (PL101 off)
    await client.diagnostics('file:///ws/late.py', (p) => p.diagnostics.some((d) => d.code === 'PL101'), 15000);
    await client.diagnostics('file:///ws/late.py', (p) => !p.diagnostics.some((d) => d.code === 'PL101'), 15000);
  });
});
