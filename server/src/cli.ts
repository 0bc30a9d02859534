/**
 * `precision-lens`: the editor's analysis as a command line tool for CI.
 *
 *   precision-lens check PATH... [--format text|json|sarif] [--fail-on SEVERITY|none] [--rule PLnnn=off|SEVERITY]
 *                                [--te-api legacy|modern] [--target-gpu any|ampere|ada|hopper|blackwell]
 *                                [--fix] [--unsafe-fixes] [--diff] [--show-fixes] [--isolated] [--jobs N]
 *   precision-lens inspect PATH... --format json
 *   precision-lens measure [DIR] --workload module:function [--python PATH] [...]   (cli/measure.ts: the A/B on a GPU)
 *
 * Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, 2 usage or I/O error (message on stderr).
 * Output positions are 1-based lines and columns; columns count UTF-16 code units (+1), like LSP and SARIF.
 */
import { version as packageVersion } from '../../package.json';
import { resolveSettings, type PrecisionLensSettings } from '../../common/settings';
import type { Severity } from '../../common/codes';
import { PythonParser } from './engine/parser';
import { analyseAll, factsOf, runFileRules, type AnalysedFile } from './cli/analyze';
import { formatGithub, formatStatistics } from './cli/format-github';
import { addNoqa, isExcluded } from './engine/suppress';
import { KeptTrees } from './cli/kept-trees';
import { parseArgs, USAGE, UsageError, type CliOptions } from './cli/args';
import { collectInputs } from './cli/files';
import { formatText } from './cli/format-text';
import { checkJson, inspectJson, type FixTitles } from './cli/format-json';
import { sarif } from './cli/format-sarif';
import { fixabilityOf, fixFiles, fixTitlesFor, writeSource, type AppliedFix } from './cli/fix';
import { teVersionFromEnvironment } from './cli/environment';
import { findProjectConfig, overlaySettings } from './engine/config';
import type { FixEnv } from './fixes';
import { statSync } from 'node:fs';
import { dirname, resolve as resolvePath, sep } from 'node:path';
import { runBench } from './cli/bench';
import { runFuzz } from './cli/fuzz';
import { runMeasure } from './cli/measure';
import { analyseParallel, canUseWorkers, startWorkerIfAny, threadCount } from './cli/parallel';

const RANK: Record<Severity, number> = { error: 4, warning: 3, information: 2, hint: 1 };

/** Settings as the editor would have them: the project's [tool.precision-lens] table, overridden by the flags given. */
export function settingsFromOptions(options: CliOptions, project: Record<string, unknown> = {}): PrecisionLensSettings {
  const flags: Record<string, unknown> = {};
  if (Object.keys(options.rules).length) flags.rules = options.rules;
  if (options.teApi) flags.te = { apiVersion: options.teApi };
  if (options.targetGpu) flags.targetGpu = options.targetGpu;
  if (options.tokensPerStep) flags.tokensPerStep = options.tokensPerStep;
  if (options.convertLosingLayers) flags.convertLosingLayers = true;
  if (options.maxFileSize !== undefined) flags.maxFileSize = options.maxFileSize;
  return resolveSettings(overlaySettings(project, flags));
}

/** The deepest folder holding every input: where the walk up to the project's pyproject.toml starts. */
function commonFolder(paths: readonly string[], cwd: string): string {
  const dirs = paths.map((p) => {
    const abs = resolvePath(cwd, p);
    try { return statSync(abs).isDirectory() ? abs : dirname(abs); } catch { return dirname(abs); }
  });
  let common = dirs[0] ?? cwd;
  for (const d of dirs.slice(1)) {
    while (common !== dirname(common) && d !== common && !d.startsWith(common.endsWith(sep) ? common : common + sep)) common = dirname(common);
  }
  return common;
}

