/**
 * PL702 / PL703 when torchao's float8 config, the sharding and the training loop are in different files of one project
 * (the config beside the model, FSDP and the loop in train.py): `precision-lens check DIR` reads what each file in reach
 * does (rules/scale.ts, the engine's path facts), and the workspace scan records the same for the editor. Through the
 * built CLI.
 */
import * as assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { scanWorkspace } from '../../server/src/workspace/scan';
import { ensureBuilt, parseJson, runCli, type CheckJson } from './cli-harness';

const CONFIG = [
  'from torchao.float8 import Float8LinearConfig, convert_to_float8_training',
  '',
  '',
  'def to_float8(model):',
  '    config = Float8LinearConfig(enable_fsdp_float8_all_gather=True)',
  '    convert_to_float8_training(model, config=config)',
  '    return model',
  '',
].join('\n');

const TRAIN_FSDP1 = [
  'import torch',
  'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
  '',
  'from float8_setup import to_float8',
  '',
  'model = FSDP(to_float8(torch.nn.Linear(2048, 2048)), use_orig_params=True)',
  'optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)',
  'for step in range(10):',
  '    model(torch.randn(8, 2048)).square().mean().backward()',
  '    optimizer.step()',
  '    optimizer.zero_grad()',
  '',
].join('\n');

const TRAIN_FSDP2 = TRAIN_FSDP1
  .replace('from torch.distributed.fsdp import FullyShardedDataParallel as FSDP', 'from torch.distributed.fsdp import fully_shard')
  .replace('model = FSDP(to_float8(torch.nn.Linear(2048, 2048)), use_orig_params=True)', 'model = to_float8(torch.nn.Linear(2048, 2048))\nfully_shard(model)');

describe('PL702 / PL703 across the files of a project (built CLI, workspace scan)', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => ensureBuilt());
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pl-cli-scale-'));
    writeFileSync(join(dir, 'float8_setup.py'), CONFIG);
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const scale = () => {
    const r = runCli(['check', '.', '--format', 'json', '--isolated'], dir);
    assert.ok(r.status === 0 || r.status === 1, r.stderr);
    return parseJson<CheckJson>(r).diagnostics.filter((d) => /^PL70[23]$/.test(d.code)).map((d) => `${d.file.replace(/^.*[\\/]/, '')}:${d.line} ${d.code} ${d.message}`);
  };

  it('FSDP1 in train.py: PL702 on the config in float8_setup.py, naming train.py', () => {
    writeFileSync(join(dir, 'train.py'), TRAIN_FSDP1);
    assert.deepEqual(scale(), ['float8_setup.py:5 PL702 float8 all-gather needs FSDP2 (fully_shard) and train.py shards with FSDP1; turn it off or move to fully_shard']);
  });

  it('FSDP2 in train.py: PL703 on its optimizer step; quiet once train.py precomputes the scales', () => {
    writeFileSync(join(dir, 'train.py'), TRAIN_FSDP2);
    assert.deepEqual(scale(), ['train.py:11 PL703 each float8 weight all-reduces its own scale; precompute_float8_dynamic_scale_for_fsdp(model) after this step does one']);
    writeFileSync(join(dir, 'train.py'), TRAIN_FSDP2.replace('    optimizer.zero_grad()', '    precompute_float8_dynamic_scale_for_fsdp(model)\n    optimizer.zero_grad()')
      .replace('import torch\n', 'import torch\nfrom torchao.float8 import precompute_float8_dynamic_scale_for_fsdp\n'));
    assert.deepEqual(scale(), []);
  });

  it('the workspace scan records the config, the FSDP1 wrap and the precompute by file', async () => {
    writeFileSync(join(dir, 'train.py'), TRAIN_FSDP1);
    writeFileSync(join(dir, 'hooks.py'), 'from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp\n\ndef after_step(model):\n    precompute_float8_dynamic_scale_for_fsdp(model)\n');
    const scan = await scanWorkspace([dir]);
    assert.deepEqual([[...scan.allGatherFiles], [...scan.fsdp1Files], [...scan.precomputeFiles]], [[join(dir, 'float8_setup.py')], [join(dir, 'train.py')], [join(dir, 'hooks.py')]]);
    // fairscale's FullyShardedDataParallel is not torch's FSDP1 (the rule's own check says the same).
    writeFileSync(join(dir, 'train.py'), TRAIN_FSDP1.replace('from torch.distributed.fsdp import FullyShardedDataParallel as FSDP', 'from fairscale.nn import FullyShardedDataParallel as FSDP'));
    assert.deepEqual([...(await scanWorkspace([dir])).fsdp1Files], []);
  });
});
