/**
 * Scenario 1 of SCENARIOS.md in a real VS Code: opening a nanoGPT-style model.py shows Precision Lens diagnostics
 * (published by the real language server over IPC) on the right ranges, the lm-head is protected, and training code
 * that calls backward inside FP8 autocast is flagged.
 */
import * as assert from 'assert';
import * as vscode from 'vscode';
import {
  callRange, codeOf, describeDiagnostics, fmtRange, lineOf, onLine, openFile, ours, waitForDiagnostics,
} from './helpers';

/** The four projections of attention and MLP in model.py: the line they are on and their constructor call. */
const PROJECTIONS = [
  'self.c_attn = nn.Linear(',
  'self.c_proj = nn.Linear(config.n_embd, config.n_embd',
  'self.c_fc = nn.Linear(',
  'self.c_proj = nn.Linear(4 * config.n_embd',
];
const LM_HEAD = 'self.lm_head = nn.Linear(';

describe('diagnostics: model.py (nanoGPT style)', function () {
  let doc: vscode.TextDocument;
  let diags: vscode.Diagnostic[];

  before(async function () {
    // The first test also pays for activation, server start and loading the WASM grammar.
    this.timeout(90_000);
    doc = await openFile('model.py');
    const lines = PROJECTIONS.map((p) => lineOf(doc, p));
    diags = await waitForDiagnostics(
      doc.uri,
      (ds) => lines.every((l) => onLine(ds, 'PL101', l).length > 0),
      'PL101 on the attention and MLP projections of model.py',
      60_000,
    );
  });

  it('puts PL101 exactly on each projection\'s nn.Linear(...) call', () => {
    for (const needle of PROJECTIONS) {
      const expected = callRange(doc, needle, 'nn.Linear');
      const found = onLine(diags, 'PL101', expected.start.line);
      assert.strictEqual(found.length, 1, `one PL101 on ${needle}: ${describeDiagnostics(doc.uri)}`);
      assert.ok(found[0].range.isEqual(expected),
        `PL101 range for ${needle}: expected ${fmtRange(expected)} (${doc.getText(expected)}), got ${fmtRange(found[0].range)} (${doc.getText(found[0].range)})`);
    }
  });

  it('gives PL101 information severity, a te.Linear message, and a link to the rule page', () => {
    const d = onLine(diags, 'PL101', lineOf(doc, PROJECTIONS[0]))[0];
    assert.strictEqual(d.severity, vscode.DiagnosticSeverity.Information);
    assert.match(d.message, /te\.Linear/);
    assert.ok(typeof d.code === 'object' && d.code !== null, 'code carries codeDescription.href');
    const target = (d.code as { value: string | number; target: vscode.Uri }).target;
    assert.match(target.toString(), /docs\/rules\/PL101\.md$/);
  });

  it('marks every diagnostic with source "precision-lens" and a known code', () => {
    const all = vscode.languages.getDiagnostics(doc.uri).filter((d) => /^PL\d{3}$/.test(codeOf(d)));
    assert.ok(all.length >= PROJECTIONS.length);
    for (const d of all) assert.strictEqual(d.source, 'precision-lens', `${codeOf(d)} source`);
  });

  it('does not offer PL101 for lm_head (vocabulary-sized, tied to wte)', () => {
    const line = lineOf(doc, LM_HEAD);
    assert.deepStrictEqual(onLine(ours(doc.uri), 'PL101', line).map(codeOf), [],
      `no PL101 on lm_head: ${describeDiagnostics(doc.uri)}`);
    // nor on the token embedding it is tied to
    const wte = lineOf(doc, 'wte=nn.Embedding(');
    assert.deepStrictEqual(ours(doc.uri).filter((d) => d.range.start.line === wte && /^PL10\d$/.test(codeOf(d))).map(codeOf), []);
  });

  it('flags the 100 -> 30 projection with PL110 (in_features % 16 != 0)', () => {
    const range = callRange(doc, 'self.proj = nn.Linear(100, 30)', 'nn.Linear');
    const found = onLine(ours(doc.uri), 'PL110', range.start.line);
    assert.strictEqual(found.length, 1, `PL110 on nn.Linear(100, 30): ${describeDiagnostics(doc.uri)}`);
    assert.ok(range.contains(found[0].range), `PL110 ${fmtRange(found[0].range)} lies within the call ${fmtRange(range)}`);
    assert.match(found[0].message, /16/);
  });

  it('follows edits: a new nn.Linear gets PL101, and it goes away when the line is removed', async () => {
    const anchor = lineOf(doc, 'self.gelu = nn.GELU()');
    const indent = doc.lineAt(anchor).text.match(/^\s*/)![0];
    const insert = new vscode.WorkspaceEdit();
    insert.insert(doc.uri, new vscode.Position(anchor + 1, 0), `${indent}self.c_extra = nn.Linear(config.n_embd, config.n_embd)\n`);
    assert.ok(await vscode.workspace.applyEdit(insert));
    const added = anchor + 1;
    await waitForDiagnostics(doc.uri, (ds) => onLine(ds, 'PL101', added).length === 1, 'PL101 on the inserted line', 15_000);
    const lm = lineOf(doc, LM_HEAD);
    assert.strictEqual(onLine(ours(doc.uri), 'PL101', lm).length, 0, 'lm_head still has no PL101 after the edit');

    const remove = new vscode.WorkspaceEdit();
    remove.delete(doc.uri, new vscode.Range(added, 0, added + 1, 0));
    assert.ok(await vscode.workspace.applyEdit(remove));
    await waitForDiagnostics(
      doc.uri,
      (ds) => ds.filter((d) => codeOf(d) === 'PL101').length === diags.filter((d) => codeOf(d) === 'PL101').length &&
        onLine(ds, 'PL101', lineOf(doc, PROJECTIONS[2])).length === 1,
      'PL101 set back to what it was before the insertion',
      15_000,
    );
  });
});

