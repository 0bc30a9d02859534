/**
 * Command-line parsing for `precision-lens`. No dependency: the contract is small and a parser library would cost
 * startup time on every CI run.
 */
import { measurePeer } from '../../../common/peer-verdict';
import { RULES, RULE_CODES, isRuleCode, type RuleCode, type Severity } from '../../../common/codes';
import type { TargetGpu } from '../../../common/settings';

export type OutputFormat = 'text' | 'json' | 'sarif' | 'github';
export type FailOn = Severity | 'none';

export interface CliOptions {
  command: 'check' | 'inspect';
  paths: string[];
  format: OutputFormat;
  failOn: FailOn;
  rules: Partial<Record<RuleCode, Severity | 'off'>>;
  teApi?: 'legacy' | 'modern';
  targetGpu?: TargetGpu;
  maxFileSize?: number;
  /** Tokens per step for the predicted FP8 gain (micro-batch x sequence). */
  tokensPerStep?: number;
  /** Also convert layers predicted to run slower in FP8. */
  convertLosingLayers?: boolean;
  fix: boolean;
  diff: boolean;
  /** Also apply (or count as fixable) the fixes that change behaviour: conversions, through the FP8 fallback. */
  unsafeFixes: boolean;
  /** List the fixes applied. */
  showFixes: boolean;
  /** Ignore [tool.precision-lens] in pyproject.toml. */
  isolated: boolean;
  /** Threads to analyse on (--jobs); undefined: PRECISION_LENS_JOBS, else one per core when the input is large enough. */
  jobs?: number;
  /** Write `# noqa: CODES` on the line of every current finding (a baseline). */
  addNoqa?: boolean;
  /** Print a count per code instead of the findings. */
  statistics?: boolean;
  /** Exit 0 whatever was found (2 still for usage and I/O errors). */
  exitZero?: boolean;
  /** Apply exclude / extend-exclude to files named on the command line too (pre-commit passes each file). */
  forceExclude?: boolean;
}

export type ParsedCommand =
  | { kind: 'run'; options: CliOptions }
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'measure'; options: MeasureOptions }
  | { kind: 'bench'; args: string[] }
  | { kind: 'fuzz'; args: string[] };

/** `precision-lens measure`: the A/B of a project as it is against its converted copy (cli/measure.ts). */
export interface MeasureOptions {
  /** The project's folder (default: the working directory). */
  dir: string;
  /** `module:function` in the project that builds the model (bench/README.md). */
  workload: string;
  /** The interpreter that runs bench/benchmark.py (default python3). */
  python?: string;
  peer?: 'torchao' | 'none';
  /** Keep the torchao peer eager (`--peer-compile off`); by default it runs under torch.compile, its best configuration. */
  peerEager?: boolean;
  steps?: number;
  warmup?: number;
  batch?: number;
  seq?: number;
  compile?: boolean;
  device?: 'auto' | 'cuda' | 'cpu';
  jsonOut?: string;
  /** Keep the converted copy (its path is printed). */
  keep: boolean;
  /** Convert also the layers predicted to run slower in FP8 (check's --convert-losing-layers). */
  convertLosingLayers?: boolean;
  /** The loss comparison: a training recipe (warm-up, cosine, clipping), 200 steps unless --steps, the eval loss on
   *  batches never trained on, and the original run twice (the noise floor). */
  lossCheck?: boolean;
  /** With the loss check: every arm starts from the original's weights after N BF16 steps (bench --warm-start-steps). */
  warmStart?: number;
  /** With the loss check: the original once more from its weights rounded once to BF16 (bench --rounded-original). */
  roundedStart?: boolean;
  /** text: progress on stderr and a table at the end; jsonl: the benchmark's JSON lines on stdout (the sidebar). */
  format: 'text' | 'jsonl';
  /** Install SIGINT/SIGTERM handlers that stop the benchmark and remove the copy (off in tests run in-process). */
  handleSignals?: boolean;
}

