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
