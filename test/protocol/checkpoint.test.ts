/**
 * PL701 over JSON-RPC to the built server: a model whose blocks run through TE and are checkpointed with torch's
 * checkpoint gets a warning on the call and a quick fix that calls
 * fp8_checkpoint and imports it; once the file has it, the warning is gone.
 */
import * as assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { TestClient } from './lsp-client';

const MODEL = readFileSync(join(__dirname, '..', 'fixtures', 'messages', 'te_checkpoint.py'), 'utf8');

type Edit = { range: { start: { line: number; character: number }; end: { line: number; character: number } }; newText: string };
type Action = { title: string; kind: string; edit?: { changes?: Record<string, Edit[]>; documentChanges?: ({ kind?: string; uri?: string } | { textDocument: { uri: string }; edits: Edit[] })[] } };

describe('server: PL701, torch\'s checkpoint around te.* layers (out/server.js)', function () {
  this.timeout(30000);
  let dir: string;
  let client: TestClient;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pl-checkpoint-'));
    client = new TestClient();
  });
  afterEach(async () => {
    await client.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('warns on the call, offers fp8_checkpoint with its fallback, and is quiet once applied', async () => {
    await client.initialize(dir, { workspaceEdit: { documentChanges: true, resourceOperations: ['create'] } });
    const model = pathToFileURL(join(dir, 'model.py')).toString();
    await client.open(model, MODEL);
    const published = await client.diagnostics(model, (p) => p.diagnostics.some((d) => d.code === 'PL701'));
    const found = published.diagnostics.filter((x) => x.code === 'PL701');
    assert.equal(found.length, 1);
    const d = found[0];
    assert.equal(d.severity, 2, 'a warning');
    assert.ok(MODEL.split('\n')[d.range.start.line].trim().startsWith('x = checkpoint(block, x'));

    const actions = (await client.connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri: model }, range: d.range, context: { diagnostics: [d], only: ['quickfix'] },
    })) as Action[];
    const action = actions.find((a) => a.title.startsWith('Recompute in FP8 with TE\'s checkpoint where FP8 runs: fp8_checkpoint(...) via '));
    assert.ok(action, JSON.stringify(actions.map((a) => a.title)));
    const changes = action!.edit!.documentChanges!;
    const edits = changes.flatMap((c) => ('textDocument' in c && c.textDocument.uri === model ? c.edits : []));
    assert.ok(edits.some((e) => e.newText === 'fp8_checkpoint'), JSON.stringify(edits));

    await client.change(model, 2, [{ text: MODEL.replace('from torch.utils.checkpoint import checkpoint', 'from torch.utils.checkpoint import checkpoint\nfrom fp8_fallback import fp8_checkpoint').replace('x = checkpoint(', 'x = fp8_checkpoint(') }]);
    const after = await client.diagnostics(model, (p) => p.version === 2);
    assert.deepEqual(after.diagnostics.filter((x) => x.code === 'PL701'), []);
  });
});
