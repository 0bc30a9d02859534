/**
 * PL306 over JSON-RPC to the built server: a training script that compiles its model gets the diagnostic on its
 * torch.compile call and a quick fix that wraps the model in fp8_for_compile and creates the project's fallback module;
 * once the script has it, the model file's te.* conversions are no longer offered (torchao owns its Linears).
 */
import * as assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { spawnSync } from 'node:child_process';
import { gpt } from '../unit/gpt-model';
import { TestClient } from './lsp-client';

const TRAIN = `import torch
from gpt_wide import GPT, GPTConfig

model = GPT(GPTConfig())
optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)
model = torch.compile(model)
for step in range(10):
    logits, loss = model(x, y)
    loss.backward()
    optimizer.step()
`;

type Edit = { range: { start: { line: number; character: number }; end: { line: number; character: number } }; newText: string };
type Action = { title: string; kind: string; edit?: { changes?: Record<string, Edit[]>; documentChanges?: ({ kind?: string; uri?: string } | { textDocument: { uri: string }; edits: Edit[] })[] } };

describe('server: PL306, a compiled model gets torchao FP8 (out/server.js)', function () {
  this.timeout(30000);
  let dir: string;
  let client: TestClient;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pl-compiled-'));
    client = new TestClient();
  });
  afterEach(async () => {
    await client.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('diagnoses the compile call, offers the wrap with the module created, and the model file then offers no te.* conversion', async () => {
    await client.initialize(dir, { workspaceEdit: { documentChanges: true, resourceOperations: ['create'] } });
    const model = pathToFileURL(join(dir, 'gpt_wide.py')).toString();
    const train = pathToFileURL(join(dir, 'train.py')).toString();
    await client.open(model, gpt(4096, 6));
    await client.diagnostics(model, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    await client.open(train, TRAIN);
    const published = await client.diagnostics(train, (p) => p.diagnostics.some((d) => d.code === 'PL306'));
    const d = published.diagnostics.find((x) => x.code === 'PL306')!;
    assert.equal(d.range.start.line, 5);
    assert.match(d.message, /^model is compiled but trains in BF16; torch\.compile\(fp8_for_compile\(model\)\) adds torchao FP8, which compiles/);

    const actions = (await client.connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri: train }, range: d.range, context: { diagnostics: [d], only: ['quickfix'] },
    })) as Action[];
    const action = actions.find((a) => /^Compile model with torchao FP8/.test(a.title));
    assert.ok(action, JSON.stringify(actions));
    const changes = action!.edit!.documentChanges!;
    assert.ok(changes.some((c) => 'kind' in c && c.kind === 'create' && /fp8_fallback\.py$/.test(c.uri!)), JSON.stringify(changes));
    const edits = changes.flatMap((c) => ('textDocument' in c && c.textDocument.uri === train ? c.edits : []));
    assert.ok(edits.some((e) => e.newText === 'fp8_for_compile('), JSON.stringify(edits));

    // The script as the fix leaves it: the model file sees torchao as the project's FP8 stack.
    await client.change(train, 2, [{ text: TRAIN.replace('from gpt_wide import', 'from fp8_fallback import fp8_for_compile\nfrom gpt_wide import').replace('torch.compile(model)', 'torch.compile(fp8_for_compile(model))') }]);
    const after = await client.diagnostics(train, (p) => p.version === 2);
    assert.deepEqual(after.diagnostics.filter((x) => x.code === 'PL306'), []);
    const modelAfter = await client.diagnostics(model, (p) => !p.diagnostics.some((x) => x.code === 'PL101'));
    assert.deepEqual(modelAfter.diagnostics.filter((x) => /^PL10/.test(String(x.code))), []);
  });

  /** What `precision-lens check DIR` (the built CLI) says about the folder's PL306. */
  function cliPl306(folder: string): number {
    const r = spawnSync(process.execPath, [join(__dirname, '..', '..', 'out', 'cli.js'), 'check', folder, '--format', 'json'], { encoding: 'utf8' });
    assert.ok(r.status === 0 || r.status === 1, r.stderr);
    return (JSON.parse(r.stdout) as { diagnostics: { code: string }[] }).diagnostics.filter((f) => f.code === 'PL306').length;
  }

  it('with only the script open, reads the model it imports from disk: quiet where the model is predicted to lose, as the CLI is', async () => {
    // GPT-2 small's width: every Linear predicted slower in FP8 (0.6x), so FP8 is not offered to the compiled model.
    writeFileSync(join(dir, 'gpt_wide.py'), gpt(768, 12));
    writeFileSync(join(dir, 'train.py'), TRAIN);
    assert.equal(cliPl306(dir), 0);
    await client.initialize(dir);
    const train = pathToFileURL(join(dir, 'train.py')).toString();
    await client.open(train, TRAIN);
    // Before the model file is read the script may be told; once read, the diagnostic goes (a later publish).
    const quiet = await client.diagnostics(train, (p) => !p.diagnostics.some((d) => d.code === 'PL306'));
    assert.deepEqual(quiet.diagnostics.filter((d) => d.code === 'PL306'), []);

    // The model file widened on disk (the watcher reports it): FP8 now pays, and the script is told.
    writeFileSync(join(dir, 'gpt_wide.py'), gpt(4096, 6));
    const later = new Date(Date.now() + 5000);
    utimesSync(join(dir, 'gpt_wide.py'), later, later);
    assert.equal(cliPl306(dir), 1);
    await client.connection.sendNotification('workspace/didChangeWatchedFiles', { changes: [{ uri: pathToFileURL(join(dir, 'gpt_wide.py')).toString(), type: 2 }] });
    const told = await client.diagnostics(train, (p) => p.diagnostics.some((d) => d.code === 'PL306'));
    assert.equal(told.diagnostics.filter((d) => d.code === 'PL306').length, 1);
  });
});
