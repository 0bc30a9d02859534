/**
 * `check` skips the parse of files that cannot have findings (engine.mayHaveFindings). The skip is only sound while
 * every file without the words `torch` and `transformer_engine` analyses to an IR that imports neither (the rules run
 * only on those): proved here on every fixture and example and on inputs built to tempt the analysis, then through
 * the CLI on one thread and on two.
 */
import * as assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_SETTINGS } from '../../common/settings';
import { mayHaveFindings, analyzeParsed } from '../../server/src/engine/engine';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';
import { ensureBuilt, parseJson, runCli, type CheckJson } from './cli-harness';

function pythonFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) pythonFiles(p, out);
    else if (e.endsWith('.py')) out.push(p);
  }
  return out;
}

const TEMPTING = [
  // Layers through a relative re-export, a star import, a bare name, a string: none imports torch.
  'from .compat import nn\n\nclass Head(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.lm_head = nn.Linear(768, 50257)\n',
  'from layers import *\n\nclass Block(Module):\n    def __init__(self):\n        self.fc = Linear(768, 3072)\n        self.norm = LayerNorm(768)\n',
  'def train(model, x):\n    with fp8_autocast(enabled=True):\n        loss = model(x)\n        loss.backward()\n',
  'import numpy as np\nW = np.zeros((768, 768))\nMODEL = "nn.Linear(768, 768)"\n',
  'class RMSNorm:\n    def __init__(self, dim):\n        self.weight = ones(dim)\n    def forward(self, x):\n        return x * rsqrt(x.pow(2).mean(-1) + 1e-6) * self.weight\n',
];

describe('check skips files that cannot have findings', function () {
  this.timeout(120_000);
  let parser: Parser;
  before(async () => { parser = await createPythonParser(); });

  it('every input without torch/transformer_engine analyses to an IR importing neither, with no findings', () => {
    const root = join(__dirname, '..', '..');
    const files = [...pythonFiles(join(root, 'test', 'fixtures')), ...pythonFiles(join(root, 'examples'))];
    const texts = [...files.map((f) => readFileSync(f, 'utf8')), ...TEMPTING];
    let inert = 0;
    for (const text of texts) {
      const tree = parser.parse(text);
      assert.ok(tree);
      try {
        const { ir, findings } = analyzeParsed(tree, text, DEFAULT_SETTINGS, {});
        if (mayHaveFindings(text)) continue;
        inert++;
        assert.equal(ir.importsTorch || ir.importsTe, false, text.slice(0, 200));
        assert.deepEqual(findings, []);
        assert.equal(ir.autocastRegions.length, 0);
        assert.equal(ir.calls.filter((c) => c.kind === 'compile').length, 0);
      } finally {
        tree.delete();
      }
    }
    assert.ok(inert >= TEMPTING.length, `only ${inert} inputs without torch`);
  });

  it('is conservative: any mention of torch or transformer_engine is parsed', () => {
    assert.equal(mayHaveFindings('import torch\n'), true);
    assert.equal(mayHaveFindings('# uses torch elsewhere\n'), true);
    assert.equal(mayHaveFindings('import transformer_engine.pytorch as te\n'), true);
    assert.equal(mayHaveFindings('import numpy as np\n'), false);
  });

  it('through the CLI: a directory with files that cannot have findings, the same output on one thread or two', () => {
    ensureBuilt();
    const dir = mkdtempSync(join(tmpdir(), 'pl-prefilter-'));
    try {
      writeFileSync(join(dir, 'model.py'), 'import torch.nn as nn\n\nclass MLP(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(768, 3072)\n');
      for (let i = 0; i < 6; i++) writeFileSync(join(dir, `util_${i}.py`), TEMPTING[i % TEMPTING.length] + (i === 0 ? 'def broken(:\n' : ''));
      const one = parseJson<CheckJson>(runCli(['check', '.', '--format', 'json', '--fail-on', 'none', '--jobs', '1'], dir));
      const two = parseJson<CheckJson>(runCli(['check', '.', '--format', 'json', '--fail-on', 'none', '--jobs', '2'], dir));
      assert.deepEqual(two, one);
      assert.deepEqual([...new Set(one.diagnostics.map((d) => d.file))], ['model.py']);
      assert.ok(one.diagnostics.some((d) => d.code === 'PL101'));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
