/**
 * `precision-lens __fuzz [DIR...] --seed N --count M`: mutants of the Python files under DIR (the test fixtures; a
 * local corpus when one is given), each run through the CLI's own check path (read, parse, IR, rules, JSON with fix
 * titles) and, for some, --fix. Fails when an input gives an internal error, takes longer than --time-limit-ms, grows
 * the process beyond --rss-limit-mb, yields output that is not valid JSON, or when --fix turns a file that compiled
 * (python3 compile()) into one that does not. An input over the time bound in this (niced, warm) process is re-timed
 * as fresh CLI processes at normal priority (fuzz-retime.ts) and fails only when those are over the bound too; both
 * figures are reported. Failing and over-bound inputs are written to --out with their seed and mutations (to become
 * fixtures, or to be re-timed with `__fuzz --retime DIR`). The run ends with a `fuzz-summary {json}` line (also
 * appended to --ledger FILE) so that chunks can be totalled; on the way it appends a progress record of the same
 * shape every --progress-seconds (fixed outputs compiled so far included), so a run killed by its time slot still
 * counts what it did (`__fuzz --total LEDGER...` counts each run once: its last record, fuzz-ledger.ts). --small caps the costly mutations (layers, line length,
 * nesting) so that the CI run (test/unit/fuzz.test.ts) stays short.
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { resolveSettings, type PrecisionLensSettings } from '../../../common/settings';
import { PythonParser } from '../engine/parser';
import { analyseAll } from './analyze';
import { UsageError } from './args';
import { fixFiles, fixTitlesFor } from './fix';
import { KeptTrees } from './kept-trees';
import { describeRetimed, retime, retimeProblems, runRetime, type Retimed } from './fuzz-retime';
import { checkJson } from './format-json';
import { mutate, prng, SCALES, useScale } from './mutate';
import { runTotals } from './fuzz-ledger';
import { describeLsp, LspDriver, planEdits, type LspFigure, type PlannedEdit } from './fuzz-lsp';

interface FuzzOptions {
  dirs: string[];
  seed: number;
  count: number;
  timeLimitMs: number;
  rssLimitMb: number;
  fixEvery: number;
  small: boolean;
  out?: string;
  ledger?: string;
  /** `--retime PATH...`: re-time saved inputs instead of fuzzing. */
  retimeOnly: boolean;
  /** Runs of each re-timed command (the fastest counts). */
  repeat: number;
  /** Stop drawing inputs after this many seconds (then compile, re-time and report as usual): a chunk of a long run
   * on a busy machine ends inside its time slot with a summary instead of being killed without one. */
  maxSeconds?: number;
  /** Seconds between progress records appended to --ledger while fuzzing (0: after every input). */
  progressSeconds: number;
  /** `--total LEDGER...`: total the ledgers instead of fuzzing. */
  totalOnly: boolean;
  /** `--lsp` (every mutant) / `--lsp-every N`: also open the mutant in the built language server and edit it (fuzz-lsp.ts); 0: off. */
  lspEvery: number;
  /** One-character edits per document in the server (`--lsp-edits`). */
  lspEdits: number;
  /** The per-step bound in the server (`--lsp-time-limit-ms`, didOpen or didChange to its publish); --time-limit-ms by default. */
  lspTimeLimitMs?: number;
  /** The server bundle (`--lsp-server`); server.js beside this CLI bundle by default. */
  lspServer?: string;
}

function parseFuzzArgs(args: readonly string[]): FuzzOptions {
  const o: FuzzOptions = { dirs: [], seed: 1, count: 1000, timeLimitMs: 2000, rssLimitMb: 1024, fixEvery: 3, small: false, retimeOnly: false, repeat: 1, progressSeconds: 60, totalOnly: false, lspEvery: 0, lspEdits: 3 };
  const num = (i: number, name: string): number => {
    const v = Number(args[i]);
    if (!Number.isFinite(v) || v < 0) throw new UsageError(`${name} needs a number`);
    return v;
  };
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--seed') o.seed = num(++i, a);
    else if (a === '--count') o.count = num(++i, a);
    else if (a === '--time-limit-ms') o.timeLimitMs = num(++i, a);
    else if (a === '--rss-limit-mb') o.rssLimitMb = num(++i, a);
    else if (a === '--fix-every') o.fixEvery = Math.max(1, num(++i, a));
    else if (a === '--out') o.out = args[++i];
    else if (a === '--ledger') o.ledger = args[++i];
    else if (a === '--retime') o.retimeOnly = true;
    else if (a === '--repeat') o.repeat = Math.max(1, num(++i, a));
    else if (a === '--max-seconds') o.maxSeconds = num(++i, a);
    else if (a === '--progress-seconds') o.progressSeconds = num(++i, a);
    else if (a === '--total') o.totalOnly = true;
    else if (a === '--small') o.small = true;
    else if (a === '--lsp') o.lspEvery = 1;
    else if (a === '--lsp-every') o.lspEvery = num(++i, a);
    else if (a === '--lsp-edits') o.lspEdits = num(++i, a);
    else if (a === '--lsp-time-limit-ms') o.lspTimeLimitMs = num(++i, a);
    else if (a === '--lsp-server') o.lspServer = args[++i];
    else if (a.startsWith('--')) throw new UsageError(`unknown __fuzz option ${a}`);
    else o.dirs.push(a);
  }
  return o;
}

