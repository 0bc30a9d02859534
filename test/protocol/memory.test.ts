/**
 * Memory after closing documents (issue 13): the server releases every document's tree and memoised statements when
 * it closes, loads a fresh WASM runtime once the last one is closed (WASM memory never shrinks), and then runs a
 * memory-reducing collection, counted. Proven through precisionLens/memory over real JSON-RPC: counts, never RSS or
 * timings.
 */
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { MemoryRequest, type MemoryReport } from '../../common/protocol';
import { ROOT, TestClient } from './lsp-client';

const model = (i: number): string => `import torch
import torch.nn as nn


class Block${i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(768, 3072)
        self.proj = nn.Linear(3072, 768)

    def forward(self, x):
        return self.proj(self.fc(x))
`;

const URIS = [0, 1, 2].map((i) => `file:///memory/model${i}.py`);

describe('language server memory over JSON-RPC (out/server.js)', function () {
  this.timeout(60000);
  let client: TestClient;
  const report = (): Promise<MemoryReport> => client.connection.sendRequest(MemoryRequest);
  const isRelease = (m: { method: string; params: unknown }): boolean =>
    m.method === 'window/logMessage' && /memory released/.test((m.params as { message: string }).message);
  /** Waits for the server's n-th "memory released" log line. */
  const released = (n: number): Promise<void> => client.notification(() => client.notifications.filter(isRelease).length >= n);

  before(() => {
    if (!existsSync(join(ROOT, 'out', 'server.js'))) execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit' });
  });
  beforeEach(async () => {
    client = new TestClient();
    await client.initialize();
  });
  afterEach(() => client.stop());

  it('releases each closed document\'s tree and memos, then a fresh WASM runtime and a memory-reducing collection after the last', async () => {
    for (const [i, uri] of URIS.entries()) await client.open(uri, model(i));
    for (const uri of URIS) await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    // an edit, so that the memo and the tree are the incremental ones
    await client.change(URIS[0], 2, [{ range: { start: { line: 7, character: 0 }, end: { line: 7, character: 0 } }, text: '        # edited\n' }]);
    await client.diagnostics(URIS[0], (p) => p.version === 2);
    const open = await report();
    assert.equal(open.documents, 3);
    assert.equal(open.trees, 3, 'one live tree per open document');
    assert.ok(open.cachedStatements >= 3, `memoised statements while open: ${open.cachedStatements}`);
    assert.equal(open.parserRuntimes, 1);
    assert.ok(open.wasmBytes > 0);
    assert.equal(open.releases, 0);

    await client.close(URIS[0]);
    await client.close(URIS[1]);
    const one = await report();
    assert.deepEqual([one.documents, one.trees, one.parserRuntimes, one.releases], [1, 1, 1, 0], 'closing releases that document\'s tree only');
    assert.ok(one.cachedStatements < open.cachedStatements);

    await client.close(URIS[2]);
    await released(1);
    const none = await report();
    assert.deepEqual([none.documents, none.trees, none.cachedStatements], [0, 0, 0], 'nothing of a document is held after it closed');
    assert.equal(none.parserRuntimes, 2, 'the grown WASM runtime is replaced by a fresh one');
    assert.equal(none.releases, 1);
    assert.ok(none.wasmBytes > 0 && none.wasmBytes <= open.wasmBytes);

    // The fresh runtime serves the next document, and its last close releases again.
    await client.open(URIS[0], model(0));
    await client.diagnostics(URIS[0], (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    assert.equal((await report()).trees, 1);
    await client.close(URIS[0]);
    await released(2);
    const again = await report();
    assert.deepEqual([again.documents, again.trees, again.parserRuntimes, again.releases], [0, 0, 3, 2]);
  });
});
