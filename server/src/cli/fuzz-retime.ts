/**
 * The fuzzer's second opinion on time and memory: an input that took longer than the bound inside the fuzzing
 * process (which runs niced, next to other jobs, with a warm heap) is run again as users run it, as a fresh process
 * at normal priority: `check FILE --format json`, then `check COPY --fix --unsafe-fixes` on a copy. Each run's wall
 * time and peak RSS (the child's own high-water mark, written at exit by a preload) are reported, next to the
 * in-process figure. `__fuzz --retime PATH... [--repeat N]` re-times inputs saved by an earlier run (a later build, another machine),
 * keeping the fastest of N runs of each command.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { getPriority, setPriority, tmpdir } from 'node:os';
import { join } from 'node:path';

/** One fresh CLI process: wall time, peak RSS, exit code, and what went wrong with its output (if anything). */
export interface ProcessFigure { ms: number; rssMb: number; status: number | null; problem?: string; skipped?: string }

/** What the CLI prints when no input was analysed, every one skipped with its reason (exit 2 since issue 25.3). */
const ALL_SKIPPED = /no file was analysed: the input was skipped/;

/** `repeats`: how many runs of each command; the figures are the fastest run (noise on a shared machine only adds). */
export interface Retimed { check: ProcessFigure; fix: ProcessFigure; nice: number; repeats: number }

/** A preload that writes the process's peak RSS (KB, from getrusage) to $PL_FUZZ_RSS_FILE when it exits. */
const PRELOAD = "process.on('exit', () => { try { require('fs').writeFileSync(process.env.PL_FUZZ_RSS_FILE, String(process.resourceUsage().maxRSS)); } catch {} });\n";

function runCli(cli: string, args: readonly string[], work: string, timeoutMs: number): ProcessFigure {
  const preload = join(work, 'rss-preload.cjs');
  if (!existsSync(preload)) writeFileSync(preload, PRELOAD);
  const rssFile = join(work, 'rss.txt');
  rmSync(rssFile, { force: true });
  const started = performance.now();
  const r = spawnSync(process.execPath, ['--require', preload, cli, ...args], {
    cwd: work, encoding: 'utf8', maxBuffer: 256 << 20, timeout: timeoutMs, env: { ...process.env, PL_FUZZ_RSS_FILE: rssFile },
  });
  const ms = performance.now() - started;
  const rssMb = existsSync(rssFile) ? Number(readFileSync(rssFile, 'utf8')) / 1024 : 0;
  const figure: ProcessFigure = { ms, rssMb, status: r.status };
  if (r.error || r.status === null) figure.problem = `killed after ${ms.toFixed(0)} ms (${r.error?.message ?? r.signal})`;
  else if (r.status === 2 && !ALL_SKIPPED.test(r.stderr)) figure.problem = `exit 2: ${r.stderr.trim().split('\n').slice(-3).join(' | ')}`;
  // An input the CLI skips (over-indented...) exits 2 with its reason since every input was skipped: the expected answer.
  else if (r.status === 2) figure.skipped = /note: [^\n]*?: ([^\n]*not analysed)/.exec(r.stderr)?.[1] ?? 'skipped';
  if (!figure.problem && args.includes('json')) {
    try {
      JSON.parse(r.stdout);
    } catch {
      figure.problem = 'stdout is not valid JSON';
    }
  }
  return figure;
}

/**
 * Runs `fn` with this process (and so the children it starts) at normal priority when it was niced, and puts the
 * priority back afterwards. Lowering the nice value needs privileges; without them the children run at the same
 * priority, and the returned nice value says so.
 */
function atNormalPriority<T>(fn: (nice: number) => T): T {
  const before = getPriority();
  let nice = before;
  if (before > 0) {
    try {
      setPriority(0);
      nice = 0;
    } catch {
      // not permitted: re-timed at the inherited priority (reported)
    }
  }
  try {
    return fn(nice);
  } finally {
    if (nice !== before) setPriority(before);
  }
}

/** The fastest of the runs, with the highest peak RSS and the first problem any run had. */
function best(runs: readonly ProcessFigure[]): ProcessFigure {
  const fastest = runs.reduce((a, b) => (b.ms < a.ms ? b : a));
  const problem = runs.find((r) => r.problem);
  return { ...fastest, rssMb: Math.max(...runs.map((r) => r.rssMb)), ...(problem ? { problem: problem.problem, status: problem.status } : {}) };
}

