/**
 * The analysis of an incrementally re-parsed tree (after random single-character edits) equals a fresh analysis of
 * the same text: deep-equal IR.
 */
import { strict as assert } from 'node:assert';
import { AnalysisCache, analyzeTree } from '../../server/src/analysis';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { closeParen } from '../../server/src/analysis/calls';
import { editTree, lineStartsOf, reparse } from '../../server/src/lsp/incremental';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';
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

/** A generated model file (scripts/gen-large-model.mjs, the benchmark's generator): factories, config classes, TE
 *  variants and training loops of several families, deterministic. Loaded once (an ES module). */
let generated = '';
before(async () => {
  const gen = await import('../../scripts/gen-large-model.mjs');
  generated = gen.generateModelFile({ lines: 700, seed: 3 });
});

/** Real model files from the git-ignored corpus/ folder, where a developer fetched them; CI has none and skips them. */
function corpusInputs(...names: string[]): [string, () => string][] {
  const dir = join(__dirname, '..', '..', 'corpus');
  return names.filter((n) => existsSync(join(dir, n))).map((n) => [`corpus/${n}`, () => readFileSync(join(dir, n), 'utf8')]);
}

describe('analysis: per-statement cache (AnalysisCache)', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });

  const inputs: [string, () => string][] = [
    ['gpt_small.py', () => fixture('gpt_small.py')],
    ['lm_head_positives.py', () => fixture('lm_head_positives.py')],
    ['lm_head_negatives.py', () => fixture('lm_head_negatives.py')],
    ['generated 700-line model', () => generated],
    ...corpusInputs('nanogpt_model.py', 'hf_qwen2_modeling.py'),
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
    let text = CROSS;
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

describe('analysis: an edited statement lends its unchanged nested statements to its new copy', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });

  it('copies from the tree only what changed inside an edited class', () => {
    let text = CROSS;
    let tree = parser.parse(text)!;
    const cache = new AnalysisCache();
    try {
      analyzeTree(tree, text, cache);
      // A letter inside a name in GPT.forward: the class is copied again, its __init__ (and forward's other lines) lent.
      const at = text.indexOf('x = self.wte(idx)') + 1;
      text = editTree(tree, text, lineStartsOf(text), { startOffset: at, endOffset: at, text: 'y' });
      tree = reparse(parser, text, tree)!;
      assert.equal(tree.rootNode.hasError, false);
      const ir = analyzeTree(tree, text, cache);
      assert.equal(cache.copied, 1);
      assert.ok(cache.nestedReused >= 2, `${cache.nestedReused} nested statements lent`);
      const fresh = parser.parse(text)!;
      try {
        assert.deepEqual(ir, analyzeTree(fresh, text));
      } finally {
        fresh.delete();
      }
    } finally {
      tree.delete();
    }
  });

  // Edits that keep the file error-free (where lending applies): a space at the end of a line, a letter doubled
  // inside a name, a digit added to a number; now and then one that breaks the file, so both paths alternate.
  const inputs: [string, () => string][] = [
    ['cross-statement model', () => CROSS],
    ['generated 700-line model', () => generated],
    ['gpt_small.py', () => fixture('gpt_small.py')],
    ['lm_head_positives.py', () => fixture('lm_head_positives.py')],
    ...corpusInputs('nanogpt_model.py', 'hf_qwen2_modeling.py'),
  ];
  for (const [name, load] of inputs) {
    it(`equals a fresh cache-less analysis after seeded edits that keep the file valid (${name})`, () => {
      const rand = rng(name.length * 31337 + 5);
      let text = load();
      let tree = parser.parse(text)!;
      const cache = new AnalysisCache();
      let lent = 0;
      try {
        analyzeTree(tree, text, cache);
        for (let i = 0; i < 60; i++) {
          const r = rand();
          let change: { startOffset: number; endOffset: number; text: string };
          if (r < 0.1) {
            const off = Math.floor(rand() * text.length);
            change = { startOffset: off, endOffset: off, text: '(' };
          } else if (r >= 0.7) {
            // a line or a whole method duplicated below itself, or a line deleted: nested statements whose text now
            // occurs twice, or inside a copy of a lent method (a subtree is lent once, never inside a lent one)
            const blocks = r < 0.8 ? lineSpans(text) : r < 0.9 ? methodSpans(text) : lineSpans(text);
            if (!blocks.length) continue;
            const [a, b] = blocks[Math.floor(rand() * blocks.length)];
            change = r < 0.9 ? { startOffset: b, endOffset: b, text: text.slice(a, b) } : { startOffset: a, endOffset: b, text: '' };
          } else {
            const pattern = r < 0.35 ? /[^\n\\](?=\n)/g : r < 0.6 ? /[a-z_](?=[a-z_])/g : /\d(?=\d*\b)/g;
            const places = [...text.matchAll(pattern)].map((m) => m.index! + 1);
            if (!places.length) continue;
            const off = places[Math.floor(rand() * places.length)];
            change = { startOffset: off, endOffset: off, text: r < 0.35 ? ' ' : text[off - 1] };
          }
          text = editTree(tree, text, lineStartsOf(text), change);
          tree = reparse(parser, text, tree)!;
          const cached = analyzeTree(tree, text, cache);
          lent += cache.nestedReused;
          const fresh = parser.parse(text)!;
          try {
            assert.deepEqual(cached, analyzeTree(fresh, text), `edit ${i} at ${change.startOffset}`);
          } finally {
            fresh.delete();
          }
        }
        assert.ok(lent > 0, 'no nested statement was lent');
      } finally {
        tree.delete();
      }
    });
  }
});