/** The seed files: every .py under the directories that exist, in a stable order. */
function seedFiles(dirs: readonly string[]): { path: string; text: string }[] {
  const out: { path: string; text: string }[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else if (name.endsWith('.py') && st.size < 512 * 1024) out.push({ path: p, text: readFileSync(p, 'utf8') });
    }
  };
  for (const d of dirs) if (existsSync(d)) walk(d);
  return out;
}

interface Failure { index: number; seed: string; applied: string[]; problem: string; saved?: string }

/** An input over the time bound in the fuzzing process, with its figures as fresh processes. */
interface OverBound { index: number; seed: string; applied: string[]; ms: number; retimed: Retimed; saved?: string }

interface CheckResult { problem?: string; fixed?: string; ms?: number; fixRun?: boolean }

/** One input through the check path (and --fix); what went wrong, if anything, and how long it took. */
async function checkOne(parser: PythonParser, path: string, settings: PrecisionLensSettings, withFix: 'safe' | 'unsafe' | false, o: FuzzOptions): Promise<CheckResult> {
  // As `check --fix` does: the tree is kept for the re-parse after a fix round, and deleted whatever happens.
  const trees = withFix ? new KeptTrees() : undefined;
  try {
    return await checkKept(parser, path, settings, withFix, o, trees);
  } finally {
    trees?.releaseAll(parser);
  }
}

async function checkKept(parser: PythonParser, path: string, settings: PrecisionLensSettings, withFix: 'safe' | 'unsafe' | false, o: FuzzOptions, trees: KeptTrees | undefined): Promise<CheckResult> {
  const started = performance.now();
  const input = { absolute: path, display: path };
  const { files } = await analyseAll(parser, [input], settings, {}, true, trees);
  const f = files[0];
  if (f.error) return { problem: `internal error: ${f.error}` };
  if (f.ir?.analysisError) return { problem: `internal error: ${f.ir.analysisError}` };
  const json = JSON.stringify(checkJson(files, (file, finding) => fixTitlesFor(file, finding, settings)));
  JSON.parse(json);
  let fixed: string | undefined;
  const fixRun = Boolean(withFix && f.findings.length);
  if (fixRun) {
    // --fix, and every other time --fix --unsafe-fixes (the conversions, through an inline fallback block), into memory:
    // the fixed text is compiled below, so no diff is made.
    const outcome = await fixFiles(parser, files, settings, { write: false, diff: false, unsafe: withFix === 'unsafe', env: {}, trees });
    if (outcome.errors.length) return { problem: `--fix failed: ${outcome.errors.join('; ')}` };
    if (outcome.changedFiles) fixed = files[0].text;
  }
  const ms = performance.now() - started;
  const rss = process.memoryUsage().rss / 1048576;
  if (rss > o.rssLimitMb) return { problem: `process at ${rss.toFixed(0)} MB (limit ${o.rssLimitMb} MB)`, ms, fixRun };
  return { fixed, ms, fixRun };
}

