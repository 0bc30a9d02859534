/**
 * The server under conditions that once wedged it (issue 13): documents whose workspace facts feed each other,
 * inputs the parser refuses, changes it cannot apply, malformed notifications and frames, CR-only line endings.
 * Every test drives the built server over real JSON-RPC streams.
 */
import * as assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, TestClient } from './lsp-client';

const MODEL = `import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(768, 3072)
        self.proj = nn.Linear(3072, 768)

    def forward(self, x):
        return self.proj(self.fc(x))
`;

const TRAIN = `import torch
import transformer_engine.pytorch as te
from model import Block

model = torch.compile(Block())
opt = torch.optim.AdamW(model.parameters())
for batch in range(10):
    with te.autocast(enabled=True):
        loss = model(batch).sum()
    loss.backward()
    opt.step()
`;

const TRAIN_PLAIN = `import torch
from model import Block

model = Block()
opt = torch.optim.AdamW(model.parameters())
for batch in range(10):
    loss = model(batch).sum()
    loss.backward()
    opt.step()
`;

/** Waits a while with the server idle as far as the test is concerned, then returns what it published meanwhile. */
function publishesDuring(client: TestClient, ms: number): Promise<number> {
  const before = client.publishCount;
  return new Promise((resolve) => setTimeout(() => resolve(client.publishCount - before), ms));
}

