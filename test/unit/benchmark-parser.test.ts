/**
 * The benchmark's stdout parser: JSON lines split anywhere across chunks (inside a line, inside a UTF-8 character,
 * between CR and LF), stray text, Python's NaN, and the normalization of every event the benchmark prints.
 */
import * as assert from 'node:assert/strict';
import { formatCapability, normalizeBenchEvent } from '../../common/bench-events';
import { JsonLineParser, parseJsonLine } from '../../client/src/benchmark/lineParser';

function collect(): { parser: JsonLineParser; json: unknown[]; text: string[] } {
  const json: unknown[] = [];
  const text: string[] = [];
  const parser = new JsonLineParser({ onJson: (v) => json.push(v), onText: (t) => text.push(t) });
  return { parser, json, text };
}

describe('benchmark stream parser', () => {
  const lines = [
    '{"event":"env","gpus":[{"name":"NVIDIA H100 80GB HBM3","capability":[9,0]}]}',
    '{"event":"progress","phase":"warmup","step":1,"total":10,"backend":"bf16"}',
    '{"event":"result","backend":"te","tokens_per_s":1234.5,"note":"naïve — ✓"}',
  ];
  const stream = lines.join('\n') + '\n';

  it('reassembles lines split at every possible chunk boundary', () => {
    for (let cut = 1; cut < stream.length; cut++) {
      const { parser, json, text } = collect();
      parser.push(stream.slice(0, cut));
      parser.push(stream.slice(cut));
      parser.end();
      assert.equal(json.length, 3, `cut at ${cut}`);
      assert.deepEqual(text, []);
    }
  });

  it('handles one byte at a time, including multi-byte UTF-8 characters split across chunks', () => {
    const { parser, json } = collect();
    const bytes = Buffer.from(stream, 'utf8');
    for (const b of bytes) parser.push(Buffer.from([b]));
    parser.end();
    assert.equal(json.length, 3);
    assert.equal((json[2] as { note: string }).note, 'naïve — ✓');
  });

  it('accepts CRLF line endings, also with CR and LF in different chunks', () => {
    const { parser, json, text } = collect();
    parser.push('{"event":"progress","phase":"a"}\r');
    parser.push('\n{"event":"progress","phase":"b"}\r\n');
    parser.end();
    assert.deepEqual(json.map((j) => (j as { phase: string }).phase), ['a', 'b']);
    assert.deepEqual(text, []);
  });

  it('reports non-JSON lines as text and keeps going', () => {
    const { parser, json, text } = collect();
    parser.push('warning: something\n{"event":"progress","phase":"x"}\n{broken json\n\n   \n[1,2,\n{"event":"result","backend":"bf16"}\n');
    parser.end();
    assert.equal(json.length, 2);
    assert.deepEqual(text, ['warning: something', '{broken json', '[1,2,']);
  });

  it('emits the last line when the stream ends without a newline', () => {
    const { parser, json } = collect();
    parser.push('{"event":"summary"}');
    assert.equal(json.length, 0);
    parser.end();
    assert.equal(json.length, 1);
  });

  it('reads Python NaN / Infinity as null instead of dropping the event', () => {
    const v = parseJsonLine('{"event":"result","losses":[1.5,NaN,-Infinity,Infinity],"s":"NaN stays"}') as { losses: unknown[]; s: string };
    assert.deepEqual(v.losses, [1.5, null, null, null]);
    assert.equal(v.s, 'NaN stays');
    assert.equal(parseJsonLine('NaN'), undefined);
  });
});

