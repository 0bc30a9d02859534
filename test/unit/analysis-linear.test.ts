/**
 * The editor's analysis path (analyzeTree with a per-document AnalysisCache, as the language server runs it) does work
 * linear in the document's size, statements on one line included (issue 25: `x=1;` * 40,000 took 8.8 s to open and
 * 20 s per keystroke, all of it in mirrorWalkNodes scanning back to the line start and through every column's copy).
 * Counted, not timed: the cache's lookup steps on N and 2N statements, open and after one-character edits.
 */
import { strict as assert } from 'node:assert';
import { AnalysisCache, analyzeTree } from '../../server/src/analysis';
import { notClassLikeScannedChars } from '../../server/src/analysis/layers';
import { editTree, lineStartsOf, reparse } from '../../server/src/lsp/incremental';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';

const SHAPES: [string, (n: number) => string][] = [
  ['x=1; on one line', (n) => `import torch\n${'x=1;'.repeat(n)}\n`],
  ['an unclosed a if b else ( line', (n) => `import torch\n${'a if b else ('.repeat(n)}\n`],
  ['layers on one line in a method', (n) => 'import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        '
    + Array.from({ length: n }, (_, i) => `self.layer${i}=nn.Linear(${16 * (1 + (i % 8))},16);`).join('') + '\n'],
  ['long statements on one line in a method', (n) => 'import torch\ndef f():\n    ' + 'value_of_x = 1;'.repeat(n) + '\n'],
];

describe('analysis: lookup work is linear in the document size (statements on one line included)', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });

  /** Steps of the cold analysis and of two one-character edits (mid-line and near the start), and whether each equals a fresh analysis. */
  function work(text: string): number[] {
    let tree = parser.parse(text)!;
    const cache = new AnalysisCache();
    const steps: number[] = [];
    try {
      analyzeTree(tree, text, cache, { lineStarts: lineStartsOf(text) });
      steps.push(cache.steps);
      for (const at of [Math.floor(text.length / 2), text.indexOf('\n') + 3]) {
        text = editTree(tree, text, lineStartsOf(text), { startOffset: at, endOffset: at, text: ' ' });
        tree = reparse(parser, text, tree)!;
        const ir = analyzeTree(tree, text, cache, { lineStarts: lineStartsOf(text) });
        steps.push(cache.steps);
        const fresh = parser.parse(text)!;
        try { assert.deepEqual(ir, analyzeTree(fresh, text)); } finally { fresh.delete(); }
      }
    } finally {
      tree.delete();
    }
    return steps;
  }

  it('self.<attr> = ... statements on one line: the text test of each reads its own statement, not the rest of the line', () => {
    // Before: notClassLikeByText (layers.ts) read to the end of the line for every `self.aN=1;` of it: 40,000 on one
    // line took 46 s of CPU in `check` (10,000: 3.1 s). `self.blk=self.block(8)` makes the analysis look them up.
    const make = (n: number): string => 'import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        '
      + Array.from({ length: n }, (_, i) => `self.a${i}=1;`).join('') + '\n        self.blk=self.block(8)\n';
    const read = (text: string): number => {
      const before = notClassLikeScannedChars();
      const tree = parser.parse(text)!;
      try { analyzeTree(tree, text); } finally { tree.delete(); }
      return notClassLikeScannedChars() - before;
    };
    const n = 2000;
    const small = read(make(n));
    const large = read(make(2 * n));
    assert.ok(small >= n, `the text test ran (${small} characters for ${n} statements)`);
    assert.ok(large <= 2.5 * small, `${small} characters read for ${n} statements, ${large} for ${2 * n}`);
  });

  for (const [name, make] of SHAPES) {
    it(name, () => {
      const n = 2000;
      const small = work(make(n));
      const large = work(make(2 * n));
      for (let i = 0; i < small.length; i++) {
        // linear: twice the statements, about twice the work (quadratic would be four times)
        assert.ok(large[i] <= 2.5 * small[i] + 1000, `pass ${i}: ${small[i]} steps for ${n} statements, ${large[i]} for ${2 * n}`);
      }
    });
  }
});
