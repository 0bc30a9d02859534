import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, TestClient } from './lsp-client';

const MODEL = `import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(768, 2304)
        self.c_proj = nn.Linear(768, 768)

    def forward(self, x):
        return self.c_proj(self.c_attn(x)[..., :768])
`;

function lineOf(text: string, needle: string): { line: number; character: number } {
  const lines = text.split('\n');
  const line = lines.findIndex((l) => l.includes(needle));
  return { line, character: lines[line].indexOf(needle) };
}

describe('language server over JSON-RPC (out/server.js)', function () {
  this.timeout(30000);
  let client: TestClient;

  before(() => {
    if (!existsSync(join(ROOT, 'out', 'server.js'))) execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit' });
  });
  beforeEach(async () => {
    client = new TestClient();
    await client.initialize();
  });
  afterEach(() => client.stop());

  it('announces incremental sync and code actions', async () => {
    const c = new TestClient();
    const result = (await c.initialize()) as { capabilities: { textDocumentSync: { change: number }; codeActionProvider: unknown } };
    assert.equal(result.capabilities.textDocumentSync.change, 2);
    assert.ok(result.capabilities.codeActionProvider);
    await c.stop();
  });

  it('publishes PL101 on open with the range of the constructor call', async () => {
    const uri = 'file:///ws/model.py';
    await client.open(uri, MODEL);
    const published = await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    const at = lineOf(MODEL, 'nn.Linear(768, 2304)');
    const d = published.diagnostics.find((x) => x.code === 'PL101' && x.range.start.line === at.line)!;
    assert.ok(d, JSON.stringify(published.diagnostics));
    assert.deepEqual(d.range.start, at);
    assert.deepEqual(d.range.end, { line: at.line, character: at.character + 'nn.Linear(768, 2304)'.length });
    assert.equal(d.source, 'precision-lens');
    assert.match(d.codeDescription!.href, /docs\/rules\/PL101\.md$/);
  });

  it('follows incremental edits with UTF-16 positions after non-ASCII text', async () => {
    const uri = 'file:///ws/edit.py';
    await client.open(uri, MODEL);
    await client.diagnostics(uri, (p) => p.diagnostics.length > 0);
    const at = lineOf(MODEL, 'self.c_proj');
    // Insert a string with an accented letter and an astral emoji (2 UTF-16 units) before the layer on its line.
    const prefix = 's = "héllo😀"; ';
    await client.change(uri, 2, [{ range: { start: at, end: at }, text: prefix }]);
    const published = await client.diagnostics(uri, (p) => p.version === 2);
    const expectedChar = at.character + prefix.length + 'self.c_proj = '.length;
    const onLine = published.diagnostics.filter((d) => d.code === 'PL101' && d.range.start.line === at.line);
    assert.equal(onLine.length, 1, JSON.stringify(published.diagnostics));
    assert.equal(onLine[0].range.start.character, expectedChar);

    // Now break the shape rule in place: 768 -> 100 is not a multiple of 8 on the output side.
    const c = lineOf(MODEL, 'nn.Linear(768, 768)');
    const col = c.character + prefix.length + 'nn.Linear(768, '.length;
    await client.change(uri, 3, [{ range: { start: { line: c.line, character: col }, end: { line: c.line, character: col + 3 } }, text: '100' }]);
    const after = await client.diagnostics(uri, (p) => p.version === 3);
    const codes = after.diagnostics.filter((d) => d.range.start.line === c.line).map((d) => d.code);
    assert.deepEqual(codes, ['PL110'], JSON.stringify(after.diagnostics));
  });

  it('offers the conversion quick fix for a PL101 diagnostic', async () => {
    const uri = 'file:///ws/fix.py';
    await client.open(uri, MODEL);
    const published = await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    const d = published.diagnostics.find((x) => x.code === 'PL101')!;
    const actions = (await client.connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri }, range: d.range, context: { diagnostics: [d], only: ['quickfix'] },
    })) as Array<{ title: string; kind: string; edit: { changes: Record<string, Array<{ newText: string }>> } }>;
    const convert = actions.find((a) => /te\.Linear/.test(a.title));
    assert.ok(convert, JSON.stringify(actions.map((a) => a.title)));
    assert.equal(convert.kind, 'quickfix');
    assert.ok(convert.edit.changes[uri].some((e) => e.newText.includes('te.Linear') || e.newText.includes('transformer_engine')));
  });

  it('creates the project\'s fallback module with a CreateFile where the client can, else an inline block', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pl-fb-'));
    try {
      const uri = `file://${join(dir, 'model.py')}`;
      type Action = { title: string; edit: { changes?: Record<string, Array<{ newText: string }>>; documentChanges?: Array<{ kind?: string; uri?: string; textDocument?: { uri: string }; edits?: Array<{ newText: string }> }> } };
      const convertWith = async (workspace: Record<string, unknown>): Promise<Action> => {
        const c = new TestClient();
        await c.initialize(dir, workspace);
        await c.open(uri, MODEL);
        const published = await c.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
        const d = published.diagnostics.find((x) => x.code === 'PL101')!;
        const actions = (await c.connection.sendRequest('textDocument/codeAction', {
          textDocument: { uri }, range: d.range, context: { diagnostics: [d], only: ['quickfix'] },
        })) as Action[];
        await c.stop();
        const convert = actions.find((a) => /^Convert to te\.Linear/.test(a.title));
        assert.ok(convert, JSON.stringify(actions.map((a) => a.title)));
        return convert;
      };
      const created = await convertWith({ workspaceEdit: { documentChanges: true, resourceOperations: ['create', 'rename', 'delete'] } });
      const ops = created.edit.documentChanges!;
      const module = `file://${join(dir, 'fp8_fallback.py')}`;
      assert.deepEqual(ops.map((o) => o.kind ?? o.textDocument!.uri), ['create', module, uri]);
      assert.equal(ops[0].uri, module);
      assert.match(ops[1].edits![0].newText, /^# precision-lens: fp8 fallback\n/);
      assert.ok(ops[2].edits!.some((e) => /^from fp8_fallback import fp8_linear\n$/.test(e.newText)), JSON.stringify(ops[2].edits));
      // A client without resource operations: the same conversion with the fallback inline.
      const inline = await convertWith({});
      assert.ok(inline.edit.changes![uri].some((e) => e.newText.includes('# precision-lens: fp8 fallback')));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('generates the TE API of the interpreter\'s TE version (precisionLens/environment)', async () => {
    const uri = 'file:///ws/api.py';
    const actionsFor = async (teVersion: string | undefined) => {
      await client.connection.sendNotification('precisionLens/environment', { teVersion, pythonPath: '/usr/bin/python3' });
      const actions = (await client.connection.sendRequest('textDocument/codeAction', {
        textDocument: { uri }, range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, context: { diagnostics: [] },
      })) as Array<{ title: string; edit: { changes: Record<string, Array<{ newText: string }>> } }>;
      const wrapper = actions.find((a) => /fallback wrapper/i.test(a.title));
      assert.ok(wrapper, JSON.stringify(actions.map((a) => a.title)));
      return wrapper.edit.changes[uri].map((e) => e.newText).join('');
    };
    await client.open(uri, MODEL);
    await client.diagnostics(uri, (p) => p.diagnostics.length > 0);
    const legacy = await actionsFor('2.5.0');
    assert.match(legacy, /te\.fp8_autocast\(enabled=enabled, fp8_recipe=/);
    const modern = await actionsFor('2.10.0');
    assert.match(modern, /te\.autocast\(enabled=enabled, recipe=/);
    assert.doesNotMatch(modern, /fp8_autocast\(/);
  });

  it('clears diagnostics when the document closes', async () => {
    const uri = 'file:///ws/close.py';
    await client.open(uri, MODEL);
    await client.diagnostics(uri, (p) => p.diagnostics.length > 0);
    await client.close(uri);
    await client.diagnostics(uri, (p) => p.diagnostics.length === 0);
  });

  it('turns a rule off through workspace/configuration', async () => {
    const c = new TestClient({ rules: { PL101: 'off' } });
    await c.initialize();
    const uri = 'file:///ws/off.py';
    await c.open(uri, MODEL);
    const published = await c.diagnostics(uri, (p) => p.version === 1);
    assert.ok(!published.diagnostics.some((d) => d.code === 'PL101'), JSON.stringify(published.diagnostics));
    await c.stop();
  });

  it('survives broken Python and a binary file without crashing', async () => {
    const broken = 'import torch.nn as nn\nclass A(nn.Module):\n    def __init__(self):\n        self.x = nn.Linear(64, 64\n        s = "unterminated\n\tself.y = nn.Linear(32, 32)\n';
    await client.open('file:///ws/broken.py', broken);
    await client.diagnostics('file:///ws/broken.py', () => true);
    await client.open('file:///ws/bin.py', 'import torch\u0000\u0001\u0002'.repeat(100));
    await client.diagnostics('file:///ws/bin.py', (p) => p.diagnostics.length === 0);
    // A 5 MB file is over the default maxFileSize: skipped at once with a status message, the server stays responsive.
    const huge = MODEL.repeat(Math.ceil(5 * 1024 * 1024 / MODEL.length));
    const started = Date.now();
    await client.open('file:///ws/huge.py', huge);
    await client.diagnostics('file:///ws/huge.py', (p) => p.diagnostics.length === 0);
    await client.notification((n) => n.method === 'precisionLens/status' && /maxFileSize/.test(JSON.stringify(n.params)));
    assert.ok(Date.now() - started < 5000, 'skipping a huge file must not parse it');
    // Still alive and analysing:
    await client.open('file:///ws/after.py', MODEL);
    await client.diagnostics('file:///ws/after.py', (p) => p.diagnostics.length > 0);
  });

  describe('PL302 looks at the whole workspace, not one file', () => {
    const TE_MODEL = 'import torch\nimport transformer_engine.pytorch as te\n\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = te.Linear(1024, 1024)\n';
    const TRAIN = 'import torch\nimport transformer_engine.pytorch as te\nfrom model import Net\n\nmodel = Net()\nwith te.autocast():\n    out = model(torch.randn(16, 1024, device="cuda"))\nout.sum().backward()\n';
    let dir: string;
    beforeEach(() => {
      dir = mkdtempSync(join(tmpdir(), 'pl-ws-'));
      writeFileSync(join(dir, 'model.py'), TE_MODEL);
    });
    afterEach(() => rmSync(dir, { recursive: true, force: true }));

    const PLAIN_TRAIN = 'import torch\nfrom model import Net\n\nmodel = Net()\nout = model(torch.randn(16, 1024))\nout.sum().backward()\n';

    it('raises PL302 once the scan proves the workspace trains but no file has FP8 autocast', async () => {
      writeFileSync(join(dir, 'train.py'), PLAIN_TRAIN);
      const c = new TestClient();
      await c.initialize(dir);
      const uri = `file://${join(dir, 'model.py')}`;
      await c.open(uri, TE_MODEL);
      await c.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL302'));
      await c.stop();
    });

    it('stays quiet when a training script elsewhere in the workspace runs the model under autocast', async () => {
      writeFileSync(join(dir, 'train.py'), TRAIN);
      const c = new TestClient();
      await c.initialize(dir);
      const uri = `file://${join(dir, 'model.py')}`;
      await c.open(uri, TE_MODEL);
      // Wait for an analysis that ran after the workspace scan (the scan logs its result), then check.
      await c.notification((n) => n.method === 'window/logMessage' && /workspace scan/.test(JSON.stringify(n.params)));
      // An edit after the scan forces an analysis that certainly sees the scan's facts.
      await c.change(uri, 2, [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, text: '# edited\n' }]);
      const published = await c.diagnostics(uri, (p) => p.version === 2);
      assert.ok(published.diagnostics.some((d) => d.code === 'PL401'), 'analysed');
      assert.ok(!published.diagnostics.some((d) => d.code === 'PL302'), JSON.stringify(published.diagnostics.map((d) => d.code)));
      await c.stop();
    });

    it('on the training script of a converted model (the model only on disk): a warning whose quick fix wraps the step', async () => {
      const CTX_TRAIN = 'import torch\nfrom contextlib import nullcontext\nfrom model import Net\n\nctx = nullcontext()\nmodel = Net()\nopt = torch.optim.AdamW(model.parameters())\nfor _ in range(2):\n    with ctx:\n        loss = model(torch.randn(16, 1024)).sum()\n    loss.backward()\n    opt.step()\n';
      writeFileSync(join(dir, 'train.py'), CTX_TRAIN);
      const c = new TestClient();
      await c.initialize(dir);
      const uri = `file://${join(dir, 'train.py')}`;
      await c.open(uri, CTX_TRAIN);
      const published = await c.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL302'));
      const d = published.diagnostics.find((x) => x.code === 'PL302')!;
      assert.equal(d.severity, 2, 'warning');
      assert.match(d.message, /FP8 is off/);
      const actions = await c.connection.sendRequest('textDocument/codeAction', {
        textDocument: { uri }, range: d.range, context: { diagnostics: [d], only: ['quickfix'] },
      }) as { title: string; edit?: { changes?: Record<string, { newText: string }[]>; documentChanges?: unknown[] } }[];
      const wrap = actions.find((a) => /^Wrap the training step in FP8 autocast inside `with ctx`/.test(a.title));
      assert.ok(wrap, JSON.stringify(actions.map((a) => a.title)));
      assert.match(JSON.stringify(wrap.edit), /, fp8_autocast_context\(inside_autocast=True\)/);
      await c.stop();
    });

    it('stays quiet in a workspace that does not train (a model library)', async () => {
      const c = new TestClient();
      await c.initialize(dir);
      const uri = `file://${join(dir, 'model.py')}`;
      await c.open(uri, TE_MODEL);
      await c.notification((n) => n.method === 'window/logMessage' && /workspace scan/.test(JSON.stringify(n.params)));
      await c.change(uri, 2, [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, text: '# edited\n' }]);
      const published = await c.diagnostics(uri, (p) => p.version === 2);
      assert.ok(published.diagnostics.some((d) => d.code === 'PL401'), 'analysed');
      assert.ok(!published.diagnostics.some((d) => d.code === 'PL302'), JSON.stringify(published.diagnostics.map((d) => d.code)));
      await c.stop();
    });
  });
});