/** A workload the user names: `module:function` (a dotted module path, then the function). */
export const WORKLOAD_PATTERN = /^[A-Za-z_][\w.]*:[A-Za-z_]\w*$/;

/** A mistake in how the tool was called: reported on stderr with exit code 2. */
export class UsageError extends Error {}

export const USAGE = `Usage:
  precision-lens check PATH... [--format|--output-format text|json|sarif|github] [--statistics] [--exit-zero]
                               [--fail-on error|warning|information|hint|none] [--add-noqa] [--force-exclude]
                               [--rule PLnnn=off|error|warning|information|hint ...]
                               [--te-api legacy|modern] [--target-gpu any|ampere|ada|hopper|blackwell]
                               [--max-file-size BYTES] [--fix] [--unsafe-fixes] [--diff] [--show-fixes]
                               [--tokens-per-step N] [--convert-losing-layers]
                               [--isolated] [--jobs N]
  precision-lens inspect PATH... [--format json] [--jobs N]
  precision-lens measure [DIR] --workload MODULE:FUNCTION [--python PATH] [--peer torchao|none] [--steps N]
                               [--warmup N] [--compile|--no-compile] [--batch N] [--seq N] [--device auto|cuda|cpu]
                               [--json-out FILE] [--keep] [--format text|jsonl] [--convert-losing-layers]
                               [--loss-check [--warm-start N] [--rounded-start]] [--peer-eager]
  precision-lens --help | --version

PATH is a file or a directory; directories are searched for *.py files (skipping .git, node_modules, __pycache__
and virtual environments). Lines and columns are 1-based; columns count UTF-16 code units, as editors and LSP do.
Exit codes: 0 no findings at or above --fail-on (default: warning), 1 findings at or above it, 2 usage or I/O error.
Fixes work as in ruff: --fix applies in place only the fixes that change no behaviour (renames, removed arguments);
--unsafe-fixes (with --fix or --diff) also applies the ones that do (te.* conversions, brought in through the FP8
fallback so the file still runs without Transformer Engine; backward() moved out of autocast); --diff prints the
fixes as a unified diff instead of writing them (exit 1 if non-empty); --show-fixes lists what was applied.
Conversions predicted to run slower in FP8 (measured H200 table, docs/gain.md; --tokens-per-step sets the rows, 16384
assumed) are left in BF16 unless --convert-losing-layers.
PL303's migration to the TE >= 2.9 API is applied only when TE >= 2.9 is known: --te-api modern, te-api in
pyproject.toml, or PRECISION_LENS_TE_VERSION / the transformer_engine installed in $VIRTUAL_ENV.
Configuration: the [tool.precision-lens] table of the nearest pyproject.toml above the inputs (flags override it;
--isolated ignores it); its exclude / extend-exclude globs skip files found in folders (and files named on the command
line with --force-exclude), per-file-ignores turns codes off by glob.
Suppressions: '# noqa: PL101' (or a bare '# noqa') on the finding's line, '# precision-lens: noqa[: codes]' for a file.
--add-noqa writes '# noqa: CODES' on the line of every current finding (a baseline; a second run adds nothing) and
says how many; --statistics prints a count per code; --format github prints GitHub Actions workflow annotations;
--exit-zero exits 0 whatever was found (2 still for usage and I/O errors).
measure is the A/B on your own GPU: it copies DIR's Python project (the .py files and pyproject.toml; at most
2,000 .py files and 50 MB) to a temporary folder, converts the copy as check --fix --unsafe-fixes would, then runs
the bundled bench/benchmark.py --mode ab on the interpreter given (default python3): your training step as it is
(BF16 autocast), as converted (FP8 where it runs), and torchao on the original (--peer none leaves it out), same
weights and batches. Progress goes to stderr, a table (tokens/s, ratio to the original, peak memory, final loss, FP8
forwards) to stdout. The copy is removed at the end unless --keep. Exit codes: 0 measured, 2 usage or I/O error,
else the benchmark's own status with its message (4: no CUDA device, 8: the workload could not be loaded).
The torchao peer runs under torch.compile, torchao's best configuration, even where the other arms run eager (with
--compile all arms compile); --peer-eager keeps it eager. A line after the table compares the conversion's tokens/s
with the peer's, measured in the same process.
--loss-check makes it the loss comparison: 200 steps (or --steps) of a real training recipe (AdamW at the learning
rate of the model's size, GPT-3's table: 6e-4 up to 125 M parameters, 2.5e-4 at 760 M; linear warm-up over a tenth of the steps, cosine to lr/10, gradient clipping 1.0), the eval loss of each arm on 8 batches it
never trained on, and the original run a second time, whose difference from the first is the noise floor the FP8
difference is judged against (no torchao peer unless --peer torchao). --warm-start N first trains the original N steps
in BF16 and starts every arm from those weights: the comparison then begins past the first steps' loss spikes, where
two runs from one random init part most. --rounded-start adds the original from its weights rounded once to BF16 (at
most 2^-8 a weight): how far the training moves from a change far smaller than FP8's, which the verdict weighs.
--jobs N analyses on N threads (default: the PRECISION_LENS_JOBS environment variable, else one per CPU core when the
inputs are large enough to repay starting the threads); --jobs 1 analyses in-process. The output is the same either way.`;

