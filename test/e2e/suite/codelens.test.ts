/**
 * The model-level FP8 estimate (issue 22, item 4) in a real VS Code: the language client turns the server's
 * textDocument/codeLens answer into a lens on the model class's `class` line, whose command (registered by the
 * extension) shows the numbers behind it.
 */
import * as assert from 'assert';
import * as vscode from 'vscode';
import { lineOf, openFile, waitFor } from './helpers';

describe('codelens: the predicted FP8 step speedup on the model class (model.py)', function () {
  this.timeout(90_000);

  it('shows one lens on `class GPT(` with the prediction, its command registered by the extension', async () => {
    const doc = await openFile('model.py');
    const line = lineOf(doc, 'class GPT(');
    const lenses = await waitFor(async () => {
      const found = await vscode.commands.executeCommand<vscode.CodeLens[]>('vscode.executeCodeLensProvider', doc.uri, 10);
      const ours = (found ?? []).filter((l) => l.command?.command === 'precisionLens.showGainEstimate');
      return ours.length ? ours : undefined;
    }, 'the Precision Lens code lens on model.py', { timeoutMs: 60_000, intervalMs: 200 });
    assert.strictEqual(lenses.length, 1, lenses.map((l) => l.command?.title).join(' | '));
    const [lens] = lenses;
    assert.strictEqual(lens.range.start.line, line, `lens on line ${lens.range.start.line}, class GPT on ${line}`);
    // The workspace's model is a 64-wide toy: on the H200 FP8 is predicted to lose (launch-bound).
    assert.match(lens.command!.title, /^FP8 loses here on NVIDIA H200: about 0\.\d+x per step at 16k tokens \(launch-bound\) · 12 blocks · tokens assumed$/);
    const [title, details] = lens.command!.arguments as [string, string[]];
    assert.strictEqual(title, lens.command!.title);
    assert.ok(details.some((d) => /GPTConfig\.n_layer/.test(d)), details.join('\n'));
    const commands = await vscode.commands.getCommands(true);
    assert.ok(commands.includes('precisionLens.showGainEstimate'), 'the lens command is registered');
  });

  it('follows precisionLens.tokensPerStep: the tokens are the user\'s, no longer assumed', async () => {
    const doc = await openFile('model.py');
    const config = vscode.workspace.getConfiguration('precisionLens', doc.uri);
    await config.update('tokensPerStep', 8192, vscode.ConfigurationTarget.Workspace);
    try {
      const title = await waitFor(async () => {
        const found = await vscode.commands.executeCommand<vscode.CodeLens[]>('vscode.executeCodeLensProvider', doc.uri, 10);
        const t = (found ?? []).find((l) => l.command?.command === 'precisionLens.showGainEstimate')?.command?.title;
        return t && / at 8192 tokens/.test(t) ? t : undefined;
      }, 'the lens at 8192 tokens per step', { timeoutMs: 30_000, intervalMs: 200 });
      assert.match(title, /· 12 blocks$/);
    } finally {
      await config.update('tokensPerStep', undefined, vscode.ConfigurationTarget.Workspace);
    }
  });
});
