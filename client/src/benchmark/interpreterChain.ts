/**
 * Which Python runs the benchmark, in order: the `precisionLens.pythonPath` setting, the Python Environments
 * extension's selection, the Python extension's active environment, then `python3` (`python` on Windows).
 * Pure: the lookups are injected, so the order is unit-tested without VS Code.
 */
import * as os from 'node:os';
import type { InterpreterCandidate, InterpreterChoice } from '../../../common/webview-messages';

export interface InterpreterLookups {
  /** The raw setting value (may be empty, may contain `${workspaceFolder}` or `~`). */
  setting(): string | undefined;
  /** Python Environments extension (ms-python.vscode-python-envs): the environment's executable. */
  pythonEnvs(): Promise<string | undefined>;
  /** Python extension (ms-python.python): the active environment's executable. */
  pythonExtension(): Promise<string | undefined>;
  platform?: NodeJS.Platform;
  workspaceFolder?: string;
  /** Logs why a source was skipped (the extension passes its LogOutputChannel). */
  log?(message: string): void;
}

/** Expands `~` and `${workspaceFolder}` / `${userHome}` in a configured path. */
export function expandPathVariables(value: string, workspaceFolder?: string): string {
  let out = value.trim();
  if (out === '~' || out.startsWith('~/') || out.startsWith('~\\')) out = os.homedir() + out.slice(1);
  out = out.replace(/\$\{userHome\}/g, os.homedir());
  if (workspaceFolder) out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
  return out;
}

/** The default interpreter command when nothing else is configured. */
export function defaultPython(platform: NodeJS.Platform = process.platform): string {
  return platform === 'win32' ? 'python' : 'python3';
}

async function attempt(lookup: () => Promise<string | undefined>, name: string, log?: (m: string) => void): Promise<string | undefined> {
  try {
    const value = await lookup();
    if (typeof value === 'string' && value.trim() !== '') return value.trim();
    log?.(`interpreter: ${name} gave no interpreter`);
  } catch (error) {
    log?.(`interpreter: ${name} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  return undefined;
}

/** Walks the sources in order and says which one was used. */
export async function chooseInterpreter(lookups: InterpreterLookups): Promise<InterpreterChoice> {
  const setting = lookups.setting();
  if (typeof setting === 'string' && setting.trim() !== '') {
    return { path: expandPathVariables(setting, lookups.workspaceFolder), source: 'setting', detail: 'from the precisionLens.pythonPath setting' };
  }
  const envs = await attempt(lookups.pythonEnvs, 'Python Environments extension', lookups.log);
  if (envs) return { path: envs, source: 'python-envs', detail: 'selected in the Python Environments extension' };
  const python = await attempt(lookups.pythonExtension, 'Python extension', lookups.log);
  if (python) return { path: python, source: 'python-extension', detail: 'the active environment of the Python extension' };
  const command = defaultPython(lookups.platform);
  return {
    path: command,
    source: 'default',
    detail: `"${command}" on PATH: no precisionLens.pythonPath setting and no interpreter selected in the Python extensions`,
  };
}

/** Names of Python executables looked for on PATH: python3, python, python3.N. */
const PYTHON_NAME = /^python(3(\.\d+)?)?(\.exe)?$/;

export interface PathScan {
  /** The PATH value (`process.env.PATH`). */
  path: string | undefined;
  platform?: NodeJS.Platform;
  /** Names in a folder; throws or returns [] for a missing one. */
  list(dir: string): string[];
  /** The real path of an executable file, or undefined when `file` is not one. */
  resolve(file: string): string | undefined;
}

/**
 * Python executables on PATH, in PATH order, one per real file (python3 and python3.11 linked to one binary count
 * once, under the first name met).
 */
export function pathInterpreters(scan: PathScan): InterpreterCandidate[] {
  const sep = (scan.platform ?? process.platform) === 'win32' ? ';' : ':';
  const seen = new Set<string>();
  const out: InterpreterCandidate[] = [];
  for (const dir of (scan.path ?? '').split(sep).filter((d) => d.trim() !== '')) {
    let names: string[];
    try {
      names = scan.list(dir);
    } catch {
      continue;
    }
    // python3 before python3.11 before python: the usual names first.
    const rank = (n: string) => (n.startsWith('python3.') ? 1 : n.startsWith('python3') ? 0 : 2);
    for (const name of names.filter((n) => PYTHON_NAME.test(n)).sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))) {
      const file = `${dir.replace(/[\\/]+$/, '')}${sep === ';' ? '\\' : '/'}${name}`;
      const real = scan.resolve(file);
      if (!real || seen.has(real)) continue;
      seen.add(real);
      out.push({ path: file, source: 'path' });
    }
  }
  return out;
}

/** One list from several sources, in order, each path once (the first source that found it stands; a later one may add its name). */
export function mergeCandidates(...groups: ReadonlyArray<readonly InterpreterCandidate[]>): InterpreterCandidate[] {
  const out: InterpreterCandidate[] = [];
  for (const group of groups) {
    for (const c of group) {
      const known = out.findIndex((o) => o.path === c.path);
      if (known < 0 && c.path) out.push(c);
      else if (known >= 0 && !out[known].name && c.name) out[known] = { ...out[known], name: c.name };
    }
  }
  return out;
}

/** How the picker names a source. */
export function candidateSourceLabel(source: InterpreterCandidate['source']): string {
  switch (source) {
    case 'setting':
      return 'precisionLens.pythonPath setting';
    case 'python-envs':
      return 'Python Environments extension';
    case 'python-extension':
      return 'Python extension';
    case 'path':
      return 'on PATH';
    default:
      return 'default';
  }
}