describe('language server robustness over JSON-RPC (out/server.js)', function () {
  this.timeout(60000);
  let client: TestClient;

  before(() => {
    if (!existsSync(join(ROOT, 'out', 'server.js'))) execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit' });
  });
  beforeEach(async () => {
    client = new TestClient();
    await client.initialize();
  });
  afterEach(() => client.stop());

  it('settles: documents whose workspace facts change each other are published a bounded number of times', async () => {
    // A training step, FP8 autocast and torch.compile in some, plain models in others: each changes the facts the
    // others are analysed with. The server once re-published these forever (about 600 publishes per second).
    const docs = [
      ['file:///ws/train.py', TRAIN], ['file:///ws/train_plain.py', TRAIN_PLAIN],
      ['file:///ws/model.py', MODEL], ['file:///ws/model2.py', MODEL.replace('Block', 'Block2')],
      ['file:///ws/train2.py', TRAIN.replace('Block()', 'Block2()')], ['file:///ws/model3.py', MODEL.replace('768', '1024')],
    ];
    for (const [uri, text] of docs) await client.open(uri, text);
    for (const [uri] of docs) await client.diagnostics(uri, () => true);
    // Once every document has been published, at most one more round can follow (the merged facts changed once
    // per document opened): a livelock publishes hundreds of times in this second.
    const total = client.publishCount + (await publishesDuring(client, 1000));
    assert.ok(total <= docs.length * 3, `published ${total} times for ${docs.length} documents`);
    assert.equal(await publishesDuring(client, 500), 0, 'still publishing after the documents settled');
    // An edit publishes its document again (new version) and only the documents whose findings changed.
    const before = client.publishCount;
    await client.change('file:///ws/model.py', 2, [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, text: '# edit\n' }]);
    await client.diagnostics('file:///ws/model.py', (p) => p.version === 2);
    await publishesDuring(client, 500);
    assert.ok(client.publishCount - before <= 2, `an edit caused ${client.publishCount - before} publishes`);
  });

  it('keeps serving after a document the parser cannot take, and says why it was not analysed', async () => {
    let deep = 'import torch\nx = \'unterminated\n';
    for (let i = 0; i < 520; i++) deep += `${'    '.repeat(i)}if x:\n`;
    await client.open('file:///ws/deep.py', deep);
    await client.notification((n) => n.method === 'precisionLens/status' && /not analysed/.test(JSON.stringify(n.params)));
    await client.open('file:///ws/model.py', MODEL);
    const published = await client.diagnostics('file:///ws/model.py', (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    assert.equal(published.diagnostics.filter((d) => d.code === 'PL101').length, 2);
  });

  it('does not drift on a reversed or negative range: it reports, then resynchronises on the whole text', async () => {
    const uri = 'file:///ws/model.py';
    await client.open(uri, MODEL);
    await client.diagnostics(uri, (p) => p.diagnostics.length === 2);
    await client.change(uri, 2, [{ range: { start: { line: 7, character: 10 }, end: { line: 7, character: 2 } }, text: 'x' }]);
    await client.notification((n) => n.method === 'precisionLens/status' && /cannot apply exactly/.test(JSON.stringify(n.params)));
    const desynced = await client.diagnostics(uri, (p) => p.version === 2);
    assert.deepEqual(desynced.diagnostics, [], 'no findings on text that may not be the editor\'s');
    await client.change(uri, 3, [{ range: { start: { line: 0, character: -4 }, end: { line: 0, character: 0 } }, text: 'y' }]);
    // The editor's whole text brings the document back.
    await client.change(uri, 4, [{ text: MODEL }]);
    const back = await client.diagnostics(uri, (p) => p.version === 4);
    assert.equal(back.diagnostics.length, 2);
  });

  it('rejects a precisionLens/environment notification with null parameters without disabling analysis', async () => {
    await client.connection.sendNotification('precisionLens/environment', null);
    await client.connection.sendNotification('precisionLens/environment', { teVersion: 42 });
    const uri = 'file:///ws/model.py';
    await client.open(uri, MODEL);
    const published = await client.diagnostics(uri, (p) => p.diagnostics.length > 0);
    assert.equal(published.diagnostics.filter((d) => d.code === 'PL101').length, 2);
    await client.notification((n) => n.method === 'window/logMessage' && /invalid parameters/.test(JSON.stringify(n.params)));
  });

  it('reads CR-only line endings by Python\'s rules (findings on the right lines and columns)', async () => {
    const uri = 'file:///ws/cr.py';
    await client.open(uri, MODEL.replace(/\n/g, '\r'));
    const published = await client.diagnostics(uri, (p) => p.diagnostics.length > 0);
    const starts = published.diagnostics.map((d) => d.range.start).sort((a, b) => a.line - b.line);
    assert.deepEqual(starts, [{ line: 7, character: 18 }, { line: 8, character: 20 }]);
  });
});

describe('language server framing over stdio (out/server.js)', function () {
  this.timeout(30000);

  /** Writes raw bytes to a fresh server, then a valid initialize request; resolves to the reply's text. */
  function replyAfter(garbage: Buffer | string): Promise<string> {
    const child = spawn(process.execPath, [join(ROOT, 'out', 'server.js'), '--stdio'], { stdio: ['pipe', 'pipe', 'pipe'] });
    const body = JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'initialize', params: { processId: null, rootUri: null, capabilities: {} } });
    return new Promise((resolve, reject) => {
      let out = '';
      const timer = setTimeout(() => { child.kill(); reject(new Error(`no reply; stdout so far: ${out}`)); }, 20000);
      child.stdout.on('data', (d) => {
        out += String(d);
        if (/"id":7/.test(out)) { clearTimeout(timer); child.kill(); resolve(out); }
      });
      child.stdin.write(garbage);
      child.stdin.write(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
  }

  it('answers after a frame without Content-Length', async () => {
    assert.match(await replyAfter('Content-Type: application/json\r\n\r\n{"jsonrpc":"2.0","method":"x"}'), /"capabilities"/);
  });

  it('answers after a negative Content-Length', async () => {
    assert.match(await replyAfter('Content-Length: -5\r\n\r\n{}'), /"capabilities"/);
  });

  it('answers after random bytes', async () => {
    const bytes = Buffer.alloc(4096);
    let seed = 13;
    for (let i = 0; i < bytes.length; i++) bytes[i] = (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24;
    assert.match(await replyAfter(bytes), /"capabilities"/);
  });
});