/** [start, end) of each indented non-blank line, its newline included. */
function lineSpans(text: string): [number, number][] {
  return [...text.matchAll(/^[ \t]+\S[^\n]*\n/gm)].map((m) => [m.index!, m.index! + m[0].length]);
}

/** [start, end) of each method: its `def` line and the lines indented deeper (blank lines inside included). */
function methodSpans(text: string): [number, number][] {
  const out: [number, number][] = [];
  for (const m of text.matchAll(/^([ \t]+)def [^\n]*\n/gm)) {
    const indent = m[1].length;
    let end = m.index! + m[0].length;
    for (;;) {
      const nl = text.indexOf('\n', end);
      if (nl < 0) break;
      const line = text.slice(end, nl);
      if (line.trim() && line.length - line.trimStart().length <= indent) break;
      end = nl + 1;
    }
    out.push([m.index!, end]);
  }
  return out;
}

/** A small model file in which layers of one statement depend on many others (imports, constants, config defaults,
 * constructor call sites, local bases, factories). */
const CROSS = `import torch
import torch.nn as nn
from torch.nn import Linear as Dense
from dataclasses import dataclass
try:
    import transformer_engine.pytorch as te
except ImportError:
    te = None

N_HEAD = 4
HIDDEN = 64 * N_HEAD
Proj = nn.Linear

@dataclass
class GPTConfig:
    n_embd: int = 768
    vocab_size: int = 50257
    n_layer: int = 2
    bias: bool = True

def make_proj(d_in, d_out=HIDDEN):
    return nn.Linear(d_in, d_out)

class Base(nn.Module):
    def __init__(self, width=128):
        super().__init__()
        self.width = width

class MyLinear(nn.Linear):
    pass

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight

class MLP(Base):
    def __init__(self, config, mult=4):
        super().__init__(config.n_embd)
        self.c_fc = nn.Linear(config.n_embd, mult * config.n_embd, bias=config.bias)
        self.c_proj = Dense(mult * config.n_embd, config.n_embd)
        self.extra = Proj(self.width, HIDDEN)
        self.norm = RMSNorm(config.n_embd)

class Attn(nn.Module):
    def __init__(self, n_embd, n_head=N_HEAD):
        super().__init__()
        self.qkv = MyLinear(n_embd, 3 * n_embd)
        self.out = make_proj(n_embd)
        self.heads = nn.Linear(n_embd, n_head * 16)

class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        width = config.n_embd * 2
        self.ln = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = Attn(width // 2, n_head=N_HEAD)
        self.mlp = MLP(config, mult=4)

class GPT(nn.Module):
    def __init__(self, config: GPTConfig):
        super().__init__()
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight
    def forward(self, idx):
        x = self.wte(idx)
        for b in self.h:
            x = b(x)
        return self.lm_head(x)

def train(steps=10):
    model = GPT(GPTConfig(n_embd=512))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    with te.fp8_autocast(enabled=True):
        loss = model(torch.zeros(1)).sum()
    loss.backward()
    opt.step()
`;

