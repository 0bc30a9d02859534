/**
 * The VS Code side: starts the language server over IPC, shows its health in a language status item, tells the
 * server which Transformer Engine version the selected interpreter has, and registers the benchmark sidebar.
 */
import { execFile } from 'node:child_process';
import * as path from 'node:path';
import * as vscode from 'vscode';
import { LanguageClient, State, TransportKind, type LanguageClientOptions, type ServerOptions } from 'vscode-languageclient/node';
import { EnvironmentNotification, SERVER_NAME, StatusNotification, type EnvironmentParams, type StatusParams } from '../../common/protocol';
import { SETTINGS_SECTION } from '../../common/settings';
import { registerBenchmark } from './benchmark';
import { onPythonSelectionChanged, resolveInterpreter } from './benchmark/interpreter';

let client: LanguageClient | undefined;

/** Asks the interpreter for transformer_engine.__version__ (undefined when TE is missing or Python fails). */
function detectTeVersion(python: string, cwd: string | undefined, log: vscode.LogOutputChannel): Promise<string | undefined> {
  const probe = 'import importlib.metadata as m\ntry:\n print(m.version("transformer_engine"))\nexcept Exception:\n print("")';
  return new Promise((resolve) => {
    execFile(python, ['-c', probe], { cwd, timeout: 15000 }, (error, stdout) => {
      if (error) {
        log.info(`TE version probe with ${python} failed: ${error.message}`);
        resolve(undefined);
        return;
      }
      resolve(stdout.trim() || undefined);
    });
  });
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const log = vscode.window.createOutputChannel(SERVER_NAME, { log: true });
  context.subscriptions.push(log);

  const statusItem = vscode.languages.createLanguageStatusItem('precisionLens.status', { language: 'python' });
  statusItem.name = SERVER_NAME;
  statusItem.text = 'Precision Lens: starting';
  statusItem.busy = true;
  statusItem.command = { command: 'precisionLens.showLog', title: 'Show log' };
  context.subscriptions.push(statusItem);

  const serverModule = context.asAbsolutePath(path.join('out', 'server.js'));
  const serverOptions: ServerOptions = {
    run: { module: serverModule, transport: TransportKind.ipc },
    debug: { module: serverModule, transport: TransportKind.ipc, options: { execArgv: ['--nolazy', '--inspect=6019'] } },
  };
  // pyproject.toml's [tool.precision-lens] table configures the server too: it re-reads it when one changes.
  const pyprojectWatcher = vscode.workspace.createFileSystemWatcher('**/pyproject.toml');
  context.subscriptions.push(pyprojectWatcher);
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ language: 'python' }],
    outputChannel: log,
    synchronize: { configurationSection: SETTINGS_SECTION, fileEvents: pyprojectWatcher },
  };
  client = new LanguageClient('precisionLens', SERVER_NAME, serverOptions, clientOptions);

  client.onDidChangeState((e) => {
    if (e.newState === State.Stopped) {
      statusItem.busy = false;
      statusItem.text = 'Precision Lens: stopped';
      statusItem.severity = vscode.LanguageStatusSeverity.Error;
    }
  });

  context.subscriptions.push(
    vscode.commands.registerCommand('precisionLens.showLog', () => log.show()),
    // The model lens (server/src/lsp/codelens.ts SHOW_GAIN_COMMAND): the numbers behind the predicted step speedup.
    vscode.commands.registerCommand('precisionLens.showGainEstimate', async (title?: unknown, details?: unknown) => {
      const lines = Array.isArray(details) ? details.filter((d): d is string => typeof d === 'string') : [];
      if (typeof title !== 'string') {
        void vscode.window.showInformationMessage('Precision Lens: the predicted FP8 step speedup is the lens above the model class of a Python file.');
        return;
      }
      await vscode.window.showInformationMessage(title, { modal: true, detail: lines.join('\n\n') });
    }),
    vscode.commands.registerCommand('precisionLens.restartServer', async () => {
      await client?.restart();
      await sendEnvironment();
    }),
    registerBenchmark(context, log),
  );

  const sendEnvironment = async (): Promise<void> => {
    if (!client || !vscode.workspace.isTrusted) return;
    const folder = vscode.workspace.workspaceFolders?.[0];
    const interpreter = await resolveInterpreter(folder?.uri, log);
    const teVersion = await detectTeVersion(interpreter.path, folder?.uri.fsPath, log);
    const params: EnvironmentParams = { teVersion, pythonPath: interpreter.path };
    await client.sendNotification(EnvironmentNotification, params);
  };

  await client.start();
  client.onNotification(StatusNotification, (params: StatusParams) => {
    statusItem.busy = false;
    statusItem.severity = params.state === 'error' ? vscode.LanguageStatusSeverity.Error : vscode.LanguageStatusSeverity.Information;
    statusItem.text = `Precision Lens: ${params.message}`;
    statusItem.detail = params.lastAnalysisMs !== undefined ? `last analysis ${params.lastAnalysisMs.toFixed(1)} ms, ${params.documents} open` : undefined;
  });
  context.subscriptions.push(
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration(`${SETTINGS_SECTION}.pythonPath`)) void sendEnvironment();
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => void sendEnvironment()),
    onPythonSelectionChanged(() => void sendEnvironment()),
  );
  // Untrusted workspaces never run the interpreter: generated code then targets the modern TE API.
  void sendEnvironment().catch((e) => log.warn(`environment detection failed: ${String(e)}`));
}

export async function deactivate(): Promise<void> {
  await client?.stop();
  client = undefined;
}