/** `[*] 3 fixable with --fix (2 more with --fix --unsafe-fixes).`, or undefined when nothing is left to fix. */
export function fixHint(counts: { safe: number; unsafe: number }, options: CliOptions): string | undefined {
  const { safe, unsafe } = counts;
  if (options.fix) {
    const left = options.unsafeFixes ? 0 : unsafe;
    return left ? `[*] ${left} more fixable with --fix --unsafe-fixes (they change behaviour: review the diff with --diff first).` : undefined;
  }
  if (options.unsafeFixes) return safe + unsafe ? `[*] ${safe + unsafe} fixable with --fix --unsafe-fixes.` : undefined;
  if (safe && unsafe) return `[*] ${safe} fixable with --fix (${unsafe} more with --fix --unsafe-fixes).`;
  if (safe) return `[*] ${safe} fixable with --fix.`;
  return unsafe ? `[*] No fix is behaviour-preserving; ${unsafe} fixable with --fix --unsafe-fixes (see them with --diff --unsafe-fixes).` : undefined;
}

/**
 * `[*] 4 conversions left in BF16: ...` when conversion findings are predicted to lose (batch fixes leave them), or
 * undefined. Said after a check and after --fix alike.
 */
export function losingHint(files: readonly AnalysedFile[], settings: PrecisionLensSettings): string | undefined {
  if (settings.convertLosingLayers) return undefined;
  const n = files.reduce((a, f) => a + f.findings.filter((x) => x.predictedLoss).length, 0);
  return n ? `[*] ${n} conversion${n === 1 ? '' : 's'} left in BF16: FP8 is predicted to run slower there (H200 table, docs/gain.md); --convert-losing-layers converts them.` : undefined;
}

/** Per finding, whether --fix / --fix --unsafe-fixes could fix it (computed here, or by the worker that had the IR). */
function fixableCounts(files: readonly AnalysedFile[], settings: PrecisionLensSettings, env: FixEnv): { safe: number; unsafe: number } {
  const counts = { safe: 0, unsafe: 0 };
  for (const file of files) {
    file.findings.forEach((finding, i) => {
      const cls = file.fixability ? file.fixability[i] : fixabilityOf(file, finding, settings, env);
      if (cls) counts[cls]++;
    });
  }
  return counts;
}

/**
 * The counts fixHint reads: after --fix --unsafe-fixes it suggests nothing whatever is left, so no fix is planned for
 * them (a 10,000-layer class: 10,000 conversions planned for a hint that is never printed).
 */
function hintCounts(files: readonly AnalysedFile[], settings: PrecisionLensSettings, env: FixEnv, options: CliOptions): { safe: number; unsafe: number } {
  return options.fix && options.unsafeFixes ? { safe: 0, unsafe: 0 } : fixableCounts(files, settings, env);
}

/** `--show-fixes`: what was applied, per file and title. */
function showFixes(applied: readonly AppliedFix[], wrote: boolean): string {
  if (!applied.length) return `No fixes ${wrote ? 'applied' : 'available'}.\n`;
  const byFile = new Map<string, Map<string, number>>();
  for (const a of applied) {
    const titles = byFile.get(a.file) ?? new Map<string, number>();
    const key = `${a.codes.join(', ') || 'source'} ${a.title}`;
    titles.set(key, (titles.get(key) ?? 0) + 1);
    byFile.set(a.file, titles);
  }
  const lines = [`${wrote ? 'Fixed' : 'Would fix'} ${applied.length} problem${applied.length === 1 ? '' : 's'}:`];
  for (const [file, titles] of byFile) {
    lines.push(`- ${file}:`);
    for (const [title, n] of titles) lines.push(`    ${n} × ${title}`);
  }
  return `${lines.join('\n')}\n`;
}

function failing(files: readonly AnalysedFile[], failOn: CliOptions['failOn']): boolean {
  if (failOn === 'none') return false;
  const threshold = RANK[failOn];
  return files.some((f) => f.findings.some((d) => RANK[d.severity] >= threshold));
}

interface Io {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  cwd: string;
}