describe('analysis: memoised layer records stay exact (edits to what other statements read)', () => {
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });

  it('rebuilds only the layers whose statement or dependencies changed', () => {
    let text = CROSS;
    let tree = parser.parse(text)!;
    const cache = new AnalysisCache();
    const edit = (at: number, ins: string, del = 0): void => {
      text = editTree(tree, text, lineStartsOf(text), { startOffset: at, endOffset: at + del, text: ins });
      tree = reparse(parser, text, tree)!;
    };
    try {
      const first = analyzeTree(tree, text, cache);
      const total = cache.layersBuilt;
      assert.ok(total >= 10, `${total} layers`);
      analyzeTree(tree, text, cache);
      // Every record, factory templates and their instances at each call site included.
      assert.equal(cache.layersReused, total);
      assert.equal(cache.layersBuilt, 0);
      // A comment line at the top moves every statement: records are reused with their spans moved.
      edit(0, '# header\n');
      const moved = analyzeTree(tree, text, cache);
      assert.equal(cache.layersReused, total);
      assert.deepEqual(moved, (() => { const f = parser.parse(text)!; try { return analyzeTree(f, text); } finally { f.delete(); } })());
      assert.equal(moved.layers[0].span.startLine, first.layers[0].span.startLine + 1);
      // A config default: the layers that read that field are rebuilt (values change), the IR stays exact.
      const at = text.indexOf('vocab_size: int = 50257') + 'vocab_size: int = '.length;
      edit(at, '3', 1);
      const ir = analyzeTree(tree, text, cache);
      assert.ok(cache.layersBuilt > 1 && cache.layersBuilt < total, `${cache.layersBuilt} rebuilt`);
      const fresh = parser.parse(text)!;
      assert.deepEqual(ir, analyzeTree(fresh, text));
      fresh.delete();
    } finally {
      tree.delete();
    }
  });

  // Places whose text other statements' layers depend on.
  const HOT = [
    /^(?:from|import) [^\n]*/gm, // imports
    /^\s*\w+\s*(?::\s*\w+\s*)?=\s*[^\n]+/gm, // config defaults, module constants, locals
    /\b[A-Z]\w*\([^()\n]*\)/g, // constructor call sites
    /^class [^\n]*/gm, // class headers
    /^\s*def [^\n]*/gm, // function and __init__ signatures
    /\d+/g, // numbers (dims)
    /\b[a-z_]\w*\b/g, // names
  ];
  const inputs: [string, () => string][] = [
    ['cross-statement model', () => CROSS],
    ['generated 700-line model', () => generated],
    ['gpt_small.py', () => fixture('gpt_small.py')],
    ['lm_head_positives.py', () => fixture('lm_head_positives.py')],
    ...corpusInputs('nanogpt_model.py', 'mingpt_model.py', 'whisper_model.py', 'torchtitan_llama3_model.py'),
  ];
  for (const [name, load] of inputs) {
    it(`equals a fresh cache-less analysis after targeted single-character edits (${name})`, () => {
      const rand = rng(name.length * 7727 + 3);
      let text = load();
      let tree = parser.parse(text)!;
      const cache = new AnalysisCache();
      const edits = name.startsWith('cross') ? 300 : 80;
      let reused = 0;
      try {
        analyzeTree(tree, text, cache);
        for (let i = 0; i < edits; i++) {
          const re = HOT[Math.floor(rand() * HOT.length)];
          const matches = [...text.matchAll(re)];
          let off: number;
          if (matches.length) {
            const m = matches[Math.floor(rand() * matches.length)];
            off = (m.index ?? 0) + Math.floor(rand() * (m[0].length + 1));
          } else off = Math.floor(rand() * text.length);
          off = Math.min(off, text.length);
          const r = rand();
          let change: { startOffset: number; endOffset: number; text: string };
          if (/\d/.test(text[off] ?? '') && r < 0.5) change = { startOffset: off, endOffset: off + 1, text: String(Math.floor(rand() * 10)) };
          else if (r < 0.35) change = { startOffset: off, endOffset: Math.min(text.length, off + 1), text: '' };
          else change = { startOffset: off, endOffset: off, text: 'aZ_19 (),.=:*\n'[Math.floor(rand() * 14)] };
          text = editTree(tree, text, lineStartsOf(text), change);
          tree = reparse(parser, text, tree)!;
          const cached = analyzeTree(tree, text, cache);
          reused += cache.layersReused;
          const fresh = parser.parse(text)!;
          try {
            assert.deepEqual(cached, analyzeTree(fresh, text), `edit ${i} at ${off}: ${JSON.stringify(change)}`);
          } finally {
            fresh.delete();
          }
          // Undo half of the edits now and then, so that the file keeps parsing and statements come back.
          if (rand() < 0.5) {
            const undo = { startOffset: change.startOffset, endOffset: change.startOffset + change.text.length, text: '' };
            if (change.text.length && change.endOffset === change.startOffset) {
              text = editTree(tree, text, lineStartsOf(text), undo);
              tree = reparse(parser, text, tree)!;
              const again = analyzeTree(tree, text, cache);
              const fresh2 = parser.parse(text)!;
              try {
                assert.deepEqual(again, analyzeTree(fresh2, text), `undo of edit ${i}`);
              } finally {
                fresh2.delete();
              }
            }
          }
        }
        assert.ok(reused > 0, 'layer records were reused');
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
