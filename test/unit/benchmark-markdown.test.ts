/**
 * "Copy as Markdown": the table of one run and the side-by-side comparison of two, as pasted into a PR.
 */
import * as assert from 'node:assert/strict';
import type { HistoryEntry } from '../../common/webview-messages';
import { compareRunsToMarkdown, escapeCell, runToMarkdown } from '../../client/src/benchmark/markdown';

const GIB = 2 ** 30;

function run(overrides: Partial<HistoryEntry> = {}): HistoryEntry {
  return {
    id: 'r1',
    startedAt: new Date(2025, 0, 31, 14, 5).getTime(),
    finishedAt: new Date(2025, 0, 31, 14, 7).getTime(),
    options: { workload: 'llama-7b-slice', backends: ['bf16', 'te', 'torch-fp8'], steps: 30, warmup: 10, batch: 4, seq: 4096, compile: true },
    gpu: 'NVIDIA H200',
    capability: '9.0',
    torchVersion: '2.11.0',
    hostname: 'gpu-box',
    results: [
      { backend: 'torch-fp8', tokensPerS: 14100, stepTimeMedianMs: 1162, stepTimeP90Ms: 1170, peakMemoryBytes: 60 * GIB, losses: [10, 8, 7.25] },
      { backend: 'bf16', tokensPerS: 10000, stepTimeMedianMs: 1638.4, stepTimeP90Ms: 1650, peakMemoryBytes: 64 * GIB, losses: [10, 8, 7.2] },
      { backend: 'te', losses: [], skippedReason: 'Transformer Engine not installed' },
    ],
    ratios: [],
    ...overrides,
  };
}

/** The table rows (lines starting with '|'), split into trimmed cells. */
function rows(markdown: string): string[][] {
  return markdown.split('\n').filter((l) => l.startsWith('|')).map((l) => l.slice(1, -1).split(/(?<!\\)\|/).map((c) => c.trim()));
}

describe('benchmark markdown export', () => {
  it('one run: header line, settings line, a GFM table with BF16 first and FP8/BF16 ratios', () => {
    const md = runToMarkdown(run());
    assert.match(md, /^\*\*FP8 vs BF16 benchmark\*\* \(2025-01-31 14:05\)/);
    assert.match(md, /workload `llama-7b-slice`, batch 4 x seq 4096, 30 steps \(10 warm-up\), torch\.compile on; NVIDIA H200 \(sm 9\.0\), host gpu-box, torch 2\.11\.0, TE not installed/);
    const t = rows(md);
    assert.deepEqual(t[0], ['Backend', 'tokens/s', 'step median', 'step p90', 'peak memory', 'final loss', 'vs BF16']);
    assert.deepEqual(t[1], ['---', '---:', '---:', '---:', '---:', '---:', '---']);
    assert.deepEqual(t[2], ['BF16', '10,000', '1,638 ms', '1,650 ms', '64.0 GiB', '7.2000', 'baseline']);
    assert.deepEqual(t[3], ['FP8 (torch._scaled_mm)', '14,100', '1,162 ms', '1,170 ms', '60.0 GiB', '7.2500', '1.41x speed, 0.94x memory']);
    assert.deepEqual(t[4], ['FP8 (Transformer Engine)', 'skipped', '', '', '', '', 'Transformer Engine not installed']);
    assert.ok(t.every((r) => r.length === 7), 'every row has every column');
  });

  it('missing numbers print as a dash, not NaN or undefined', () => {
    const md = runToMarkdown(run({ results: [{ backend: 'bf16', losses: [null] }] }));
    assert.doesNotMatch(md, /NaN|undefined|null/);
    assert.deepEqual(rows(md)[2], ['BF16', '–', '–', '–', '–', '–', 'baseline']);
  });

  it('escapes pipes and newlines in cells', () => {
    assert.equal(escapeCell('a|b\nc'), 'a\\|b c');
    const md = runToMarkdown(run({ results: [{ backend: 'bf16', losses: [], skippedReason: 'bad | thing\nhere' }] }));
    assert.deepEqual(rows(md)[2].slice(-1), ['bad \\| thing here']);
  });

  it('two runs side by side: A, B and B/A per backend and metric', () => {
    const a = run();
    const b = run({
      id: 'r2',
      startedAt: a.startedAt + 3600000,
      options: { ...a.options, batch: 8 },
      results: [
        { backend: 'bf16', tokensPerS: 11000, stepTimeMedianMs: 2979, peakMemoryBytes: 100 * GIB, losses: [7.1] },
        { backend: 'torch-fp8', tokensPerS: 16500, stepTimeMedianMs: 1986, peakMemoryBytes: 90 * GIB, losses: [7.15] },
      ],
    });
    const md = compareRunsToMarkdown(a, b);
    assert.match(md, /- A \(2025-01-31 14:05\): workload `llama-7b-slice`, batch 4 x seq 4096/);
    assert.match(md, /- B \(2025-01-31 15:05\): workload `llama-7b-slice`, batch 8 x seq 4096/);
    const t = rows(md);
    assert.deepEqual(t[0], ['Backend', 'Metric', 'A', 'B', 'B / A']);
    assert.deepEqual(t[2], ['BF16', 'tokens/s', '10,000', '11,000', '1.10x']);
    assert.deepEqual(t[4], ['BF16', 'peak memory', '64.0 GiB', '100 GiB', '1.56x']);
    assert.deepEqual(t[5], ['BF16', 'final loss', '7.2000', '7.1000', '-0.100']);
    assert.deepEqual(t.find((r) => r[0] === 'FP8 (torch._scaled_mm)' && r[1] === 'speed-up vs BF16'), ['FP8 (torch._scaled_mm)', 'speed-up vs BF16', '1.41x', '1.50x', '']);
    assert.deepEqual(t.find((r) => r[0] === 'FP8 (Transformer Engine)' && r[1] === 'tokens/s'), ['FP8 (Transformer Engine)', 'tokens/s', '–', '–', '–']);
  });
});
