/**
 * PL702 / PL703 over JSON-RPC to the built server when torchao's float8 config and the training script are different
 * files: the editor opens the config, the workspace scan has read train.py from disk (FSDP1 there: PL702 on the config,
 * naming train.py); train.py turned to FSDP2 on disk, the watcher's report moves the finding to PL703 on the script's
 * optimizer step, as `precision-lens check DIR` says.
 */
import * as assert from 'node:assert/strict';
import { mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { TestClient } from './lsp-client';

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

describe('server: PL702 / PL703 across the files of a project (out/server.js)', function () {
  this.timeout(30000);
  let dir: string;
  let client: TestClient;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pl-scale-'));
    client = new TestClient();
  });
  afterEach(async () => {
    await client.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the config open, train.py on disk: PL702 naming train.py; train.py moved to FSDP2 there: PL703 on its step', async () => {
    writeFileSync(join(dir, 'float8_setup.py'), CONFIG);
    writeFileSync(join(dir, 'train.py'), TRAIN_FSDP1);
    await client.initialize(dir);
    const config = pathToFileURL(join(dir, 'float8_setup.py')).toString();
    await client.open(config, CONFIG);
    const published = await client.diagnostics(config, (p) => p.diagnostics.some((d) => d.code === 'PL702'));
    const d = published.diagnostics.find((x) => x.code === 'PL702')!;
    assert.equal(d.range.start.line, 4);
    assert.equal(d.message, 'float8 all-gather needs FSDP2 (fully_shard) and train.py shards with FSDP1; turn it off or move to fully_shard');

    const fsdp2 = TRAIN_FSDP1.replace('from torch.distributed.fsdp import FullyShardedDataParallel as FSDP', 'from torch.distributed.fsdp import fully_shard')
      .replace('model = FSDP(to_float8(torch.nn.Linear(2048, 2048)), use_orig_params=True)', 'model = to_float8(torch.nn.Linear(2048, 2048))\nfully_shard(model)');
    writeFileSync(join(dir, 'train.py'), fsdp2);
    const later = new Date(Date.now() + 5000);
    utimesSync(join(dir, 'train.py'), later, later);
    const train = pathToFileURL(join(dir, 'train.py')).toString();
    await client.connection.sendNotification('workspace/didChangeWatchedFiles', { changes: [{ uri: train, type: 2 }] });
    await client.diagnostics(config, (p) => !p.diagnostics.some((x) => x.code === 'PL702'));
    await client.open(train, fsdp2);
    const step = await client.diagnostics(train, (p) => p.diagnostics.some((x) => x.code === 'PL703'));
    const s = step.diagnostics.find((x) => x.code === 'PL703')!;
    assert.equal(fsdp2.split('\n')[s.range.start.line].trim(), 'optimizer.step()');
  });
});
