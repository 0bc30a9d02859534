/**
 * Runs bench/benchmark.py as a child process tree and turns its output into typed events.
 * stdout: JSON lines (events); stderr: human text, forwarded line by line. Pure Node: no `vscode` import.
 */
import type { ChildProcess } from 'node:child_process';
import { BenchEvent, ErrorEvent, normalizeBenchEvent } from '../../../common/bench-events';
import { LOSS_CHECK_STEPS } from '../../../common/loss-check';
import { measurePeer } from '../../../common/peer-verdict';
import { runBackends, runMode, type RunOptions, type UserError } from '../../../common/webview-messages';
import { JsonLineParser } from './lineParser';
import { killProcessTree, spawnTree } from './processTree';
import { BENCH_EXIT_CODES, toUserError, withoutTraceback } from './state';

export interface BenchmarkInvocation {
  /** Interpreter command or path. */
  command: string;
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

export interface BenchmarkHandlers {
  onEvent?(event: BenchEvent): void;
  /** One line of stderr (human text: phases, warnings, Python's own messages). */
  onStderr?(line: string): void;
  /** A stdout line that is not a JSON event. */
  onStdoutText?(line: string): void;
}

export interface BenchmarkOutcome {
  exitCode: number | null;
  signal: NodeJS.Signals | null;
  /** `cancel()` was called before the process ended. */
  cancelled: boolean;
  /** The process could not be started (ENOENT: no such interpreter). */
  spawnError?: NodeJS.ErrnoException;
  /** The first error event that stops the benchmark, if any. */
  fatalError?: ErrorEvent;
  /** Every error event, fatal or not, in order. */
  errors: ErrorEvent[];
  /** The last stderr lines, for a process that died without saying why. */
  stderrTail: string[];
  /** Whether stdout carried at least one event. */
  sawEvents: boolean;
  /** The process was killed because it ran past the time limit. */
  timedOut: boolean;
}

export interface StartOptions {
  /** Kill the tree after this many ms (the probe uses it; a benchmark run has none). */
  timeoutMs?: number;
  /** SIGTERM -> SIGKILL grace on cancel. */
  killGraceMs?: number;
  /** How many stderr lines to keep for error messages. */
  stderrTailLines?: number;
}

/** A running benchmark process tree. */
export class BenchmarkProcess {
  readonly done: Promise<BenchmarkOutcome>;
  private readonly child: ChildProcess;
  private cancelled = false;
  private timedOut = false;
  private killing: Promise<void> | undefined;

