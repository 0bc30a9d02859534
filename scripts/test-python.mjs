#!/usr/bin/env node
// The Python test layer, once per supported PyTorch:
//   - pytest: the benchmark's tests (bench/tests) and the Python tests of generated code (test/python/*.py),
//   - generated code executed on the CPU (mocha test/python/*.test.ts: models converted by the real fixes, trained).
// Interpreters, newest first:
//   current   .venv-torch/bin/python: a CPU torch 2.13 from PyPI in a venv (scripts/setup-torch-venv.sh creates it,
//             and this script runs it when the venv is missing). PYTHON_CURRENT=/path overrides it.
//   oldest    Debian's python3-torch (1.13) as /usr/bin/python3: the oldest torch the generated code supports.
//             PYTHON_OLDEST=/path overrides it; PL_SKIP_OLDEST=1 skips it.
// PYTHON=/path runs only that interpreter (the old behaviour). Extra arguments go to pytest.
// Exit 0 only when every interpreter ran and passed; a missing interpreter is a failure with the command that fixes it.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const extraArgs = process.argv.slice(2);
const venvPython = join(root, '.venv-torch', 'bin', 'python');

function probe(python) {
  if (python.startsWith('/') && !existsSync(python)) return { ok: false, why: 'not found' };
  const r = spawnSync(python, ['-c', 'import torch, pytest; print(torch.__version__, pytest.__version__)'], { encoding: 'utf8', timeout: 120_000 });
  if (r.error) return { ok: false, why: r.error.code === 'ENOENT' ? 'not found' : String(r.error.message) };
  if (r.status !== 0) return { ok: false, why: (r.stderr || '').trim().split('\n').pop() || `exit ${r.status}` };
  const [torch, pytest] = r.stdout.trim().split(' ');
  return { ok: true, torch, pytest };
}

/** The interpreters to run, each with the command that installs it when it is missing. */
function interpreters() {
  if (process.env.PYTHON) return [{ name: 'PYTHON', python: process.env.PYTHON, fix: 'point PYTHON at an interpreter with torch and pytest' }];
  const list = [{
    name: 'current torch', python: process.env.PYTHON_CURRENT || venvPython,
    fix: 'bash scripts/setup-torch-venv.sh', setup: !process.env.PYTHON_CURRENT,
  }];
  if (process.env.PL_SKIP_OLDEST !== '1') {
    list.push({ name: 'oldest supported torch', python: process.env.PYTHON_OLDEST || '/usr/bin/python3', fix: 'apt-get install -y python3-torch python3-pytest' });
  }
  return list;
}

function run(command, args, env) {
  const t0 = Date.now();
  const r = spawnSync(command, args, { cwd: root, stdio: 'inherit', env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', ...env } });
  if (r.error) console.error(`test:python: could not run ${command}: ${r.error.message}`);
  return { ok: r.status === 0, seconds: (Date.now() - t0) / 1000 };
}

const summary = [];
let failed = 0;
for (const it of interpreters()) {
  let p = probe(it.python);
  if (!p.ok && it.setup) {
    console.error(`test:python: ${it.python}: ${p.why}; creating it with scripts/setup-torch-venv.sh`);
    const s = spawnSync('bash', [join(root, 'scripts', 'setup-torch-venv.sh')], { cwd: root, stdio: 'inherit' });
    if (s.status === 0) p = probe(it.python);
  }
  if (!p.ok) {
    console.error(`test:python: ${it.name}: ${it.python} has no torch and pytest (${p.why}). Fix: ${it.fix}`);
    summary.push(`${it.name}: ${it.python}: missing (${p.why})`);
    failed++;
    continue;
  }
  console.error(`\ntest:python: ${it.name}: ${it.python} (torch ${p.torch}, pytest ${p.pytest})`);
  const bench = run(it.python, ['-m', 'pytest', '-q', '-p', 'no:cacheprovider', 'bench/tests', 'test/python', ...extraArgs]);
  const exec = run(process.execPath, [join(root, 'node_modules', 'mocha', 'bin', 'mocha.js'), '--config', '.mocharc.json', 'test/python/**/*.test.ts'], { PL_PYTHON: it.python });
  if (!bench.ok || !exec.ok) failed++;
  summary.push(`${it.name} (torch ${p.torch}): pytest ${bench.ok ? 'passed' : 'FAILED'} in ${bench.seconds.toFixed(0)} s, ` +
    `generated code ${exec.ok ? 'passed' : 'FAILED'} in ${exec.seconds.toFixed(0)} s`);
}
console.error(`\ntest:python:\n  ${summary.join('\n  ')}`);
process.exit(failed === 0 ? 0 : 1);
