/**
 * Issue 10 in a real VS Code: on a GPT-style model.py + train.py (test/e2e/workspace/mingpt, the same files as
 * test/fixtures/fixes/project), one "Convert N layers in this file to FP8 (with fallback)" converts the layers,
 * extends the class tests and creates the project's fallback module with an LSP CreateFile; one "Wrap the training
 * step in FP8 autocast" in train.py imports that module instead of pasting a second copy. The two files then train
 * on the CPU (BF16 fallback, one mode line) with the optimizer groups intact, where python3 has torch.
 */
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as vscode from 'vscode';
import { lineOf, onLine, openFile, waitFor, waitForDiagnostics, workspaceFile } from './helpers';

const MARKER = '# precision-lens: fp8 fallback';

async function actionsFor(doc: vscode.TextDocument): Promise<vscode.CodeAction[]> {
  const items = await vscode.commands.executeCommand<(vscode.CodeAction | vscode.Command)[]>(
    'vscode.executeCodeActionProvider', doc.uri, new vscode.Range(0, 0, 0, 0), undefined, 50);
  return (items ?? []).filter((a): a is vscode.CodeAction => typeof (a as vscode.Command).command !== 'string');
}

async function applyTitled(doc: vscode.TextDocument, title: RegExp): Promise<vscode.CodeAction> {
  const actions = await waitFor(async () => {
    const all = await actionsFor(doc);
    return all.some((a) => title.test(a.title)) ? all : undefined;
  }, `an action matching ${title}`, { timeoutMs: 30_000, intervalMs: 250 });
  const action = actions.find((a) => title.test(a.title))!;
  assert.ok(action.edit, `"${action.title}" carries its edit`);
  const before = doc.getText();
  assert.ok(await vscode.workspace.applyEdit(action.edit), `applyEdit of "${action.title}"`);
  await waitFor(() => doc.getText() !== before, `"${action.title}" to change ${doc.uri.path}`, { timeoutMs: 10_000 });
  return action;
}

async function fallbackFiles(): Promise<vscode.Uri[]> {
  const out: vscode.Uri[] = [];
  for (const uri of await vscode.workspace.findFiles('mingpt/**/*.py')) {
    const doc = await vscode.workspace.openTextDocument(uri);
    if (doc.getText().includes(MARKER)) out.push(uri);
  }
  return out;
}

describe('one FP8 fallback module per project (model.py + train.py)', function () {
  this.timeout(120_000);

  it('converts model.py and wraps train.py: two files importing one created module, and they train on the CPU', async () => {
    const model = await openFile('mingpt/model.py');
    await waitForDiagnostics(model.uri, (ds) => onLine(ds, 'PL101', lineOf(model, 'self.c_attn = ')).length === 1, 'PL101 on c_attn', 60_000);
    const convert = await applyTitled(model, /^Convert 7 layers in this file to FP8 \(with fallback; fusing 1 norm into te\.LayerNormLinear; extending 4 class tests/);
    assert.ok(convert.edit!.entries().some(([uri]) => uri.path.endsWith('/mingpt/fp8_fallback.py')), 'the edit creates mingpt/fp8_fallback.py');
    const text = model.getText();
    assert.match(text, /^from fp8_fallback import TE_LAYERNORM, TE_LAYERNORM_LINEAR, TE_LINEAR, fp8_fuse_norm, fp8_layernorm, fp8_linear$/m);
    // ln_1 feeds only the attention's c_attn: fused into te.LayerNormLinear where FP8 runs.
    assert.match(text, /self\.attn = fp8_fuse_norm\(self\.ln_1, CausalSelfAttention\(config\), "c_attn"\)/);
    assert.doesNotMatch(text, /^\s*(import|from) transformer_engine/m, 'no bare TE import');
    assert.match(text, /self\.c_attn = fp8_linear\(config\.n_embd, 3 \* config\.n_embd\)/);
    assert.match(text, /whitelist_weight_modules = \(torch\.nn\.Linear, TE_LINEAR, TE_LAYERNORM_LINEAR, \)/);
    assert.match(text, /self\.lm_head = nn\.Linear\(/, 'the lm-head stays');

    const train = await openFile('mingpt/train.py');
    const wrap = await applyTitled(train, /^Wrap the training step in FP8 autocast \(backward\(\) stays outside; context from fp8_fallback\)$/);
    assert.ok(!wrap.edit!.entries().some(([uri]) => uri.path.endsWith('fp8_fallback.py')), 'the module is not created twice');
    assert.match(train.getText(), /^from fp8_fallback import fp8_autocast_context$/m);
    assert.match(train.getText(), /\n {8}with fp8_autocast_context\(\):\n/);
    assert.deepStrictEqual((await fallbackFiles()).map((u) => u.path.split('/').pop()), ['fp8_fallback.py'], 'one fallback in the project');

    assert.ok(await vscode.workspace.saveAll(false), 'saved');
    const cwd = workspaceFile('mingpt').fsPath;
    const probe = spawnSync('python3', ['-c', 'import torch'], { encoding: 'utf8' });
    if (probe.status !== 0) return; // no torch here: the Python test layer trains the same (golden) files
    const run = spawnSync('python3', ['train.py'], { cwd, encoding: 'utf8', timeout: 120_000, env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' } });
    const out = `${run.stdout}${run.stderr}`;
    assert.strictEqual(run.status, 0, out);
    assert.strictEqual((out.match(/Running in /g) ?? []).length, 1, `one mode line:\n${out}`);
    assert.match(out, /^Running in BF16 fallback: /m);
    assert.match(out, /^param groups: 9 decay, 20 no_decay$/m);
    assert.strictEqual((out.match(/^step \d: loss /gm) ?? []).length, 3, out);
  });
});