const SEVERITIES: readonly Severity[] = ['error', 'warning', 'information', 'hint'];
const FORMATS: readonly OutputFormat[] = ['text', 'json', 'sarif', 'github'];
const GPUS: readonly TargetGpu[] = ['any', 'ampere', 'ada', 'hopper', 'blackwell'];

function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) {
    throw new UsageError(`${flag}: expected one of ${allowed.join(', ')}, got '${value}'`);
  }
  return value as T;
}

/** `PL101=off`, `linear-to-te=hint`; several may be given at once, separated by commas. */
function parseRuleOverrides(value: string, into: CliOptions['rules']): void {
  for (const item of value.split(',').map((s) => s.trim()).filter(Boolean)) {
    const eq = item.indexOf('=');
    if (eq <= 0) throw new UsageError(`--rule: expected PLnnn=off|severity, got '${item}'`);
    const key = item.slice(0, eq).trim();
    const level = item.slice(eq + 1).trim();
    const code = isRuleCode(key.toUpperCase()) ? (key.toUpperCase() as RuleCode) : RULE_CODES.find((c) => RULES[c].rule === key);
    if (!code) throw new UsageError(`--rule: unknown rule '${key}' (known: ${RULE_CODES.join(', ')})`);
    into[code] = oneOf('--rule', level, [...SEVERITIES, 'off'] as const);
  }
}

/**
 * The option at rest[i]: its name, a value given inline (`--flag=value`), and a reader of its value (inline, else the
 * next argument, which `advance` then consumes; a missing value or another option there is a UsageError).
 */
function flagAt(rest: readonly string[], i: number, advance: () => void): { flag: string; inline?: string; value: () => string } {
  const arg = rest[i];
  const eq = arg.indexOf('=');
  const flag = eq > 0 && arg.startsWith('--') ? arg.slice(0, eq) : arg;
  const inline = eq > 0 && arg.startsWith('--') ? arg.slice(eq + 1) : undefined;
  const value = (): string => {
    if (inline !== undefined) return inline;
    const next = rest[i + 1];
    if (next === undefined || (next.startsWith('--') && next.length > 2)) throw new UsageError(`${flag} needs a value`);
    advance();
    return next;
  };
  return { flag, inline, value };
}

