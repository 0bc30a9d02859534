/**
 * The language server under hostile input and traffic (issue 25), over real JSON-RPC streams (out/server.js): many
 * statements on one line, unanswered requests to the client, malformed requests, a second initialize, requests
 * after shutdown.
 */
import * as assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
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

describe('byte-order marks: the editor and the CLI agree (out/server.js, out/cli.js)', function () {
  this.timeout(60000);
  let client: TestClient;
  let dir: string;
  beforeEach(async () => { client = new TestClient(); await client.initialize(); dir = mkdtempSync(join(tmpdir(), 'pl-bom-')); });
  afterEach(async () => { await client.stop(); rmSync(dir, { recursive: true, force: true }); });

  it('a file starting with one, two or three BOMs has the same findings in the server (whatever the editor strips) and in check', async () => {
    // Before: a double-BOM file gave 7 findings in `check` (it removes one BOM) and 0 in the editor when the text came
    // with both: two U+FEFF made tree-sitter lose the module docstring and the imports. Now the leading BOMs are blank
    // to the parser in both (lines.ts pythonSource).
    const fixture = readFileSync(join(ROOT, 'test', 'fixtures', 'analysis', 'gpt_small.py'), 'utf8');
    const lines = (ds: Array<{ code: string; range: { start: { line: number } } }>): string[] => ds.map((d) => `${d.range.start.line + 1}:${d.code}`).sort();
    const seen: string[][] = [];
    for (const boms of [0, 1, 2, 3]) {
      const uri = `file:///ws/bom${boms}.py`;
      await client.open(uri, '\ufeff'.repeat(boms) + fixture);
      seen.push(lines((await client.diagnostics(uri, (p) => p.version === 1)).diagnostics));
    }
    assert.ok(seen[0].length >= 5, `findings without a BOM: ${seen[0]}`);
    for (const s of seen) assert.deepEqual(s, seen[0]);
    for (const boms of [1, 2, 3]) {
      const file = join(dir, `bom${boms}.py`);
      writeFileSync(file, Buffer.concat([Buffer.from('\ufeff'.repeat(boms)), Buffer.from(fixture)]));
      const run = spawnSync(process.execPath, [join(ROOT, 'out', 'cli.js'), 'check', file, '--format', 'json'], { encoding: 'utf8', timeout: 30000 });
      const json = JSON.parse(run.stdout) as { diagnostics: Array<{ line: number; code: string }> };
      assert.deepEqual(json.diagnostics.map((d) => `${d.line}:${d.code}`).sort(), seen[0], `check with ${boms} BOMs`);
    }
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

/**
 * A fresh server given initialize, initialized, then `frames` as raw JSON-RPC frames; resolves to the replies by id.
 * With `initialize` false the frames are sent at once, with no initialize of ours before them.
 */
function rawReplies(frames: Array<{ id: number; [key: string]: unknown }>, initialize = true): Promise<Map<number, unknown>> {
  const child = spawn(process.execPath, [join(ROOT, 'out', 'server.js'), '--stdio'], { stdio: ['pipe', 'pipe', 'pipe'] });
  const send = (message: object): void => {
    const body = JSON.stringify(message);
    child.stdin.write(`Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  };
  const replies = new Map<number, unknown>();
  return new Promise((resolve, reject) => {
    let out = Buffer.alloc(0);
    const timer = setTimeout(() => { child.kill(); reject(new Error(`replies so far: ${JSON.stringify([...replies])}`)); }, 20000);
    child.stdout.on('data', (d: Buffer) => {
      out = Buffer.concat([out, d]);
      for (;;) {
        const head = out.indexOf('\r\n\r\n');
        const m = head >= 0 ? /Content-Length: (\d+)/.exec(out.subarray(0, head).toString()) : null;
        if (!m || out.length < head + 4 + Number(m[1])) break;
        const message = JSON.parse(out.subarray(head + 4, head + 4 + Number(m[1])).toString());
        out = out.subarray(head + 4 + Number(m[1]));
        if (initialize && message.id === 1 && 'result' in message) { send({ jsonrpc: '2.0', method: 'initialized', params: {} }); frames.forEach(send); }
        else if (typeof message.id === 'number' && !message.method) replies.set(message.id, message);
      }
      if (frames.every((f) => replies.has(f.id))) { clearTimeout(timer); child.kill(); resolve(replies); }
    });
    if (initialize) send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { processId: null, rootUri: null, capabilities: {} } });
    else frames.forEach(send);
  });
}

describe('malformed and out-of-order traffic (out/server.js)', function () {
  this.timeout(60000);
  let client: TestClient;
  beforeEach(async () => { client = new TestClient(); await client.initialize(); });
  afterEach(() => client.stop());

  /** The error a request is answered with (fails when it is answered with a result). */
  async function errorOf(method: string, params: unknown): Promise<{ code: number; message: string }> {
    try {
      const result = await client.connection.sendRequest(method, params);
      assert.fail(`${method} answered ${JSON.stringify(result)}`);
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      return e as { code: number; message: string };
    }
  }

  it('a second initialize is refused (InvalidRequest) and the open documents are kept', async () => {
    const uri = 'file:///ws/kept.py';
    await client.open(uri, MODEL);
    await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    const err = await errorOf('initialize', { processId: process.pid, rootUri: null, capabilities: {} });
    assert.equal(err.code, -32600);
    assert.match(err.message, /already initialized/);
    // Before: a new session, the document gone: hover answered null and edits were dropped.
    const hover = await client.connection.sendRequest('textDocument/hover', { textDocument: { uri }, position: { line: 7, character: 20 } });
    assert.ok(hover, 'the document is still open');
    await client.change(uri, 2, [{ range: { start: { line: 7, character: 28 }, end: { line: 7, character: 31 } }, text: '4096' }]);
    await client.diagnostics(uri, (p) => p.version === 2 && p.diagnostics.some((d) => d.code === 'PL101'));
  });

  it('null or missing params (raw frames) answer InvalidParams (-32602) saying what is wrong', async () => {
    const replies = await rawReplies([
      { jsonrpc: '2.0', id: 11, method: 'textDocument/hover', params: null },
      { jsonrpc: '2.0', id: 12, method: 'textDocument/hover' },
      { jsonrpc: '2.0', id: 13, method: 'textDocument/codeAction', params: null },
    ]);
    for (const id of [11, 12, 13]) {
      const reply = replies.get(id) as { error?: { code: number; message: string } };
      assert.equal(reply?.error?.code, -32602, JSON.stringify(reply));
      assert.match(reply.error!.message, /parameters must be an object, got (null|nothing)/);
    }
  });

  it('initialize with null, missing or malformed params answers InvalidParams (-32602), and a valid one after it works', async () => {
    // Before: null params threw inside vscode-languageserver (it read params.processId before our handler): -32603
    // "Cannot read properties of null (reading 'processId')".
    const replies = await rawReplies([
      { jsonrpc: '2.0', id: 21, method: 'initialize', params: null },
      { jsonrpc: '2.0', id: 22, method: 'initialize' },
      { jsonrpc: '2.0', id: 23, method: 'initialize', params: { processId: null, rootUri: null } },
      { jsonrpc: '2.0', id: 24, method: 'initialize', params: { processId: null, capabilities: { workspace: 3 } } },
      { jsonrpc: '2.0', id: 25, method: 'initialize', params: { processId: null, rootUri: null, capabilities: {} } },
    ], false);
    const expected: Record<number, RegExp> = {
      21: /^initialize: the parameters must be an object, got null$/,
      22: /^initialize: the parameters must be an object, got nothing$/,
      23: /^initialize: capabilities must be an object, got nothing$/,
      24: /^initialize: capabilities\.workspace must be an object, got 3$/,
    };
    for (const [id, message] of Object.entries(expected)) {
      const reply = replies.get(Number(id)) as { error?: { code: number; message: string } };
      assert.equal(reply?.error?.code, -32602, JSON.stringify(reply));
      assert.match(reply.error!.message, message);
    }
    const ok = replies.get(25) as { result?: { capabilities?: unknown } };
    assert.ok(ok?.result?.capabilities, JSON.stringify(ok));
  });

  it('malformed params answer InvalidParams (-32602) saying what is wrong, not a JavaScript error', async () => {
    await client.open('file:///ws/m.py', MODEL);
    const cases: [string, unknown, RegExp][] = [
      ['textDocument/hover', { textDocument: { uri: 'file:///ws/m.py' } }, /position must be \{line, character\}/],
      ['textDocument/hover', { textDocument: null, position: { line: 0, character: 0 } }, /textDocument must be \{uri: string\}/],
      ['textDocument/codeAction', { textDocument: { uri: 'file:///ws/m.py' }, range: null, context: { diagnostics: [] } }, /range must be \{start, end\}/],
      ['textDocument/codeAction', { textDocument: { uri: 'file:///ws/m.py' }, range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } } }, /context must be/],
    ];
    for (const [method, params, message] of cases) {
      const err = await errorOf(method, params);
      assert.equal(err.code, -32602, `${method} ${JSON.stringify(params)}: ${err.message}`);
      assert.match(err.message, message);
      assert.doesNotMatch(err.message, /Cannot read properties/);
    }
    // malformed notifications are logged and ignored; the server goes on
    await client.connection.sendNotification('textDocument/didOpen', null);
    await client.connection.sendNotification('textDocument/didClose', { textDocument: null });
    await client.notification((n) => n.method === 'window/logMessage' && /ignored a textDocument\/didOpen notification with invalid parameters/.test((n.params as { message: string }).message));
    await client.diagnostics('file:///ws/m.py', (p) => p.diagnostics.some((d) => d.code === 'PL101'));
  });

  it('a didChange with one malformed change applies none of them, says so, and resynchronises on the whole text', async () => {
    const uri = 'file:///ws/allornone.py';
    await client.open(uri, MODEL);
    await client.diagnostics(uri, (p) => p.version === 1 && p.diagnostics.length > 0);
    await client.change(uri, 2, [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, text: '# a\n' }, { range: null, text: 'x' }]);
    // Before: the first change applied, then a throw: no publish and the version not updated.
    const desynced = await client.diagnostics(uri, (p) => p.version === 2);
    assert.deepEqual(desynced.diagnostics, []);
    await client.notification((n) => n.method === 'window/logMessage' && /none of the 2 changes of version 2 applied/.test((n.params as { message: string }).message));
    await client.notification((n) => n.method === 'precisionLens/status' && /none of the 2 changes/.test(JSON.stringify(n.params)));
    await client.change(uri, 3, [{ text: MODEL }]);
    await client.diagnostics(uri, (p) => p.version === 3 && p.diagnostics.some((d) => d.code === 'PL101'));
  });

  it('requests after shutdown are refused (InvalidRequest)', async () => {
    await client.open('file:///ws/s.py', MODEL);
    await client.connection.sendRequest('shutdown');
    const err = await errorOf('textDocument/hover', { textDocument: { uri: 'file:///ws/s.py' }, position: { line: 7, character: 20 } });
    assert.equal(err.code, -32600);
    assert.match(err.message, /shut down/);
    const again = await errorOf('initialize', { processId: process.pid, rootUri: null, capabilities: {} });
    assert.equal(again.code, -32600);
  });
});
