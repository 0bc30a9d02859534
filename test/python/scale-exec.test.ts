/**
 * PL703's fix runs against the real torchao (the PTQ venv's torchao 0.18, CPU): one command inserts
 * precompute_float8_dynamic_scale_for_fsdp(model) after the optimizer step of a training loop that turns float8
 * all-gather on, and the loop as fixed imports it from torchao and runs its steps (unsharded, on a model without
 * Linears: the call finds no float8 weights to precompute and returns, as torchao's function does off FSDP2). Skips
 * where the PTQ venv is missing (scripts/ptq-venv.sh makes it).
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../temp-dirs';
import { oneCommand, python } from './run-python';

const ROOT = join(__dirname, '..', '..');
const FIXTURE = join(ROOT, 'test', 'fixtures', 'messages', 'float8_fsdp2_train.py');
const TORCHAO_PYTHON = process.env.PL_PTQ_PYTHON ?? join(ROOT, '.venv-ptq', 'bin', 'python');
const hasTorchao = existsSync(TORCHAO_PYTHON) && spawnSync(TORCHAO_PYTHON, ['-c', 'from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp'], { timeout: 120_000 }).status === 0;

describe('PL703: the precompute the fix inserts runs with torchao', function () {
  this.timeout(600_000);

  it('one command inserts it after the step, and the loop runs its steps with it', function () {
    if (!hasTorchao) this.skip();
    const dir = tempDir('pl-scale-');
    cpSync(FIXTURE, join(dir, 'train_fsdp.py'));
    const r = oneCommand(dir, []);
    assert.ok(r.status === 0 || r.status === 1, `${r.stdout}${r.stderr}`);
    const fixed = readFileSync(join(dir, 'train_fsdp.py'), 'utf8');
    assert.ok(fixed.includes('        optimizer.step()\n        precompute_float8_dynamic_scale_for_fsdp(model)\n'), fixed);
    const run = python([
      'import torch, train_fsdp',
      'class Scale(torch.nn.Module):',
      '    def __init__(self):',
      '        super().__init__()',
      '        self.w = torch.nn.Parameter(torch.ones(8))',
      '    def forward(self, x):',
      '        return x * self.w',
      'model = train_fsdp.train(Scale(), [torch.randn(4, 8) for _ in range(3)], 3, shard=False)',
      'print("trained", round(float(model.w.sum()), 3) != 8.0)',
    ].join('\n'), dir, [], TORCHAO_PYTHON);
    assert.equal(run.status, 0, run.output);
    assert.match(run.stdout, /^trained True$/m, run.output);
  });
});