/** Parses argv (without `node` and the script). Throws UsageError on anything it does not understand. */
export function parseArgs(argv: readonly string[]): ParsedCommand {
  if (argv.length === 0) throw new UsageError('missing command (check or inspect)');
  const [command, ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') return { kind: 'help' };
  if (command === '--version' || command === '-V') return { kind: 'version' };
  if (command === '__bench') return { kind: 'bench', args: rest };
  if (command === '__fuzz') return { kind: 'fuzz', args: rest };
  if (command === 'measure' && (rest.includes('--help') || rest.includes('-h'))) return { kind: 'help' };
  if (command === 'measure') return { kind: 'measure', options: parseMeasureArgs(rest) };
  if (command !== 'check' && command !== 'inspect') throw new UsageError(`unknown command '${command}' (expected check, inspect or measure)`);

  const options: CliOptions = {
    command, paths: [], format: command === 'inspect' ? 'json' : 'text', failOn: 'warning', rules: {}, fix: false, diff: false,
    unsafeFixes: false, showFixes: false, isolated: false,
  };
  let onlyPaths = false;
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (onlyPaths || !arg.startsWith('-') || arg === '-') {
      options.paths.push(arg);
      continue;
    }
    if (arg === '--') { onlyPaths = true; continue; }
    if (arg === '--help' || arg === '-h') return { kind: 'help' };
    const { flag, inline, value } = flagAt(rest, i, () => i++);
    switch (flag) {
      // --output-format is ruff's name for it; --format stays.
      case '--format': case '-f': case '--output-format': options.format = oneOf(flag, value(), FORMATS); break;
      case '--add-noqa': if (inline !== undefined) throw new UsageError('--add-noqa takes no value'); options.addNoqa = true; break;
      case '--statistics': if (inline !== undefined) throw new UsageError('--statistics takes no value'); options.statistics = true; break;
      case '--exit-zero': if (inline !== undefined) throw new UsageError('--exit-zero takes no value'); options.exitZero = true; break;
      case '--force-exclude': if (inline !== undefined) throw new UsageError('--force-exclude takes no value'); options.forceExclude = true; break;
      case '--fail-on': options.failOn = oneOf(flag, value(), [...SEVERITIES, 'none'] as const); break;
      case '--rule': parseRuleOverrides(value(), options.rules); break;
      case '--te-api': options.teApi = oneOf(flag, value(), ['legacy', 'modern'] as const); break;
      case '--target-gpu': options.targetGpu = oneOf(flag, value(), GPUS); break;
      case '--max-file-size': {
        const v = value();
        const n = Number(v);
        if (!Number.isFinite(n) || n <= 0) throw new UsageError(`--max-file-size: expected a positive number of bytes, got '${v}'`);
        options.maxFileSize = n;
        break;
      }
      case '--tokens-per-step': {
        const v = value();
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw new UsageError(`--tokens-per-step: expected a whole number of tokens (micro-batch x sequence), got '${v}'`);
        options.tokensPerStep = n;
        break;
      }
      case '--convert-losing-layers': if (inline !== undefined) throw new UsageError('--convert-losing-layers takes no value'); options.convertLosingLayers = true; break;
      case '--jobs': case '-j': {
        const v = value();
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw new UsageError(`--jobs: expected a whole number of threads (1 or more), got '${v}'`);
        options.jobs = n;
        break;
      }
      case '--fix': if (inline !== undefined) throw new UsageError('--fix takes no value'); options.fix = true; break;
      case '--diff': if (inline !== undefined) throw new UsageError('--diff takes no value'); options.diff = true; break;
      case '--unsafe-fixes': if (inline !== undefined) throw new UsageError('--unsafe-fixes takes no value'); options.unsafeFixes = true; break;
      case '--show-fixes': if (inline !== undefined) throw new UsageError('--show-fixes takes no value'); options.showFixes = true; break;
      case '--isolated': if (inline !== undefined) throw new UsageError('--isolated takes no value'); options.isolated = true; break;
      default: throw new UsageError(`unknown option '${arg}'`);
    }
  }
  if (options.paths.length === 0) throw new UsageError(`${command}: missing PATH`);
  if (command === 'inspect') {
    if (options.format !== 'json') throw new UsageError(`inspect: only --format json is supported`);
    if (options.fix || options.diff || options.unsafeFixes || options.showFixes) throw new UsageError('inspect: --fix, --unsafe-fixes, --diff and --show-fixes apply to check only');
    if (options.addNoqa || options.statistics || options.exitZero) throw new UsageError('inspect: --add-noqa, --statistics and --exit-zero apply to check only');
  }
  if (options.addNoqa && (options.fix || options.diff)) throw new UsageError('--add-noqa cannot be combined with --fix or --diff (fix first, then baseline what is left)');
  // As in ruff: --diff shows the fixes instead of writing them, so it implies --fix.
  if (options.diff) options.fix = true;
  return { kind: 'run', options };
}

