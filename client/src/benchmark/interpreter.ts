/**
 * Interpreter discovery inside VS Code: the setting, then the Python Environments extension API, then the Python
 * extension API, then python3. Both extension APIs are optional and read defensively (no npm dependency on them,
 * no hard extension dependency): any missing piece or exception falls through to the next source.
 */
import * as vscode from 'vscode';
import { SETTINGS_SECTION } from '../../../common/settings';
import type { InterpreterChoice } from '../../../common/webview-messages';
import { chooseInterpreter } from './interpreterChain';

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
