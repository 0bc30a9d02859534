/**
 * The analysis of an incrementally re-parsed tree (after random single-character edits) equals a fresh analysis of
 * the same text: deep-equal IR.
 */
import { strict as assert } from 'node:assert';
import { analyzeTree } from '../../server/src/analysis';
import { closeParen } from '../../server/src/analysis/calls';
import { editTree, lineStartsOf, reparse } from '../../server/src/incremental';
import { createPythonParser, type Parser } from '../../server/src/parser';
import { fixture } from './analysis-helpers';

function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => { s = (s * 1664525 + 1013904223) >>> 0; return s / 4294967296; };
}

describe('analysis: incremental re-analysis', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });

  for (const name of ['gpt_small.py', 'lm_head_positives.py', 'lm_head_negatives.py']) {
    it(`equals a fresh analysis after random single-character edits (${name})`, () => {
      const rand = rng(name.length * 7919);
      let text = fixture(name);
      let tree = parser.parse(text)!;
      const chars = 'a_1 (),.=:\n';
      try {
        for (let i = 0; i < 40; i++) {
          const off = Math.floor(rand() * text.length);
          const change = rand() < 0.3
            ? { startOffset: off, endOffset: Math.min(text.length, off + 1), text: '' }
            : { startOffset: off, endOffset: off, text: chars[Math.floor(rand() * chars.length)] };
          text = editTree(tree, text, lineStartsOf(text), change);
          tree = reparse(parser, text, tree)!;
          const incremental = analyzeTree(tree, text);
          const fresh = parser.parse(text)!;
          try {
            assert.deepEqual(incremental, analyzeTree(fresh, text), `edit ${i} at ${off}`);
          } finally {
            fresh.delete();
          }
        }
      } finally {
        tree.delete();
      }
    });
  }
});

describe('analysis: closeParen (text scanner for argument lists)', () => {
  it('skips strings, triple quotes, escapes, comments and nested brackets', () => {
    const cases = [
      'x.to(torch.bfloat16)',
      'print(f"a) {b[0]}", \'c)\\\'\', [1, (2)])',
      'log(""" ) """, {\'k\': (1,)})',
      'f(a,  # not ) here\n  b)',
    ];
    for (const c of cases) assert.equal(closeParen(c + ' tail', c.indexOf('(')), c.length, c);
    assert.equal(closeParen('f(a, b', 1), 'f(a, b'.length);
  });
});
