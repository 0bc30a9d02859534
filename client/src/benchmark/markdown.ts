/**
 * "Copy as Markdown": a benchmark run, or two runs side by side, as a GitHub-flavoured Markdown table for a PR.
 * Pure: no `vscode`, no Node APIs.
 */
import { armLabel, backendLabel, BackendResult, baselineOf, BASELINE_BACKEND } from '../../../common/bench-events';
import { abLines, evalLossText, showsEvalLoss } from './ab';
import { runMode, type HistoryEntry } from '../../../common/webview-messages';
import { finalLoss, formatBytes, formatDelta, formatMs, formatNumber, formatRatio, formatTimestamp } from './format';
import { computeRatios } from './state';

/** Escapes text for a table cell: pipes and newlines would break the row. */
export function escapeCell(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\|/g, '\\|').replace(/\r?\n/g, ' ');
}

function row(cells: string[]): string {
  return `| ${cells.map(escapeCell).join(' | ')} |`;
}

function table(header: string[], rows: string[][], align?: Array<'l' | 'r'>): string {
  const sep = header.map((_, i) => ((align?.[i] ?? 'l') === 'r' ? '---:' : '---'));
  return [row(header), `| ${sep.join(' | ')} |`, ...rows.map(row)].join('\n');
}

/** One line saying what ran where: workload, shape, GPU, software versions. */
export function describeRun(run: HistoryEntry): string {
  const o = run.options;
  const parts = runMode(o) === 'inference' ? [
    `inference, workload \`${o.workload}\``,
    `batch ${o.batch} x ${o.promptLen} prompt tokens + ${o.newTokens} decoded`,
    `median of ${o.repeats} repeats`,
  ] : [
    `workload \`${o.workload}\``,
    `batch ${o.batch} x seq ${o.seq}`,
    `${o.steps} steps (${o.warmup} warm-up)`,
    o.compile ? 'torch.compile on' : 'torch.compile off',
    ...(o.ab && o.lossCheck ? [`loss check (training recipe, eval loss, BF16 run twice${o.roundedStart ? ' and from its weights rounded to BF16' : ''}${o.warmStart ? `, every arm from ${o.warmStart} BF16 warm-start steps` : ''})`] : []),
  ];
  const where = [
    run.gpu ? `${run.gpu}${run.capability ? ` (sm ${run.capability})` : ''}` : undefined,
    run.hostname ? `host ${run.hostname}` : undefined,
    run.torchVersion ? `torch ${run.torchVersion}` : undefined,
    `TE ${run.teVersion ?? 'not installed'}`,
  ].filter((p): p is string => p !== undefined);
  return `${parts.join(', ')}; ${where.join(', ')}`;
}

function orderedResults(results: readonly BackendResult[]): BackendResult[] {
  const base = baselineOf(results);
  return [...results].sort((a, b) => (a.backend === base ? -1 : b.backend === base ? 1 : 0));
}

/** An inference run: throughput of both phases, peak memory and the accuracy cost of each backend against BF16. */
function inferenceRunToMarkdown(run: HistoryEntry): string {
  const ratios = run.ratios.length > 0 ? run.ratios : computeRatios(run.results);
  const rows = orderedResults(run.results).map((r) => {
    if (r.skippedReason) return [backendLabel(r.backend), 'skipped', '', '', '', '', '', r.skippedReason];
    const f = r.inference ?? {};
    const ratio = ratios.find((x) => x.backend === r.backend);
    const vs = r.backend === BASELINE_BACKEND ? 'baseline'
      : f.referenceOnly ? 'accuracy reference only (fake-quant)'
        : ratio ? `prefill ${formatRatio(ratio.prefillSpeedup)}, decode ${formatRatio(ratio.decodeSpeedup)}` : '–';
    return [
      backendLabel(r.backend),
      formatNumber(f.prefillTokensPerS, 0),
      formatNumber(f.decodeTokensPerS, 0),
      formatBytes(r.peakMemoryBytes),
      formatNumber(f.maxAbsLogitDiff, 3),
      formatNumber(f.meanAbsLogitDiff, 3),
      f.nextTokenAgreement !== undefined ? `${formatNumber(f.nextTokenAgreement * 100, 1)} %` : '–',
      vs,
    ];
  });
  return [
    `**FP8 vs BF16 inference benchmark** (${formatTimestamp(run.startedAt)})`,
    '',
    describeRun(run),
    '',
    table(['Backend', 'prefill tokens/s', 'decode tokens/s', 'peak memory', 'max |Δ logit|', 'mean |Δ logit|', 'next-token agreement', 'vs BF16'], rows,
      ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'l']),
    '',
  ].join('\n');
}

