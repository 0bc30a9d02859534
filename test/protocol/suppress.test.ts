/**
 * Suppressions in the editor (issue 24), over JSON-RPC to the built server: the "Ignore PLnnn on this line" quick fix
 * adds the `# noqa` the engine then honours (the same engine as the CLI), the unused-noqa hint and its removal, and
 * `[tool.precision-lens]` per-file-ignores and extend-exclude read from the document's pyproject.toml.
 */
import * as assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { TestClient } from './lsp-client';

const MODEL = `import torch
import torch.nn as nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(1024, 1024)
        self.b = nn.Linear(1024, 1024)  # noqa: PL101, PL102
`;

type Action = { title: string; kind: string; edit: { changes: Record<string, Array<{ range: { start: { line: number; character: number } }; newText: string }>> } };

describe('server: suppressions (issue 24)', function () {
  this.timeout(30000);
  let dir: string;
  let client: TestClient;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pl-noqa-'));
    client = new TestClient();
  });
  afterEach(async () => {
    await client.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('offers "Ignore PL101 on this line", whose comment silences the finding; the unused code gets PL001 and a removal', async () => {
    await client.initialize(dir);
    const uri = pathToFileURL(join(dir, 'model.py')).toString();
    await client.open(uri, MODEL);
    const published = await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    // line 9 (0-based 8): PL101 silenced, PL102 unused there
    assert.deepEqual(published.diagnostics.map((d) => `${d.range.start.line} ${d.code}`).sort(), ['7 PL101', '8 PL001']);
    const d = published.diagnostics.find((x) => x.code === 'PL101')!;
    const actions = (await client.connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri }, range: d.range, context: { diagnostics: [d], only: ['quickfix'] },
    })) as Action[];
    const ignore = actions.find((a) => a.title === 'Ignore PL101 on this line');
    assert.ok(ignore, JSON.stringify(actions.map((a) => a.title)));
    assert.equal(ignore.kind, 'quickfix');
    const [edit] = ignore.edit.changes[uri];
    assert.deepEqual([edit.range.start.line, edit.newText], [7, '  # noqa: PL101']);
    const lines = MODEL.split('\n');
    lines[7] += edit.newText;
    await client.change(uri, 2, [{ text: lines.join('\n') }]);
    const after = await client.diagnostics(uri, (p) => p.version === 2);
    assert.deepEqual(after.diagnostics.map((x) => x.code), ['PL001']);
    const unused = after.diagnostics[0];
    const removal = (await client.connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri }, range: unused.range, context: { diagnostics: [unused], only: ['quickfix'] },
    })) as Action[];
    const remove = removal.find((a) => a.title === 'Remove unused suppression');
    assert.ok(remove, JSON.stringify(removal.map((a) => a.title)));
    assert.deepEqual(remove.edit.changes[uri].map((e) => e.newText), ['PL101']);
  });

  it('honours [tool.precision-lens] per-file-ignores and extend-exclude from the pyproject.toml above the file', async () => {
    writeFileSync(join(dir, 'pyproject.toml'), '[tool.precision-lens]\nextend-exclude = ["vendor"]\n[tool.precision-lens.per-file-ignores]\n"tests/*.py" = ["PL101"]\n');
    mkdirSync(join(dir, 'tests'));
    mkdirSync(join(dir, 'vendor'));
    await client.initialize(dir);
    const plain = MODEL.replace(/ {2}# noqa.*$/m, '');
    const model = pathToFileURL(join(dir, 'model.py')).toString();
    const test = pathToFileURL(join(dir, 'tests', 'test_model.py')).toString();
    const vendored = pathToFileURL(join(dir, 'vendor', 'lib.py')).toString();
    await client.open(model, plain);
    await client.open(test, plain);
    await client.open(vendored, plain);
    await client.diagnostics(model, (p) => p.diagnostics.filter((d) => d.code === 'PL101').length === 2);
    const t = await client.diagnostics(test, (p) => p.version === 1);
    assert.deepEqual(t.diagnostics.filter((d) => d.code === 'PL101'), []);
    const v = await client.diagnostics(vendored, (p) => p.version === 1);
    assert.deepEqual(v.diagnostics, []);
  });
});
