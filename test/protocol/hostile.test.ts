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
