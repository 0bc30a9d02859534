/**
 * Totals over fuzz ledgers (`__fuzz --total LEDGER...`): a run appends progress records as it goes and a final summary
 * (fuzz.ts), each with its figures so far, so each run counts once, by its last record: the summary when it finished,
 * else the last progress record (a run killed by its time slot). Records from before progress records existed carry
 * no run name: each is a finished run of its own. A line cut short by a kill is skipped.
 */
import { existsSync, readFileSync } from 'node:fs';

type LedgerRecord = Record<string, unknown>;

export interface FuzzTotals {
  runs: number;
  /** Runs with no final summary (killed or still running): counted by their last progress record. */
  unfinished: number;
  inputs: number; fixRuns: number; compiled: number; overBound: number; failures: number; seconds: number;
  peakRssMb: number; retimedPeakRssMb: number; slowestRetimedCheckMs: number; slowestRetimedFixMs: number;
  seeds: number[];
  /** The language-server leg (`__fuzz --lsp`): documents opened and edited, those over the bound, the slowest step and server CPU. */
  lspDocs: number; lspOverBound: number; lspSlowestStepMs: number; lspSlowestCpuMs: number;
}

const SUMMED = ['inputs', 'fixRuns', 'compiled', 'overBound', 'failures', 'seconds', 'lspDocs', 'lspOverBound'] as const;
const PEAKS = ['peakRssMb', 'retimedPeakRssMb', 'slowestRetimedCheckMs', 'slowestRetimedFixMs', 'lspSlowestStepMs', 'lspSlowestCpuMs'] as const;

/** The last record of each run, in the order the runs started. */
export function lastRecords(lines: readonly string[]): LedgerRecord[] {
  const byRun = new Map<string, LedgerRecord>();
  lines.forEach((line, i) => {
    let r: unknown;
    try { r = JSON.parse(line); } catch { return; }
    if (!r || typeof r !== 'object' || typeof (r as LedgerRecord).inputs !== 'number') return;
    const run = (r as LedgerRecord).run;
    byRun.set(typeof run === 'string' ? run : `line ${i}`, r as LedgerRecord);
  });
  return [...byRun.values()];
}

export function ledgerTotals(lines: readonly string[]): FuzzTotals {
  const last = lastRecords(lines);
  const n = (r: LedgerRecord, k: string): number => (typeof r[k] === 'number' ? (r[k] as number) : 0);
  const t: FuzzTotals = {
    runs: last.length, unfinished: last.filter((r) => r.final === false).length,
    inputs: 0, fixRuns: 0, compiled: 0, overBound: 0, failures: 0, seconds: 0,
    peakRssMb: 0, retimedPeakRssMb: 0, slowestRetimedCheckMs: 0, slowestRetimedFixMs: 0,
    seeds: [...new Set(last.map((r) => n(r, 'seed')))].sort((a, b) => a - b),
    lspDocs: 0, lspOverBound: 0, lspSlowestStepMs: 0, lspSlowestCpuMs: 0,
  };
  for (const r of last) {
    for (const k of SUMMED) t[k] += n(r, k);
    for (const k of PEAKS) t[k] = Math.max(t[k], n(r, k));
  }
  return t;
}

export function runTotals(paths: readonly string[], write: (s: string) => void): number {
  const lines = paths.filter((p) => existsSync(p)).flatMap((p) => readFileSync(p, 'utf8').split('\n')).filter((l) => l.trim());
  write(`fuzz-total ${JSON.stringify(ledgerTotals(lines))}\n`);
  return 0;
}
