/** The workspace scan and its updates from the file watcher (server/src/workspace/scan.ts, watch.ts). */
import { strict as assert } from 'node:assert';
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inScan, scanWorkspace, updateScan } from '../../server/src/workspace/scan';
import { WorkspaceScan } from '../../server/src/workspace/watch';
import { readFileSync } from 'node:fs';

const TRAIN = 'import torch\nimport transformer_engine.pytorch as te\nwith te.fp8_autocast(enabled=True):\n    loss = model(x)\nloss.backward()\n';

describe('workspace scan: updates from the file watcher', () => {
  let dir = '';
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pl-scan-'));
    writeFileSync(join(dir, 'model.py'), 'import torch\n');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('adds a created file, re-reads a changed one and drops a deleted one, leaving the earlier result as it was', async () => {
    const first = await scanWorkspace([dir]);
    assert.equal(first.files, 1);
    const train = join(dir, 'train.py');
    writeFileSync(train, TRAIN);
    const created = await updateScan(first, [train]);
    assert.deepEqual([created.files, [...created.autocastFiles], [...created.trainFiles]], [2, [train], [train]]);
    assert.ok(created.pythonFiles.includes(train));
    assert.equal(first.autocastFiles.size, 0);
    writeFileSync(train, 'import torch\nloss.backward()\n');
    const changed = await updateScan(created, [train]);
    assert.deepEqual([changed.files, changed.autocastFiles.size, changed.trainFiles.size], [2, 0, 1]);
    unlinkSync(train);
    const deleted = await updateScan(changed, [train]);
    assert.deepEqual([deleted.files, deleted.trainFiles.size, deleted.pythonFiles], [1, 0, [join(dir, 'model.py')]]);
  });

  it('the FP8 fallback module (TE autocast inside its helper) is no autocast region; a step wrapped through it is', async () => {
    const module = readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'expected', 'project-modern', 'fp8_fallback.py'), 'utf8');
    assert.match(module, /autocast\(/);
    writeFileSync(join(dir, 'fp8_fallback.py'), module);
    const train = join(dir, 'train.py');
    writeFileSync(train, 'import torch\nloss = model(x)\nloss.backward()\n');
    const unwrapped = await scanWorkspace([dir]);
    assert.deepEqual([unwrapped.files, unwrapped.autocastFiles.size, [...unwrapped.trainFiles]], [3, 0, [train]]);
    writeFileSync(train, 'import torch\nimport transformer_engine.pytorch as te\nwith te.autocast(enabled=True):\n    loss = model(x)\nloss.backward()\n');
    const wrapped = await updateScan(unwrapped, [train]);
    assert.deepEqual([...wrapped.autocastFiles], [train]);
  });

  it('ignores paths the scan would not read (outside the roots, skipped folders, not .py)', () => {
    assert.equal(inScan([dir], join(dir, 'pkg', 'a.py')), true);
    assert.equal(inScan([dir], join(dir, 'node_modules', 'a.py')), false);
    assert.equal(inScan([dir], join(dir, '.venv', 'lib', 'a.py')), false);
    assert.equal(inScan([dir], join(dir, 'a.txt')), false);
    assert.equal(inScan([dir], `${dir}-other/a.py`), false);
  });

  it('applies watcher batches after the full scan, in order', async () => {
    const seen: number[] = [];
    const ws = new WorkspaceScan([dir], (scan) => seen.push(scan.trainFiles.size));
    const started = ws.start();
    mkdirSync(join(dir, 'pkg'));
    const train = join(dir, 'pkg', 'train.py');
    writeFileSync(train, TRAIN);
    const added = ws.changed([train, join(dir, 'node_modules', 'x.py')]);
    await Promise.all([started, added]);
    // The full scan may already have found the new file; the update after it finds it in any case.
    assert.equal(seen.length, 2);
    assert.equal(seen[1], 1);
    unlinkSync(train);
    await ws.changed([train]);
    assert.deepEqual(seen.slice(2), [0]);
    assert.equal(ws.current?.files, 1);
  });
});