describe('diagnostics: te_model.py (TE under fp8_autocast)', function () {
  let doc: vscode.TextDocument;

  before(async function () {
    this.timeout(60_000);
    doc = await openFile('te_model.py');
    await waitForDiagnostics(doc.uri, (ds) => ds.some((d) => codeOf(d) === 'PL301'), 'PL301 in te_model.py', 45_000);
  });

  it('flags loss.backward() inside the te.fp8_autocast block with PL301 on that call', () => {
    const line = lineOf(doc, /^\s+loss\.backward\(\)\s*$/);
    const found = onLine(ours(doc.uri), 'PL301', line);
    assert.strictEqual(found.length, 1, `one PL301 on loss.backward(): ${describeDiagnostics(doc.uri)}`);
    assert.strictEqual(found[0].range.start.line, line);
    assert.match(doc.getText(found[0].range), /backward/, 'the range covers the backward call');
    assert.strictEqual(found[0].severity, vscode.DiagnosticSeverity.Warning);
    // and nowhere else: the other calls in the block are fine
    assert.strictEqual(ours(doc.uri).filter((d) => codeOf(d) === 'PL301').length, 1);
  });

  it('warns (PL201) that the te.Linear lm_head runs in FP8 under autocast', () => {
    const head = lineOf(doc, 'self.lm_head = te.Linear(');
    const pl201 = ours(doc.uri).filter((d) => codeOf(d) === 'PL201');
    assert.ok(pl201.length >= 1, `PL201 expected: ${describeDiagnostics(doc.uri)}`);
    assert.ok(pl201.some((d) => d.range.start.line === head || /lm_head/.test(d.message)),
      `a PL201 on the lm_head line or naming lm_head: ${describeDiagnostics(doc.uri)}`);
    assert.ok(pl201.every((d) => d.severity === vscode.DiagnosticSeverity.Warning));
  });

  it('does not offer PL101 for layers that already are te.Linear', () => {
    for (const needle of ['self.fc1 = te.Linear(', 'self.fc2 = te.Linear(']) {
      assert.strictEqual(onLine(ours(doc.uri), 'PL101', lineOf(doc, needle)).length, 0, needle);
    }
  });
});

describe('diagnostics: files without torch', () => {
  it('stays silent on plain.py', async function () {
    this.timeout(60_000);
    const plain = await openFile('plain.py');
    // Ordering instead of sleeping: plain.py was opened before this edit of model.py, so once model.py's diagnostics
    // reflect the edit, the server has handled plain.py too.
    const model = await openFile('model.py');
    const anchor = lineOf(model, 'self.gelu = nn.GELU()');
    const edit = new vscode.WorkspaceEdit();
    edit.insert(model.uri, new vscode.Position(anchor + 1, 0), '        self.c_probe = nn.Linear(config.n_embd, config.n_embd)\n');
    assert.ok(await vscode.workspace.applyEdit(edit));
    await waitForDiagnostics(model.uri, (ds) => onLine(ds, 'PL101', anchor + 1).length === 1, 'PL101 on the probe line', 15_000);
    assert.deepStrictEqual(ours(plain.uri).map(codeOf), [], 'no diagnostics on a file that does not import torch');
    const undo = new vscode.WorkspaceEdit();
    undo.delete(model.uri, new vscode.Range(anchor + 1, 0, anchor + 2, 0));
    assert.ok(await vscode.workspace.applyEdit(undo));
  });
});
