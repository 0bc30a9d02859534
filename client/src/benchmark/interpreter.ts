/**
 * Interpreter discovery inside VS Code: the setting, then the Python Environments extension API, then the Python
 * extension API, then python3. Both extension APIs are optional and read defensively (no npm dependency on them,
 * no hard extension dependency): any missing piece or exception falls through to the next source.
 */
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { SETTINGS_SECTION } from '../../../common/settings';
import type { InterpreterCandidate, InterpreterChoice } from '../../../common/webview-messages';
import { chooseInterpreter, expandPathVariables, mergeCandidates, pathInterpreters } from './interpreterChain';

export const PYTHON_ENVS_EXTENSION_ID = 'ms-python.vscode-python-envs';
export const PYTHON_EXTENSION_ID = 'ms-python.python';
const ACTIVATION_TIMEOUT_MS = 10000;

type AnyRecord = Record<string, unknown>;

function isRecord(value: unknown): value is AnyRecord {
  return typeof value === 'object' && value !== null;
}

function withTimeout<T>(promise: PromiseLike<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
    Promise.resolve(promise).then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}

/** The extension's exports when it is installed; activates it (bounded) when it is installed but not yet active. */
async function extensionApi(id: string): Promise<AnyRecord | undefined> {
  const extension = vscode.extensions.getExtension(id);
  if (!extension) return undefined;
  const exports: unknown = extension.isActive ? extension.exports : await withTimeout(extension.activate(), ACTIVATION_TIMEOUT_MS, id);
  return isRecord(exports) ? exports : undefined;
}

/** ms-python.vscode-python-envs: `api.getEnvironment(scope)` -> `environment.execInfo.run.executable`. */
export async function pythonEnvsExecutable(scope: vscode.Uri | undefined): Promise<string | undefined> {
  const api = await extensionApi(PYTHON_ENVS_EXTENSION_ID);
  const getEnvironment = api?.getEnvironment;
  if (typeof getEnvironment !== 'function') return undefined;
  const environment: unknown = await withTimeout(Promise.resolve(getEnvironment.call(api, scope)), ACTIVATION_TIMEOUT_MS, 'getEnvironment');
  if (!isRecord(environment)) return undefined;
  const execInfo = environment.execInfo;
  const run = isRecord(execInfo) ? execInfo.run : undefined;
  const executable = isRecord(run) ? run.executable : undefined;
  return typeof executable === 'string' ? executable : undefined;
}

/** ms-python.python: `exports.environments.getActiveEnvironmentPath(resource).path`, resolved to an executable if possible. */
export async function pythonExtensionExecutable(scope: vscode.Uri | undefined): Promise<string | undefined> {
  const api = await extensionApi(PYTHON_EXTENSION_ID);
  const environments = api?.environments;
  if (!isRecord(environments) || typeof environments.getActiveEnvironmentPath !== 'function') return undefined;
  const active: unknown = environments.getActiveEnvironmentPath.call(environments, scope);
  if (!isRecord(active) || typeof active.path !== 'string') return undefined;
  // `path` may be an environment folder (conda); resolveEnvironment gives the executable when it can.
  if (typeof environments.resolveEnvironment === 'function') {
    try {
      const resolved: unknown = await withTimeout(Promise.resolve(environments.resolveEnvironment.call(environments, active)), ACTIVATION_TIMEOUT_MS, 'resolveEnvironment');
      const executable = isRecord(resolved) ? resolved.executable : undefined;
      const uri = isRecord(executable) ? executable.uri : undefined;
      if (uri instanceof vscode.Uri) return uri.fsPath;
      if (isRecord(uri) && typeof uri.fsPath === 'string') return uri.fsPath;
    } catch {
      // fall back to the path as given
    }
  }
  return active.path;
}

/**
 * The interpreter for `scope` (a workspace folder or file), and why it was chosen.
 * Also used by the lead's extension.ts for TE version detection.
 */
export async function resolveInterpreter(scope?: vscode.Uri, log?: vscode.LogOutputChannel): Promise<InterpreterChoice> {
  const folder = scope ? vscode.workspace.getWorkspaceFolder(scope) : vscode.workspace.workspaceFolders?.[0];
  return chooseInterpreter({
    setting: () => vscode.workspace.getConfiguration(SETTINGS_SECTION, scope).get<string>('pythonPath'),
    pythonEnvs: () => pythonEnvsExecutable(scope),
    pythonExtension: () => pythonExtensionExecutable(scope),
    workspaceFolder: folder?.uri.fsPath,
    log: log ? (m) => log.debug(m) : undefined,
  });
}

