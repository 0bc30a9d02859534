/**
 * Issue 24 in a real VS Code: the "Ignore PL101 on this line" quick fix, asked for as the light bulb asks and applied
 * as the editor applies it, adds `# noqa: PL101` and the diagnostic goes away (no PL001 in its place); and
 * `source.fixAll.precisionLens` in `editor.codeActionsOnSave` applies the safe fixes on save (an unused noqa code, a
 * recipe argument), never a conversion. Each test edits its own file.
 */
import * as assert from 'assert';
import * as vscode from 'vscode';
import { codeOf, describeDiagnostics, lineOf, onLine, openFile, copyFile, waitFor, waitForDiagnostics, workspaceFile } from './helpers';

const C_ATTN = 'self.c_attn = ';
const C_FC = 'self.c_fc = nn.Linear(';

async function quickFixes(uri: vscode.Uri, range: vscode.Range): Promise<vscode.CodeAction[]> {
  const items = await vscode.commands.executeCommand<(vscode.CodeAction | vscode.Command)[]>(
    'vscode.executeCodeActionProvider', uri, range, vscode.CodeActionKind.QuickFix.value, 50);
  return (items ?? []).filter((a): a is vscode.CodeAction => typeof (a as vscode.Command).command !== 'string');
}

describe('suppressions in the editor (issue 24)', function () {
  this.timeout(90_000);

  it('"Ignore PL101 on this line" adds the noqa comment and the diagnostic disappears', async () => {
    const doc = await openFile(await copyFile('model.py', 'noqa_model.py'));
    const line = lineOf(doc, C_ATTN);
    const before = doc.lineAt(line).text;
    const [diag] = await waitForDiagnostics(doc.uri, (ds) => onLine(ds, 'PL101', line).length === 1, 'PL101 on c_attn', 60_000)
      .then((ds) => onLine(ds, 'PL101', line));
    const actions = await quickFixes(doc.uri, diag.range);
    const ignore = actions.find((a) => a.title === 'Ignore PL101 on this line');
    assert.ok(ignore?.edit, `offered with an edit; got: ${actions.map((a) => a.title).join(' | ')}`);
    assert.ok(ignore.kind && vscode.CodeActionKind.QuickFix.contains(ignore.kind), `quickfix kind, got ${ignore.kind?.value}`);
    assert.ok(await vscode.workspace.applyEdit(ignore.edit), 'applyEdit');

    assert.strictEqual(doc.lineAt(line).text, `${before}  # noqa: PL101`);
    await waitForDiagnostics(doc.uri,
      (ds) => onLine(ds, 'PL101', line).length === 0 && onLine(ds, 'PL001', line).length === 0 && onLine(ds, 'PL101', lineOf(doc, C_FC)).length === 1,
      'PL101 gone from c_attn (no PL001 there), still on c_fc', 15_000);
    // the other lines are as they were
    assert.strictEqual(doc.getText().replace('  # noqa: PL101', ''), (await vscode.workspace.fs.readFile(workspaceFile('model.py'))).toString());
  });

  it('source.fixAll.precisionLens on save applies the safe fixes only', async () => {
    const text = [
      'import torch',
      'import torch.nn as nn',
      'from transformer_engine.common.recipe import DelayedScaling, Format',
      '',
      '',
      'class M(nn.Module):',
      '    def __init__(self):',
      '        super().__init__()',
      '        self.a = nn.Linear(1024, 1024)',
      '        self.b = nn.Linear(1024, 1024)  # noqa: PL101, PL102',
      '',
      '',
      'recipe = DelayedScaling(fp8_format=Format.HYBRID, interval=4)',
      '',
    ].join('\n');
    const uri = workspaceFile('fixall_on_save.py');
    await vscode.workspace.fs.writeFile(uri, Buffer.from(text));
    const editor = vscode.workspace.getConfiguration('editor', { languageId: 'python', uri });
    await editor.update('codeActionsOnSave', { 'source.fixAll.precisionLens': 'explicit' }, vscode.ConfigurationTarget.Workspace);
    try {
      const doc = await openFile(uri);
      await waitForDiagnostics(uri, (ds) => ['PL001', 'PL101', 'PL304'].every((c) => ds.some((d) => codeOf(d) === c)),
        'PL001, PL101 and PL304', 60_000);
      // an edit of the user's, then an explicit save (Ctrl+S)
      const edit = new vscode.WorkspaceEdit();
      edit.insert(uri, new vscode.Position(doc.lineCount - 1, 0), 'x = 1\n');
      assert.ok(await vscode.workspace.applyEdit(edit));
      await vscode.window.showTextDocument(doc);
      await vscode.commands.executeCommand('workbench.action.files.save');
      const expected = `${text}x = 1\n`.replace('  # noqa: PL101, PL102', '  # noqa: PL101').replace(', interval=4)', ')');
      await waitFor(() => !doc.isDirty && doc.getText() === expected, 'the save to apply the safe fixes',
        { timeoutMs: 15_000, describe: () => `dirty=${doc.isDirty}\n${doc.getText()}` });
      assert.strictEqual((await vscode.workspace.fs.readFile(uri)).toString(), expected, 'what was saved');
      assert.match(doc.getText(), /self\.a = nn\.Linear\(1024, 1024\)\n/, 'the conversion (unsafe) is not applied');
      await waitForDiagnostics(uri, (ds) => ds.length > 0 && ds.every((d) => codeOf(d) === 'PL101'),
        'only PL101 left', 15_000).catch((e) => { throw new Error(`${(e as Error).message}\n${describeDiagnostics(uri)}`); });
    } finally {
      await editor.update('codeActionsOnSave', undefined, vscode.ConfigurationTarget.Workspace);
    }
  });
});
