/**
 * `precision-lens measure DIR --workload module:function`: the A/B of the user's own project on their GPU.
 *
 *   1. copies DIR's Python project (the .py files and pyproject.toml; no .git, virtual environments, node_modules,
 *      __pycache__ or data folders; bounded) to a temporary folder;
 *   2. converts the copy with the CLI's own `check --fix --unsafe-fixes` (run in-process through `check`, the same
 *      code path as on the command line: no second implementation of the fixes), and says what it applied;
 *   3. runs this package's bench/benchmark.py `--mode ab --workspace DIR --converted COPY` on the interpreter given
 *      (the torchao peer under torch.compile unless --peer-eager), streams its progress to stderr and prints a table
 *      of the arms (original, converted, torchao-original) and the verdict against the peer;
 *   4. removes the copy unless --keep.
 *
 * `--format jsonl` is what the editor's sidebar runs: stdout carries the benchmark's JSON lines as they come (plus a
 * `progress` event for the conversion and one `conversion` event saying what was applied), stderr the human text.
 * Exit codes: 0 the benchmark finished; 2 usage or I/O error (message on stderr); otherwise the benchmark's own
 * non-zero exit status (its error message on stderr): 4 no CUDA device, 8 the workload could not be loaded, ...
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { armLabel, attentionOfResult, fp8GemmsOfResult, normalizeBenchEvent, PEER_ARM, workloadDescriptionOf, type BackendResult } from '../../../common/bench-events';
import { evalLossOf, hasEvalLosses, LOSS_CHECK_STEPS, lossVerdict, REPEAT_ARM, ROUNDED_ARM } from '../../../common/loss-check';
import { measurePeer, peerVerdict } from '../../../common/peer-verdict';
import { resolveSettings } from '../../../common/settings';
import { findProjectConfig } from '../engine/config';
import type { MeasureOptions } from './args';
import { SKIPPED_DIRS } from './files';

/** At most this many .py files are copied (a whole monorepo is not "a project"). */
export const MAX_PY_FILES = 2000;
/** At most this many bytes are copied. */
export const MAX_COPY_BYTES = 50 * 1024 * 1024;
/** Folders never copied besides the analysis' own skip list: data, checkpoints, build outputs. */
const NOT_COPIED = new Set([...SKIPPED_DIRS, 'data', 'datasets', 'dataset', 'checkpoints', 'wandb', 'outputs', 'logs', 'build', 'dist', '.eggs', '.pytest_cache']);

export interface MeasureIo {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  cwd: string;
}

/** `check` run in-process (cli.ts's main): passed in so this module does not import cli.ts back. */
export type CheckRunner = (argv: readonly string[], io: MeasureIo) => Promise<number>;

/** A problem with the input that ends the command with exit code 2. */
export class MeasureInputError extends Error {}

export interface CopiedProject {
  copy: string;
  pyFiles: number;
  bytes: number;
}

/**
 * Copies the Python project under `dir` to a new temporary folder: every .py file and pyproject.toml, in the same
 * layout. Refuses (MeasureInputError) a missing folder, one without .py files, or one above the bounds.
 */
