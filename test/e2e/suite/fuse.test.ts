/**
 * Issue 21 in a real VS Code: a LayerNorm whose output only the child attention's c_attn reads gets PL104, and its
 * quick fix fuses the two (te.LayerNormLinear where FP8 runs) through the project's fallback module, created with the
 * edit, without touching forward.
 */
import * as assert from 'assert';
import * as vscode from 'vscode';
import { codeOf, lineOf, ours, waitFor, waitForDiagnostics, workspaceFile } from './helpers';

describe('PL104: fuse a norm into the Linear it feeds', function () {
  this.timeout(120_000);

  it('offers "Fuse self.ln_1 into attn.c_attn" on the hint and writes fp8_fuse_norm around the child', async () => {
    const target = workspaceFile('fuse/mine.py');
    await vscode.workspace.fs.copy(workspaceFile('fuse/block.py'), target, { overwrite: true });
    const doc = await vscode.workspace.openTextDocument(target);
    await vscode.window.showTextDocument(doc, { preview: false });
    const ln1 = lineOf(doc, 'self.ln_1 = ');
    const [hint] = (await waitForDiagnostics(doc.uri, (ds) => ds.some((d) => codeOf(d) === 'PL104' && d.range.start.line === ln1), 'PL104 on ln_1', 60_000))
      .filter((d) => codeOf(d) === 'PL104');
    assert.strictEqual(hint.message, 'self.ln_1 feeds only attn.c_attn: fuse them as te.LayerNormLinear(2048, 6144) where FP8 runs');
    assert.strictEqual(hint.severity, vscode.DiagnosticSeverity.Hint);

    const title = 'Fuse self.ln_1 into attn.c_attn (te.LayerNormLinear where FP8 runs, converting attn.c_attn)';
    const action = await waitFor(async () => {
      const items = await vscode.commands.executeCommand<vscode.CodeAction[]>('vscode.executeCodeActionProvider', doc.uri, hint.range, vscode.CodeActionKind.QuickFix.value);
      return (items ?? []).find((a) => a.title === title);
    }, `the action "${title}"`, { timeoutMs: 30_000, intervalMs: 250 });
    assert.ok(action.edit, 'the action carries its edit');
    assert.ok(action.edit.entries().some(([uri]) => uri.path.endsWith('/fuse/fp8_fallback.py')), 'the edit creates fuse/fp8_fallback.py');
    const forward = doc.getText().slice(doc.getText().indexOf('    def forward(self, x):\n        return x +'));
    assert.ok(await vscode.workspace.applyEdit(action.edit), 'applyEdit');
    const text = await waitFor(() => (doc.getText().includes('fp8_fuse_norm(') ? doc.getText() : undefined), 'the fused line');
    assert.match(text, /^ {8}self\.attn = fp8_fuse_norm\(self\.ln_1, Attention\(dim\), "c_attn"\)$/m);
    assert.match(text, /^ {8}self\.c_attn = fp8_linear\(dim, 3 \* dim\)$/m);
    assert.match(text, /^from fp8_fallback import fp8_fuse_norm, fp8_linear$/m);
    assert.ok(text.endsWith(forward), 'forward is untouched');
    // Analysed again: the pair is fused, so no PL104 is left on ln_1.
    await waitForDiagnostics(doc.uri, (ds) => !ds.some((d) => codeOf(d) === 'PL104'), 'PL104 gone', 30_000);
    assert.ok(ours(doc.uri).every((d) => codeOf(d) !== 'PL104'));
  });
});
