/**
 * Shared by the cli-*.test.ts files: runs the BUILT command line (out/cli.js, what `npx precision-lens` runs) as a
 * real process on a scratch copy of test/fixtures/cli, so fixes may write files.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const ROOT = join(__dirname, '..', '..');
export const CLI = join(ROOT, 'out', 'cli.js');
export const FIXTURES = join(ROOT, 'test', 'fixtures', 'cli');

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

/** Builds out/ when the bundle is missing or older than the sources it is made from. */
export function ensureBuilt(): void {
  const sources = Math.max(newestMtime(join(ROOT, 'server', 'src')), newestMtime(join(ROOT, 'common')));
  if (existsSync(CLI) && statSync(CLI).mtimeMs >= sources) return;
  const build = spawnSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { cwd: ROOT, encoding: 'utf8', timeout: 180_000 });
  if (build.status !== 0) throw new Error(`npm run build failed:\n${build.stdout}\n${build.stderr}`);
}

export interface CliRun {
  status: number | null;
  stdout: string;
  stderr: string;
}

export function runCli(args: readonly string[], cwd: string): CliRun {
  const r = spawnSync(process.execPath, [CLI, ...args], { cwd, encoding: 'utf8', timeout: 60_000, maxBuffer: 64 << 20 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A scratch copy of the CLI fixtures; remove it with `dispose`. */
export function scratchCopy(): { dir: string; dispose: () => void } {
  const dir = mkdtempSync(join(tmpdir(), 'precision-lens-cli-'));
  cpSync(FIXTURES, dir, { recursive: true });
  return { dir, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

export interface CheckJson {
  version: number;
  diagnostics: {
    file: string; line: number; column: number; endLine: number; endColumn: number;
    code: string; rule: string; severity: string; message: string; fixes: string[];
    explanation: string; related: Array<{ line: number; column: number; endLine: number; endColumn: number; message: string }>;
  }[];
}

export function parseJson<T>(run: CliRun): T {
  try {
    return JSON.parse(run.stdout) as T;
  } catch {
    throw new Error(`stdout is not JSON (exit ${run.status}):\n${run.stdout.slice(0, 2000)}\nstderr:\n${run.stderr.slice(0, 2000)}`);
  }
}
