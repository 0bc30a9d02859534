/**
 * `check` / `inspect` on every core: worker threads (out/cli.js itself, started with workerData) and the main thread
 * pull files from one shared queue, largest first (an atomic counter in a SharedArrayBuffer, so no thread waits on
 * another to hand out work), parse and analyse them, and keep their IRs. The workspace facts are the OR of each
 * thread's partial facts; the main thread merges them and sends them back, and each thread runs the rules (and the fix
 * titles the JSON and SARIF outputs show) on the files it analysed. Only findings, titles and notes cross threads;
 * IRs do only for `inspect`. A worker that crashes or exits early fails the run (exit code 2), never hangs it.
 */
import * as fs from 'node:fs';
import { availableParallelism } from 'node:os';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import type { PrecisionLensSettings } from '../../../common/settings';
import type { ModelIR } from '../analysis/ir';
import { PythonParser } from '../engine/parser';
import type { Finding, WorkspaceFacts } from '../rules/types';
import { buildIR, factsOf, readInput, runFileRules, type AnalysedFile } from './analyze';
import { fixabilityOf, fixTitlesFor, type BatchClass } from './fix';
import type { FixEnv } from '../fixes';
import type { InputFile } from './files';

/**
 * Automatic threads only when the files other than the largest (the work that can overlap it: one file is never split)
 * come to this many bytes: below it, starting a worker (the bundle and the WASM grammar load again, ~150 ms of CPU)
 * costs more than it saves. Measured on 2 cores: ~240 KB besides an 84 KB file ran slower on 2 threads.
 */
export const PARALLEL_MIN_BYTES = 256 * 1024;

const WORKER_TAG = 'precision-lens-check-worker';

interface WorkerInit {
  tag: typeof WORKER_TAG;
  inputs: InputFile[];
  /** Indexes into `inputs`, largest file first: the shared queue. */
  order: number[];
  /** Int32Array view: [0] the next position in `order` to take. */
  counter: SharedArrayBuffer;
  settings: PrecisionLensSettings;
  wantIR: boolean;
  wantTitles: boolean;
  /** Per finding, whether --fix (or --fix --unsafe-fixes) could fix it: the summary's hint. */
  wantFixability: boolean;
  /** The environment fixes depend on (the TE version). */
  env: FixEnv;
  /** Test hook: the worker throws instead of working (PRECISION_LENS_TEST_WORKER_CRASH). */
  crash?: boolean;
}

/** What a thread reports for one of its files after the rules. */
interface FileResult {
  index: number;
  findings: Finding[];
  titles?: string[][];
  fixability?: BatchClass[];
  ir?: ModelIR;
  analysed: boolean;
  bom?: boolean;
  skipped?: string;
  incomplete?: string;
  error?: string;
}

type ToMain =
  | { type: 'facts'; facts: WorkspaceFacts }
  | { type: 'done'; results: FileResult[] };
type ToWorker = { type: 'rules'; workspace: WorkspaceFacts };

/** How many threads to use: --jobs / PRECISION_LENS_JOBS when given, else one per core; never more than files. */
export function threadCount(jobs: number | undefined, inputs: readonly InputFile[]): number {
  if (inputs.length < 2) return 1;
  const explicit = jobs ?? envJobs();
  if (explicit !== undefined) return Math.max(1, Math.min(explicit, inputs.length));
  const cores = typeof availableParallelism === 'function' ? availableParallelism() : 1;
  if (cores < 2) return 1;
  // Automatic: only when there is enough to do besides the largest file that the workers' start-up pays for itself.
  let total = 0;
  let largest = 0;
  for (const input of inputs) {
    let size = 0;
    try { size = fs.statSync(input.absolute).size; } catch { /* reported when read */ }
    total += size;
    largest = Math.max(largest, size);
  }
  return total - largest >= PARALLEL_MIN_BYTES ? Math.min(cores, inputs.length) : 1;
}

function envJobs(): number | undefined {
  const raw = process.env.PRECISION_LENS_JOBS;
  if (raw === undefined || raw.trim() === '') return undefined;
  const n = Number(raw);
  return Number.isInteger(n) && n >= 1 ? n : undefined;
}

/** Can this code start itself as a worker (the built bundle, not the TypeScript sources under a test runner)? */
export function canUseWorkers(): boolean {
  return __filename.endsWith('.js');
}

