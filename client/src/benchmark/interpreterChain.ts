/**
 * Which Python runs the benchmark, in order: the `precisionLens.pythonPath` setting, the Python Environments
 * extension's selection, the Python extension's active environment, then `python3` (`python` on Windows).
 * Pure: the lookups are injected, so the order is unit-tested without VS Code.
 */
import * as os from 'node:os';
import type { InterpreterChoice } from '../../../common/webview-messages';

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