export function copyPythonProject(dir: string, limits: { maxFiles?: number; maxBytes?: number } = {}): CopiedProject {
  const maxFiles = limits.maxFiles ?? MAX_PY_FILES;
  const maxBytes = limits.maxBytes ?? MAX_COPY_BYTES;
  let st: fs.Stats;
  try {
    st = fs.statSync(dir);
  } catch {
    throw new MeasureInputError(`${dir}: no such directory`);
  }
  if (!st.isDirectory()) throw new MeasureInputError(`${dir}: not a directory (measure takes the project's folder)`);
  const picked: Array<{ rel: string; size: number }> = [];
  let pyFiles = 0;
  let bytes = 0;
  const seen = new Set<string>();
  const walk = (abs: string, rel: string): void => {
    let real: string;
    try { real = fs.realpathSync(abs); } catch { return; }
    if (seen.has(real)) return;
    seen.add(real);
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(abs, { withFileTypes: true });
    } catch (e) {
      throw new MeasureInputError(`${abs}: cannot read directory (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    for (const entry of entries) {
      const full = path.join(abs, entry.name);
      const relPath = rel ? `${rel}/${entry.name}` : entry.name;
      let isDir = entry.isDirectory();
      let isFile = entry.isFile();
      if (entry.isSymbolicLink()) {
        try {
          const s = fs.statSync(full);
          isDir = s.isDirectory();
          isFile = s.isFile();
        } catch {
          continue;
        }
      }
      if (isDir) {
        if (NOT_COPIED.has(entry.name) || fs.existsSync(path.join(full, 'pyvenv.cfg'))) continue;
        walk(full, relPath);
      } else if (isFile && (entry.name.endsWith('.py') || (entry.name === 'pyproject.toml'))) {
        const size = fs.statSync(full).size;
        if (entry.name.endsWith('.py')) pyFiles++;
        bytes += size;
        if (pyFiles > maxFiles) {
          throw new MeasureInputError(`${dir} holds more than ${maxFiles} .py files: measure copies one project, not a tree of them; point it at the project's own folder`);
        }
        if (bytes > maxBytes) {
          throw new MeasureInputError(`${dir}: its Python files come to more than ${Math.round(maxBytes / 1024 / 1024)} MB; point measure at the project's own folder`);
        }
        picked.push({ rel: relPath, size });
      }
    }
  };
  walk(path.resolve(dir), '');
  if (pyFiles === 0) throw new MeasureInputError(`${dir}: no .py files to measure`);
  const copy = fs.mkdtempSync(path.join(os.tmpdir(), 'precision-lens-measure-'));
  try {
    for (const f of picked) {
      const target = path.join(copy, ...f.rel.split('/'));
      fs.mkdirSync(path.dirname(target), { recursive: true });
      fs.copyFileSync(path.join(dir, ...f.rel.split('/')), target);
    }
  } catch (e) {
    fs.rmSync(copy, { recursive: true, force: true });
    throw new MeasureInputError(`could not copy ${dir}: ${(e as Error).message}`);
  }
  return { copy, pyFiles, bytes };
}

export interface ConversionReport {
  /** Exit code of the in-process `check --fix --unsafe-fixes` (0, or 2 on an I/O error). */
  exitCode: number;
  appliedFixes: number;
  changedFiles: number;
  /** `--show-fixes`' lines: "Fixed N problems:", "- model.py:", "    3 × PL101 Convert ...". */
  lines: string[];
  /** The fallback module the conversion imports (module name, for the benchmark's --fallback-module). */
  fallbackModule: string;
}

/**
 * Converts the copy in place exactly as `precision-lens check COPY --fix --unsafe-fixes` does: through `check` itself.
 * Paths in the report are relative to the copy (they read as the project's own).
 */
export async function convertCopy(copy: string, check: CheckRunner, gain: { tokensPerStep?: number; convertLosingLayers?: boolean } = {}): Promise<ConversionReport> {
  let err = '';
  // The measured step's tokens are the rows the gain prediction reads (which layers are predicted to pay).
  const extra = [...(gain.tokensPerStep ? ['--tokens-per-step', String(gain.tokensPerStep)] : []), ...(gain.convertLosingLayers ? ['--convert-losing-layers'] : [])];
  const exitCode = await check(['check', '.', '--fix', '--unsafe-fixes', ...extra, '--show-fixes', '--format', 'json', '--fail-on', 'none'], {
    stdout: () => undefined, // the findings left after the fixes: not this command's business
    stderr: (s) => { err += s; },
    cwd: copy,
  });
  const lines = err.split('\n').filter((l) => l.trim() !== '');
  const applied = /applied (\d+) fix(?:es)? in (\d+) files?/.exec(err);
  const project = findProjectConfig(copy);
  const fallback = resolveSettings(project?.settings ?? {}).fallbackModule;
  return {
    exitCode,
    appliedFixes: applied ? Number(applied[1]) : 0,
    changedFiles: applied ? Number(applied[2]) : 0,
    lines: lines.filter((l) => !/^precision-lens: applied /.test(l)),
    fallbackModule: fallback.replace(/\.py$/, '').split('/').join('.'),
  };
}

/** Whether the conversion's `--show-fixes` lines include PL306's (the model compiled through fp8_for_compile). */
export function compilePathIn(lines: readonly string[]): boolean {
  return lines.some((l) => /\bPL306\b/.test(l));
}