/** Pass 1 over the shared queue: the files this thread took, analysed, in the order taken. */
async function takeAndAnalyse(parser: PythonParser, init: Pick<WorkerInit, 'inputs' | 'order' | 'settings' | 'wantIR'>, counter: Int32Array): Promise<{ index: number; file: AnalysedFile }[]> {
  const mine: { index: number; file: AnalysedFile }[] = [];
  for (;;) {
    const pos = Atomics.add(counter, 0, 1);
    if (pos >= init.order.length) return mine;
    const index = init.order[pos];
    const file = readInput(init.inputs[index], init.settings);
    await buildIR(parser, file, !init.wantIR, init.settings, init.inputs);
    mine.push({ index, file });
  }
}

function partialFacts(files: readonly { file: AnalysedFile }[]): WorkspaceFacts {
  return factsOf(files.map(({ file }) => file));
}

/** Merges per-thread facts; undefined when a fact is not a plain "any file has X" boolean (then merging is not exact). */
export function mergeFacts(parts: readonly WorkspaceFacts[]): WorkspaceFacts | undefined {
  const merged: Record<string, unknown> = {};
  for (const part of parts) {
    for (const [key, value] of Object.entries(part)) {
      if ((key === 'teFiles' || key === 'fp8GainFiles' || key === 'fp8LoseFiles' || key === 'compileFiles') && Array.isArray(value)) {
        merged[key] = [...((merged[key] as string[] | undefined) ?? []), ...value];
        continue;
      }
      if (key === 'stackDirs' && value && typeof value === 'object') {
        const into = (merged[key] ??= {}) as Record<string, string[]>;
        for (const [mod, dirs] of Object.entries(value as Record<string, string[]>)) into[mod] = [...new Set([...(into[mod] ?? []), ...dirs])];
        continue;
      }
      if (key === 'stackImports' && value && typeof value === 'object') {
        // module -> stack: the union (the first thread's stack for a module wins, as in input order it is arbitrary)
        merged[key] = { ...(value as Record<string, string>), ...(merged[key] as Record<string, string> | undefined) };
        continue;
      }
      if (typeof value !== 'boolean') return undefined;
      merged[key] = merged[key] === true || value;
    }
  }
  return merged as WorkspaceFacts;
}

/** The worker thread's side: pass 1, report facts, wait for the merged facts, pass 2, report results. */
async function workerMain(init: WorkerInit): Promise<void> {
  const port = parentPort!;
  if (init.crash) throw new Error('worker crash requested by PRECISION_LENS_TEST_WORKER_CRASH');
  const parser = await PythonParser.create();
  const mine = await takeAndAnalyse(parser, init, new Int32Array(init.counter));
  parser.dispose();
  const workspace = await new Promise<WorkspaceFacts>((resolve) => {
    port.once('message', (m: ToWorker) => resolve(m.workspace));
    port.postMessage({ type: 'facts', facts: partialFacts(mine) } satisfies ToMain);
  });
  const results = mine.map(({ index, file }) => resultOf(index, file, init.settings, workspace, init));
  port.postMessage({ type: 'done', results } satisfies ToMain);
  port.close();
}

function resultOf(index: number, file: AnalysedFile, settings: PrecisionLensSettings, workspace: WorkspaceFacts, want: { wantIR: boolean; wantTitles: boolean; wantFixability: boolean; env: FixEnv }): FileResult {
  runFileRules(file, settings, workspace);
  const result: FileResult = { index, findings: file.findings, analysed: file.ir !== undefined };
  if (want.wantTitles && file.ir) result.titles = file.findings.map((f) => fixTitlesFor(file, f, settings, want.env));
  if (want.wantFixability && file.ir) result.fixability = file.findings.map((f) => fixabilityOf(file, f, settings, want.env));
  if (want.wantIR && file.ir) result.ir = file.ir;
  if (file.bom) result.bom = true;
  if (file.skipped !== undefined) result.skipped = file.skipped;
  if (file.incomplete !== undefined) result.incomplete = file.incomplete;
  if (file.error !== undefined) result.error = file.error;
  return result;
}

/** Starts the worker side when this bundle was loaded as a check worker; true if it was. */
export function startWorkerIfAny(): boolean {
  if (isMainThread || !workerData || (workerData as WorkerInit).tag !== WORKER_TAG) return false;
  workerMain(workerData as WorkerInit).catch((e) => {
    // Rethrown outside the promise: the main thread sees it as the worker's 'error' event.
    setImmediate(() => { throw e; });
  });
  return true;
}