/** A single run as Markdown: a heading line, the settings, and one row per backend with its ratio to BF16. */
export function runToMarkdown(run: HistoryEntry): string {
  if (runMode(run.options) === 'inference') return inferenceRunToMarkdown(run);
  const ratios = run.ratios.length > 0 ? run.ratios : computeRatios(run.results);
  const baseline = baselineOf(run.results);
  const ab = baseline !== BASELINE_BACKEND;
  const withEval = showsEvalLoss(run.results);
  const rows = orderedResults(run.results).map((r) => {
    if (r.skippedReason) return [armLabel(r), 'skipped', '', '', '', '', ...(withEval ? [''] : []), r.skippedReason];
    const ratio = ratios.find((x) => x.backend === r.backend);
    const vs = r.backend === baseline ? 'baseline' : ratio ? `${formatRatio(ratio.speedup)} speed, ${formatRatio(ratio.memory)} memory` : '–';
    return [
      armLabel(r),
      formatNumber(r.tokensPerS, 0),
      formatMs(r.stepTimeMedianMs),
      formatMs(r.stepTimeP90Ms),
      formatBytes(r.peakMemoryBytes),
      formatNumber(finalLoss(r.losses), 4),
      ...(withEval ? [evalLossText(r)] : []),
      vs,
    ];
  });
  return [
    ab ? `**A/B: the project as it is vs converted to FP8** (${formatTimestamp(run.startedAt)})` : `**FP8 vs BF16 benchmark** (${formatTimestamp(run.startedAt)})`,
    '',
    describeRun(run),
    '',
    table(['Backend', 'tokens/s', 'step median', 'step p90', 'peak memory', 'final loss', ...(withEval ? ['eval loss'] : []), ab ? 'vs original' : 'vs BF16'], rows,
      ['l', 'r', 'r', 'r', 'r', 'r', ...(withEval ? ['r' as const] : []), 'l']),
    '',
    ...(ab ? abLines(run.results, run.conversion).flatMap((l) => [l, '']) : []),
  ].join('\n');
}

/** Two runs side by side: per backend and metric, run A, run B and B/A. */
export function compareRunsToMarkdown(a: HistoryEntry, b: HistoryEntry): string {
  const backends = [...new Set([...orderedResults(a.results), ...orderedResults(b.results)].map((r) => r.backend))];
  const rows: string[][] = [];
  const ratio = (x?: number, y?: number) => (x !== undefined && y !== undefined && x !== 0 ? formatRatio(y / x) : '–');
  for (const backend of backends) {
    const ra = a.results.find((r) => r.backend === backend && !r.skippedReason);
    const rb = b.results.find((r) => r.backend === backend && !r.skippedReason);
    const label = backendLabel(backend);
    rows.push([label, 'tokens/s', formatNumber(ra?.tokensPerS, 0), formatNumber(rb?.tokensPerS, 0), ratio(ra?.tokensPerS, rb?.tokensPerS)]);
    rows.push([label, 'step median', formatMs(ra?.stepTimeMedianMs), formatMs(rb?.stepTimeMedianMs), ratio(ra?.stepTimeMedianMs, rb?.stepTimeMedianMs)]);
    rows.push([label, 'peak memory', formatBytes(ra?.peakMemoryBytes), formatBytes(rb?.peakMemoryBytes), ratio(ra?.peakMemoryBytes, rb?.peakMemoryBytes)]);
    const la = finalLoss(ra?.losses);
    const lb = finalLoss(rb?.losses);
    rows.push([label, 'final loss', formatNumber(la, 4), formatNumber(lb, 4), la !== undefined && lb !== undefined ? formatDelta(lb - la) : '–']);
  }
  const speedups = (run: HistoryEntry) => (run.ratios.length > 0 ? run.ratios : computeRatios(run.results));
  for (const backend of backends.filter((x) => x !== BASELINE_BACKEND)) {
    const sa = speedups(a).find((r) => r.backend === backend)?.speedup;
    const sb = speedups(b).find((r) => r.backend === backend)?.speedup;
    rows.push([backendLabel(backend), 'speed-up vs BF16', formatRatio(sa), formatRatio(sb), '']);
  }
  return [
    '**FP8 benchmark comparison**',
    '',
    `- A (${formatTimestamp(a.startedAt)}): ${describeRun(a)}`,
    `- B (${formatTimestamp(b.startedAt)}): ${describeRun(b)}`,
    '',
    table(['Backend', 'Metric', 'A', 'B', 'B / A'], rows, ['l', 'l', 'r', 'r', 'r']),
    '',
  ].join('\n');
}
