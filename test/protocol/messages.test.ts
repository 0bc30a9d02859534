/**
 * Over JSON-RPC: a diagnostic's evidence arrives as relatedInformation (when the client says it shows it), and the
 * hover on a diagnostic's range gives the markdown explanation without repeating the message.
 */
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { ROOT, TestClient } from './lsp-client';

const GPT = `import torch
import torch.nn as nn
from dataclasses import dataclass


@dataclass
class GPTConfig:
    vocab_size: int = 50304
    n_embd: int = 768
    bias: bool = False


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd)
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight

    def forward(self, idx):
        return self.lm_head(self.ln_f(self.c_fc(self.wte(idx))))
`;

const lineOf = (needle: string): number => GPT.split('\n').findIndex((l) => l.includes(needle));

describe('language server: relatedInformation and hover (out/server.js)', function () {
  this.timeout(30000);
  let client: TestClient;

  before(() => {
    if (!existsSync(join(ROOT, 'out', 'server.js'))) execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit' });
  });
  afterEach(() => client.stop());

  it('sends the config default as relatedInformation, with its location, when the client supports it', async () => {
    client = new TestClient();
    await client.initialize(undefined, {}, { publishDiagnostics: { versionSupport: true, relatedInformation: true } });
    const uri = 'file:///ws/gpt.py';
    await client.open(uri, GPT);
    const published = await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL102'));
    const ln = published.diagnostics.find((d) => d.code === 'PL102')!;
    assert.ok(ln.message.length <= 120, ln.message);
    assert.match(ln.message, /^self\.ln_f: nn\.LayerNorm 768 cannot become te\.LayerNorm exactly; /);
    const related = ln.relatedInformation ?? [];
    const bias = related.find((r) => /GPTConfig\.bias defaults to False/.test(r.message));
    assert.ok(bias, JSON.stringify(related));
    assert.equal(bias.location.uri, uri);
    assert.equal(bias.location.range.start.line, lineOf('bias: bool = False'));
  });

  it('leaves relatedInformation out for a client that does not show it', async () => {
    client = new TestClient();
    await client.initialize();
    const uri = 'file:///ws/gpt.py';
    await client.open(uri, GPT);
    const published = await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL102'));
    assert.ok(published.diagnostics.every((d) => d.relatedInformation === undefined));
  });

  it('answers a hover on a diagnostic with the markdown explanation and the rule link, not the message again', async () => {
    client = new TestClient();
    const init = (await client.initialize()) as { capabilities: { hoverProvider?: boolean } };
    assert.equal(init.capabilities.hoverProvider, true);
    const uri = 'file:///ws/gpt.py';
    await client.open(uri, GPT);
    const published = await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
    const fc = published.diagnostics.find((d) => d.code === 'PL101' && d.range.start.line === lineOf('self.c_fc'))!;
    // At 768 wide the gain table predicts FP8 slower (current scaling, the generated recipe): the verdict says so.
    assert.equal(fc.message, 'self.c_fc: nn.Linear 768->3072: FP8 as te.Linear loses (model 1.00x at 16k tokens); keep it in BF16');
    const hover = (await client.connection.sendRequest('textDocument/hover', {
      textDocument: { uri }, position: { line: fc.range.start.line, character: fc.range.start.character + 3 },
    })) as { contents: { kind: string; value: string }; range: unknown } | null;
    assert.ok(hover);
    assert.equal(hover.contents.kind, 'markdown');
    // Markdown escapes (`in\\_features`) aside, the text as the user reads it.
    const md = hover.contents.value.replace(/\\([\\`*_{}[\]()#+\-.!<>])/g, '$1');
    assert.match(md, /\*\*PL101 · linear-to-te\*\*/);
    assert.match(md, /GPTConfig\.n_embd default 768/);
    assert.match(md, /\*\*The fix:\*\* The fix builds it through the project's FP8 fallback \(te\.Linear where FP8 runs/);
    assert.match(md, /\*\*GEMM\*\*: a general matrix multiply/);
    assert.match(md, /\(https:\/\/github\.com\/precision-lens\/precision-lens\/blob\/main\/docs\/rules\/PL101\.md\)/);
    assert.ok(!md.includes(fc.message));
    // Off any diagnostic: no hover.
    const none = await client.connection.sendRequest('textDocument/hover', { textDocument: { uri }, position: { line: 0, character: 0 } });
    assert.equal(none, null);
  });

  it('lists a refused fix as a disabled code action with the reason, for a client with disabledSupport', async () => {
    client = new TestClient();
    await client.initialize(undefined, {}, { codeAction: { disabledSupport: true, codeActionLiteralSupport: { codeActionKind: { valueSet: ['quickfix', 'refactor', 'source'] } } } });
    const uri = 'file:///ws/gpt.py';
    await client.open(uri, GPT);
    const published = await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL102'));
    const ln = published.diagnostics.find((d) => d.code === 'PL102')!;
    const actions = (await client.connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri }, range: ln.range, context: { diagnostics: [ln], only: ['quickfix'] },
    })) as Array<{ title: string; kind: string; disabled?: { reason: string }; edit?: unknown }>;
    const refused = actions.find((a) => a.title === 'Convert self.ln_f to te.LayerNorm');
    assert.ok(refused, JSON.stringify(actions));
    assert.equal(refused.kind, 'quickfix');
    assert.equal(refused.edit, undefined);
    assert.match(refused.disabled!.reason, /te\.LayerNorm always has a weight and a bias/);
    // VS Code hides disabled actions from a plain Ctrl+.: an enabled twin says why and opens the hover card.
    const why = actions.find((a) => a.title.startsWith('Why no fix: ')) as { title: string; kind: string; command?: { command: string } } | undefined;
    assert.ok(why, JSON.stringify(actions));
    assert.equal(why.kind, 'quickfix.precisionLens.explain');
    assert.equal(why.command?.command, 'editor.action.showHover');
    assert.ok(why.title.length <= 100, why.title);
  });

  it('sends no disabled actions to a client without disabledSupport', async () => {
    client = new TestClient();
    await client.initialize();
    const uri = 'file:///ws/gpt.py';
    await client.open(uri, GPT);
    const published = await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL102'));
    const ln = published.diagnostics.find((d) => d.code === 'PL102')!;
    const actions = (await client.connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri }, range: ln.range, context: { diagnostics: [ln] },
    })) as Array<{ disabled?: unknown }>;
    assert.ok(actions.every((a) => a.disabled === undefined));
  });

  it('publishes the file- and class-wide actions as source.* kinds for "Source Action..." and as refactorings otherwise', async () => {
    client = new TestClient();
    await client.initialize(undefined, {}, { codeAction: { disabledSupport: true } });
    const uri = 'file:///ws/gpt.py';
    await client.open(uri, GPT);
    await client.diagnostics(uri, (p) => p.diagnostics.length > 0);
    const inClass = { start: { line: lineOf('self.c_fc'), character: 8 }, end: { line: lineOf('self.c_fc'), character: 8 } };
    const source = (await client.connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri }, range: inClass, context: { diagnostics: [], only: ['source'] },
    })) as Array<{ title: string; kind: string }>;
    assert.ok(source.length > 0);
    assert.ok(source.every((a) => a.kind.startsWith('source.precisionLens.')), JSON.stringify(source));
    assert.ok(source.some((a) => a.kind === 'source.precisionLens.convertAll' && /class GPT/.test(a.title)), JSON.stringify(source));
    const lightbulb = (await client.connection.sendRequest('textDocument/codeAction', {
      textDocument: { uri }, range: inClass, context: { diagnostics: [] },
    })) as Array<{ title: string; kind: string }>;
    assert.ok(lightbulb.every((a) => !a.kind.startsWith('source')), JSON.stringify(lightbulb));
    assert.deepEqual(lightbulb.map((a) => a.title).sort(), source.map((a) => a.title).sort());
  });

  it("applies the project's [tool.precision-lens] table to open files, and re-reads it when the client says it changed", async () => {
    const root = mkdtempSync(join(tmpdir(), 'pl-proto-config-'));
    try {
      const toml = join(root, 'pyproject.toml');
      writeFileSync(toml, '[tool.precision-lens]\nignore = ["PL101"]\n[tool.precision-lens.rules]\nPL102 = "warning"\n');
      client = new TestClient();
      await client.initialize();
      const uri = pathToFileURL(join(root, 'gpt.py')).href;
      await client.open(uri, GPT);
      const first = await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL102'));
      assert.ok(!first.diagnostics.some((d) => d.code === 'PL101'), JSON.stringify(first.diagnostics.map((d) => d.code)));
      assert.equal(first.diagnostics.find((d) => d.code === 'PL102')!.severity, 2);
      writeFileSync(toml, '[tool.precision-lens]\ntarget-gpu = "any"\n');
      const later = new Date(Date.now() + 5000);
      utimesSync(toml, later, later);
      await client.connection.sendNotification('workspace/didChangeWatchedFiles', { changes: [{ uri: pathToFileURL(toml).href, type: 2 }] });
      const second = await client.diagnostics(uri, (p) => p.diagnostics.some((d) => d.code === 'PL101'));
      assert.equal(second.diagnostics.find((d) => d.code === 'PL102')!.severity, 3);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
