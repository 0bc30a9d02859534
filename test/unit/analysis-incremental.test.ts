/**
 * The analysis of an incrementally re-parsed tree (after random single-character edits) equals a fresh analysis of
 * the same text: deep-equal IR.
 */
import { strict as assert } from 'node:assert';
import { AnalysisCache, analyzeTree } from '../../server/src/analysis';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
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

describe('analysis: per-statement cache (AnalysisCache)', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });

  const corpus = (name: string): string => readFileSync(join(__dirname, '..', '..', 'corpus', name), 'utf8');
  const inputs: [string, () => string][] = [
    ['gpt_small.py', () => fixture('gpt_small.py')],
    ['lm_head_positives.py', () => fixture('lm_head_positives.py')],
    ['lm_head_negatives.py', () => fixture('lm_head_negatives.py')],
    ['corpus/nanogpt_model.py', () => corpus('nanogpt_model.py')],
    ['corpus/hf_qwen2_modeling.py', () => corpus('hf_qwen2_modeling.py')],
  ];
  for (const [name, load] of inputs) {
    it(`through the cache equals a fresh cache-less analysis after seeded random edits (${name})`, () => {
      const rand = rng(name.length * 104729 + 17);
      let text = load();
      let tree = parser.parse(text)!;
      const cache = new AnalysisCache();
      const chars = 'a_1 (),.=:\n#"\'[]';
      try {
        assert.deepEqual(analyzeTree(tree, text, cache), analyzeTree(tree, text), 'cold cache');
        for (let i = 0; i < 40; i++) {
          const off = Math.floor(rand() * text.length);
          const change = rand() < 0.3
            ? { startOffset: off, endOffset: Math.min(text.length, off + 1), text: '' }
            : { startOffset: off, endOffset: off, text: chars[Math.floor(rand() * chars.length)] };
          text = editTree(tree, text, lineStartsOf(text), change);
          tree = reparse(parser, text, tree)!;
          const cached = analyzeTree(tree, text, cache);
          const fresh = parser.parse(text)!;
          try {
            assert.deepEqual(cached, analyzeTree(fresh, text), `edit ${i} at ${off}`);
          } finally {
            fresh.delete();
          }
        }
      } finally {
        tree.delete();
      }
    });
  }

  it('copies only the edited statement again', () => {
    let text = corpus('nanogpt_model.py');
    let tree = parser.parse(text)!;
    const cache = new AnalysisCache();
    try {
      analyzeTree(tree, text, cache);
      const total = cache.copied;
      assert.ok(total > 10, `${total} statements`);
      analyzeTree(tree, text, cache);
      assert.equal(cache.copied, 0);
      assert.equal(cache.reused, total);
      // One character inside a method of a class in the middle of the file.
      const at = text.indexOf('def forward') + 4;
      text = editTree(tree, text, lineStartsOf(text), { startOffset: at, endOffset: at, text: 'x' });
      tree = reparse(parser, text, tree)!;
      const ir = analyzeTree(tree, text, cache);
      assert.equal(cache.copied, 1);
      assert.equal(cache.reused, total - 1);
      const fresh = parser.parse(text)!;
      assert.deepEqual(ir, analyzeTree(fresh, text));
      fresh.delete();
    } finally {
      tree.delete();
    }
  });
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
