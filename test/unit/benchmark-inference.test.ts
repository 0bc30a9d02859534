/**
 * The benchmark view's inference tab below the webview: the env event's `inference_backends` and the inference
 * result fields as the extension reads them, the ratios, the command line a run launches, the history entry an
 * imported `--mode inference --json-out` file gives, its Markdown, and (with Debian's torch) a real CPU run through
 * the same runner and reducer the view uses.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { normalizeBenchEvent, type EnvInfo } from '../../common/bench-events';
import { DEFAULT_RUN_OPTIONS, runBackends, runMode, sanitizeRunOptions, type EnvironmentState, type RunOptions } from '../../common/webview-messages';
import { inferenceBackendChoices } from '../../client/src/benchmark/availability';
import { jsonOutToHistoryEntry, parseJsonOutText } from '../../client/src/benchmark/importResults';
import { runToMarkdown } from '../../client/src/benchmark/markdown';
import { buildRunArgs, outcomeToUserError, startBenchmark } from '../../client/src/benchmark/runner';
import { applyRunEvent, computeRatios, finishRun, startedRunState } from '../../client/src/benchmark/state';

const ROOT = join(__dirname, '..', '..');
const FIXTURE = join(ROOT, 'test', 'fixtures', 'bench', 'inference-cpu-tiny.json');
const INFERENCE: RunOptions = sanitizeRunOptions({
  mode: 'inference', workload: 'tiny', inferenceBackends: ['bf16', 'torch-fp8'], batch: 2, promptLen: 16, newTokens: 4, repeats: 1,
});

function result(raw: Record<string, unknown>) {
  const e = normalizeBenchEvent({ event: 'result', mode: 'inference', ...raw });
  assert.equal(e?.event, 'result');
  return e as Extract<NonNullable<typeof e>, { event: 'result' }>;
}

describe('benchmark view: inference runs', () => {
  it('reads an inference result: both throughputs, the accuracy cost, fake-quant marked, emulation from its notes', () => {
    const r = result({
      backend: 'modelopt', prefill_tokens_per_s: 1000, decode_tokens_per_s: 50, prompt_tokens: 512, new_tokens: 64, reference_only: true,
      peak_memory_bytes: 2 ** 30, accuracy: { max_abs_logit_diff: 0.5, mean_abs_logit_diff: 0.02, next_token_agreement: 0.97 }, notes: { emulated: true },
    });
    assert.deepEqual(r.inference, {
      prefillTokensPerS: 1000, decodeTokensPerS: 50, promptTokens: 512, newTokens: 64, maxAbsLogitDiff: 0.5, meanAbsLogitDiff: 0.02,
      nextTokenAgreement: 0.97, referenceOnly: true,
    });
    assert.equal(r.peakMemoryBytes, 2 ** 30);
    assert.equal(r.emulated, true);
    assert.ok(!('accuracy' in (r.extra ?? {})) && !('prefill_tokens_per_s' in (r.extra ?? {})), 'typed, not left in extra');
    const train = normalizeBenchEvent({ event: 'result', backend: 'bf16', tokens_per_s: 5 });
    assert.ok(train?.event === 'result' && train.inference === undefined, 'a training result has none');
  });

  it('prefill and decode ratios against BF16', () => {
    const ratios = computeRatios([
      result({ backend: 'bf16', prefill_tokens_per_s: 100, decode_tokens_per_s: 10 }),
      result({ backend: 'torchao', prefill_tokens_per_s: 150, decode_tokens_per_s: 12, accuracy: { next_token_agreement: 0.99 } }),
    ]);
    assert.equal(ratios.length, 1);
    assert.equal(ratios[0].backend, 'torchao');
    assert.equal(ratios[0].prefillSpeedup, 1.5);
    assert.equal(ratios[0].decodeSpeedup, 1.2);
    assert.equal(ratios[0].speedup, undefined, 'no training tokens/s');
  });

  it('offers the probe\'s inference backends with their reasons; before a probe, the known ones', () => {
    const env = normalizeBenchEvent({
      event: 'env', torch: '2.11', gpus: [{ name: 'NVIDIA A100', capability: [8, 0] }], inference_backends: [
        { id: 'bf16', label: 'BF16 (eval)', available: true, reason: null },
        { id: 'torchao', label: 'FP8 (torchao dynamic act + weight)', available: false, reason: 'compute capability 8.0 < 8.9' },
        { id: 'modelopt', label: 'ModelOpt fake-quant (accuracy only)', available: false, reason: null, reference_only: true },
      ],
    }) as EnvInfo;
    const choices = inferenceBackendChoices({ status: 'ready', info: env });
    assert.deepEqual(choices.map((c) => [c.id, c.available, c.reason]), [
      ['bf16', true, undefined], ['torchao', false, 'compute capability 8.0 < 8.9'], ['modelopt', false, 'not available here'],
    ]);
    assert.equal(choices[2].referenceOnly, true);
    const before = inferenceBackendChoices({ status: 'unknown' } as EnvironmentState);
    assert.deepEqual(before.map((c) => c.id), ['bf16', 'torchao', 'te', 'torch-fp8', 'modelopt']);
    assert.ok(before.every((c) => c.available === undefined));
    const older = inferenceBackendChoices({ status: 'ready', info: { ...env, inferenceBackends: undefined } });
    assert.ok(older.every((c) => c.available === false && /no --mode inference/.test(c.reason ?? '')), 'a benchmark that predates inference');
  });

  it('a run of the inference tab launches --mode inference with its own backends and lengths; training runs are unchanged', () => {
    assert.equal(runMode(INFERENCE), 'inference');
    assert.deepEqual(runBackends(INFERENCE), ['bf16', 'torch-fp8']);
    assert.deepEqual(buildRunArgs('b.py', INFERENCE, { jsonOut: '/o.json' }), [
      'b.py', '--mode', 'inference', '--workload', 'tiny', '--backends', 'bf16,torch-fp8', '--batch', '2', '--prompt-len', '16',
      '--new-tokens', '4', '--repeats', '1', '--json-out', '/o.json',
    ]);
    const train = buildRunArgs('b.py', DEFAULT_RUN_OPTIONS);
    assert.ok(!train.includes('--mode') && train.includes('--steps'));
    assert.equal(runMode({}), 'train', 'history entries from before inference are training runs');
    assert.equal(sanitizeRunOptions({ mode: 'serve' }, INFERENCE).mode, 'inference', 'an odd mode keeps the fallback');
    assert.equal(sanitizeRunOptions({ newTokens: -3, repeats: 0 }).newTokens, 0);
  });

  it('an imported --mode inference --json-out file becomes an inference history entry, and its Markdown has the accuracy cost', () => {
    const doc = parseJsonOutText(readFileSync(FIXTURE, 'utf8'), FIXTURE);
    const { entry } = jsonOutToHistoryEntry(doc, { path: FIXTURE, finishedAt: 0 });
    assert.equal(runMode(entry.options), 'inference');
    assert.deepEqual([entry.options.workload, entry.options.batch, entry.options.promptLen, entry.options.newTokens, entry.options.repeats], ['tiny', 2, 16, 4, 1]);
    assert.deepEqual(entry.options.inferenceBackends, ['bf16', 'torch-fp8']);
    const fp8 = entry.results.find((r) => r.backend === 'torch-fp8')!;
    assert.equal(fp8.emulated, true);
    assert.equal(fp8.inference?.nextTokenAgreement, 1);
    const summary = (doc as { summary: { ratios: Record<string, { decode_tokens_per_s: number; prefill_tokens_per_s: number }> } }).summary.ratios['torch-fp8'];
    const ratio = entry.ratios.find((r) => r.backend === 'torch-fp8')!;
    assert.ok(Math.abs(ratio.decodeSpeedup! - summary.decode_tokens_per_s) < 1e-9, 'the benchmark summary\'s own ratio');
    assert.ok(Math.abs(ratio.prefillSpeedup! - summary.prefill_tokens_per_s) < 1e-9);
    const md = runToMarkdown(entry);
    assert.match(md, /inference benchmark/);
    assert.ok(md.includes('| Backend | prefill tokens/s | decode tokens/s | peak memory | max \\|Δ logit\\| | mean \\|Δ logit\\| | next-token agreement | vs BF16 |'), md);
    assert.match(md, /100\.0 %/);
    assert.match(md, /batch 2 x 16 prompt tokens \+ 4 decoded/);
  });
});

const PYTHON = ['/usr/bin/python3'].find((p) => existsSync(p) && spawnSync(p, ['-c', 'import torch'], { stdio: 'ignore' }).status === 0);

describe('benchmark view: an inference run against bench/benchmark.py (CPU harness)', function () {
  this.timeout(120000);
  before(function () {
    if (!PYTHON) this.skip();
  });

  it('runs through the runner and the reducer: BF16 then torch-fp8 with its accuracy cost, done', async () => {
    let run = startedRunState('t', INFERENCE, Date.now());
    const phases: string[] = [];
    const proc = startBenchmark({ command: PYTHON!, args: [...buildRunArgs(join(ROOT, 'bench', 'benchmark.py'), INFERENCE), '--device', 'cpu', '--eval-batches', '1'] }, {
      onEvent: (e) => {
        run = applyRunEvent(run, e);
        if (e.event === 'progress') phases.push(`${e.phase}:${e.backend}:${e.step}/${e.total}`);
      },
    });
    const outcome = await proc.done;
    run = finishRun(run, { cancelled: false, error: outcomeToUserError(outcome, PYTHON!, run.results.length > 0) }, Date.now());
    assert.equal(run.status, 'done', JSON.stringify(run.error));
    assert.deepEqual(phases, ['inference:bf16:1/2', 'inference:torch-fp8:2/2']);
    assert.deepEqual(run.results.map((r) => r.backend), ['bf16', 'torch-fp8']);
    assert.ok(run.results.every((r) => (r.inference?.prefillTokensPerS ?? 0) > 0 && (r.inference?.decodeTokensPerS ?? 0) > 0));
    const fp8 = run.results[1].inference!;
    assert.ok(fp8.maxAbsLogitDiff! > 0 && fp8.nextTokenAgreement! > 0 && fp8.nextTokenAgreement! <= 1);
    assert.ok(run.ratios[0].decodeSpeedup! > 0);
  });
});