async function run(options: CliOptions, io: Io): Promise<number> {
  const project = options.isolated ? undefined : findProjectConfig(commonFolder(options.paths, io.cwd));
  for (const p of project?.problems ?? []) io.stderr(`precision-lens: warning: ${p}\n`);
  const settings = settingsFromOptions(options, project?.settings);
  const env: FixEnv = { teVersion: teVersionFromEnvironment() };
  const { files: inputs, errors, warnings } = collectInputs(options.paths, io.cwd, {
    excluded: (absolute) => isExcluded(settings, absolute), forceExclude: options.forceExclude, defaultSkips: !settings.project?.exclude,
  });
  for (const w of warnings ?? []) io.stderr(`precision-lens: warning: ${w}\n`);
  for (const e of errors) io.stderr(`precision-lens: ${e}\n`);
  if (errors.length && inputs.length === 0) return 2;

  // --fix and --add-noqa rewrite the files: they need each file's text and encoding, which only an in-process analysis
  // keeps (a worker sends back findings only: --add-noqa on its files added nothing, and which files went to a worker
  // varied from run to run).
  const threads = options.fix || options.addNoqa || !canUseWorkers() ? 1 : threadCount(options.jobs, inputs);
  const parser = await PythonParser.create();
  try {
    let files = threads > 1
      ? await analyseParallel(parser, inputs, settings, {
        threads, wantIR: options.command === 'inspect', wantTitles: options.command === 'check' && options.format !== 'text',
        wantFixability: options.command === 'check' && !options.fix, env,
      })
      : undefined;
    // --fix parses each fixed file again after its rounds: from the tree of its last parse, with the round's edits.
    const trees = options.fix ? new KeptTrees() : undefined;
    files ??= (await analyseAll(parser, inputs, settings, {}, options.command !== 'inspect', trees)).files;
    let fixOutcome: Awaited<ReturnType<typeof fixFiles>> | undefined;
    if (options.fix) {
      // The project's folder: its fallback module lives there (created once), as in the editor's workspace folder.
      const projectRoot = project ? dirname(project.path) : commonFolder(options.paths, io.cwd);
      fixOutcome = await fixFiles(parser, files, settings, { write: !options.diff, unsafe: options.unsafeFixes, env, projectRoot, trees });
      files = fixOutcome.files;
    }
    let ioError = errors.length > 0;
    for (const f of files) {
      if (f.skipped) io.stderr(`precision-lens: note: ${f.input.display}: ${f.skipped}\n`);
      if (f.incomplete) io.stderr(`precision-lens: note: ${f.input.display}: ${f.incomplete}\n`);
      if (f.error) { io.stderr(`precision-lens: ${f.input.display}: ${f.error}\n`); ioError = true; }
    }
    // Nothing analysed is not a pass: a CI job whose every input was skipped (too large, binary...) checked nothing.
    if (files.length && files.every((f) => f.skipped || f.error) && !files.some((f) => f.error)) {
      io.stderr(`precision-lens: no file was analysed: ${files.length === 1 ? 'the input was' : `all ${files.length} inputs were`} skipped (see the note${files.length === 1 ? '' : 's'} above)\n`);
      ioError = true;
    }
    if (fixOutcome) {
      for (const e of fixOutcome.errors) { io.stderr(`precision-lens: ${e}\n`); ioError = true; }
      if (options.diff) {
        io.stdout(fixOutcome.diff);
        if (options.showFixes) io.stderr(showFixes(fixOutcome.applied, false));
        const hint = fixHint(hintCounts(files, settings, env, options), options);
        if (hint) io.stderr(`${hint}\n`);
        if (ioError) return 2;
        return fixOutcome.changedFiles > 0 ? 1 : 0;
      }
      io.stderr(`precision-lens: applied ${fixOutcome.appliedFixes} fix${fixOutcome.appliedFixes === 1 ? '' : 'es'} in ${fixOutcome.changedFiles} file${fixOutcome.changedFiles === 1 ? '' : 's'}\n`);
      const losing = losingHint(files, settings);
      if (losing) io.stderr(`${losing}\n`);
      if (options.showFixes) (options.format === 'text' ? io.stdout : io.stderr)(showFixes(fixOutcome.applied, true));
    }

    if (options.command === 'inspect') {
      io.stdout(JSON.stringify(inspectJson(files, settings, factsOf(files)), null, 2) + '\n');
      return ioError ? 2 : 0;
    }
    if (options.addNoqa) {
      const { added, files: changed, errors: noqaErrors } = writeNoqa(files);
      for (const e of noqaErrors) { io.stderr(`precision-lens: ${e}\n`); ioError = true; }
      io.stderr(`precision-lens: added ${added} noqa directive${added === 1 ? '' : 's'} in ${changed} file${changed === 1 ? '' : 's'}\n`);
      if (!ioError && added) {
        // What is reported now is what is left: the findings no comment could silence.
        const workspace = factsOf(files);
        for (const f of files) if (f.ir) runFileRules(f, settings, workspace);
      }
    }
    if (options.statistics) {
      const fixable = (file: AnalysedFile, i: number): boolean => {
        const cls = file.fixability ? file.fixability[i] : fixabilityOf(file, file.findings[i], settings, env);
        return cls === 'safe' || (cls === 'unsafe' && options.unsafeFixes);
      };
      io.stdout(formatStatistics(files, fixable, options.format === 'json'));
      if (ioError) return 2;
      return options.exitZero ? 0 : failing(files, options.failOn) ? 1 : 0;
    }
    const titles: FixTitles = (file, finding) => fixTitlesFor(file, finding, settings, env);
    if (options.format === 'github') io.stdout(formatGithub(files));
    else if (options.format === 'json') io.stdout(JSON.stringify(checkJson(files, titles, fixableCounts(files, settings, env)), null, 2) + '\n');
    else if (options.format === 'sarif') io.stdout(JSON.stringify(sarif(files, { version: packageVersion, cwd: io.cwd, fixTitles: titles }), null, 2) + '\n');
    else {
      io.stdout(formatText(files));
      const hint = fixHint(hintCounts(files, settings, env, options), options);
      if (hint) io.stdout(`${hint}\n`);
      const losing = options.fix ? undefined : losingHint(files, settings);
      if (losing) io.stdout(`${losing}\n`);
    }
    if (ioError) return 2;
    return !options.exitZero && failing(files, options.failOn) ? 1 : 0;
  } finally {
    parser.dispose();
  }
}

