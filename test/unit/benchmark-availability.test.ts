/**
 * What the benchmark view offers: the backends the environment reports (data-driven), each enabled or disabled with
 * the reason, and whether Run can start; and the interpreter picker's candidates (PATH scan, merging).
 */
import * as assert from 'node:assert/strict';
import { normalizeBenchEvent, type EnvInfo } from '../../common/bench-events';
import type { EnvironmentState } from '../../common/webview-messages';
import { backendChoices, backendSelectionProblem, RUN_BLOCKED, runBlockedReason } from '../../client/src/benchmark/availability';
import { mergeCandidates, pathInterpreters } from '../../client/src/benchmark/interpreterChain';

const H200 = { name: 'NVIDIA H200', capability: '9.0' };
function env(over: Partial<EnvInfo>): EnvInfo {
  return { gpus: [H200], torchVersion: '2.11.0', fp8Available: true, recipes: [], teVersion: '2.16.0', torchFp8Available: true, ...over };
}
const ready = (info: EnvInfo): EnvironmentState => ({ status: 'ready', info });
const state = (environment: EnvironmentState, trusted = true) => ({ trusted, environment, interpreter: { path: '/opt/py/bin/python', source: 'setting' as const, detail: '' }, backends: backendChoices(environment) });

describe('benchmark view: backends and Run availability', () => {
  it('asks to choose a backend only when one can run: with every backend disabled the rows and Run say why, once', () => {
    const none = backendChoices(ready(env({ gpus: [], torchFp8Available: false })));
    assert.ok(none.length >= 3 && none.every((b) => b.available === false && b.reason === 'no CUDA device'));
    assert.equal(backendSelectionProblem([], none), undefined);
    assert.equal(runBlockedReason(state(ready(env({ gpus: [] })))), RUN_BLOCKED.noCuda);
    const some = backendChoices(ready(env({})));
    assert.equal(backendSelectionProblem([], some), 'Choose at least one backend.');
    assert.equal(backendSelectionProblem(['bf16'], some), undefined);
  });

  it('offers exactly the backends the probe reports, new ones included, with their reasons', () => {
    const e = normalizeBenchEvent({
      event: 'env', torch: '2.11.0', gpus: [{ name: 'NVIDIA H200', capability: '9.0' }], cuda_available: true,
      backends: [
        { id: 'bf16', label: 'BF16', available: true, reason: null },
        { id: 'te', label: 'FP8 (Transformer Engine)', available: false, reason: 'Transformer Engine not installed' },
        { id: 'torchao-rowwise', label: 'FP8 (torchao, rowwise)', description: 'convert_to_float8_training', available: true },
        { id: 'te', label: 'duplicate' },
        { label: 'no id' },
      ],
    });
    assert.ok(e && e.event === 'env');
    const choices = backendChoices(ready(e));
    assert.deepEqual(choices.map((c) => [c.id, c.available, c.reason]), [
      ['bf16', true, undefined],
      ['te', false, 'Transformer Engine not installed'],
      ['torchao-rowwise', true, undefined],
    ]);
    assert.equal(choices[2].label, 'FP8 (torchao, rowwise)');
    assert.equal(runBlockedReason(state(ready(e))), undefined);
  });

  it('derives the reasons from the older env fields when the probe lists no backends', () => {
    const noTe = backendChoices(ready(env({ teVersion: undefined })));
    assert.deepEqual(noTe.map((c) => [c.id, c.available]), [['bf16', true], ['te', false], ['torch-fp8', true]]);
    assert.equal(noTe[1].reason, 'Transformer Engine not installed');
    const a100 = backendChoices(ready(env({ gpus: [{ name: 'A100', capability: '8.0' }], fp8Available: false, fp8Reason: 'Device compute capability 8.9 or higher required for FP8 execution.', torchFp8Available: false, torchFp8Reason: 'needs sm_89' })));
    assert.deepEqual(a100.map((c) => c.available), [true, false, false]);
    assert.match(a100[1].reason!, /compute capability 8\.9/);
    assert.equal(a100[2].reason, 'needs sm_89');
    const broken = backendChoices(ready(env({ teError: 'Transformer Engine is installed but failed to import: libcudnn' })));
    assert.match(broken[1].reason!, /failed to import/);
    // Before any probe: offered, availability unknown (enabled).
    assert.deepEqual(backendChoices({ status: 'unknown' }).map((c) => c.available), [undefined, undefined, undefined]);
  });

  it('blocks Run with the reason: untrusted, probing, failed probe, no torch, no CUDA, nothing runnable', () => {
    assert.equal(runBlockedReason(state(ready(env({})), false)), RUN_BLOCKED.untrusted);
    assert.equal(runBlockedReason(state({ status: 'probing', info: env({}) })), RUN_BLOCKED.probing);
    assert.equal(
      runBlockedReason(state({ status: 'failed', error: { code: 'interpreter_missing', title: 'Python not found', message: 'python3.99 is not on PATH.' } })),
      'Python not found: python3.99 is not on PATH.',
    );
    assert.match(runBlockedReason(state(ready(env({ torchVersion: undefined, gpus: [] }))))!, /^PyTorch is not installed in \/opt\/py\/bin\/python/);
    const noCuda = ready(env({ gpus: [], fp8Available: false }));
    assert.equal(runBlockedReason(state(noCuda)), RUN_BLOCKED.noCuda);
    assert.deepEqual(backendChoices(noCuda).map((c) => c.reason), ['no CUDA device', 'no CUDA device', 'no CUDA device']);
    const none = ready({ ...env({}), backends: [{ id: 'bf16', label: 'BF16', available: false, reason: 'bf16 unsupported on this GPU' }] });
    assert.equal(runBlockedReason(state(none)), 'No backend can run here: bf16 unsupported on this GPU.');
    assert.equal(runBlockedReason(state(ready(env({})))), undefined);
  });
});