/** Re-times one input file as fresh processes of `cli` (check; check --fix --unsafe-fixes on a copy), each `repeats` times. */
export function retime(cli: string, file: string, repeats = 1, timeoutMs = 120_000): Retimed {
  const work = mkdtempSync(join(tmpdir(), 'precision-lens-retime-'));
  try {
    return atNormalPriority((nice) => {
      const checks: ProcessFigure[] = [];
      const fixes: ProcessFigure[] = [];
      for (let i = 0; i < Math.max(1, repeats); i++) {
        const input = join(work, 'input.py');
        copyFileSync(file, input);
        checks.push(runCli(cli, ['check', input, '--format', 'json', '--fail-on', 'none'], work, timeoutMs));
        const copy = join(work, 'fixed.py');
        copyFileSync(file, copy);
        fixes.push(runCli(cli, ['check', copy, '--fix', '--unsafe-fixes', '--fail-on', 'none'], work, timeoutMs));
      }
      return { check: best(checks), fix: best(fixes), nice, repeats: Math.max(1, repeats) };
    });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** What a re-timed input breaks: a process over the time bound, killed, exiting 2 or printing invalid JSON. */
export function retimeProblems(r: Retimed, timeLimitMs: number, rssLimitMb: number): string[] {
  const out: string[] = [];
  for (const [name, f] of [['check', r.check], ['--fix --unsafe-fixes', r.fix]] as const) {
    if (f.problem) out.push(`${name}: ${f.problem}`);
    else if (f.ms > timeLimitMs) out.push(`${name} took ${f.ms.toFixed(0)} ms as a fresh process (limit ${timeLimitMs} ms)`);
    if (f.rssMb > rssLimitMb) out.push(`${name} peaked at ${f.rssMb.toFixed(0)} MB (limit ${rssLimitMb} MB)`);
  }
  return out;
}

export function describeRetimed(r: Retimed): string {
  const skipped = r.check.skipped ? ` (skipped: ${r.check.skipped})` : '';
  return `check ${r.check.ms.toFixed(0)} ms / ${r.check.rssMb.toFixed(0)} MB${skipped}, --fix --unsafe-fixes ${r.fix.ms.toFixed(0)} ms / ${r.fix.rssMb.toFixed(0)} MB (fresh processes at nice ${r.nice}${r.repeats > 1 ? `, best of ${r.repeats}` : ''})`;
}

/** `__fuzz --retime PATH...`: the saved inputs (.py files, or folders of them) re-timed, one line each. */
export function runRetime(paths: readonly string[], cli: string, timeLimitMs: number, rssLimitMb: number, repeats: number, write: (s: string) => void): number {
  const files: string[] = [];
  const walk = (p: string): void => {
    if (statSync(p).isDirectory()) for (const name of readdirSync(p).sort()) walk(join(p, name));
    else if (p.endsWith('.py')) files.push(p);
  };
  for (const p of paths) if (existsSync(p)) walk(p);
  // each figure is written as soon as it is measured (a run cut short keeps what it measured), the slowest last
  let over = 0;
  const rows = files.map((file) => {
    const r = retime(cli, file, repeats);
    const problems = retimeProblems(r, timeLimitMs, rssLimitMb);
    if (problems.length) over++;
    write(`${file}: ${describeRetimed(r)}${problems.length ? `: ${problems.join('; ')}` : ''}\n`);
    return { file, r };
  });
  const slowest = rows.reduce<{ file: string; r: Retimed } | undefined>((a, b) => (!a || Math.max(b.r.check.ms, b.r.fix.ms) > Math.max(a.r.check.ms, a.r.fix.ms) ? b : a), undefined);
  if (slowest) write(`slowest: ${slowest.file}: ${describeRetimed(slowest.r)}\n`);
  const peak = Math.max(0, ...rows.map(({ r }) => Math.max(r.check.rssMb, r.fix.rssMb)));
  write(`retime: ${rows.length} inputs, ${over} over the bounds (${timeLimitMs} ms, ${rssLimitMb} MB), peak RSS ${peak.toFixed(0)} MB\n`);
  return over ? 1 : 0;
}