/** Fires when either Python extension reports a changed selection (subscribed defensively, when it is active). */
export function onPythonSelectionChanged(listener: () => void): vscode.Disposable {
  const disposables: vscode.Disposable[] = [];
  const subscribe = (api: AnyRecord | undefined, path: string[]) => {
    let target: unknown = api;
    for (const key of path.slice(0, -1)) target = isRecord(target) ? target[key] : undefined;
    const event = isRecord(target) ? target[path[path.length - 1]] : undefined;
    if (typeof event === 'function') {
      try {
        const d: unknown = event.call(target, () => listener());
        if (isRecord(d) && typeof d.dispose === 'function') disposables.push(d as unknown as vscode.Disposable);
      } catch {
        // an API shape we do not know: no live updates from it
      }
    }
  };
  for (const [id, path] of [
    [PYTHON_ENVS_EXTENSION_ID, ['onDidChangeEnvironment']],
    [PYTHON_EXTENSION_ID, ['environments', 'onDidChangeActiveEnvironmentPath']],
  ] as const) {
    const extension = vscode.extensions.getExtension(id);
    if (extension?.isActive && isRecord(extension.exports)) subscribe(extension.exports, [...path]);
  }
  return vscode.Disposable.from(...disposables);
}

function executableOf(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value instanceof vscode.Uri) return value.fsPath;
  if (isRecord(value) && typeof value.fsPath === 'string') return value.fsPath;
  return undefined;
}

/** ms-python.vscode-python-envs: `api.getEnvironments('all')`, each `execInfo.run.executable`. */
async function pythonEnvsCandidates(): Promise<InterpreterCandidate[]> {
  const api = await extensionApi(PYTHON_ENVS_EXTENSION_ID);
  if (typeof api?.getEnvironments !== 'function') return [];
  const list: unknown = await withTimeout(Promise.resolve(api.getEnvironments.call(api, 'all')), ACTIVATION_TIMEOUT_MS, 'getEnvironments');
  if (!Array.isArray(list)) return [];
  return list.flatMap((env: unknown) => {
    if (!isRecord(env)) return [];
    const run = isRecord(env.execInfo) ? env.execInfo.run : undefined;
    const path = isRecord(run) ? executableOf(run.executable) : undefined;
    const name = typeof env.displayName === 'string' ? env.displayName : typeof env.name === 'string' ? env.name : undefined;
    return path ? [{ path, source: 'python-envs' as const, name }] : [];
  });
}

/** ms-python.python: `exports.environments.known`, each `executable.uri` (else `path`). */
async function pythonExtensionCandidates(): Promise<InterpreterCandidate[]> {
  const api = await extensionApi(PYTHON_EXTENSION_ID);
  const environments = api?.environments;
  const known = isRecord(environments) ? environments.known : undefined;
  if (!Array.isArray(known)) return [];
  return known.flatMap((env: unknown) => {
    if (!isRecord(env)) return [];
    const path = (isRecord(env.executable) ? executableOf(env.executable.uri) : undefined) ?? (typeof env.path === 'string' ? env.path : undefined);
    const inner = isRecord(env.environment) ? env.environment : undefined;
    const name = inner && typeof inner.name === 'string' ? inner.name : undefined;
    return path ? [{ path, source: 'python-extension' as const, name }] : [];
  });
}

async function safely(what: string, find: () => Promise<InterpreterCandidate[]>, log?: vscode.LogOutputChannel): Promise<InterpreterCandidate[]> {
  try {
    return await find();
  } catch (e) {
    log?.debug(`interpreters: ${what} failed: ${e instanceof Error ? e.message : String(e)}`);
    return [];
  }
}

/**
 * Every interpreter the picker offers, on the machine the extension host runs on (the remote one in a remote
 * window): the setting's value, the selections and known environments of the Python Environments and Python
 * extensions, then the Python executables on PATH.
 */
export async function findInterpreters(scope?: vscode.Uri, log?: vscode.LogOutputChannel): Promise<InterpreterCandidate[]> {
  const folder = scope ? vscode.workspace.getWorkspaceFolder(scope) : vscode.workspace.workspaceFolders?.[0];
  const setting = vscode.workspace.getConfiguration(SETTINGS_SECTION, scope).get<string>('pythonPath')?.trim();
  const fromSetting: InterpreterCandidate[] = setting ? [{ path: expandPathVariables(setting, folder?.uri.fsPath), source: 'setting' }] : [];
  const [envsSelected, envs, pySelected, py] = await Promise.all([
    safely('Python Environments selection', async () => {
      const p = await pythonEnvsExecutable(scope);
      return p ? [{ path: p, source: 'python-envs' as const }] : [];
    }, log),
    safely('Python Environments list', pythonEnvsCandidates, log),
    safely('Python extension selection', async () => {
      const p = await pythonExtensionExecutable(scope);
      return p ? [{ path: p, source: 'python-extension' as const }] : [];
    }, log),
    safely('Python extension list', pythonExtensionCandidates, log),
  ]);
  const onPath = pathInterpreters({
    path: process.env.PATH,
    list: (dir) => fs.readdirSync(dir),
    resolve: (file) => {
      try {
        const real = fs.realpathSync(file);
        fs.accessSync(real, fs.constants.X_OK);
        return fs.statSync(real).isFile() ? real : undefined;
      } catch {
        return undefined;
      }
    },
  });
  return mergeCandidates(fromSetting, envsSelected, envs, pySelected, py, onPath);
}