  constructor(invocation: BenchmarkInvocation, handlers: BenchmarkHandlers, private readonly options: StartOptions = {}) {
    const tailSize = options.stderrTailLines ?? 20;
    const stderrTail: string[] = [];
    let fatalError: ErrorEvent | undefined;
    const errors: ErrorEvent[] = [];
    let sawEvents = false;
    const stdout = new JsonLineParser({
      onJson: (value, line) => {
        const event = normalizeBenchEvent(value);
        if (!event) {
          handlers.onStdoutText?.(line);
          return;
        }
        sawEvents = true;
        if (event.event === 'error') {
          errors.push(event);
          if (event.fatal && !fatalError) fatalError = event;
        }
        handlers.onEvent?.(event);
      },
      onText: (line) => handlers.onStdoutText?.(line),
    });
    const stderr = new JsonLineParser({
      // A JSON-looking stderr line is still just text to show.
      onJson: (_value, line) => pushStderr(line),
      onText: (line) => pushStderr(line),
    });
    const pushStderr = (line: string) => {
      stderrTail.push(line);
      if (stderrTail.length > tailSize) stderrTail.shift();
      handlers.onStderr?.(line);
    };

    this.child = spawnTree(invocation.command, invocation.args, {
      cwd: invocation.cwd,
      env: { ...process.env, ...invocation.env, PYTHONUNBUFFERED: '1', PYTHONIOENCODING: 'utf-8' },
    });
    let timer: NodeJS.Timeout | undefined;
    if (options.timeoutMs !== undefined) {
      timer = setTimeout(() => {
        this.timedOut = true;
        void this.kill();
      }, options.timeoutMs);
    }
    this.done = new Promise<BenchmarkOutcome>((resolve) => {
      let spawnError: NodeJS.ErrnoException | undefined;
      let settled = false;
      const finish = (exitCode: number | null, signal: NodeJS.Signals | null) => {
        if (settled) return;
        settled = true;
        if (timer) clearTimeout(timer);
        stdout.end();
        stderr.end();
        const outcome: BenchmarkOutcome = {
          exitCode,
          signal,
          cancelled: this.cancelled,
          spawnError,
          fatalError,
          errors: [...errors],
          stderrTail: [...stderrTail],
          sawEvents,
          timedOut: this.timedOut,
        };
        // Cancelled or timed out: wait until the whole tree is gone, so a new run never overlaps the old one.
        if (this.killing) void this.killing.then(() => resolve(outcome));
        else resolve(outcome);
      };
      this.child.stdout?.on('data', (chunk: Buffer) => stdout.push(chunk));
      this.child.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk));
      this.child.on('error', (error: NodeJS.ErrnoException) => {
        spawnError = error;
        // 'close' does not follow a failed spawn.
        if (this.child.pid === undefined) finish(null, null);
      });
      // 'close' waits for stdio to end: every line is parsed before the outcome.
      this.child.on('close', (code, signal) => finish(code, signal));
    });
  }

  /** The child's pid (the process group id on POSIX); undefined when the spawn failed. */
  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Kills the whole process tree; `done` then resolves with `cancelled: true`. */
  cancel(): Promise<void> {
    this.cancelled = true;
    return this.kill();
  }

  private kill(): Promise<void> {
    const pid = this.child.pid;
    if (pid === undefined) return Promise.resolve();
    this.killing ??= killProcessTree(pid, { graceMs: this.options.killGraceMs ?? 3000 });
    return this.killing;
  }
}

/** Starts the benchmark; see `BenchmarkProcess`. */
export function startBenchmark(invocation: BenchmarkInvocation, handlers: BenchmarkHandlers, options?: StartOptions): BenchmarkProcess {
  return new BenchmarkProcess(invocation, handlers, options);
}

/** Arguments for a benchmark run. */
export function buildRunArgs(script: string, options: RunOptions, extra: { jsonOut?: string; workspace?: string } = {}): string[] {
  const args = runMode(options) === 'inference' ? [
    script,
    '--mode', 'inference',
    '--workload', options.workload,
    '--backends', runBackends(options).join(','),
    '--batch', String(options.batch),
    '--prompt-len', String(options.promptLen),
    '--new-tokens', String(options.newTokens),
    '--repeats', String(options.repeats),
  ] : [
    script,
    '--workload', options.workload,
    '--backends', options.backends.join(','),
    '--steps', String(options.steps),
    '--warmup', String(options.warmup),
    '--batch', String(options.batch),
    '--seq', String(options.seq),
    options.compile ? '--compile' : '--no-compile',
  ];
  if (extra.jsonOut) args.push('--json-out', extra.jsonOut);
  if (extra.workspace) args.push('--workspace', extra.workspace);
  return args;
}

/**
 * Arguments of the bundled CLI for an A/B run ("Measure conversion"): `precision-lens measure FOLDER --format jsonl`,
 * which copies and converts the project, runs bench/benchmark.py --mode ab on `python` and prints its events.
 * `options.lossCheck` adds `--loss-check` (the training recipe, eval losses, the BF16 arm again), `options.warmStart`
 * its `--warm-start N` (every arm from the original's weights after N BF16 steps). The torchao peer
 * runs as `measure` runs it: under torch.compile, its best configuration, even when the form's Compile is off
 * (bench --peer-compile on); `extra.peerEager` keeps it eager (`--peer-eager`).
 */
