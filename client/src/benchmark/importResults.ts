/**
 * Turns a `bench/benchmark.py --json-out` document into a history entry, as if the run had been made from the
 * sidebar: the document's events are replayed through the same reducer a live run uses (`applyRunEvent`,
 * `finishRun`, `toHistoryEntry`), so an imported run shows exactly what a live one would have shown.
 * Pure: no `vscode` import (unit-tested against bench/results/h200/*.json).
 */
import { createHash } from 'node:crypto';
import { BenchEvent, EnvInfo, normalizeBenchEvent } from '../../../common/bench-events';
import { DEFAULT_RUN_OPTIONS, HistoryEntry, RunOptions, sanitizeRunOptions } from '../../../common/webview-messages';
import { parseJsonLine } from './lineParser';
import { applyRunEvent, finishRun, startedRunState, toHistoryEntry } from './state';

/** The file is not a usable `--json-out` document: the message says why (shown to the user as is). */
export class ImportError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ImportError';
  }
}

export interface ImportSource {
  /** Where the document was read from: kept as the entry's `jsonOut`, and named in errors. */
  path?: string;
  /**
   * When the benchmark finished, ms since epoch. The document carries no timestamp of its own: callers pass the
   * file's modification time (the benchmark writes the file as its last act).
   */
  finishedAt: number;
}