describe('benchmark event normalization', () => {
  it('normalizes the env event of bench/plbench/envprobe.py', () => {
    const e = normalizeBenchEvent({
      event: 'env', python: '3.12.3', python_executable: '/usr/bin/python3', hostname: 'gpu-box', torch: '2.11.0+cu130', cuda: '13.0',
      cuda_available: true, gpus: [{ index: 0, name: 'NVIDIA H200', capability: '9.0', sm: 'sm_90', memory_total_bytes: 150000000000 }],
      te: { installed: false, version: null, api: null, error: "ModuleNotFoundError: No module named 'transformer_engine'" },
      fp8: { available: true, reason: 'sm_90 supports FP8', source: 'capability rule' },
      torch_fp8: { available: true, reason: 'torch._scaled_mm' },
      recipes: { DelayedScaling: { supported: true }, MXFP8BlockScaling: { supported: false } },
      brand_new_field: 1,
    });
    assert.ok(e && e.event === 'env');
    assert.equal(e.gpus[0].name, 'NVIDIA H200');
    assert.equal(e.gpus[0].capability, '9.0');
    assert.equal(e.gpus[0].memoryBytes, 150000000000);
    assert.equal(e.teVersion, undefined, 'TE not installed');
    assert.equal(e.teError, undefined, 'an import error of a missing TE is not a broken TE');
    assert.equal(e.fp8Available, true);
    assert.equal(e.torchFp8Available, true);
    assert.deepEqual(e.recipes, ['DelayedScaling']);
    assert.equal(e.hostname, 'gpu-box');
    assert.equal(e.pythonExecutable, '/usr/bin/python3');
    assert.equal(e.extra.brand_new_field, 1);
  });

  it('tolerates missing and oddly typed fields', () => {
    const e = normalizeBenchEvent({ event: 'env', gpus: 'none', fp8: true, te_version: '2.10.0' });
    assert.ok(e && e.event === 'env');
    assert.deepEqual(e.gpus, []);
    assert.equal(e.fp8Available, true);
    assert.equal(e.teVersion, '2.10.0');
    assert.equal(normalizeBenchEvent({ no: 'event' }), undefined);
    assert.equal(normalizeBenchEvent([1, 2]), undefined);
    assert.equal(normalizeBenchEvent(null), undefined);
    assert.deepEqual(normalizeBenchEvent({ event: 'brand_new', signal: 'SIGTERM' }), { event: 'unknown', name: 'brand_new', raw: { event: 'brand_new', signal: 'SIGTERM' } });
    assert.equal(normalizeBenchEvent({ event: 'cancelled', signal: 'SIGTERM' })?.event, 'cancelled', 'see benchmark-cancelled.test.ts');
  });

  it('normalizes results (step_ms or step_time_ms, NaN losses, skipped backends)', () => {
    const r = normalizeBenchEvent({
      event: 'result', backend: 'te', tokens_per_s: 1000, step_ms: { median: 10, p90: 12, p90_over_median: 1.2 }, peak_memory_bytes: 2 ** 30,
      losses: [3, null, 2.5], loss_measured_from: 1, emulated: true, recipe: 'DelayedScaling', conversion: { counts: {} },
    });
    assert.ok(r && r.event === 'result');
    assert.equal(r.stepTimeMedianMs, 10);
    assert.equal(r.stepTimeP90Ms, 12);
    assert.deepEqual(r.losses, [3, null, 2.5]);
    assert.equal(r.lossMeasuredFrom, 1);
    assert.equal(r.emulated, true);
    assert.ok(r.extra && 'conversion' in r.extra);
    const old = normalizeBenchEvent({ event: 'result', backend: 'bf16', step_time_ms: { median: 5, p90: 6 } });
    assert.ok(old && old.event === 'result' && old.stepTimeMedianMs === 5 && old.stepTimeP90Ms === 6);
    const skipped = normalizeBenchEvent({ event: 'result', backend: 'te', status: 'skipped', reason: 'Transformer Engine not installed' });
    assert.ok(skipped && skipped.event === 'result' && skipped.skippedReason === 'Transformer Engine not installed');
  });

  it('tells fatal from non-fatal errors', () => {
    const nonFatal = normalizeBenchEvent({ event: 'error', code: 'te_missing', message: 'Transformer Engine not installed', fatal: false, backend: 'te' });
    assert.ok(nonFatal && nonFatal.event === 'error' && !nonFatal.fatal);
    const fatal = normalizeBenchEvent({ event: 'error', code: 'no_cuda', message: 'no CUDA device', hint: 'h' });
    assert.ok(fatal && fatal.event === 'error' && fatal.fatal && fatal.hint === 'h');
    const perBackend = normalizeBenchEvent({ event: 'error', code: 'backend_failed', message: 'x', backend: 'te' });
    assert.ok(perBackend && perBackend.event === 'error' && !perBackend.fatal, 'an error naming a backend is not fatal unless it says so');
  });

  it('reads workload lists and hides test presets', () => {
    const w = normalizeBenchEvent({ event: 'workloads', workloads: [{ name: 'gpt-125m', description: 'GPT-2 small', batch: 16, seq: 1024 }, { name: 'tiny', hidden_test: true }, 'plain'] });
    assert.ok(w && w.event === 'workloads');
    assert.deepEqual(w.workloads.map((x) => x.name), ['gpt-125m', 'plain']);
    assert.equal(w.workloads[0].batch, 16);
  });

  it('formats compute capability from any shape', () => {
    assert.equal(formatCapability([9, 0]), '9.0');
    assert.equal(formatCapability('8.9'), '8.9');
    assert.equal(formatCapability('sm_90'), '9.0');
    assert.equal(formatCapability('sm_100a'), '10.0');
    assert.equal(formatCapability(89), '8.9');
    assert.equal(formatCapability({ major: 12, minor: 0 }), '12.0');
    assert.equal(formatCapability('(8, 6)'), '8.6');
    assert.equal(formatCapability(undefined), undefined);
  });
});
