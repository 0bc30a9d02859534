/**
 * Command-line parsing for `precision-lens`. No dependency: the contract is small and a parser library would cost
 * startup time on every CI run.
 */
import { RULES, RULE_CODES, isRuleCode, type RuleCode, type Severity } from '../../../common/codes';
import type { TargetGpu } from '../../../common/settings';

export type OutputFormat = 'text' | 'json' | 'sarif';
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
}

export type ParsedCommand =
  | { kind: 'run'; options: CliOptions }
  | { kind: 'help' }
  | { kind: 'version' }
  | { kind: 'bench'; args: string[] }
  | { kind: 'fuzz'; args: string[] };

/** A mistake in how the tool was called: reported on stderr with exit code 2. */
export class UsageError extends Error {}

export const USAGE = `Usage:
  precision-lens check PATH... [--format text|json|sarif] [--fail-on error|warning|information|hint|none]
                               [--rule PLnnn=off|error|warning|information|hint ...]
                               [--te-api legacy|modern] [--target-gpu any|ampere|ada|hopper|blackwell]
                               [--max-file-size BYTES] [--fix] [--unsafe-fixes] [--diff] [--show-fixes]
                               [--isolated] [--jobs N]
  precision-lens inspect PATH... [--format json] [--jobs N]
  precision-lens --help | --version

PATH is a file or a directory; directories are searched for *.py files (skipping .git, node_modules, __pycache__
and virtual environments). Lines and columns are 1-based; columns count UTF-16 code units, as editors and LSP do.
Exit codes: 0 no findings at or above --fail-on (default: warning), 1 findings at or above it, 2 usage or I/O error.
Fixes work as in ruff: --fix applies in place only the fixes that change no behaviour (renames, removed arguments);
--unsafe-fixes (with --fix or --diff) also applies the ones that do (te.* conversions, brought in through the FP8
fallback so the file still runs without Transformer Engine; backward() moved out of autocast); --diff prints the
fixes as a unified diff instead of writing them (exit 1 if non-empty); --show-fixes lists what was applied.
PL303's migration to the TE >= 2.9 API is applied only when TE >= 2.9 is known: --te-api modern, te-api in
pyproject.toml, or PRECISION_LENS_TE_VERSION / the transformer_engine installed in $VIRTUAL_ENV.
Configuration: the [tool.precision-lens] table of the nearest pyproject.toml above the inputs (flags override it;
--isolated ignores it).
--jobs N analyses on N threads (default: the PRECISION_LENS_JOBS environment variable, else one per CPU core when the
inputs are large enough to repay starting the threads); --jobs 1 analyses in-process. The output is the same either way.`;

const SEVERITIES: readonly Severity[] = ['error', 'warning', 'information', 'hint'];
const FORMATS: readonly OutputFormat[] = ['text', 'json', 'sarif'];
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

/** Parses argv (without `node` and the script). Throws UsageError on anything it does not understand. */
export function parseArgs(argv: readonly string[]): ParsedCommand {
  if (argv.length === 0) throw new UsageError('missing command (check or inspect)');
  const [command, ...rest] = argv;
  if (command === '--help' || command === '-h' || command === 'help') return { kind: 'help' };
  if (command === '--version' || command === '-V') return { kind: 'version' };
  if (command === '__bench') return { kind: 'bench', args: rest };
  if (command === '__fuzz') return { kind: 'fuzz', args: rest };
  if (command !== 'check' && command !== 'inspect') throw new UsageError(`unknown command '${command}' (expected check or inspect)`);

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
    const eq = arg.indexOf('=');
    const flag = eq > 0 && arg.startsWith('--') ? arg.slice(0, eq) : arg;
    const inline = eq > 0 && arg.startsWith('--') ? arg.slice(eq + 1) : undefined;
    const value = (): string => {
      if (inline !== undefined) return inline;
      const next = rest[i + 1];
      if (next === undefined || (next.startsWith('--') && next.length > 2)) throw new UsageError(`${flag} needs a value`);
      i++;
      return next;
    };
    switch (flag) {
      case '--format': case '-f': options.format = oneOf(flag, value(), FORMATS); break;
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
  }
  // As in ruff: --diff shows the fixes instead of writing them, so it implies --fix.
  if (options.diff) options.fix = true;
  return { kind: 'run', options };
}
