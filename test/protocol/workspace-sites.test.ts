import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, TestClient } from './lsp-client';

const MODEL = [
  'import torch', 'from torch import nn', '', '',
  'class ViT(nn.Module):',
  '    def __init__(self, dim, mlp_dim):',
  '        super().__init__()',
  '        self.up = nn.Linear(dim, mlp_dim)',
  '        self.down = nn.Linear(mlp_dim, dim)',
  '',
  '    def forward(self, x):',
  '        return self.down(self.up(x))',
  '',
].join('\n');

const TRAIN = 'import torch\nfrom model import ViT\n\n\nmodel = ViT(dim=1024, mlp_dim=4096)\n';

describe('language server: sizes from construction sites in other workspace files', function () {
  this.timeout(30000);
  let dir = '';
  before(() => {
    if (!existsSync(join(ROOT, 'out', 'server.js'))) execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit' });
    dir = mkdtempSync(join(tmpdir(), 'pl-sites-lsp-'));
    writeFileSync(join(dir, 'model.py'), MODEL);
    writeFileSync(join(dir, 'train.py'), TRAIN);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('after the workspace scan, the layers get the sizes train.py builds the class with, and the hover names train.py:5', async () => {
    const c = new TestClient();
    try {
      await c.initialize(dir);
      const uri = `file://${join(dir, 'model.py')}`;
      await c.open(uri, MODEL);
      await c.notification((n) => n.method === 'window/logMessage' && /workspace scan/.test(JSON.stringify(n.params)));
      await c.change(uri, 2, [{ range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } }, text: '# edited\n' }]);
      const published = await c.diagnostics(uri, (p) => p.version === 2);
      const up = published.diagnostics.find((d) => d.code === 'PL101' && d.message.startsWith('self.up:'));
      assert.ok(up, JSON.stringify(published.diagnostics.map((d) => d.message)));
      assert.equal(up.message, 'self.up: nn.Linear 1024->4096 can run in FP8 as te.Linear (1.09x at 16k tokens)');
      const hover = (await c.connection.sendRequest('textDocument/hover', {
        textDocument: { uri }, position: { line: up.range.start.line, character: up.range.start.character + 3 },
      })) as { contents: { value: string } } | null;
      assert.ok(hover);
      const md = hover.contents.value.replace(/\\([\\`*_{}[\]()#+\-.!<>])/g, '$1');
      assert.match(md, /dim = 1024 \(dim as passed where ViT is built at train\.py:5\)/);
    } finally {
      await c.stop();
    }
  });

  it('sees a training script created after the scan, and its deletion, through the watcher it registers', async () => {
    const ws = join(dir, 'watched');
    mkdirSync(ws);
    writeFileSync(join(ws, 'model.py'), MODEL);
    const c = new TestClient();
    try {
      await c.initialize(ws, { didChangeWatchedFiles: { dynamicRegistration: true } });
      const uri = `file://${join(ws, 'model.py')}`;
      await c.open(uri, MODEL);
      await c.notification((n) => n.method === 'window/logMessage' && /workspace scan/.test(JSON.stringify(n.params)));
      const watcher = c.registrations.find((r) => r.method === 'workspace/didChangeWatchedFiles');
      assert.deepEqual(watcher?.registerOptions, { watchers: [{ globPattern: '**/*.py' }] });
      const up = (p: { diagnostics: { code: string; message: string }[] }) => p.diagnostics.find((d) => d.code === 'PL101' && d.message.startsWith('self.up:'));
      const before = await c.diagnostics(uri, (p) => p.version === 1 && !!up(p));
      assert.doesNotMatch(up(before)!.message, /1024/);
      const train = join(ws, 'train.py');
      writeFileSync(train, TRAIN);
      await c.connection.sendNotification('workspace/didChangeWatchedFiles', { changes: [{ uri: `file://${train}`, type: 1 }] });
      const created = await c.diagnostics(uri, (p) => /1024->4096/.test(up(p)?.message ?? ''));
      assert.equal(up(created)!.message, 'self.up: nn.Linear 1024->4096 can run in FP8 as te.Linear (1.09x at 16k tokens)');
      unlinkSync(train);
      await c.connection.sendNotification('workspace/didChangeWatchedFiles', { changes: [{ uri: `file://${train}`, type: 3 }] });
      const deleted = await c.diagnostics(uri, (p) => !!up(p) && !/1024/.test(up(p)!.message));
      assert.equal(up(deleted)!.message, up(before)!.message);
    } finally {
      await c.stop();
    }
  });
});