/**
 * `--add-noqa`: `# noqa: CODES` on the line of each finding of each file, written in the file's own encoding. A
 * second run adds nothing (the findings are suppressed by then).
 */
function writeNoqa(files: readonly AnalysedFile[]): { added: number; files: number; errors: string[] } {
  let added = 0;
  let changed = 0;
  const errors: string[] = [];
  for (const f of files) {
    if (!f.findings.length || f.skipped || f.error) continue;
    const result = addNoqa(f.text, f.findings);
    if (!result.added) continue;
    try {
      writeSource(f, result.text);
    } catch (e) {
      errors.push(`${f.input.display}: could not write: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      continue;
    }
    f.text = result.text;
    added += result.added;
    changed++;
  }
  return { added, files: changed, errors };
}

/** Runs the command line; resolves to the exit code. */
export async function main(argv: readonly string[], io: Io = {
  stdout: (s) => process.stdout.write(s),
  stderr: (s) => process.stderr.write(s),
  cwd: process.cwd(),
}): Promise<number> {
  try {
    const parsed = parseArgs(argv);
    switch (parsed.kind) {
      case 'help': io.stdout(USAGE + '\n'); return 0;
      case 'version': io.stdout(packageVersion + '\n'); return 0;
      case 'bench': return await runBench(parsed.args, io.stdout);
      case 'fuzz': return await runFuzz(parsed.args, io.stdout);
      case 'run': return await run(parsed.options, io);
      // The conversion of the copy is `check --fix --unsafe-fixes`, run through this same main.
      case 'measure': return await runMeasure(parsed.options, io, (argv, checkIo) => main(argv, checkIo));
    }
  } catch (e) {
    if (e instanceof UsageError) {
      io.stderr(`precision-lens: ${e.message}\n${USAGE}\n`);
      return 2;
    }
    io.stderr(`precision-lens: internal error: ${(e as Error).stack ?? String(e)}\n`);
    return 2;
  }
}

/** The process entry (node out/cli.js, bin/precision-lens.js): runs main and sets the exit code. */
export function runFromProcess(argv: readonly string[] = process.argv.slice(2)): void {
  // `precision-lens check . | head`: a closed pipe ends the run quietly instead of with a stack trace.
  process.stdout.on('error', (e: NodeJS.ErrnoException) => {
    if (e.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw e;
  });
  // exitCode, not exit(): a large report piped to another process must be flushed first.
  void main(argv).then((code) => { process.exitCode = code; });
}

// The same bundle runs the worker threads of a parallel check (cli/parallel.ts); workerData tells them apart.
if (!startWorkerIfAny() && require.main === module) runFromProcess();
