/**
 * The `cancelled` event (bench/plbench/cli.py emits it on SIGTERM/SIGINT, then exits with 130): it is a known
 * event, the run shows "Cancelled" with its partial results, and blank stdout lines are skipped.
 */
import * as assert from 'node:assert/strict';
import { normalizeBenchEvent, parseBenchEventLine, BenchEvent } from '../../common/bench-events';
import { DEFAULT_RUN_OPTIONS } from '../../common/webview-messages';
import { applyRunEvent, finishRun, startedRunState, toHistoryEntry } from '../../client/src/benchmark/state';

/** What install_signal_handlers in bench/plbench/cli.py prints. */
const WIRE = { event: 'cancelled', code: 'cancelled', signal: 'SIGTERM', phase: 'measure', backend: 'torch-fp8', exit_code: 130, message: 'benchmark cancelled (SIGTERM)' };

describe('benchmark cancelled event', () => {
  it('normalizes to a typed event, not an unknown one', () => {
    assert.deepEqual(normalizeBenchEvent(WIRE), {
      event: 'cancelled', code: 'cancelled', signal: 'SIGTERM', phase: 'measure', backend: 'torch-fp8', message: 'benchmark cancelled (SIGTERM)',
    });
    // phase/backend are null outside a backend; no message: one is made up
    assert.deepEqual(normalizeBenchEvent({ event: 'cancelled', signal: 'SIGINT', phase: null, backend: null }), {
      event: 'cancelled', code: 'cancelled', signal: 'SIGINT', phase: undefined, backend: undefined, message: 'The benchmark was cancelled (SIGINT).',
    });
  });

  it('the reducer shows Cancelled and keeps the partial results, even when the cancel came from outside', () => {
    let run = startedRunState('r', { ...DEFAULT_RUN_OPTIONS, backends: ['bf16', 'torch-fp8'] }, 0);
    run = applyRunEvent(run, normalizeBenchEvent({ event: 'result', backend: 'bf16', tokens_per_s: 100, losses: [2, 1] })!);
    run = applyRunEvent(run, normalizeBenchEvent({ event: 'progress', phase: 'measure', step: 5, total: 20, backend: 'torch-fp8' })!);
    run = applyRunEvent(run, normalizeBenchEvent(WIRE)!);
    assert.equal(run.status, 'cancelled');
    assert.equal(run.progress?.phase, 'cancelled');
    assert.equal(run.progress?.backend, 'torch-fp8');
    assert.equal(run.progress?.message, 'benchmark cancelled (SIGTERM)');
    assert.equal(run.results.length, 1);
    assert.equal(run.error, undefined);
    // SIGTERM from outside the extension: the exit status 130 reads as an error, but the event says it was a cancel.
    const done = finishRun(run, { cancelled: false, error: { code: 'cancelled', title: 'The benchmark was cancelled', message: 'exit code 130' } }, 9);
    assert.equal(done.status, 'cancelled');
    assert.equal(done.finishedAt, 9);
    assert.equal(done.results.length, 1);
    assert.equal(toHistoryEntry(done, {}), undefined, 'a cancelled run is not kept in the history');
  });

  it('stdout lines: blank ones and non-JSON ones are skipped, events parsed', () => {
    for (const blank of ['', '   ', '\t', '\r', ' \r\n']) assert.equal(parseBenchEventLine(blank), undefined, JSON.stringify(blank));
    assert.equal(parseBenchEventLine('warning: something'), undefined);
    assert.equal(parseBenchEventLine('{"not": "an event"}'), undefined);
    assert.equal(parseBenchEventLine('{broken'), undefined);
    const e = parseBenchEventLine(`  ${JSON.stringify(WIRE)}\r`) as BenchEvent;
    assert.equal(e.event, 'cancelled');
  });
});
