/**
 * Issue 21 in a real VS Code: a LayerNorm whose output only the child attention's c_attn reads gets PL104, and its
 * quick fix fuses the two (te.LayerNormLinear where FP8 runs) through the project's fallback module, created with the
 * edit, without touching forward; a norm feeding llama2.c's whole SwiGLU FeedForward gets PL105, and its quick fix
 * makes the three Linears and the norm one te.LayerNormMLP where FP8 runs.
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

  it('offers "Fuse self.ffn_norm into feed_forward" on PL105 and writes fp8_fuse_mlp around the norm built after the MLP', async () => {
    const target = workspaceFile('fuse/mine_ffn.py');
    await vscode.workspace.fs.copy(workspaceFile('fuse/llama_ffn.py'), target, { overwrite: true });
    const doc = await vscode.workspace.openTextDocument(target);
    await vscode.window.showTextDocument(doc, { preview: false });
    const norm = lineOf(doc, 'self.ffn_norm = ');
    const [hint] = (await waitForDiagnostics(doc.uri, (ds) => ds.some((d) => codeOf(d) === 'PL105' && d.range.start.line === norm), 'PL105 on ffn_norm', 60_000))
      .filter((d) => codeOf(d) === 'PL105');
    assert.strictEqual(hint.message, 'self.ffn_norm feeds only feed_forward, a gated MLP: fuse both as te.LayerNormMLP where FP8 runs');
    const title = 'Fuse self.ffn_norm into feed_forward (te.LayerNormMLP where FP8 runs, converting 3 Linears)';
    const action = await waitFor(async () => {
      const items = await vscode.commands.executeCommand<vscode.CodeAction[]>('vscode.executeCodeActionProvider', doc.uri, hint.range, vscode.CodeActionKind.QuickFix.value);
      return (items ?? []).find((a) => a.title === title);
    }, `the action "${title}"`, { timeoutMs: 30_000, intervalMs: 250 });
    assert.ok(action.edit, 'the action carries its edit');
    const before = doc.getText();
    const forwards = before.split('    def forward').slice(1);
    assert.ok(await vscode.workspace.applyEdit(action.edit), 'applyEdit');
    const text = await waitFor(() => (doc.getText().includes('fp8_fuse_mlp(') ? doc.getText() : undefined), 'the fused line');
    assert.match(text, /^ {8}self\.ffn_norm = fp8_fuse_mlp\(nn\.LayerNorm\(dim, eps=1e-5\), self\.feed_forward, "w1", "w2", up="w3", activation="swiglu", dropout="dropout", returns="norm"\)$/m);
    for (const w of ['w1', 'w3']) assert.match(text, new RegExp(`^ {8}self\\.${w} = fp8_linear\\(dim, hidden_dim, bias=False\\)$`, 'm'));
    assert.match(text, /^from fp8_fallback import fp8_fuse_mlp, fp8_linear$/m);
    assert.deepEqual(text.split('    def forward').slice(1).map((f) => f.split('\n\n')[0]), forwards.map((f) => f.split('\n\n')[0]), 'both forwards untouched');
    await waitForDiagnostics(doc.uri, (ds) => !ds.some((d) => codeOf(d) === 'PL105'), 'PL105 gone', 30_000);
  });
});
