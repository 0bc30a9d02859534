/**
 * PL306 in a real VS Code: a training script that compiles its model gets the diagnostic on its torch.compile call,
 * and the quick fix wraps the model in fp8_for_compile, imports it and creates the project's fallback module with the
 * edit. te_model.py elsewhere in the workspace (examples/gpt) is not this script's model, so it does not silence it.
 */
import * as assert from 'assert';
import * as vscode from 'vscode';
import { codeOf, lineOf, ours, waitFor, waitForDiagnostics, workspaceFile } from './helpers';

describe('PL306: compile the model with torchao FP8', function () {
  this.timeout(120_000);

  it('offers "Compile model with torchao FP8" on the compile call and writes torch.compile(fp8_for_compile(model))', async () => {
    const target = workspaceFile('compiled/mine.py');
    await vscode.workspace.fs.copy(workspaceFile('compiled/train.py'), target, { overwrite: true });
    const doc = await vscode.workspace.openTextDocument(target);
    await vscode.window.showTextDocument(doc, { preview: false });
    const line = lineOf(doc, '    model = torch.compile(');
    const [d] = (await waitForDiagnostics(doc.uri, (ds) => ds.some((x) => codeOf(x) === 'PL306' && x.range.start.line === line), 'PL306 on the compile call', 60_000))
      .filter((x) => codeOf(x) === 'PL306');
    assert.strictEqual(d.message, 'model is compiled but trains in BF16; torch.compile(fp8_for_compile(model)) adds torchao FP8, which compiles');
    assert.strictEqual(d.severity, vscode.DiagnosticSeverity.Information);

    const action = await waitFor(async () => {
      const items = await vscode.commands.executeCommand<vscode.CodeAction[]>('vscode.executeCodeActionProvider', doc.uri, d.range, vscode.CodeActionKind.QuickFix.value);
      return (items ?? []).find((a) => a.title.startsWith('Compile model with torchao FP8: torch.compile(fp8_for_compile(model)) via '));
    }, 'the PL306 quick fix', { timeoutMs: 30_000, intervalMs: 250 });
    assert.ok(action.edit, 'the action carries its edit');
    assert.ok(await vscode.workspace.applyEdit(action.edit), 'applyEdit');
    const text = await waitFor(() => (doc.getText().includes('fp8_for_compile(model)') ? doc.getText() : undefined), 'the wrapped call');
    assert.match(text, /^ {4}model = torch\.compile\(fp8_for_compile\(model\), backend="eager"\)/m);
    assert.match(text, /^from fp8_fallback import fp8_for_compile$/m);
    // The module is created by the same edit (its text an edit of the new, unsaved document).
    const module = await vscode.workspace.openTextDocument(workspaceFile('compiled/fp8_fallback.py'));
    assert.match(module.getText(), /^def fp8_for_compile\(model, keep=\(\)\):$/m);
    await waitForDiagnostics(doc.uri, (ds) => !ds.some((x) => codeOf(x) === 'PL306'), 'PL306 gone', 30_000);
    assert.ok(ours(doc.uri).every((x) => codeOf(x) !== 'PL306'));
  });
});
