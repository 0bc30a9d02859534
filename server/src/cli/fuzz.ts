/**
 * `precision-lens __fuzz [DIR...] --seed N --count M`: mutants of the Python files under DIR (the test fixtures; a
 * local corpus when one is given), each run through the CLI's own check path (read, parse, IR, rules, JSON with fix
 * titles) and, for some, --fix. Fails when an input gives an internal error, takes longer than --time-limit-ms, grows
 * the process beyond --rss-limit-mb, yields output that is not valid JSON, or when --fix turns a file that compiled
 * (python3 compile()) into one that does not. Failing inputs are written to --out (to become fixtures). --small caps
 * the costly mutations (layers, line length, nesting) so that the CI run (test/unit/fuzz.test.ts) stays short.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveSettings, type PrecisionLensSettings } from '../../../common/settings';
import { PythonParser } from '../parser';
import { analyseAll } from './analyze';
import { UsageError } from './args';
import { fixFiles, fixTitlesFor } from './fix';
import { checkJson } from './format-json';
import { mutate, prng, SCALES, useScale } from './mutate';

interface FuzzOptions {
  dirs: string[];
  seed: number;
  count: number;
  timeLimitMs: number;
  rssLimitMb: number;
  fixEvery: number;
  small: boolean;
  out?: string;
}

function parseFuzzArgs(args: readonly string[]): FuzzOptions {
  const o: FuzzOptions = { dirs: [], seed: 1, count: 1000, timeLimitMs: 2000, rssLimitMb: 1024, fixEvery: 3, small: false };
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
    else if (a === '--small') o.small = true;
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

/** One input through the check path (and --fix); what went wrong, if anything. */
async function checkOne(parser: PythonParser, path: string, settings: PrecisionLensSettings, withFix: 'safe' | 'unsafe' | false, o: FuzzOptions): Promise<{ problem?: string; fixed?: string; ms?: number }> {
  const started = performance.now();
  const input = { absolute: path, display: path };
  const { files } = await analyseAll(parser, [input], settings, {}, true);
  const f = files[0];
  if (f.error) return { problem: `internal error: ${f.error}` };
  if (f.ir?.analysisError) return { problem: `internal error: ${f.ir.analysisError}` };
  const json = JSON.stringify(checkJson(files, (file, finding) => fixTitlesFor(file, finding, settings)));
  JSON.parse(json);
  let fixed: string | undefined;
  if (withFix && f.findings.length) {
    // --fix, and every other time --fix --unsafe-fixes (the conversions, through an inline fallback block), into memory:
    // the fixed text is compiled below, so no diff is made.
    const outcome = await fixFiles(parser, files, settings, { write: false, diff: false, unsafe: withFix === 'unsafe', env: {} });
    if (outcome.errors.length) return { problem: `--fix failed: ${outcome.errors.join('; ')}` };
    if (outcome.changedFiles) fixed = files[0].text;
  }
  const ms = performance.now() - started;
  if (ms > o.timeLimitMs) return { problem: `took ${ms.toFixed(0)} ms (limit ${o.timeLimitMs} ms)`, ms };
  const rss = process.memoryUsage().rss / 1048576;
  if (rss > o.rssLimitMb) return { problem: `process at ${rss.toFixed(0)} MB (limit ${o.rssLimitMb} MB)`, ms };
  return { fixed, ms };
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

export async function runFuzz(args: readonly string[], write: (s: string) => void): Promise<number> {
  const o = parseFuzzArgs(args);
  useScale(o.small ? SCALES.small : SCALES.large);
  const seeds = seedFiles(o.dirs.length ? o.dirs : ['test/fixtures']);
  if (!seeds.length) throw new UsageError('__fuzz: no .py files under the given directories');
  const settings = resolveSettings({});
  const work = mkdtempSync(join(tmpdir(), 'precision-lens-fuzz-'));
  const parser = await PythonParser.create();
  const random = prng(o.seed);
  const failures: Failure[] = [];
  const pairs: [string, string][] = [];
  const inputs = new Map<string, { index: number; seed: string; applied: string[]; text: string }>();
  const started = performance.now();
  let peakRss = 0;
  let slowest = { ms: 0, index: -1 };
  try {
    for (let i = 0; i < o.count; i++) {
      const seed = seeds[Math.floor(random() * seeds.length)];
      const { text, applied } = mutate(seed.text, random);
      const path = join(work, `in-${i}.py`);
      writeFileSync(path, text);
      let result: { problem?: string; fixed?: string; ms?: number };
      try {
        result = await checkOne(parser, path, settings, i % o.fixEvery !== 0 ? false : i % (2 * o.fixEvery) === 0 ? 'unsafe' : 'safe', o);
      } catch (e) {
        result = { problem: `crash: ${(e as Error).stack ?? String(e)}` };
      }
      peakRss = Math.max(peakRss, process.memoryUsage().rss);
      if ((result.ms ?? 0) > slowest.ms) slowest = { ms: result.ms!, index: i };
      if (result.fixed !== undefined) {
        writeFileSync(`${path}.fixed.py`, result.fixed);
        pairs.push([path, `${path}.fixed.py`]);
        inputs.set(path, { index: i, seed: seed.path, applied, text });
      }
      if (result.problem) failures.push({ index: i, seed: seed.path, applied, problem: result.problem, saved: save(o.out, i, text) });
    }
    const broken = brokenByFix(pairs);
    if (broken === undefined) write('note: python3 not available: --fix outputs were not compiled\n');
    for (const b of broken ?? []) {
      // keep what reproduces it: the input (saved to --out like any other failure), its seed file and its mutations
      const input = inputs.get(b.slice(0, b.indexOf(': ')));
      failures.push({
        index: input?.index ?? -1, seed: input?.seed ?? '', applied: [...(input?.applied ?? []), '--fix'],
        problem: `--fix broke compilation: ${b}`, saved: input ? save(o.out, input.index, input.text) : undefined,
      });
    }
  } finally {
    parser.dispose();
    rmSync(work, { recursive: true, force: true });
  }
  const seconds = (performance.now() - started) / 1000;
  write(`fuzz: seed ${o.seed}, ${o.count} inputs from ${seeds.length} files in ${seconds.toFixed(1)} s, ${pairs.length} fixed and compiled, slowest ${slowest.ms.toFixed(0)} ms (#${slowest.index}), peak RSS ${(peakRss / 1048576).toFixed(0)} MB, ${failures.length} failure${failures.length === 1 ? '' : 's'}\n`);
  for (const f of failures) write(`FAIL #${f.index} (${f.applied.join(' + ')} of ${f.seed})${f.saved ? ` saved as ${f.saved}` : ''}: ${f.problem}\n`);
  return failures.length ? 1 : 0;
}

function save(dir: string | undefined, index: number, text: string): string | undefined {
  if (!dir) return undefined;
  mkdirSync(dir, { recursive: true });
  const p = join(dir, `fuzz-${index}.py`);
  writeFileSync(p, text);
  return p;
}
