/**
 * The pre-commit hook (.pre-commit-hooks.yaml) through `pre-commit try-repo` against this clone, offline: a repo with
 * a Python file that turns FP8 on without a fallback fails the hook with PL401; with `# noqa: PL401` it passes.
 * pre-commit comes from PyPI into a venv (scripts/pre-commit-venv.sh, run by .ci/run); without it the test skips and says so.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CLI, ensureBuilt, ROOT } from './cli-harness';

const PRE_COMMIT = process.env.PRE_COMMIT ?? join(ROOT, '.venv-pre-commit', 'bin', 'pre-commit');

describe('pre-commit hook (pre-commit try-repo)', function () {
  this.timeout(120_000);
  let dir: string;
  before(function () {
    if (!existsSync(PRE_COMMIT)) {
      console.log(`      (skipped: no pre-commit at ${PRE_COMMIT}; run bash scripts/pre-commit-venv.sh)`);
      this.skip();
    }
    ensureBuilt();
  });
  beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'pl-precommit-')); });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('fails on a finding and passes once it is suppressed', () => {
    // the hook runs the `precision-lens` on PATH: this build's CLI
    const bin = join(dir, 'bin');
    mkdirSync(bin);
    writeFileSync(join(bin, 'precision-lens'), `#!/bin/sh\nexec "${process.execPath}" "${CLI}" "$@"\n`);
    chmodSync(join(bin, 'precision-lens'), 0o755);
    const repo = join(dir, 'repo');
    mkdirSync(repo);
    const env = { ...process.env, PATH: `${bin}:${process.env.PATH}`, PRE_COMMIT_HOME: join(dir, 'cache'), GIT_AUTHOR_NAME: 't', GIT_AUTHOR_EMAIL: 't@t', GIT_COMMITTER_NAME: 't', GIT_COMMITTER_EMAIL: 't@t' };
    const git = (...args: string[]) => spawnSync('git', args, { cwd: repo, env, encoding: 'utf8' });
    git('init', '-q');
    const source = 'import transformer_engine.pytorch as te\n\nwith te.fp8_autocast():\n    pass\n';
    writeFileSync(join(repo, 'train.py'), source);
    git('add', 'train.py');
    const tryRepo = () => spawnSync(PRE_COMMIT, ['try-repo', ROOT, 'precision-lens', '--all-files'], { cwd: repo, env, encoding: 'utf8' });
    const failed = tryRepo();
    assert.equal(failed.status, 1, failed.stdout + failed.stderr);
    assert.match(failed.stdout, /PL401/);
    writeFileSync(join(repo, 'train.py'), source.replace(/^import transformer_engine\.pytorch as te$/m, '$&  # noqa: PL401').replace('with te.fp8_autocast():', 'with te.fp8_autocast():  # noqa: PL401'));
    git('add', 'train.py');
    const passed = tryRepo();
    assert.equal(passed.status, 0, passed.stdout + passed.stderr);
    assert.match(passed.stdout, /precision-lens.*Passed/);
  });
});
