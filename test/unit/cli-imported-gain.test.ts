/**
 * `precision-lens check train.py` given the script alone: the model file it imports is read from disk for its
 * predicted FP8 gain (workspace/gains.ts importedGainsOf), so PL306 says what `check DIR` and the editor say: quiet
 * for a GPT-2 small at 768 wide (FP8 predicted slower), told once the model is 4096 wide. Through the built CLI.
 */
import * as assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt, parseJson, runCli, type CheckJson } from './cli-harness';
import { gpt } from './gpt-model';

const TRAIN = 'import torch\nfrom model import GPT\nmodel = GPT()\nmodel = torch.compile(model)\nloss = model(x).sum()\nloss.backward()\noptimizer.step()\n';

describe('precision-lens check SCRIPT reads the model the script imports (PL306)', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => ensureBuilt());
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pl-cli-imported-'));
    writeFileSync(join(dir, 'train.py'), TRAIN);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const pl306 = (args: string[]) => {
    const r = runCli(['check', ...args, '--format', 'json'], dir);
    assert.ok(r.status === 0 || r.status === 1, r.stderr);
    return parseJson<CheckJson>(r).diagnostics.filter((d) => d.code === 'PL306');
  };

  it('a model predicted to lose keeps PL306 quiet on the script alone, as on the folder', () => {
    writeFileSync(join(dir, 'model.py'), gpt(768, 12));
    assert.deepEqual(pl306(['.']), [], 'the folder: model.py analysed with it');
    assert.deepEqual(pl306(['train.py']), [], 'the script alone: model.py read from disk');
    // Without the model file there is nothing to say it loses: PL306 offers the compiled FP8 path.
    rmSync(join(dir, 'model.py'));
    assert.equal(pl306(['train.py']).length, 1);
  });

  it('a model predicted to gain: PL306 on the script, once', () => {
    writeFileSync(join(dir, 'model.py'), gpt(4096, 6));
    const found = pl306(['train.py']);
    assert.equal(found.length, 1);
    assert.match(found[0].file, /train\.py$/);
    assert.deepEqual(pl306(['.']).map((d) => d.line), found.map((d) => d.line));
  });
});

describe('precision-lens check SCRIPT reads the model the script imports (PL701)', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => ensureBuilt());
  beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'pl-cli-imported-ckpt-')); });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const SCRIPT = [
    'import torch',
    'from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper',
    'from model import Net',
    '',
    'model = Net()',
    'model.blocks = torch.nn.ModuleList(checkpoint_wrapper(b) for b in model.blocks)',
    '',
  ].join('\n');
  const MODEL = (linear: string) => `import torch\n${linear === 'fp8_linear' ? 'from fp8_fallback import fp8_linear\n' : ''}\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.blocks = torch.nn.ModuleList(${linear}(64, 64) for _ in range(2))\n`;
  const pl701 = (args: string[]) => {
    const r = runCli(['check', ...args, '--format', 'json'], dir);
    assert.ok(r.status === 0 || r.status === 1, r.stderr);
    return parseJson<CheckJson>(r).diagnostics.filter((d) => d.code === 'PL701');
  };

  it('the script alone: its checkpoint_wrapper is reported where the model it imports builds te.* layers, as on the folder', () => {
    writeFileSync(join(dir, 'train.py'), SCRIPT);
    writeFileSync(join(dir, 'model.py'), MODEL('fp8_linear'));
    const alone = pl701(['train.py']);
    assert.equal(alone.length, 1);
    assert.deepEqual(pl701(['.']).map((d) => [d.file.replace(/^.*[\\/]/, ''), d.line]), alone.map((d) => ['train.py', d.line]));
    // The model still in torch.nn: nothing recomputes outside FP8 autocast.
    writeFileSync(join(dir, 'model.py'), MODEL('torch.nn.Linear'));
    assert.deepEqual(pl701(['train.py']), []);
  });
});