class WorkerHandle {
  readonly worker: Worker;
  private facts?: (f: WorkspaceFacts) => void;
  private done?: (r: FileResult[]) => void;
  readonly factsP: Promise<WorkspaceFacts>;
  readonly doneP: Promise<FileResult[]>;
  private finished = false;

  constructor(script: string, init: WorkerInit, onFail: (message: string) => void) {
    this.factsP = new Promise((resolve) => { this.facts = resolve; });
    this.doneP = new Promise((resolve) => { this.done = resolve; });
    this.worker = new Worker(script, { workerData: init, stdout: false, stderr: false });
    this.worker.on('message', (m: ToMain) => {
      if (m.type === 'facts') this.facts!(m.facts);
      else { this.finished = true; this.done!(m.results); }
    });
    this.worker.on('error', (e) => onFail(`worker thread failed: ${e.stack ?? e.message}`));
    this.worker.on('exit', (code) => {
      if (!this.finished) onFail(`worker thread exited (code ${code}) before finishing its files`);
    });
  }
}

export interface ParallelOptions {
  threads: number;
  wantIR: boolean;
  wantTitles: boolean;
  wantFixability?: boolean;
  env?: FixEnv;
  base?: WorkspaceFacts;
}

/**
 * Both passes over every input on `threads` threads (the main one included). Resolves to the files in input order,
 * as analyseAll would give them: findings, and `titles` where the workers computed the fix titles; `ir` and `text`
 * only on the files the main thread analysed (and `ir` on all of them with wantIR). Rejects when a worker fails.
 */
export async function analyseParallel(parser: PythonParser, inputs: readonly InputFile[], settings: PrecisionLensSettings, opts: ParallelOptions): Promise<AnalysedFile[] | undefined> {
  const order = inputs.map((_, i) => i);
  const sizes = inputs.map((input) => { try { return fs.statSync(input.absolute).size; } catch { return 0; } });
  order.sort((a, b) => sizes[b] - sizes[a] || a - b);
  const counter = new SharedArrayBuffer(4);
  const init: WorkerInit = {
    tag: WORKER_TAG, inputs: [...inputs], order, counter, settings, wantIR: opts.wantIR, wantTitles: opts.wantTitles,
    wantFixability: opts.wantFixability ?? false, env: opts.env ?? {},
    crash: process.env.PRECISION_LENS_TEST_WORKER_CRASH === '1' || undefined,
  };
  let fail!: (e: Error) => void;
  const failed = new Promise<never>((_, reject) => { fail = reject; });
  failed.catch(() => { /* observed through the races below */ });
  const handles: WorkerHandle[] = [];
  const stopAll = (): void => { for (const h of handles) void h.worker.terminate(); };
  for (let i = 1; i < opts.threads; i++) handles.push(new WorkerHandle(__filename, init, (message) => fail(new Error(message))));
  try {
    // The main thread works the same queue meanwhile (it takes the largest file while the workers start up).
    const mine = await takeAndAnalyse(parser, init, new Int32Array(counter));
    const parts = await Promise.race([Promise.all(handles.map((h) => h.factsP)), failed]);
    const merged = mergeFacts([partialFacts(mine), ...parts]);
    if (!merged) { stopAll(); return undefined; } // not mergeable: the caller analyses in-process
    const workspace: WorkspaceFacts = { ...opts.base, ...merged };
    for (const h of handles) h.worker.postMessage({ type: 'rules', workspace } satisfies ToWorker);

    const files: AnalysedFile[] = new Array(inputs.length);
    for (const { index, file } of mine) {
      runFileRules(file, settings, workspace);
      files[index] = file;
    }
    const done = await Promise.race([Promise.all(handles.map((h) => h.doneP)), failed]);
    for (const results of done) {
      for (const r of results) {
        const file: AnalysedFile = { input: inputs[r.index], text: '', findings: r.findings, analysed: r.analysed };
        if (r.ir) file.ir = r.ir;
        if (r.titles) file.titles = r.titles;
        if (r.fixability) file.fixability = r.fixability;
        if (r.bom) file.bom = true;
        if (r.skipped !== undefined) file.skipped = r.skipped;
        if (r.incomplete !== undefined) file.incomplete = r.incomplete;
        if (r.error !== undefined) file.error = r.error;
        files[r.index] = file;
      }
    }
    for (let i = 0; i < files.length; i++) if (!files[i]) throw new Error(`no thread analysed ${inputs[i].display}`);
    return files;
  } catch (e) {
    stopAll();
    throw e;
  }
}