export interface ImportedRun {
  entry: HistoryEntry;
  /** Backend-level problems of the run (e.g. "te: Transformer Engine not installed"), as a live run lists them. */
  warnings: string[];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Parses the file's text; Python's NaN/Infinity tokens become null (as on the live stream). */
export function parseJsonOutText(text: string, path?: string): unknown {
  const value = parseJsonLine(text.replace(/^\uFEFF/, '').trim());
  if (value === undefined) throw new ImportError(`${path ?? 'The file'} is not JSON.`);
  return value;
}

/** The value of `--name value` / `--name=value` in the recorded argv. */
function argValue(argv: readonly string[], name: string): string | undefined {
  let value: string | undefined;
  argv.forEach((a, i) => {
    if (a === name && i + 1 < argv.length) value = argv[i + 1];
    else if (a.startsWith(`${name}=`)) value = a.slice(name.length + 1);
  });
  return value;
}

/** The run's options: what the results say was measured, then the recorded command line, then the defaults. */
export function optionsFromDocument(doc: Record<string, unknown>, events: readonly BenchEvent[]): RunOptions {
  const argv = Array.isArray(doc.command) ? doc.command.filter((a): a is string => typeof a === 'string') : [];
  const result = events.find((e) => e.event === 'result' && !e.skippedReason);
  const extra = result?.event === 'result' ? result.extra ?? {} : {};
  const summary = isRecord(doc.summary) ? doc.summary : {};
  const flag = argv.includes('--no-compile') ? false : argv.includes('--compile') ? true : undefined;
  const backends = argValue(argv, '--backends');
  const requested = backends && backends !== 'auto' ? backends.split(',').map((b) => b.trim()).filter(Boolean) : undefined;
  const ran = events.filter((e) => e.event === 'result').map((e) => (e.event === 'result' ? e.backend : ''));
  const inference = summary.mode === 'inference' || extra.mode === 'inference' || argValue(argv, '--mode') === 'inference';
  // `--mode ab` (what `precision-lens measure` runs): shown as the sidebar's A/B run of it would be; with
  // --repeat-original, a loss check (with --warm-start-steps N, from N BF16 steps).
  const ab = !inference && (summary.mode === 'ab' || argValue(argv, '--mode') === 'ab');
  const figures = result?.event === 'result' ? result.inference : undefined;
  const backendsRun = requested ?? (Array.isArray(summary.backends) ? summary.backends : ran);
  return sanitizeRunOptions({
    mode: inference ? 'inference' : 'train',
    workload: extra.workload ?? summary.workload ?? argValue(argv, '--workload'),
    backends: inference ? undefined : backendsRun,
    inferenceBackends: inference ? backendsRun : undefined,
    promptLen: figures?.promptTokens ?? argValue(argv, '--prompt-len'),
    newTokens: figures?.newTokens ?? argValue(argv, '--new-tokens'),
    repeats: extra.repeats ?? argValue(argv, '--repeats'),
    steps: extra.steps ?? summary.steps ?? argValue(argv, '--steps'),
    warmup: extra.warmup ?? summary.warmup ?? argValue(argv, '--warmup'),
    batch: extra.batch ?? argValue(argv, '--batch'),
    seq: extra.seq ?? argValue(argv, '--seq'),
    compile: typeof extra.compile === 'boolean' ? extra.compile : typeof summary.compile === 'boolean' ? summary.compile : flag,
    ...(ab ? { ab: true, ...(argv.includes('--repeat-original') ? { lossCheck: true, warmStart: argValue(argv, '--warm-start-steps'), ...(argv.includes('--rounded-original') ? { roundedStart: true } : {}) } : {}) } : {}),
  }, { ...DEFAULT_RUN_OPTIONS, workload: 'unknown' });
}

/** The document's events in order; a document without `events` is rebuilt from its env / errors / results / summary. */
function documentEvents(doc: Record<string, unknown>): unknown[] {
  if (Array.isArray(doc.events)) return doc.events;
  const list = (v: unknown) => (Array.isArray(v) ? v : []);
  return [doc.env, ...list(doc.errors), ...list(doc.results), doc.summary].filter(isRecord);
}

/** A stable id: importing the same file twice replaces the entry instead of adding a second one. */
function importId(doc: unknown, workload: string): string {
  const hash = createHash('sha256').update(JSON.stringify(doc)).digest('hex').slice(0, 12);
  return `import-${workload.replace(/[^A-Za-z0-9_.-]+/g, '_')}-${hash}`;
}

/**
 * Converts a parsed `--json-out` document into a finished run for the history. Throws `ImportError` (with a message
 * for the user) when it is not such a document or the run it records has no result (it failed or was cancelled).
 */
export function jsonOutToHistoryEntry(doc: unknown, source: ImportSource): ImportedRun {
  const where = source.path ?? 'The file';
  if (!isRecord(doc)) throw new ImportError(`${where} is not a benchmark --json-out file (expected a JSON object).`);
  if (!Array.isArray(doc.events) && !Array.isArray(doc.results)) {
    throw new ImportError(`${where} is not a benchmark --json-out file: it has neither "events" nor "results".`);
  }
  if (typeof doc.protocol === 'number' && doc.protocol > 1) {
    throw new ImportError(`${where} was written by a newer benchmark (protocol ${doc.protocol}); this extension reads protocol 1.`);
  }
  const events = documentEvents(doc).map(normalizeBenchEvent).filter((e): e is BenchEvent => e !== undefined);
  if (!events.some((e) => e.event === 'result')) throw new ImportError(`${where} has no benchmark result to import.`);

  const options = optionsFromDocument(doc, events);
  const summary = isRecord(doc.summary) ? doc.summary : {};
  const elapsedMs = typeof summary.elapsed_s === 'number' && Number.isFinite(summary.elapsed_s) && summary.elapsed_s >= 0 ? summary.elapsed_s * 1000 : 0;
  // Files written since the benchmark records `finished_at` carry their own date; older ones fall back to the file's.
  const recorded = typeof doc.finished_at === 'string' ? Date.parse(doc.finished_at) : NaN;
  const finishedAt = Number.isFinite(recorded) ? recorded : source.finishedAt;
  const startedAt = Math.round(finishedAt - elapsedMs);

  let env: EnvInfo | undefined;
  let cancelled = false;
  let run = startedRunState(importId(doc, options.workload), options, startedAt);
  for (const event of events) {
    if (event.event === 'env') env = event;
    if (event.event === 'cancelled') cancelled = true;
    run = applyRunEvent(run, event);
  }
  const finished = finishRun(run, { cancelled }, finishedAt);
  if (finished.status === 'cancelled') throw new ImportError(`${where} records a cancelled run: only finished runs are kept in the history.`);
  if (finished.status !== 'done') {
    const error = finished.error;
    throw new ImportError(`${where} records a run that failed${error ? `: ${error.title}: ${error.message}` : ''}.`);
  }
  const entry = toHistoryEntry(finished, { env, interpreter: env?.pythonExecutable, jsonOut: source.path });
  if (!entry) throw new ImportError(`${where} could not be converted.`);
  return { entry, warnings: finished.warnings };
}