describe('interpreter picker: candidates', () => {
  const files: Record<string, string[]> = {
    '/home/u/.venv/bin': ['python', 'python3', 'pip', 'activate'],
    '/usr/bin': ['python3', 'python3.11', 'python3-config', 'pythonw', 'rg'],
    '/usr/local/bin': ['python3.12'],
  };
  const real: Record<string, string> = {
    '/home/u/.venv/bin/python': '/usr/bin/python3.11', '/home/u/.venv/bin/python3': '/usr/bin/python3.11',
    '/usr/bin/python3': '/usr/bin/python3.11', '/usr/bin/python3.11': '/usr/bin/python3.11', '/usr/local/bin/python3.12': '/usr/local/bin/python3.12',
  };
  it('finds python3, python and python3.N on PATH, in PATH order, each real binary once', () => {
    const found = pathInterpreters({
      path: '/home/u/.venv/bin::/missing:/usr/bin:/usr/local/bin', platform: 'linux',
      list: (dir) => {
        if (!files[dir]) throw new Error('ENOENT');
        return files[dir];
      },
      resolve: (f) => real[f],
    });
    // The venv's python3 and /usr/bin/python3 are one binary: the first name met stands for it.
    assert.deepEqual(found.map((c) => c.path), ['/home/u/.venv/bin/python3', '/usr/local/bin/python3.12']);
    assert.ok(found.every((c) => c.source === 'path'));
  });

  it('merges the sources in order, each path once, keeping a name a later source gives', () => {
    const merged = mergeCandidates(
      [{ path: '/p/a', source: 'setting' }],
      [{ path: '/p/b', source: 'python-envs' }],
      [{ path: '/p/b', source: 'python-envs', name: '.venv' }, { path: '/p/a', source: 'python-extension', name: 'base' }],
      [{ path: '/usr/bin/python3', source: 'path' }],
    );
    assert.deepEqual(merged.map((c) => [c.path, c.source, c.name]), [
      ['/p/a', 'setting', 'base'], ['/p/b', 'python-envs', '.venv'], ['/usr/bin/python3', 'path', undefined],
    ]);
  });
});
