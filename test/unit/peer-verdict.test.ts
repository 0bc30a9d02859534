/**
 * The A/B run against its torchao peer (common/peer-verdict.ts, common/bench-events.ts): the peer's compile flag kept
 * from the result event, the arm's label ("torchao on original (compiled)"), and the one-line verdict the CLI and the
 * sidebar share, on the ratios measured on the H200 (nanoGPT 12 x 2048: 1.059x, 6 x 4096: 1.011x; llama2.c 6 x 4096:
 * 0.838x, torchao compiled ahead by 19 %), and on the recorded runs themselves (bench/results/h200/2026-12-04-peer).
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { armLabel, compiledOf, normalizeBenchEvent, PEER_ARM, type BackendResult } from '../../common/bench-events';
import { PEER_EVEN_HIGH, PEER_EVEN_LOW, peerComparison, peerVerdict } from '../../common/peer-verdict';
import * as measure from '../../server/src/cli/measure';
import { ROOT } from './cli-harness';

/** The result events of a recorded `bench/benchmark.py --mode ab` run on the H200, and its summary's converted_vs_peer. */
function recorded(name: string): { results: BackendResult[]; vsPeer: { tokens_per_s_ratio: number; peer_compiled: boolean } } {
  const events = readFileSync(join(ROOT, 'bench', 'results', 'h200', '2026-12-04-peer', name), 'utf8').split('\n')
    .filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
  const summary = events.find((e) => e.event === 'summary') as { ab: { converted_vs_peer: { tokens_per_s_ratio: number; peer_compiled: boolean } } };
  return { results: events.filter((e) => e.event === 'result').map((e) => normalizeBenchEvent(e) as BackendResult), vsPeer: summary.ab.converted_vs_peer };
}

/** The converted arm at `ratio` x the peer's tokens/s, the peer with the given compile flags (absent: not said). */
function arms(ratio: number, peer: Record<string, unknown> = { compile: true, compile_requested: true }): BackendResult[] {
  return [
    { event: 'result', backend: 'original', tokens_per_s: 100_000, losses: [2, 1.5] },
    { event: 'result', backend: 'converted', tokens_per_s: Math.round(120_000 * ratio), losses: [2, 1.5] },
    { event: 'result', backend: PEER_ARM, tokens_per_s: 120_000, losses: [2, 1.5], ...peer },
  ].map((e) => normalizeBenchEvent(e) as BackendResult);
}

