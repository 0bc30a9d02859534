#!/usr/bin/env node
// Runs the Python tests (bench/tests: the benchmark; test/python: generated code trained on the CPU) with pytest and exits with pytest's exit code.
// Interpreter: /usr/bin/python3 (Debian's python3-torch + python3-pytest on CI), else `python3` on PATH.
// Fails clearly when neither has both torch and pytest. PYTHON=/path/to/python overrides the search.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const candidates = [process.env.PYTHON, '/usr/bin/python3', 'python3'].filter(Boolean);
const extraArgs = process.argv.slice(2);

function probe(python) {
  if (python.startsWith('/') && !existsSync(python)) return { ok: false, why: 'not found' };
  const r = spawnSync(python, ['-c', 'import torch, pytest; print(torch.__version__, pytest.__version__)'], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  if (r.error) return { ok: false, why: r.error.code === 'ENOENT' ? 'not found' : String(r.error.message) };
  if (r.status !== 0) {
    const last = (r.stderr || '').trim().split('\n').pop() || `exit ${r.status}`;
    return { ok: false, why: last };
  }
  return { ok: true, versions: r.stdout.trim() };
}

const tried = [];
let chosen = null;
for (const python of candidates) {
  const p = probe(python);
  if (p.ok) {
    chosen = { python, versions: p.versions };
    break;
  }
  tried.push(`  ${python}: ${p.why}`);
}

if (!chosen) {
  console.error('test:python: no Python interpreter with both torch and pytest was found.');
  console.error(tried.join('\n'));
  console.error('Install them (Debian/Ubuntu: sudo apt-get install -y python3-torch python3-pytest) or set PYTHON=/path/to/python.');
  process.exit(1);
}

const [torchVersion, pytestVersion] = chosen.versions.split(' ');
console.error(`test:python: ${chosen.python} (torch ${torchVersion}, pytest ${pytestVersion})`);
const r = spawnSync(chosen.python, ['-m', 'pytest', '-q', 'bench/tests', 'test/python', ...extraArgs], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1' },
});
if (r.error) {
  console.error(`test:python: could not run pytest: ${r.error.message}`);
  process.exit(1);
}
process.exit(r.status ?? 1);
