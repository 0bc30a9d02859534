/**
 * `precision-lens`: the editor's analysis as a command line tool for CI.
 *
 *   precision-lens check PATH... [--format text|json|sarif] [--fail-on SEVERITY|none] [--rule PLnnn=off|SEVERITY]
 *                                [--te-api legacy|modern] [--target-gpu any|ada|hopper|blackwell] [--fix [--diff]] [--jobs N]
 *   precision-lens inspect PATH... --format json
 *
 * Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it, 2 usage or I/O error (message on stderr).
 * Output positions are 1-based lines and columns; columns count UTF-16 code units (+1), like LSP and SARIF.
 */
import { version as packageVersion } from '../../package.json';
import { resolveSettings, type PrecisionLensSettings } from '../../common/settings';
import type { Severity } from '../../common/codes';
import { createPythonParser } from './parser';
import { analyseAll, type AnalysedFile } from './cli/analyze';
import { parseArgs, USAGE, UsageError, type CliOptions } from './cli/args';
import { collectInputs } from './cli/files';
import { formatText } from './cli/format-text';
import { checkJson, inspectJson, type FixTitles } from './cli/format-json';
import { sarif } from './cli/format-sarif';
import { fixFiles, fixTitlesFor } from './cli/fix';
import { runBench } from './cli/bench';
import { analyseParallel, canUseWorkers, startWorkerIfAny, threadCount } from './cli/parallel';

const RANK: Record<Severity, number> = { error: 4, warning: 3, information: 2, hint: 1 };

/** Settings as the editor would have them, built from flags. */
export function settingsFromOptions(options: CliOptions): PrecisionLensSettings {
  return resolveSettings({
    rules: options.rules,
    te: { apiVersion: options.teApi ?? 'auto' },
    targetGpu: options.targetGpu ?? 'any',
    maxFileSize: options.maxFileSize,
  });
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
  const settings = settingsFromOptions(options);
  const { files: inputs, errors } = collectInputs(options.paths, io.cwd);
  for (const e of errors) io.stderr(`precision-lens: ${e}\n`);
  if (errors.length && inputs.length === 0) return 2;

  const threads = options.fix || !canUseWorkers() ? 1 : threadCount(options.jobs, inputs);
  const parser = await createPythonParser();
  try {
    let files = threads > 1
      ? await analyseParallel(parser, inputs, settings, {
        threads, wantIR: options.command === 'inspect', wantTitles: options.command === 'check' && options.format !== 'text',
      })
      : undefined;
    files ??= analyseAll(parser, inputs, settings, {}, options.command !== 'inspect').files;
    let fixOutcome: Awaited<ReturnType<typeof fixFiles>> | undefined;
    if (options.fix) {
      fixOutcome = fixFiles(parser, files, settings, { write: !options.diff });
      files = fixOutcome.files;
    }
    let ioError = errors.length > 0;
    for (const f of files) {
      if (f.skipped) io.stderr(`precision-lens: note: ${f.input.display}: ${f.skipped}\n`);
      if (f.error) { io.stderr(`precision-lens: ${f.input.display}: ${f.error}\n`); ioError = true; }
    }
    if (fixOutcome) {
      for (const e of fixOutcome.errors) { io.stderr(`precision-lens: ${e}\n`); ioError = true; }
      if (options.diff) {
        io.stdout(fixOutcome.diff);
        if (ioError) return 2;
        return fixOutcome.changedFiles > 0 ? 1 : 0;
      }
      io.stderr(`precision-lens: applied ${fixOutcome.appliedFixes} fix${fixOutcome.appliedFixes === 1 ? '' : 'es'} in ${fixOutcome.changedFiles} file${fixOutcome.changedFiles === 1 ? '' : 's'}\n`);
    }

    if (options.command === 'inspect') {
      io.stdout(JSON.stringify(inspectJson(files), null, 2) + '\n');
      return ioError ? 2 : 0;
    }
    const titles: FixTitles = (file, finding) => fixTitlesFor(file, finding, settings);
    if (options.format === 'json') io.stdout(JSON.stringify(checkJson(files, titles), null, 2) + '\n');
    else if (options.format === 'sarif') io.stdout(JSON.stringify(sarif(files, { version: packageVersion, cwd: io.cwd, fixTitles: titles }), null, 2) + '\n');
    else io.stdout(formatText(files));
    if (ioError) return 2;
    return failing(files, options.failOn) ? 1 : 0;
  } finally {
    parser.delete();
  }
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
      case 'run': return await run(parsed.options, io);
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