/** `measure`'s arguments (without the command). */
export function parseMeasureArgs(rest: readonly string[]): MeasureOptions {
  const dirs: string[] = [];
  let workload: string | undefined;
  const options: Omit<MeasureOptions, 'dir' | 'workload'> = { keep: false, format: 'text' };
  const count = (flag: string, v: string, min: number): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min) throw new UsageError(`${flag}: expected a whole number of at least ${min}, got '${v}'`);
    return n;
  };
  for (let i = 0; i < rest.length; i++) {
    const arg = rest[i];
    if (!arg.startsWith('-') || arg === '-') { dirs.push(arg); continue; }
    const { flag, inline, value } = flagAt(rest, i, () => i++);
    const noValue = () => { if (inline !== undefined) throw new UsageError(`${flag} takes no value`); };
    switch (flag) {
      case '--workload': case '-w': workload = value(); break;
      case '--python': options.python = value(); break;
      case '--peer': options.peer = oneOf(flag, value(), ['torchao', 'none'] as const); break;
      case '--steps': options.steps = count(flag, value(), 1); break;
      case '--warmup': options.warmup = count(flag, value(), 0); break;
      case '--batch': options.batch = count(flag, value(), 1); break;
      case '--seq': options.seq = count(flag, value(), 1); break;
      case '--compile': noValue(); options.compile = true; break;
      case '--no-compile': noValue(); options.compile = false; break;
      case '--device': options.device = oneOf(flag, value(), ['auto', 'cuda', 'cpu'] as const); break;
      case '--json-out': options.jsonOut = value(); break;
      case '--keep': noValue(); options.keep = true; break;
      case '--convert-losing-layers': noValue(); options.convertLosingLayers = true; break;
      case '--loss-check': noValue(); options.lossCheck = true; break;
      case '--peer-eager': noValue(); options.peerEager = true; break;
      case '--warm-start': options.warmStart = count(flag, value(), 1); break;
      case '--rounded-start': noValue(); options.roundedStart = true; break;
      case '--format': case '-f': options.format = oneOf(flag, value(), ['text', 'jsonl'] as const); break;
      default: throw new UsageError(`measure: unknown option '${arg}'`);
    }
  }
  if (dirs.length > 1) throw new UsageError(`measure: one project folder, got ${dirs.length} (${dirs.join(', ')})`);
  if (workload === undefined) throw new UsageError('measure: missing --workload MODULE:FUNCTION (the function in your project that builds the model; see bench/README.md)');
  if (!WORKLOAD_PATTERN.test(workload)) throw new UsageError(`--workload: expected module:function (e.g. mypkg.model:build), got '${workload}'`);
  if (options.peerEager && measurePeer(options) === 'none') {
    throw new UsageError(`--peer-eager: no torchao peer runs (${options.peer === 'none' ? '--peer none' : '--loss-check leaves it out unless --peer torchao'})`);
  }
  if (options.warmStart !== undefined && !options.lossCheck) throw new UsageError('--warm-start: only with --loss-check (it sets where the loss comparison starts)');
  if (options.roundedStart && !options.lossCheck) throw new UsageError('--rounded-start: only with --loss-check (it adds an arm to the loss comparison)');
  return { ...options, dir: dirs[0] ?? '.', workload };
}