export function buildMeasureArgs(
  cli: string, folder: string, options: RunOptions,
  extra: { python: string; jsonOut?: string; peer?: 'torchao' | 'none'; peerEager?: boolean; convertLosingLayers?: boolean },
): string[] {
  const args = [
    cli, 'measure', folder,
    '--workload', options.workload,
    '--python', extra.python,
    '--format', 'jsonl',
    // The loss check: measure's own 200 steps apply unless the form asks for more (its speed-run default of 30 steps
    // says nothing about the loss); measure then leaves the torchao peer out and runs the BF16 arm twice.
    ...(options.lossCheck && options.steps < LOSS_CHECK_STEPS ? [] : ['--steps', String(options.steps)]),
    '--warmup', String(options.warmup),
    '--batch', String(options.batch),
    '--seq', String(options.seq),
    options.compile ? '--compile' : '--no-compile',
  ];
  if (options.lossCheck) args.push('--loss-check');
  if (options.lossCheck && options.warmStart) args.push('--warm-start', String(options.warmStart));
  if (options.lossCheck && options.roundedStart) args.push('--rounded-start');
  if (extra.peer) args.push('--peer', extra.peer);
  // --peer-eager only where a peer runs (measure refuses it beside --peer none or a loss check without the peer).
  if (extra.peerEager && measurePeer({ peer: extra.peer, lossCheck: options.lossCheck }) !== 'none') args.push('--peer-eager');
  if (extra.jsonOut) args.push('--json-out', extra.jsonOut);
  if (extra.convertLosingLayers) args.push('--convert-losing-layers');
  return args;
}

/** Arguments for the environment probe. */
export function buildProbeArgs(script: string, workspace?: string): string[] {
  return workspace ? [script, '--probe', '--workspace', workspace] : [script, '--probe'];
}

/** Arguments that list the workload presets. */
export function buildListWorkloadsArgs(script: string): string[] {
  return [script, '--list-workloads'];
}

/**
 * The user-facing error for a finished process, or undefined when it ended normally (or was cancelled).
 * A fatal error event wins. The benchmark exits non-zero after non-fatal errors too (TE missing, FP8 unsupported):
 * with results that is a successful run with notes (`hasResults`); without, the first error explains it.
 * A process that died silently gets "benchmark exited with code N" and its last stderr lines.
 */
export function outcomeToUserError(outcome: BenchmarkOutcome, interpreter: string, hasResults = false): UserError | undefined {
  if (outcome.cancelled) return undefined;
  if (outcome.spawnError) {
    const notFound = outcome.spawnError.code === 'ENOENT';
    return {
      code: notFound ? 'interpreter_not_found' : 'spawn_failed',
      title: notFound ? 'Python interpreter not found' : 'The benchmark could not start',
      message: notFound ? `Could not start "${interpreter}": no such file or command.` : `Could not start "${interpreter}": ${outcome.spawnError.message}`,
      hint: 'Set precisionLens.pythonPath to a Python with PyTorch, or select an interpreter with the Python extension.',
    };
  }
  if (outcome.fatalError) return toUserError(outcome.fatalError.code, outcome.fatalError.message, outcome.fatalError.hint);
  if (outcome.timedOut) {
    return { code: 'timeout', title: 'The benchmark timed out', message: `"${interpreter}" did not answer in time.`, hint: 'Open the benchmark log for details.' };
  }
  if (outcome.exitCode === 0) return undefined;
  if (outcome.errors.length > 0) {
    if (hasResults) return undefined;
    const first = outcome.errors[0];
    return toUserError(first.code, first.message, first.hint);
  }
  const how = outcome.exitCode !== null ? `code ${outcome.exitCode}` : `signal ${outcome.signal ?? 'unknown'}`;
  const tail = outcome.stderrTail.slice(-8).join('\n').trim();
  const message = `benchmark exited with ${how}${tail ? `: ${withoutTraceback(tail)}` : ''}`;
  const known = outcome.exitCode !== null ? BENCH_EXIT_CODES[outcome.exitCode] : undefined;
  const base = known ? toUserError(known, message) : undefined;
  return {
    code: known ?? 'exit',
    title: base?.title ?? 'The benchmark stopped',
    message,
    hint: base?.hint ?? 'Open the benchmark log for the full output.',
    details: tail || undefined,
  };
}