/** bench/benchmark.py of this package: next to out/ in the bundle, three folders up from server/src/cli in the sources. */
export function benchScript(from: string = __dirname): string | undefined {
  let dir = from;
  for (let i = 0; i < 5; i++) {
    const candidate = path.join(dir, 'bench', 'benchmark.py');
    if (fs.existsSync(candidate)) return candidate;
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  return undefined;
}

// The loss check's steps and verdict, and the verdict against the torchao peer, are shared with the editor's sidebar
// (common/loss-check.ts, common/peer-verdict.ts): one implementation.
export { LOSS_CHECK_STEPS, lossVerdict, peerVerdict };

/** The benchmark's arguments for the A/B of `workspace` against its converted `copy`. */
export function benchArgs(script: string, options: MeasureOptions, workspace: string, copy: string, fallbackModule: string): string[] {
  const args = [script, '--mode', 'ab', '--workload', options.workload, '--workspace', workspace, '--converted', copy, '--fallback-module', fallbackModule];
  const steps = options.steps ?? (options.lossCheck ? LOSS_CHECK_STEPS : undefined);
  const peer = measurePeer(options);
  if (peer) args.push('--peer', peer);
  // The torchao peer in its best configuration, torch.compile, even beside eager arms (bench --peer-compile on): the
  // conversion is compared with the best torchao does in the same process. With --compile every arm compiles anyway.
  if (peer !== 'none') args.push('--peer-compile', options.peerEager ? 'off' : options.compile === true ? 'same' : 'on');
  if (steps !== undefined) args.push('--steps', String(steps));
  if (options.lossCheck) {
    // nanoGPT's and llama2.c's own recipe, scaled to the run: without a warm-up the first steps spike and the
    // comparison measures that chaos, not FP8 (bench/results/h200/README.md, 2026-12-04). The learning rate of the
    // model's size (GPT-3's table): GPT-2 small's 6e-4 on a 0.7 B model made BF16 disagree with itself by 4 %
    // (2026-12-05-loss-lr).
    args.push('--lr', 'auto', '--lr-warmup', String(Math.max(1, Math.round(steps! / 10))), '--lr-schedule', 'cosine',
      '--clip-grad', '1.0', '--eval-loss-batches', '8', '--repeat-original');
    if (options.warmStart) args.push('--warm-start-steps', String(options.warmStart));
    if (options.roundedStart) args.push('--rounded-original');
  }
  if (options.warmup !== undefined) args.push('--warmup', String(options.warmup));
  if (options.batch !== undefined) args.push('--batch', String(options.batch));
  if (options.seq !== undefined) args.push('--seq', String(options.seq));
  if (options.compile !== undefined) args.push(options.compile ? '--compile' : '--no-compile');
  if (options.device) args.push('--device', options.device);
  if (options.jsonOut) args.push('--json-out', options.jsonOut);
  return args;
}

const ARM_LABELS: Readonly<Record<string, string>> = {
  original: 'original (BF16)',
  converted: 'converted (FP8)',
  [REPEAT_ARM]: 'original again (BF16)',
  [ROUNDED_ARM]: 'original, rounded start (BF16)',
  [PEER_ARM]: 'torchao on original',
};

/** An arm's name in the table; the torchao peer's says whether it ran compiled or eager. */
function labelOf(r: BackendResult): string {
  return armLabel(r, ARM_LABELS[r.backend] ?? r.backend);
}

function fmt(x: number | undefined, digits = 0): string {
  if (x === undefined || !Number.isFinite(x)) return '–';
  return x.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function fmtBytes(b: number | undefined): string {
  if (b === undefined || !Number.isFinite(b)) return '–';
  const gib = b / 1024 ** 3;
  return gib >= 1 ? `${gib.toFixed(2)} GiB` : `${(b / 1024 ** 2).toFixed(0)} MiB`;
}

function lastLoss(losses: ReadonlyArray<number | null>): number | undefined {
  for (let i = losses.length - 1; i >= 0; i--) {
    const l = losses[i];
    if (l !== null && Number.isFinite(l)) return l;
  }
  return undefined;
}

/** The table printed at the end: arm, tokens/s, ratio to the original, peak memory, final loss, FP8 forwards. */
export function measureTable(results: readonly BackendResult[]): string {
  const order = ['original', 'converted', REPEAT_ARM, ROUNDED_ARM, PEER_ARM];
  const sorted = [...results].sort((a, b) => {
    const ia = order.indexOf(a.backend);
    const ib = order.indexOf(b.backend);
    return (ia < 0 ? 99 : ia) - (ib < 0 ? 99 : ib);
  });
  const base = results.find((r) => r.backend === 'original' && !r.skippedReason);
  // The eval loss column only where a run measured it (--loss-check).
  const withEval = hasEvalLosses(results);
  const header = ['arm', 'tokens/s', 'vs original', 'peak memory', 'final loss', ...(withEval ? ['eval loss'] : []), 'FP8 forwards'];
  const rows = sorted.map((r) => {
    if (r.skippedReason) return [labelOf(r), `skipped: ${r.skippedReason}`, '', '', '', ...(withEval ? [''] : []), ''];
    const ratio = r === base ? 'baseline' : base?.tokensPerS && r.tokensPerS !== undefined ? `${(r.tokensPerS / base.tokensPerS).toFixed(2)}x` : '–';
    const g = fp8GemmsOfResult(r);
    const fwd = g && g.forwardsTotal !== undefined ? `${fmt(g.forwardsFp8)}/${fmt(g.forwardsTotal)}${g.modules !== undefined ? ` (${g.modules} modules)` : ''}`
      : g?.torchao && g.modules !== undefined ? `all (${g.modules} Float8Linear)` : '–';
    return [labelOf(r), fmt(r.tokensPerS), ratio, fmtBytes(r.peakMemoryBytes), fmt(lastLoss(r.losses), 4), ...(withEval ? [fmt(evalLossOf(r), 4)] : []), fwd];
  });
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ').trimEnd();
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n') + '\n';
}

/** Runs `measure`; resolves to the exit code. */
export async function runMeasure(options: MeasureOptions, io: MeasureIo, check: CheckRunner): Promise<number> {
  const jsonl = options.format === 'jsonl';
  const event = (e: Record<string, unknown>) => { if (jsonl) io.stdout(JSON.stringify(e) + '\n'); };
  const fail = (code: string, message: string, exit = 2): number => {
    io.stderr(`precision-lens: ${message}\n`);
    event({ event: 'error', code, message, fatal: true });
    return exit;
  };
  const workspace = path.resolve(io.cwd, options.dir);
  const script = benchScript();
  if (!script) return fail('missing_script', 'bench/benchmark.py is not part of this installation');

  let project: CopiedProject;
  try {
    project = copyPythonProject(workspace);
  } catch (e) {
    if (e instanceof MeasureInputError) return fail('usage', e.message);
    throw e;
  }
  const cleanup = () => {
    if (!options.keep) fs.rmSync(project.copy, { recursive: true, force: true });
  };
  let child: ChildProcess | undefined;
  let stopSignal: NodeJS.Signals | undefined;
  const onSignal = (signal: NodeJS.Signals) => {
    stopSignal = signal;
    // The benchmark reports `cancelled` and exits; the copy goes once it has.
    if (child && child.exitCode === null) child.kill(signal);
  };
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM'];
  const useSignals = options.handleSignals !== false;
  if (useSignals) for (const s of signals) process.on(s, onSignal);
  try {
    event({ event: 'progress', phase: 'convert', message: `copying ${project.pyFiles} .py files and converting the copy` });
    io.stderr(`precision-lens: copied ${project.pyFiles} .py file${project.pyFiles === 1 ? '' : 's'} of ${workspace} to ${project.copy}\n`);
    const conversion = await convertCopy(project.copy, check, {
      tokensPerStep: options.batch && options.seq ? options.batch * options.seq : undefined, convertLosingLayers: options.convertLosingLayers,
    });
    for (const l of conversion.lines) io.stderr(`${l}\n`);
    if (conversion.exitCode === 2) return fail('conversion_failed', 'the conversion of the copy failed (see above)');
    io.stderr(`precision-lens: converted the copy: ${conversion.appliedFixes} fix${conversion.appliedFixes === 1 ? '' : 'es'} in ${conversion.changedFiles} file${conversion.changedFiles === 1 ? '' : 's'}\n`);
    event({
      event: 'conversion', applied: conversion.appliedFixes, files: conversion.changedFiles, fixes: conversion.lines,
      copy: project.copy, kept: options.keep, fallback_module: conversion.fallbackModule,
    });
    if (conversion.appliedFixes === 0) io.stderr('precision-lens: warning: nothing was converted: both arms run the same code\n');
    if (options.compile === false && compilePathIn(conversion.lines)) {
      // PL306's conversion is torchao under torch.compile: the converted script calls fp8_for_compile only when it compiles.
      io.stderr('precision-lens: warning: the conversion compiles the model with torchao FP8 (PL306), and --no-compile runs it as the script does without compiling: in BF16. Measure without --no-compile, or turn PL306 off in pyproject.toml for the te.* conversion\n');
    }
    if (stopSignal) {
      event({ event: 'cancelled', code: 'cancelled', signal: stopSignal, phase: 'convert', message: 'cancelled before the benchmark started' });
      return 130;
    }

    const args = benchArgs(script, options, workspace, project.copy, conversion.fallbackModule);
    const python = options.python ?? 'python3';
    io.stderr(`precision-lens: ${python} ${args.join(' ')}\n`);
    const results = new Map<string, BackendResult>();
    let fatal: { message: string; hint?: string } | undefined;
    let lastPhase = '';
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null; spawnError?: NodeJS.ErrnoException }>((resolve) => {
      let spawnError: NodeJS.ErrnoException | undefined;
      child = spawn(python, args, {
        cwd: workspace,
        env: { ...process.env, PYTHONUNBUFFERED: '1', PYTHONIOENCODING: 'utf-8' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const lines = (stream: NodeJS.ReadableStream | null, onLine: (line: string) => void) => {
        let buf = '';
        stream?.setEncoding('utf8');
        stream?.on('data', (chunk: string) => {
          buf += chunk;
          let nl: number;
          while ((nl = buf.indexOf('\n')) >= 0) {
            onLine(buf.slice(0, nl).replace(/\r$/, ''));
            buf = buf.slice(nl + 1);
          }
        });
        stream?.on('end', () => { if (buf) onLine(buf); buf = ''; });
      };
      lines(child.stdout, (line) => {
        let value: unknown;
        try { value = JSON.parse(line); } catch { value = undefined; }
        const e = value === undefined ? undefined : normalizeBenchEvent(value);
        if (jsonl) io.stdout(`${line}\n`);
        else if (!e) io.stderr(`${line}\n`);
        if (!e) return;
        if (e.event === 'result') results.set(e.backend, e);
        else if (e.event === 'error' && e.fatal && !fatal) fatal = { message: e.message, hint: e.hint };
        else if (e.event === 'progress' && !jsonl) {
          const phase = `${e.phase}${e.backend ? ` (${e.backend})` : ''}`;
          if (phase !== lastPhase || (e.step !== undefined && e.total !== undefined && e.step === e.total)) {
            io.stderr(`precision-lens: ${phase}${e.step !== undefined && e.total !== undefined ? ` ${e.step}/${e.total}` : ''}\n`);
          }
          lastPhase = phase;
        }
      });
      lines(child.stderr, (line) => io.stderr(`${line}\n`));
      child.on('error', (e: NodeJS.ErrnoException) => {
        spawnError = e;
        if (child?.pid === undefined) resolve({ code: null, signal: null, spawnError });
      });
      child.on('close', (code, signal) => resolve({ code, signal, spawnError }));
    });
    if (exit.spawnError) {
      const notFound = exit.spawnError.code === 'ENOENT';
      return fail(notFound ? 'interpreter_not_found' : 'spawn_failed', `could not start ${python}: ${notFound ? 'no such file or command (give --python PATH)' : exit.spawnError.message}`);
    }
    if (stopSignal) return 130;
    if (!jsonl && results.size > 0) {
      const arms = [...results.values()];
      io.stdout(measureTable(arms));
      const workload = arms.map(workloadDescriptionOf).find((w) => w !== undefined);
      if (workload) io.stdout(`workload: ${workload}\n`);
      const attention = arms.map(attentionOfResult).find((a) => a !== undefined);
      if (attention) io.stdout(`attention (converted): ${attention}\n`);
      for (const verdict of [peerVerdict(arms), lossVerdict(arms)]) if (verdict) io.stdout(`${verdict}\n`);
    }
    const code = exit.code ?? 1;
    if (code !== 0 || fatal) {
      // A fatal error event is on the benchmark's stderr already (forwarded above): said once.
      if (!fatal && !jsonl) io.stderr(`precision-lens: measure failed: the benchmark exited with ${exit.code !== null ? `code ${exit.code}` : `signal ${exit.signal}`}\n`);
      return code === 0 ? 1 : code;
    }
    if (options.keep) io.stderr(`precision-lens: the converted copy is kept in ${project.copy}\n`);
    return 0;
  } finally {
    if (useSignals) for (const s of signals) process.off(s, onSignal);
    cleanup();
  }
}