describe('A/B against the torchao peer', () => {
  it('the result event\'s compile flags are kept in extra; compiledOf reads the one that ran', () => {
    const peer = normalizeBenchEvent({ event: 'result', backend: PEER_ARM, tokens_per_s: 1, losses: [], compile: true, compile_requested: true }) as BackendResult;
    assert.deepEqual([peer.extra?.compile, peer.extra?.compile_requested], [true, true]);
    assert.equal(compiledOf(peer), true);
    // Asked for, but torch had no torch.compile: it ran eager, and says so.
    assert.equal(compiledOf(normalizeBenchEvent({ event: 'result', backend: PEER_ARM, losses: [], compile: false, compile_requested: true }) as BackendResult), false);
    assert.equal(compiledOf({ extra: {} }), undefined, 'an older benchmark does not say');
    assert.equal(compiledOf({ extra: { compile: 'yes' } }), undefined);
  });

  it('labels the peer compiled or eager from its result; other arms and a silent result keep their name', () => {
    const [original, , peer] = arms(1);
    assert.equal(armLabel(peer), 'torchao on original (compiled)');
    assert.equal(armLabel(arms(1, { compile: false })[2]), 'torchao on original (eager)');
    assert.equal(armLabel(arms(1, {})[2]), 'torchao on original');
    assert.equal(armLabel(peer, 'torchao FP8'), 'torchao FP8 (compiled)', 'a given label gets the note');
    assert.equal(armLabel({ ...original, extra: { compile: true } }), 'Original (BF16)', 'only the peer: the arms share --compile');
  });

  it('the verdict on the H200 ratios: ahead, about even, behind', () => {
    assert.equal(peerVerdict(arms(1.059)), 'FP8 conversion: 1.06x the tokens/s of torchao (compiled) on the original, same process: the conversion is ahead.');
    assert.equal(peerVerdict(arms(1.011)), 'FP8 conversion: 1.01x the tokens/s of torchao (compiled) on the original, same process: about even with torchao (compiled).');
    assert.equal(peerVerdict(arms(0.838)), 'torchao (compiled) on the original is 1.19x faster than this conversion: for this model, '
      + 'torch.compile with torchao\'s convert_to_float8_training trains faster.');
  });

  it('the band is 0.97 to 1.03, inclusive', () => {
    assert.deepEqual([PEER_EVEN_LOW, PEER_EVEN_HIGH], [0.97, 1.03]);
    assert.match(peerVerdict(arms(0.97))!, /0\.97x .*about even/);
    assert.match(peerVerdict(arms(1.03))!, /1\.03x .*about even/);
    assert.match(peerVerdict(arms(0.969))!, /is 1\.03x faster than this conversion/);
    assert.match(peerVerdict(arms(1.031))!, /the conversion is ahead\.$/);
  });

  it('says which peer it was: eager, or not said', () => {
    assert.equal(peerVerdict(arms(0.8, { compile: false })), 'torchao (eager) on the original is 1.25x faster than this conversion: for this model, '
      + 'torchao\'s convert_to_float8_training trains faster.');
    assert.equal(peerVerdict(arms(1.2, {})), 'FP8 conversion: 1.20x the tokens/s of torchao on the original, same process: the conversion is ahead.');
    assert.deepEqual(peerComparison(arms(1.2, { compile: false })), { ratio: 1.2, peerCompiled: false });
  });

  it('no verdict without both arms measured, or with FP8 emulated', () => {
    const [original, converted, peer] = arms(1.1);
    assert.equal(peerVerdict([original, converted]), undefined, 'no peer (--peer none, a loss check)');
    assert.equal(peerVerdict([original, converted, { ...peer, tokensPerS: undefined, skippedReason: 'torchao not installed' }]), undefined);
    assert.equal(peerVerdict([original, { ...converted, skippedReason: 'failed' }, peer]), undefined);
    assert.equal(peerVerdict([original, converted, { ...peer, tokensPerS: 0 }]), undefined);
    assert.equal(peerVerdict([original, { ...converted, emulated: true }, peer]), undefined, 'emulated FP8 is no speed');
  });

  it('the recorded H200 runs: the benchmark\'s own converted_vs_peer, the label and the verdict of each', () => {
    const cases: Array<[string, string]> = [
      ['ab-nanogpt-12x2048-8x2048-eager-out.txt', 'FP8 conversion: 1.06x the tokens/s of torchao (compiled) on the original, same process: the conversion is ahead.'],
      ['ab-nanogpt-6x4096-6x4096-eager-out.txt', 'FP8 conversion: 1.01x the tokens/s of torchao (compiled) on the original, same process: about even with torchao (compiled).'],
      ['ab-llama2c-12x2048-8x2048-eager-out.txt', 'torchao (compiled) on the original is 1.32x faster than this conversion: for this model, torch.compile with torchao\'s convert_to_float8_training trains faster.'],
      ['ab-llama2c-6x4096-6x4096-eager-out.txt', 'torchao (compiled) on the original is 1.19x faster than this conversion: for this model, torch.compile with torchao\'s convert_to_float8_training trains faster.'],
      // Every arm compiled (measure --compile: --peer-compile same): torchao still ahead, by less.
      ['ab-llama2c-6x4096-6x4096-compiled-out.txt', 'torchao (compiled) on the original is 1.05x faster than this conversion: for this model, torch.compile with torchao\'s convert_to_float8_training trains faster.'],
    ];
    for (const [name, verdict] of cases) {
      const { results, vsPeer } = recorded(name);
      const cmp = peerComparison(results)!;
      assert.ok(Math.abs(cmp.ratio - vsPeer.tokens_per_s_ratio) < 1e-12, `${name}: the ratio is the benchmark's own`);
      assert.equal(cmp.peerCompiled, vsPeer.peer_compiled, name);
      assert.equal(peerVerdict(results), verdict, name);
      assert.match(measure.measureTable(results), /^torchao on original \(compiled\)\s/m, name);
    }
  });

  it('one implementation: the CLI prints the shared verdict', () => {
    assert.equal(measure.peerVerdict, peerVerdict);
  });
});
