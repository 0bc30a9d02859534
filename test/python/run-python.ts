/**
 * Shared by the generated-code tests (test/python/*.test.ts): the interpreter they run (PL_PYTHON, as
 * `npm run test:python` sets it for torch 2.13 and 1.13) and one way to run a snippet of Python with the generated
 * modules on its path.
 */
import { spawnSync } from 'node:child_process';

export const PYTHON = process.env.PL_PYTHON || '/usr/bin/python3';

/** Runs `code` with `python -c` in `cwd`, `cwd` and `pythonpath` on PYTHONPATH; stdout alone and everything together. */
export function python(code: string, cwd: string, pythonpath: string[] = [], interpreter = PYTHON): { status: number | null; stdout: string; output: string } {
  const r = spawnSync(interpreter, ['-c', code], {
    encoding: 'utf8', timeout: 300_000, cwd,
    env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', PYTHONPATH: [cwd, ...pythonpath].join(':') },
  });
  return { status: r.status, stdout: r.stdout ?? '', output: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}