/** Pairs (original, fixed) where the original compiles and the fixed text does not, per python3's compile(). */
function brokenByFix(pairs: readonly [string, string][]): string[] | undefined {
  if (!pairs.length) return [];
  const script = [
    'import json, sys',
    'bad = []',
    'for orig, fixed in json.load(sys.stdin):',
    '    try: compile(open(orig, "rb").read(), orig, "exec")',
    '    except Exception: continue',
    '    try: compile(open(fixed, "rb").read(), fixed, "exec")',
    '    except Exception as e: bad.append(f"{orig}: {type(e).__name__}: {e}")',
    'print(json.dumps(bad))',
  ].join('\n');
  const python = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
  const r = spawnSync(python, ['-c', script], { input: JSON.stringify(pairs), encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) return undefined;
  return JSON.parse(r.stdout) as string[];
}

/** What one run counted; printed as the `fuzz-summary` JSON line and appended to --ledger. */
interface Tally {
  inputs: number; fixRuns: number; compiled: number; slowestMs: number; slowestIndex: number;
  overBound: OverBound[]; failures: Failure[]; compileSkipped?: boolean;
  /** Names this run in the ledger (its records share it), when it started, its seed files. */
  run: string; started: number; seedFiles: number;
  /** Where progress lines go (stdout), beside the ledger. */
  write: (s: string) => void;
  /** The server leg: documents opened and edited, the slowest ones (worst step first), those over the bound in a fresh server too. */
  lspDocs: number; lspSlowest: LspSlow[]; lspOverBound: LspSlow[];
}

/** A document of the server leg with its figures (the worst step: its open or one edit, to the publish). */
interface LspSlow { index: number; seed: string; applied: string[]; chars: number; worstMs: number; figure: LspFigure; fresh?: LspFigure; saved?: string }

/** How many of the slowest server documents a run reports. */
const LSP_SLOWEST = 10;

/** The mutants, each through checkOne; over-bound inputs are re-timed after the loop, so the loop's timing is undisturbed. */
async function fuzzLoop(o: FuzzOptions, seeds: readonly { path: string; text: string }[], work: string, tally: Tally): Promise<void> {
  const settings = resolveSettings({});
  const parser = await PythonParser.create();
  const random = prng(o.seed);
  // the fixed inputs not compiled yet, and what reproduces each (its text stays on disk: kept here, hundreds of large
  // mutants were most of the heap); compiled and appended as a progress record every --progress-seconds
  const pending: Pending = { pairs: [], inputs: new Map() };
  const slow: { index: number; seed: string; applied: string[]; ms: number; text: string }[] = [];
  const lspServer = o.lspServer ?? join(dirname(process.argv[1]), 'server.js');
  let lsp = o.lspEvery > 0 ? await LspDriver.start(lspServer) : undefined;
  // server documents over the bound: run again in a fresh server after the loop
  const lspSlow: { input: LspInput; edits: PlannedEdit[]; figure: LspFigure }[] = [];
  let lastProgress = performance.now();
  try {
    for (let i = 0; i < o.count; i++) {
      if (o.maxSeconds !== undefined && performance.now() - tally.started > o.maxSeconds * 1000) break;
      const seed = seeds[Math.floor(random() * seeds.length)];
      const { text, applied } = mutate(seed.text, random);
      const path = join(work, `in-${i}.py`);
      writeFileSync(path, text);
      let result: CheckResult;
      try {
        result = await checkOne(parser, path, settings, i % o.fixEvery !== 0 ? false : i % (2 * o.fixEvery) === 0 ? 'unsafe' : 'safe', o);
      } catch (e) {
        result = { problem: `crash: ${(e as Error).stack ?? String(e)}` };
      }
      tally.inputs++;
      if (result.fixRun) tally.fixRuns++;
      if ((result.ms ?? 0) > tally.slowestMs) [tally.slowestMs, tally.slowestIndex] = [result.ms!, i];
      if ((result.ms ?? 0) > o.timeLimitMs) slow.push({ index: i, seed: seed.path, applied, ms: result.ms!, text });
      if (result.fixed !== undefined) {
        writeFileSync(`${path}.fixed.py`, result.fixed);
        pending.pairs.push([path, `${path}.fixed.py`]);
        pending.inputs.set(path, { index: i, seed: seed.path, applied });
      }
      if (result.problem) tally.failures.push({ index: i, seed: seed.path, applied, problem: result.problem, saved: save(o, i, text, { seedFile: seed.path, applied, problem: result.problem }) });
      if (lsp && i % o.lspEvery === 0) lsp = await lspOne(o, lsp, lspServer, { index: i, seed: seed.path, applied, text }, tally, lspSlow);
      if (performance.now() - lastProgress >= o.progressSeconds * 1000) {
        flushCompile(o, pending, tally);
        appendRecord(o, tally, 'fuzzing');
        lastProgress = performance.now();
      }
    }
  } finally {
    parser.dispose();
    await lsp?.stop();
  }
  flushCompile(o, pending, tally);
  appendRecord(o, tally, 're-timing');
  for (const s of slow) {
    retimeSlow(o, s, work, tally);
    appendRecord(o, tally, 're-timing');
  }
  for (const s of lspSlow) {
    await lspAgain(o, lspServer, s, tally);
    appendRecord(o, tally, 're-timing');
  }
}

/** A mutant for the server leg. */
interface LspInput { index: number; seed: string; applied: string[]; text: string }

/** The server's per-step bound, and how long a step may take before the server is taken for stuck. */
function lspBounds(o: FuzzOptions): { bound: number; giveUp: number } {
  const bound = o.lspTimeLimitMs ?? o.timeLimitMs;
  return { bound, giveUp: Math.max(30_000, bound * 10) };
}

/**
 * One mutant through the server: opened, edited (seeded by the run's seed and the input's index, apart from the
 * mutants' own stream, so the CLI leg's inputs are the same with or without --lsp), closed. A server that exited or
 * stopped answering is a failure and is replaced; the driver to go on with is returned.
 */
async function lspOne(o: FuzzOptions, lsp: LspDriver, serverJs: string, input: LspInput, tally: Tally, slow: { input: LspInput; edits: PlannedEdit[]; figure: LspFigure }[]): Promise<LspDriver> {
  const edits = planEdits(input.text, prng((o.seed * 1_000_003 + input.index) >>> 0), o.lspEdits);
  const { bound, giveUp } = lspBounds(o);
  const outcome = await lsp.document(input.text, edits, bound, giveUp);
  tally.lspDocs++;
  if (outcome.figure) {
    const entry: LspSlow = { index: input.index, seed: input.seed, applied: input.applied, chars: input.text.length, worstMs: Math.max(outcome.figure.openMs, ...outcome.figure.editMs), figure: outcome.figure };
    tally.lspSlowest.push(entry);
    tally.lspSlowest.sort((a, b) => b.worstMs - a.worstMs);
    tally.lspSlowest.length = Math.min(tally.lspSlowest.length, LSP_SLOWEST);
    if (outcome.overMs !== undefined) slow.push({ input, edits, figure: outcome.figure });
  }
  if (outcome.problem || !lsp.alive) {
    const problem = `language server: ${outcome.problem ?? 'the server exited'}`;
    tally.failures.push({ index: input.index, seed: input.seed, applied: [...input.applied, 'lsp'], problem, saved: saveLsp(o, input, edits, { problem }) });
    await lsp.stop();
    return LspDriver.start(serverJs);
  }
  return lsp;
}

/** A server document over the bound, run again in a fresh server: a failure only when it is over there too. */
async function lspAgain(o: FuzzOptions, serverJs: string, s: { input: LspInput; edits: PlannedEdit[]; figure: LspFigure }, tally: Tally): Promise<void> {
  const { bound, giveUp } = lspBounds(o);
  const fresh = await LspDriver.start(serverJs);
  let outcome;
  try {
    outcome = await fresh.document(s.input.text, s.edits, bound, giveUp);
  } finally {
    await fresh.stop();
  }
  const worst = Math.max(s.figure.openMs, ...s.figure.editMs);
  const saved = saveLsp(o, s.input, s.edits, { figure: s.figure, fresh: outcome.figure, problem: outcome.problem });
  const entry: LspSlow = { index: s.input.index, seed: s.input.seed, applied: s.input.applied, chars: s.input.text.length, worstMs: worst, figure: s.figure, fresh: outcome.figure, saved };
  tally.lspOverBound.push(entry);
  if (outcome.problem || outcome.overMs !== undefined) {
    const problem = `language server: ${outcome.problem ?? `a step took ${outcome.overMs!.toFixed(0)} ms in a fresh server (limit ${bound} ms)`} (${worst.toFixed(0)} ms in the run's server)`;
    tally.failures.push({ index: s.input.index, seed: s.input.seed, applied: [...s.input.applied, 'lsp'], problem, saved });
  }
}

/** Saves a server-leg input as lsp-s<seed>-<index>.py with its mutations, edits and figures beside it. */
function saveLsp(o: FuzzOptions, input: LspInput, edits: readonly PlannedEdit[], meta: Record<string, unknown>): string | undefined {
  if (!o.out) return undefined;
  mkdirSync(o.out, { recursive: true });
  const p = join(o.out, `lsp-s${o.seed}-${input.index}.py`);
  writeFileSync(p, input.text);
  writeFileSync(`${p.slice(0, -3)}.json`, `${JSON.stringify({ runSeed: o.seed, index: input.index, seedFile: input.seed, applied: input.applied, edits, ...meta }, null, 2)}\n`);
  return p;
}

/** Fixed inputs waiting for python3 compile(). */
interface Pending { pairs: [string, string][]; inputs: Map<string, SavedInput> }

/** Compiles the pending fixed inputs (a fix that broke one is a failure) and drops their files. */
function flushCompile(o: FuzzOptions, pending: Pending, tally: Tally): void {
  if (!pending.pairs.length) return;
  if (compileCheck(o, pending.pairs, pending.inputs, tally)) tally.compiled += pending.pairs.length;
  for (const [orig, fixed] of pending.pairs) {
    rmSync(orig, { force: true });
    rmSync(fixed, { force: true });
  }
  pending.pairs = [];
  pending.inputs.clear();
}

/** Appends the run's figures so far to --ledger: a progress record, or (final) the summary. */
function appendRecord(o: FuzzOptions, tally: Tally, stage: string, final = false): Record<string, unknown> {
  const record = { ...summaryOf(o, tally), stage, final };
  if (o.ledger) appendFileSync(o.ledger, `${JSON.stringify(record)}\n`);
  if (!final) tally.write(`fuzz-progress ${JSON.stringify(record)}\n`);
  return record;
}

/** --fix outputs through python3 compile(): a fix that breaks a compiling file is a failure. */
interface SavedInput { index: number; seed: string; applied: string[] }

/** False when python3 could not compile (then nothing counts as compiled). */
function compileCheck(o: FuzzOptions, pairs: [string, string][], inputs: Map<string, SavedInput>, tally: Tally): boolean {
  const broken = brokenByFix(pairs);
  if (broken === undefined) {
    tally.compileSkipped = true;
    return false;
  }
  for (const b of broken) {
    // keep what reproduces it: the input (saved to --out like any other failure), its seed file and its mutations
    const path = b.slice(0, b.indexOf(': '));
    const input = inputs.get(path);
    const problem = `--fix broke compilation: ${b}`;
    const applied = [...(input?.applied ?? []), '--fix'];
    tally.failures.push({
      index: input?.index ?? -1, seed: input?.seed ?? '', applied, problem,
      saved: input ? save(o, input.index, readFileSync(path, 'utf8'), { seedFile: input.seed, applied, problem }) : undefined,
    });
  }
  return true;
}

/** An input over the bound in-process: saved, re-timed as fresh processes; a failure only if those are over too. */
function retimeSlow(o: FuzzOptions, s: { index: number; seed: string; applied: string[]; ms: number; text: string }, work: string, tally: Tally): void {
  const file = join(work, `slow-${s.index}.py`);
  writeFileSync(file, s.text);
  const retimed = retime(process.argv[1], file, o.repeat);
  const problems = retimeProblems(retimed, o.timeLimitMs, o.rssLimitMb);
  const meta = { seedFile: s.seed, applied: s.applied, inProcessMs: Math.round(s.ms), retimed };
  const saved = save(o, s.index, s.text, meta);
  tally.overBound.push({ index: s.index, seed: s.seed, applied: s.applied, ms: s.ms, retimed, saved });
  if (problems.length) tally.failures.push({ index: s.index, seed: s.seed, applied: s.applied, problem: `${problems.join('; ')} (${s.ms.toFixed(0)} ms in the fuzzing process)`, saved });
}

function summaryOf(o: FuzzOptions, tally: Tally): Record<string, unknown> {
  const seconds = (performance.now() - tally.started) / 1000;
  const retimedPeak = Math.max(0, ...tally.overBound.map((b) => Math.max(b.retimed.check.rssMb, b.retimed.fix.rssMb)));
  const slowest = (pick: (r: Retimed) => number) => Math.max(0, ...tally.overBound.map((b) => pick(b.retimed)));
  return {
    run: tally.run, seed: o.seed, count: o.count, inputs: tally.inputs, seedFiles: tally.seedFiles, seconds: Math.round(seconds),
    fixRuns: tally.fixRuns, compiled: tally.compiled, slowestInProcessMs: Math.round(tally.slowestMs),
    // the fuzzing process's own high-water mark (getrusage), over all its inputs: every input ran in this one CLI process
    peakRssMb: Math.round(process.resourceUsage().maxRSS / 1024), retimedPeakRssMb: Math.round(retimedPeak),
    overBound: tally.overBound.length,
    slowestRetimedCheckMs: Math.round(slowest((r) => r.check.ms)), slowestRetimedFixMs: Math.round(slowest((r) => r.fix.ms)),
    failures: tally.failures.length,
    ...(o.lspEvery > 0 ? {
      lspDocs: tally.lspDocs, lspSlowestStepMs: Math.round(tally.lspSlowest[0]?.worstMs ?? 0),
      lspSlowestCpuMs: Math.round(Math.max(0, ...tally.lspSlowest.map((s) => s.figure.cpuMs))), lspOverBound: tally.lspOverBound.length,
    } : {}),
  };
}

export async function runFuzz(args: readonly string[], write: (s: string) => void): Promise<number> {
  const o = parseFuzzArgs(args);
  if (o.retimeOnly) return runRetime(o.dirs, process.argv[1], o.timeLimitMs, o.rssLimitMb, o.repeat, write);
  if (o.totalOnly) return runTotals(o.dirs, write);
  useScale(o.small ? SCALES.small : SCALES.large);
  const seeds = seedFiles(o.dirs.length ? o.dirs : ['test/fixtures']);
  if (!seeds.length) throw new UsageError('__fuzz: no .py files under the given directories');
  const work = mkdtempSync(join(tmpdir(), 'precision-lens-fuzz-'));
  const started = performance.now();
  const tally: Tally = {
    inputs: 0, fixRuns: 0, compiled: 0, slowestMs: 0, slowestIndex: -1, overBound: [], failures: [],
    run: `s${o.seed}-${new Date().toISOString()}-${process.pid}`, started, seedFiles: seeds.length, write,
    lspDocs: 0, lspSlowest: [], lspOverBound: [],
  };
  try {
    await fuzzLoop(o, seeds, work, tally);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const seconds = (performance.now() - started) / 1000;
  const summary = appendRecord(o, tally, 'done', true);
  write(`fuzz: seed ${o.seed}, ${tally.inputs}${tally.inputs < o.count ? ` of ${o.count} (--max-seconds)` : ''} inputs from ${seeds.length} files in ${seconds.toFixed(1)} s, ${tally.fixRuns} through --fix, ${tally.compiled} fixed and compiled, slowest ${tally.slowestMs.toFixed(0)} ms (#${tally.slowestIndex}), ${tally.overBound.length} over ${o.timeLimitMs} ms in-process, peak RSS ${summary.peakRssMb} MB, ${tally.failures.length} failure${tally.failures.length === 1 ? '' : 's'}\n`);
  if (tally.compileSkipped) write('note: python3 not available: --fix outputs were not compiled\n');
  for (const b of tally.overBound) write(`OVER #${b.index} (${b.applied.join(' + ')} of ${b.seed}): ${b.ms.toFixed(0)} ms in-process; ${describeRetimed(b.retimed)}${b.saved ? `; saved as ${b.saved}` : ''}\n`);
  if (o.lspEvery > 0) {
    write(`language server: ${tally.lspDocs} documents opened and edited ${o.lspEdits} times each, ${tally.lspOverBound.length} with a step over ${lspBounds(o).bound} ms; the slowest:\n`);
    for (const s of tally.lspSlowest) write(`  LSP #${s.index} (${s.applied.join(' + ')} of ${s.seed}, ${s.chars} chars): ${describeLsp(s.figure)}\n`);
    for (const s of tally.lspOverBound) write(`LSP-OVER #${s.index} (${s.applied.join(' + ')} of ${s.seed}): ${describeLsp(s.figure)}; fresh server: ${s.fresh ? describeLsp(s.fresh) : 'no figure'}${s.saved ? `; saved as ${s.saved}` : ''}\n`);
  }
  for (const f of tally.failures) write(`FAIL #${f.index} (${f.applied.join(' + ')} of ${f.seed})${f.saved ? ` saved as ${f.saved}` : ''}: ${f.problem}\n`);
  write(`fuzz-summary ${JSON.stringify(summary)}\n`);
  return tally.failures.length ? 1 : 0;
}

/** Saves an input to --out as fuzz-s<seed>-<index>.py, with what reproduces it (seed file, mutations, figures) beside it. */
function save(o: FuzzOptions, index: number, text: string, meta: Record<string, unknown>): string | undefined {
  if (!o.out) return undefined;
  mkdirSync(o.out, { recursive: true });
  const p = join(o.out, `fuzz-s${o.seed}-${index}.py`);
  writeFileSync(p, text);
  writeFileSync(`${p.slice(0, -3)}.json`, `${JSON.stringify({ runSeed: o.seed, index, ...meta }, null, 2)}\n`);
  return p;
}
