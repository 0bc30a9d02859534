/**
 * PL107 in a real VS Code: a model whose Linears run through the project's fallback module and whose attention is
 * torch's scaled_dot_product_attention gets the diagnostic on the call, and the quick fix calls fp8_attention with the
 * same arguments, imports it and writes the fallback module (none in this folder yet) with the edit.
 */
import * as assert from 'assert';
import * as vscode from 'vscode';
import { codeOf, lineOf, ours, waitFor, waitForDiagnostics, workspaceFile } from './helpers';

describe('PL107: attention through TE\'s fused kernel', function () {
  this.timeout(120_000);

  it('offers the fix on the attention call and writes fp8_attention(...) with its import', async () => {
    const target = workspaceFile('attention/mine.py');
    await vscode.workspace.fs.copy(workspaceFile('attention/model.py'), target, { overwrite: true });
    const doc = await vscode.workspace.openTextDocument(target);
    await vscode.window.showTextDocument(doc, { preview: false });
    const line = lineOf(doc, '        y = F.scaled_dot_product_attention(');
    const [d] = (await waitForDiagnostics(doc.uri, (ds) => ds.some((x) => codeOf(x) === 'PL107' && x.range.start.line === line), 'PL107 on the attention call', 60_000))
      .filter((x) => codeOf(x) === 'PL107');
    assert.strictEqual(d.message, 'torch\'s attention in an FP8 model: fp8_attention runs it in TE\'s fused attention where FP8 runs, the same result');
    assert.strictEqual(d.severity, vscode.DiagnosticSeverity.Information);

    const action = await waitFor(async () => {
      const items = await vscode.commands.executeCommand<vscode.CodeAction[]>('vscode.executeCodeActionProvider', doc.uri, d.range, vscode.CodeActionKind.QuickFix.value);
      return (items ?? []).find((a) => a.title.startsWith('Run this attention in TE\'s fused kernel where FP8 runs: fp8_attention(...) via '));
    }, 'the PL107 quick fix', { timeoutMs: 30_000, intervalMs: 250 });
    assert.ok(action.edit, 'the action carries its edit');
    assert.ok(await vscode.workspace.applyEdit(action.edit), 'applyEdit');
    const text = await waitFor(() => (doc.getText().includes('y = fp8_attention(') ? doc.getText() : undefined), 'the renamed call');
    assert.match(text, /^ {8}y = fp8_attention\(q, k, v, attn_mask=None, dropout_p=0\.0, is_causal=True\)$/m);
    assert.match(text, /^from fp8_fallback import fp8_attention, fp8_linear$/m);
    const module = await vscode.workspace.openTextDocument(workspaceFile('attention/fp8_fallback.py'));
    assert.match(module.getText(), /^def fp8_attention\(q, k, v, attn_mask=None, dropout_p=0\.0, is_causal=False, scale=None, \*\*kwargs\):$/m);
    await waitForDiagnostics(doc.uri, (ds) => !ds.some((x) => codeOf(x) === 'PL107'), 'PL107 gone', 30_000);
    assert.ok(ours(doc.uri).every((x) => codeOf(x) !== 'PL107'));
  });
});
