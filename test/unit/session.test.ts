import * as assert from 'node:assert/strict';
import { resolveSettings } from '../../common/settings';
import { lineStartsOf, pointAt } from '../../server/src/lsp/incremental';
import { lineStartsAfter } from '../../server/src/engine/lines';
import { createPythonParser, PythonParser, type Parser } from '../../server/src/engine/parser';
import { AnalysisSession } from '../../server/src/lsp/session';

const SOURCE = `import torch.nn as nn

class MLP(nn.Module):
    def __init__(self, d=768):
        super().__init__()
        # é and 😀 before layers exercise UTF-16 columns
        self.fc = nn.Linear(d, 4 * d)  # "😀"
        self.proj = nn.Linear(4 * d, d)
`;

/** A tiny deterministic PRNG so failures reproduce. */
function prng(seed: number): () => number {
  return () => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
}

describe('incremental parsing (AnalysisSession)', () => {
  let parser: Parser;
  let host: PythonParser;
  before(async () => {
    parser = await createPythonParser();
    host = await PythonParser.create();
  });

  it('pointAt maps offsets to rows and UTF-16 columns', () => {
    const text = 'a😀\nbc\n';
    const starts = lineStartsOf(text);
    assert.deepEqual(starts, [0, 4, 7]);
    assert.deepEqual(pointAt(starts, 3), { row: 0, column: 3 });
    assert.deepEqual(pointAt(starts, 5), { row: 1, column: 1 });
    assert.deepEqual(pointAt(starts, 7), { row: 2, column: 0 });
  });

  it('updates a line table around a change (lineStartsAfter) as if rebuilt from the whole text', () => {
    const random = prng(7);
    let text = 'ab\ncd\n\nef';
    const pieces = ['', 'x', '\n', '\n\n', 'y\nz', '\nq\n'];
    for (let i = 0; i < 400; i++) {
      const start = Math.floor(random() * (text.length + 1));
      const end = Math.min(text.length, start + Math.floor(random() * 5));
      const inserted = pieces[Math.floor(random() * pieces.length)];
      const after = lineStartsAfter(lineStartsOf(text), start, end, inserted);
      text = text.slice(0, start) + inserted + text.slice(end);
      assert.deepEqual(after, lineStartsOf(text), `change ${i}: [${start}, ${end}) -> ${JSON.stringify(inserted)}`);
    }
  });

  it('gives the same tree as a fresh parse after random edits, including multi-line and non-ASCII ones', () => {
    const session = new AnalysisSession(host);
    const settings = resolveSettings({});
    session.open('u', SOURCE, 1);
    session.analyze('u', settings, {});
    const random = prng(42);
    const inserts = ['x', '\n', 'é', '😀', '(', ')', '    ', 'nn.Linear(16, 32)\n', '"', ''];
    for (let version = 2; version < 150; version++) {
      const state = session.get('u')!;
      const start = Math.floor(random() * state.text.length);
      // Never split a surrogate pair: editors never do.
      const safeStart = /[\uDC00-\uDFFF]/.test(state.text[start] ?? '') ? start - 1 : start;
      let end = Math.min(state.text.length, safeStart + Math.floor(random() * 4));
      if (/[\uDC00-\uDFFF]/.test(state.text[end] ?? '')) end++;
      const text = inserts[Math.floor(random() * inserts.length)];
      session.change('u', [{ startOffset: safeStart, endOffset: end, text }], version);
      // the line table is updated around each change: the same as one built from the whole text
      assert.deepEqual(state.lineStarts, lineStartsOf(state.text), `line table after edit ${version}`);
      if (version % 3 === 0) session.analyze('u', settings, {});
    }
    session.analyze('u', settings, {});
    const state = session.get('u')!;
    const fresh = parser.parse(state.text)!;
    assert.equal(state.tree!.rootNode.toString(), fresh.rootNode.toString());
    fresh.delete();
    session.dispose();
  });

  it('caches the analysis per version and frees the tree on close', () => {
    const session = new AnalysisSession(host);
    const settings = resolveSettings({});
    session.open('u', SOURCE, 1);
    const a = session.analyze('u', settings, {});
    assert.equal(session.analyze('u', settings, {}), a, 'same version: cached');
    session.change('u', [{ startOffset: 0, endOffset: 0, text: '# edit\n' }], 2);
    assert.notEqual(session.analyze('u', settings, {}), a);
    session.close('u');
    assert.equal(session.get('u'), undefined);
    assert.equal(session.size, 0);
  });

  it('skips binary and oversized documents with a reason instead of parsing them', () => {
    const session = new AnalysisSession(host);
    session.open('bin', 'import torch\u0000garbage', 1);
    assert.match(session.analyze('bin', resolveSettings({}), {})!.skipped!, /binary/);
    session.open('big', 'x = 1\n'.repeat(100), 1);
    assert.match(session.analyze('big', resolveSettings({ maxFileSize: 100 }), {})!.skipped!, /maxFileSize/);
    session.dispose();
  });
});
