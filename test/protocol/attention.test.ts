/**
 * PL107 over JSON-RPC to the built server: a model whose Linears run through the project's fallback module gets the
 * diagnostic on torch's attention call and a quick fix that renames it fp8_attention and imports it; a masked call in
 * the same file gets neither. Once the file has it, the diagnostic is gone.
 */
import * as assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { TestClient } from './lsp-client';

const MODEL = readFileSync(join(__dirname, '..', 'e2e', 'workspace', 'attention', 'model.py'), 'utf8')
  + '\n\ndef masked(q, k, v, mask):\n    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n';

type Edit = { range: { start: { line: number; character: number }; end: { line: number; character: number } }; newText: string };
type Action = { title: string; kind: string; edit?: { changes?: Record<string, Edit[]>; documentChanges?: ({ kind?: string; uri?: string } | { textDocument: { uri: string }; edits: Edit[] })[] } };

describe('server: PL107, attention through TE\'s fused kernel (out/server.js)', function () {
  this.timeout(30000);
  let dir: string;
  let client: TestClient;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pl-attention-'));
    client = new TestClient();
  });
  afterEach(async () => {
    await client.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('diagnoses the unmasked call only, offers the rename with its import, and is quiet once applied', async () => {
    await client.initialize(dir, { workspaceEdit: { documentChanges: true, resourceOperations: ['create'] } });
    const model = pathToFileURL(join(dir, 'model.py')).toString();
    await client.open(model, MODEL);
    const published = await client.diagnostics(model, (p) => p.diagnostics.some((d) => d.code === 'PL107'));
    const found = published.diagnostics.filter((x) => x.code === 'PL107');
    assert.equal(found.length, 1, 'the masked call is not reported');
    const d = found[0];
    assert.equal(MODEL.split('\n')[d.range.start.line].trim().startsWith('y = F.scaled_dot_product_attention('), true);
    assert.equal(d.message, 'torch\'s attention in an FP8 model: fp8_attention runs it in TE\'s fused attention where FP8 runs, the same result');

    const actions = (await client.connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri: model }, range: d.range, context: { diagnostics: [d], only: ['quickfix'] },
    })) as Action[];
    const action = actions.find((a) => a.title.startsWith('Run this attention in TE\'s fused kernel where FP8 runs: fp8_attention(...) via '));
    assert.ok(action, JSON.stringify(actions.map((a) => a.title)));
    const changes = action!.edit!.documentChanges!;
    const edits = changes.flatMap((c) => ('textDocument' in c && c.textDocument.uri === model ? c.edits : []));
    assert.ok(edits.some((e) => e.newText === 'fp8_attention'), JSON.stringify(edits));
    assert.ok(edits.some((e) => e.newText === 'fp8_attention, fp8_linear'), JSON.stringify(edits)); // the import, extended

    await client.change(model, 2, [{ text: MODEL.replace('from fp8_fallback import fp8_linear', 'from fp8_fallback import fp8_attention, fp8_linear').replace('y = F.scaled_dot_product_attention(', 'y = fp8_attention(') }]);
    const after = await client.diagnostics(model, (p) => p.version === 2);
    assert.deepEqual(after.diagnostics.filter((x) => x.code === 'PL107'), []);
  });
});
