/**
 * Input discovery: explicit files as given, directories searched recursively for *.py. Vendored and generated trees
 * (.git, node_modules, __pycache__, virtual environments) are skipped; symlinks are followed but every directory and
 * file is visited once (by real path), so a symlink loop ends.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Directory names never searched. */
export const SKIPPED_DIRS: ReadonlySet<string> = new Set([
  '.git', '.hg', '.svn', 'node_modules', '__pycache__', '.venv', 'venv', 'site-packages', '.tox', '.nox', '.mypy_cache', '.ruff_cache',
]);

export interface InputFile {
  /** Absolute path as found (not resolved through symlinks: fixes write where the user pointed). */
  absolute: string;
  /** Path relative to the working directory with '/' separators: what the output shows. */
  display: string;
}

export interface CollectResult {
  files: InputFile[];
  /** Paths that do not exist or cannot be read, or match no .py file: exit code 2. */
  errors: string[];
  /** An empty folder: said, not an error. */
  warnings?: string[];
}

/** `[tool.precision-lens]` exclude / extend-exclude, as the CLI applies them. */
export interface CollectOptions {
  /** Whether a file or folder found by the walk is excluded (globs; suppress.isExcluded). */
  excluded?: (absolute: string) => boolean;
  /** Files named on the command line are excluded too (pre-commit names each file). */
  forceExclude?: boolean;
  /** Skip SKIPPED_DIRS (false when the project's `exclude` replaces them, as ruff's does). */
  defaultSkips?: boolean;
}

/** Relative to `cwd` with forward slashes; an absolute path when the file lies outside `cwd`. */
export function displayPath(absolute: string, cwd: string): string {
  const rel = path.relative(cwd, absolute);
  if (rel === '' ) return path.basename(absolute);
  if (rel.startsWith('..') || path.isAbsolute(rel)) return absolute.split(path.sep).join('/');
  return rel.split(path.sep).join('/');
}

function isVirtualEnv(dir: string): boolean {
  // A venv under any name is recognised by its marker file.
  return fs.existsSync(path.join(dir, 'pyvenv.cfg'));
}

/** Finds the files to analyse, sorted by displayed path. */
export function collectInputs(paths: readonly string[], cwd: string = process.cwd(), options: CollectOptions = {}): CollectResult {
  const files: InputFile[] = [];
  const errors: string[] = [];
  const warnings: string[] = [];
  const excluded = options.excluded ?? (() => false);
  const defaultSkips = options.defaultSkips ?? true;
  /** .py files the walk of the current argument found (excluded ones too) and entries it saw. */
  let found = 0;
  let entriesSeen = 0;
  const seenFiles = new Set<string>();
  const seenDirs = new Set<string>();

  const addFile = (absolute: string): void => {
    let real: string;
    try { real = fs.realpathSync(absolute); } catch { real = absolute; }
    if (seenFiles.has(real)) return;
    seenFiles.add(real);
    files.push({ absolute, display: displayPath(absolute, cwd) });
  };

  const walk = (dir: string): void => {
    let real: string;
    try { real = fs.realpathSync(dir); } catch (e) { errors.push(`${displayPath(dir, cwd)}: ${(e as Error).message}`); return; }
    if (seenDirs.has(real)) return;
    seenDirs.add(real);
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch (e) {
      errors.push(`${displayPath(dir, cwd)}: cannot read directory (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
      return;
    }
    entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      let isDir = entry.isDirectory();
      let isFile = entry.isFile();
      if (entry.isSymbolicLink()) {
        try {
          const st = fs.statSync(full);
          isDir = st.isDirectory();
          isFile = st.isFile();
        } catch {
          continue; // a dangling link is not an input
        }
      }
      entriesSeen++;
      if (isDir) {
        if ((defaultSkips && SKIPPED_DIRS.has(entry.name)) || isVirtualEnv(full) || excluded(full)) continue;
        walk(full);
      } else if (isFile && entry.name.endsWith('.py')) {
        found++;
        if (!excluded(full)) addFile(full);
      }
    }
  };

  for (const p of paths) {
    const absolute = path.resolve(cwd, p);
    let st: fs.Stats;
    try {
      st = fs.statSync(absolute);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      errors.push(`${p}: ${code === 'ENOENT' ? 'no such file or directory' : code ?? (e as Error).message}`);
      continue;
    }
    if (st.isDirectory()) {
      found = 0;
      entriesSeen = 0;
      walk(absolute);
      // Said, not silent: a CI path that points at the wrong folder would otherwise pass with "0 files analysed".
      if (entriesSeen === 0) warnings.push(`${p}: empty folder, nothing to check`);
      else if (found === 0) errors.push(`${p}: no .py file in this folder`);
    } else if (!st.isFile()) {
      // A FIFO would block the run for good, /dev/zero would fill the memory: only regular files are read.
      errors.push(`${p}: not a regular file (${fileKind(st)}): not read`);
    } else if (!(options.forceExclude && excluded(absolute))) addFile(absolute); // an explicit file is analysed whatever its extension
  }
  // One order whatever the order of the arguments: reports and SARIF diffs stay stable between CI runs.
  files.sort((a, b) => (a.display < b.display ? -1 : a.display > b.display ? 1 : 0));
  return { files, errors, warnings };
}

/** What a file system entry is, for a message. */
export function fileKind(st: fs.Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  if (st.isDirectory()) return 'a directory';
  return st.isFile() ? 'a regular file' : 'an unknown kind of file';
}

/**
 * A regular file's bytes, never more than `limit` of them: the size stat gives is not trusted (a file that grows, a
 * /proc file reporting 0), and anything but a regular file is refused, checked on the opened descriptor (opened
 * without blocking: opening a FIFO would wait for a writer).
 */
export function readAtMost(absolute: string, limit: number): { bytes: Buffer } | { over: number; exact: boolean } | { refused: string } {
  const fd = fs.openSync(absolute, fs.constants.O_RDONLY | (fs.constants.O_NONBLOCK ?? 0));
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) return { refused: `not a regular file (${fileKind(st)}): not read` };
    if (st.size > limit) return { over: st.size, exact: true };
    const buffer = Buffer.allocUnsafe(Math.min(limit + 1, Math.max(st.size + 1, 65536)));
    let total = 0;
    let chunk = buffer;
    for (;;) {
      if (total === chunk.length) {
        if (chunk.length > limit) return { over: total, exact: false };
        const bigger = Buffer.allocUnsafe(Math.min(limit + 1, chunk.length * 2));
        chunk.copy(bigger, 0, 0, total);
        chunk = bigger;
      }
      const n = fs.readSync(fd, chunk, total, chunk.length - total, null);
      if (n === 0) break;
      total += n;
    }
    return total > limit ? { over: total, exact: false } : { bytes: chunk.subarray(0, total) };
  } finally {
    fs.closeSync(fd);
  }
}
