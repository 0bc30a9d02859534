/**
 * `source.fixAll.precisionLens` (issue 24) over JSON-RPC to the built server: registered as a code action kind, asked
 * for the way `editor.codeActionsOnSave` asks (`only: ['source.fixAll.precisionLens']` or `['source.fixAll']`), it
 * applies the safe fixes only (an unused noqa code removed, a recipe repaired), never a conversion, a wrapper or a
 * noqa; nothing on a file with a syntax error; and it never shows in the quick fix or Source Action lists.
 */
import * as assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { TestClient } from './lsp-client';

const FIX_ALL = 'source.fixAll.precisionLens';

// PL101 on `a` (a conversion: unsafe), PL102 unused in the noqa of `b` (PL001: safe removal), and a recipe with
// DelayedScaling(interval=...) (PL304: safe removal of the argument).
const MODEL = `import torch
import torch.nn as nn
from transformer_engine.common.recipe import DelayedScaling, Format


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(1024, 1024)
        self.b = nn.Linear(1024, 1024)  # noqa: PL101, PL102


recipe = DelayedScaling(fp8_format=Format.HYBRID, interval=4)
`;

type Edit = { range: { start: { line: number; character: number }; end: { line: number; character: number } }; newText: string };
type Action = { title: string; kind: string; diagnostics?: unknown[]; edit?: { changes?: Record<string, Edit[]>; documentChanges?: unknown[] } };

/** Applies LSP edits (non-overlapping) to `text`. */
function applyLsp(text: string, edits: Edit[]): string {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === '\n') starts.push(i + 1);
  const at = (p: Edit['range']['start']) => starts[p.line] + p.character;
  return [...edits].sort((x, y) => at(y.range.start) - at(x.range.start))
    .reduce((t, e) => t.slice(0, at(e.range.start)) + e.newText + t.slice(at(e.range.end)), text);
}

describe('server: source.fixAll.precisionLens (issue 24)', function () {
  this.timeout(30000);
  let dir: string;
  let client: TestClient;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pl-fixall-'));
    client = new TestClient();
  });
  afterEach(async () => {
    await client.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function actions(uri: string, only?: string[]): Promise<Action[]> {
    return (await client.connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri },
      range: { start: { line: 0, character: 0 }, end: { line: 0, character: 0 } },
      context: { diagnostics: [], ...(only ? { only } : {}), triggerKind: 2 },
    })) as Action[];
  }

  it('is registered, and applies the safe fixes only: a second request on the result offers nothing', async () => {
    const init = await client.initialize(dir) as { capabilities: { codeActionProvider: { codeActionKinds: string[] } } };
    assert.ok(init.capabilities.codeActionProvider.codeActionKinds.includes(FIX_ALL), JSON.stringify(init.capabilities.codeActionProvider));
    const uri = pathToFileURL(join(dir, 'model.py')).toString();
    await client.open(uri, MODEL);
    const published = await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    assert.deepEqual(published.diagnostics.map((d) => d.code).sort(), ['PL001', 'PL101', 'PL304']);

    for (const only of [[FIX_ALL], ['source.fixAll'], ['source']]) {
      const all = (await actions(uri, only)).filter((a) => a.kind === FIX_ALL);
      assert.equal(all.length, 1, `${JSON.stringify(only)}: ${JSON.stringify((await actions(uri, only)).map((a) => a.kind))}`);
    }
    const [action] = await actions(uri, [FIX_ALL]);
    assert.equal(action.kind, FIX_ALL);
    assert.match(action.title, /PL001/);
    assert.match(action.title, /PL304/);
    assert.equal(action.edit?.documentChanges, undefined, 'creates no file');
    const fixed = applyLsp(MODEL, action.edit!.changes![uri]);
    // exactly the two safe edits: the unused code and the interval argument; the conversion and the wrapper untouched
    assert.equal(fixed, MODEL.replace('  # noqa: PL101, PL102', '  # noqa: PL101').replace(', interval=4)', ')'));

    await client.change(uri, 2, [{ text: fixed }]);
    const after = await client.diagnostics(uri, (p) => p.version === 2);
    assert.deepEqual(after.diagnostics.map((d) => d.code).sort(), ['PL101']);
    assert.deepEqual(await actions(uri, [FIX_ALL]), [], 'nothing left to fix on save');
  });

  it('is not in the quick fix or refactor lists, nor asked without only', async () => {
    await client.initialize(dir);
    const uri = pathToFileURL(join(dir, 'model.py')).toString();
    await client.open(uri, MODEL);
    await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    for (const only of [undefined, ['quickfix'], ['refactor'], ['source.precisionLens']]) {
      const kinds = (await actions(uri, only)).map((a) => a.kind);
      assert.ok(!kinds.includes(FIX_ALL), `${JSON.stringify(only)}: ${kinds.join(', ')}`);
    }
  });

  it('applies nothing to a file with a syntax error, nor where no safe fix exists', async () => {
    await client.initialize(dir);
    const broken = pathToFileURL(join(dir, 'broken.py')).toString();
    await client.open(broken, `${MODEL}\ndef oops(:\n    pass\n`);
    await client.diagnostics(broken, (p) => p.diagnostics.some((d) => d.code === 'PL002'));
    assert.deepEqual(await actions(broken, [FIX_ALL]), []);
    const clean = pathToFileURL(join(dir, 'clean.py')).toString();
    await client.open(clean, MODEL.replace('  # noqa: PL101, PL102', '').replace(', interval=4', ''));
    await client.diagnostics(clean, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    assert.deepEqual(await actions(clean, [FIX_ALL]), []);
  });
});
