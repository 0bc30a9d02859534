/**
 * Shared by the generated-code tests (test/python/*.test.ts): the interpreter they run (PL_PYTHON, as
 * `npm run test:python` sets it for torch 2.13 and 1.13) and one way to run a snippet of Python with the generated
 * modules on its path.
 */
import * as assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { tempDir } from '../temp-dirs';

export const PYTHON = process.env.PL_PYTHON || '/usr/bin/python3';

/** Runs `code` with `python -c` in `cwd`, `cwd` and `pythonpath` on PYTHONPATH; stdout alone and everything together. */
export function python(code: string, cwd: string, pythonpath: string[] = [], interpreter = PYTHON): { status: number | null; stdout: string; output: string } {
  const r = spawnSync(interpreter, ['-c', code], {
    encoding: 'utf8', timeout: 300_000, cwd,
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', PYTHONPATH: [cwd, ...pythonpath].join(':') },
  });
  return { status: r.status, stdout: r.stdout ?? '', output: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

/** Python lines that import torch and make it report one CUDA GPU of compute capability `cc` (`'(9, 0)'`), named `name`:
 *  the generated code's device checks then take their GPU path, the tensors staying on the CPU. */
export function fakeGpu(cc: string, name = 'Fake GPU'): string[] {
  return ['import torch', 'torch.cuda.is_available = lambda: True', `torch.cuda.get_device_capability = lambda *a: ${cc}`, `torch.cuda.get_device_name = lambda *a: "${name}"`];
}

const CLI = join(__dirname, '..', '..', 'out', 'cli.js');

/** The built CLI's one command on a folder: `check DIR --fix --unsafe-fixes --isolated` and `flags`. */
export function oneCommand(dir: string, flags: string[] = ['--convert-losing-layers']): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [CLI, 'check', dir, '--fix', '--unsafe-fixes', ...flags, '--isolated'], { encoding: 'utf8', timeout: 120_000 });
}

/** A temporary folder with the fixture project as written (orig/) and as the one command converts it (conv/). */
export function origAndConverted(project: string, prefix: string): string {
  const dir = tempDir(prefix);
  cpSync(project, join(dir, 'conv'), { recursive: true });
  cpSync(project, join(dir, 'orig'), { recursive: true });
  const r = oneCommand(join(dir, 'conv'));
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  return dir;
}
