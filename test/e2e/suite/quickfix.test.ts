/**
 * Scenario 2 of SCENARIOS.md in a real VS Code: the PL101 quick fix "Convert to te.Linear", asked for the way the
 * light bulb asks (vscode.executeCodeActionProvider on the diagnostic's range) and applied the way the editor applies
 * it, rewrites the one layer through the project's FP8 fallback module (imported once, never a bare TE import), extends
 * the file's isinstance(..., nn.Linear) test, leaves the lm-head alone and keeps the file valid Python.
 * Each test edits its own copy of model.py.
 */
import * as assert from 'assert';
import { spawnSync } from 'child_process';
import * as vscode from 'vscode';
import { callRange, copyFile, describeDiagnostics, lineOf, onLine, openFile, ours, waitFor, waitForDiagnostics, workspaceFile } from './helpers';

const CONVERT = /^Convert to te\.Linear\b/;
const C_ATTN = 'self.c_attn = ';
const C_PROJ_ATTN = 'self.c_proj = nn.Linear(config.n_embd, config.n_embd';
const LM_HEAD = 'self.lm_head = ';
const TE_IMPORT = /^[ \t]*(import transformer_engine\.pytorch as te|from transformer_engine import pytorch as te)[ \t]*$/gm;
const FALLBACK_IMPORT = /^from fp8_fallback import TE_LINEAR, fp8_linear$/gm;

let copies = 0;
async function freshModel(): Promise<vscode.TextDocument> {
  const uri = await copyFile('model.py', `qf_model_${++copies}.py`);
  return openFile(uri);
}

/** Code actions for `range`, resolved (edits filled in) as the light bulb would before applying. */
async function actionsAt(uri: vscode.Uri, range: vscode.Range): Promise<vscode.CodeAction[]> {
  const items = await vscode.commands.executeCommand<(vscode.CodeAction | vscode.Command)[]>(
    'vscode.executeCodeActionProvider', uri, range, vscode.CodeActionKind.QuickFix.value, 20);
  // a bare Command has a string `command`; a CodeAction's `command` (if any) is an object
  return (items ?? []).filter((a): a is vscode.CodeAction => typeof (a as vscode.Command).command !== 'string');
}

async function apply(action: vscode.CodeAction): Promise<void> {
  assert.ok(action.edit || action.command, `"${action.title}" has neither an edit nor a command`);
  if (action.edit) assert.ok(await vscode.workspace.applyEdit(action.edit), `applyEdit of "${action.title}"`);
  if (action.command) await vscode.commands.executeCommand(action.command.command, ...(action.command.arguments ?? []));
}

/** Waits for PL101 on the layer at `needle`, asks for the fix there and applies it; returns the new text. */
async function convert(doc: vscode.TextDocument, needle: string): Promise<string> {
  const line = lineOf(doc, needle);
  const [diag] = await waitForDiagnostics(doc.uri, (ds) => onLine(ds, 'PL101', line).length === 1, `PL101 on ${needle}`, 60_000)
    .then((ds) => onLine(ds, 'PL101', line));
  const actions = await actionsAt(doc.uri, diag.range);
  const fix = actions.find((a) => CONVERT.test(a.title));
  assert.ok(fix, `"Convert to te.Linear" offered on ${needle}; got: ${actions.map((a) => a.title).join(' | ') || '(none)'}`);
  assert.ok(fix.kind && vscode.CodeActionKind.QuickFix.contains(fix.kind), `quickfix kind, got ${fix.kind?.value}`);
  const before = doc.getText();
  await apply(fix);
  return waitFor(() => (doc.getText() !== before ? doc.getText() : undefined), 'the fix to change the document', { timeoutMs: 10_000 });
}

/** Whether python3 parses `text`; undefined when no python3 is on this machine. */
function pythonParses(text: string): { ok: boolean; error: string } | undefined {
  const r = spawnSync('python3', ['-c', 'import ast, sys; ast.parse(sys.stdin.read())'], { input: text, encoding: 'utf8' });
  if (r.error) return undefined;
  return { ok: r.status === 0, error: r.stderr };
}

describe('quick fix: Convert to te.Linear (PL101)', function () {
  this.timeout(90_000);

  it('rewrites c_attn through the fallback module with the same arguments, and no bare TE import', async () => {
    const doc = await freshModel();
    const original = doc.getText();
    const text = await convert(doc, C_ATTN);

    const line = doc.lineAt(lineOf(doc, C_ATTN)).text;
    assert.match(line, /self\.c_attn = fp8_linear\(config\.n_embd, 3 \* config\.n_embd, bias=config\.bias[,)]/, line);
    assert.strictEqual((text.match(TE_IMPORT) ?? []).length, 0, `no bare TE import:\n${text.slice(0, 600)}`);
    assert.strictEqual((text.match(FALLBACK_IMPORT) ?? []).length, 1, `one import of the fallback module:\n${text.slice(0, 600)}`);
    assert.match(text, /isinstance\(module, \(nn\.Linear, TE_LINEAR\)\)/, 'the weight-init class test follows the conversion');
    assert.ok(await vscode.workspace.fs.stat(workspaceFile('fp8_fallback.py')), 'the module exists beside the file');

    // nothing else became TE: the other projections, the lm-head and the embeddings are as they were
    for (const needle of [C_PROJ_ATTN, 'self.c_fc = nn.Linear(', LM_HEAD, 'wte=nn.Embedding(']) {
      const was = original.split('\n').find((l) => l.includes(needle));
      assert.strictEqual(doc.lineAt(lineOf(doc, needle)).text, was, `${needle} untouched`);
    }
    const parsed = pythonParses(text);
    if (parsed) assert.ok(parsed.ok, `the fixed file is valid Python:\n${parsed.error}`);

    // the server re-analyses: no PL101 left on the converted layer, still on the others
    await waitForDiagnostics(doc.uri,
      (ds) => onLine(ds, 'PL101', lineOf(doc, C_ATTN)).length === 0 && onLine(ds, 'PL101', lineOf(doc, C_PROJ_ATTN)).length === 1,
      'PL101 gone from c_attn only', 15_000);
  });

  it('adds the import only once when a second layer is converted', async () => {
    const doc = await freshModel();
    await convert(doc, C_ATTN);
    const text = await convert(doc, C_PROJ_ATTN);
    assert.match(doc.lineAt(lineOf(doc, 'self.c_proj = fp8_linear(config.n_embd, config.n_embd')).text, /fp8_linear\(/);
    assert.strictEqual((text.match(FALLBACK_IMPORT) ?? []).length, 1, `still one import:\n${text.slice(0, 600)}`);
    assert.strictEqual((text.match(TE_IMPORT) ?? []).length, 0);
    const parsed = pythonParses(text);
    if (parsed) assert.ok(parsed.ok, parsed.error);
  });

  it('offers no conversion on the lm-head', async () => {
    const doc = await freshModel();
    // wait until the file is analysed, then ask on the lm_head call
    await waitForDiagnostics(doc.uri, (ds) => onLine(ds, 'PL101', lineOf(doc, C_ATTN)).length === 1, 'analysis of the copy', 60_000);
    const range = callRange(doc, LM_HEAD, 'nn.Linear');
    const titles = (await actionsAt(doc.uri, range)).map((a) => a.title);
    assert.ok(!titles.some((t) => CONVERT.test(t)), `no "Convert to te.Linear" on lm_head; got ${titles.join(' | ')}\n${describeDiagnostics(doc.uri)}`);
    assert.strictEqual(onLine(ours(doc.uri), 'PL101', range.start.line).length, 0);
  });
});
