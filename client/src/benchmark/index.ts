/**
 * The benchmark feature: sidebar view, commands, runner, history. The lead's extension.ts calls `registerBenchmark`.
 */
import * as vscode from 'vscode';
import { SETTINGS_SECTION } from '../../../common/settings';
import type { BenchmarkViewState } from '../../../common/webview-messages';
import { BENCHMARK_VIEW_ID, BenchmarkViewProvider } from '../sidebar/viewProvider';
import { BenchmarkController } from './controller';
import { HistoryStore } from './historyStore';

export const BENCHMARK_LOG_NAME = 'Precision Lens Benchmark';
export const BENCHMARK_LOG_LANGUAGE = 'precision-lens-benchmark-log';

export const COMMANDS = {
  run: 'precisionLens.benchmark.run',
  /** The A/B of the workspace's own project (optional argument: partial RunOptions; `workload` skips the prompt). */
  measureConversion: 'precisionLens.benchmark.measureConversion',
  cancel: 'precisionLens.benchmark.cancel',
  /** Internal (not in the command palette): the host-side state, for the e2e tests. */
  getState: 'precisionLens.benchmark.getState',
  refresh: 'precisionLens.benchmark.refreshEnvironment',
  importResults: 'precisionLens.benchmark.importResults',
  chooseInterpreter: 'precisionLens.benchmark.chooseInterpreter',
} as const;

/** The files the import command was given: a path, a Uri, or a list of them (scripts, tests, the explorer menu). */
function importArgument(arg: unknown, more: unknown): string[] | undefined {
  const one = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : v instanceof vscode.Uri && v.scheme === 'file' ? v.fsPath : undefined);
  // The explorer context menu passes (clicked Uri, selected Uris).
  const list = Array.isArray(more) && more.length > 0 ? more : Array.isArray(arg) ? arg : arg !== undefined ? [arg] : [];
  const files = list.map(one).filter((f): f is string => f !== undefined);
  return files.length > 0 ? files : undefined;
}

/**
 * Registers the benchmark sidebar (`precisionLens.benchmark`), the commands `precisionLens.benchmark.run` (optional
 * argument: partial RunOptions), `precisionLens.benchmark.cancel`, `precisionLens.benchmark.importResults` (argument:
 * a --json-out path or Uri, or a list; none: a file picker; returns the imported history ids) and the internal
 * `precisionLens.benchmark.getState`,
 * and starts the environment probe. Disposing it cancels a running benchmark.
 */
export function registerBenchmark(context: vscode.ExtensionContext, log: vscode.LogOutputChannel): vscode.Disposable {
  const benchLog = vscode.window.createOutputChannel(BENCHMARK_LOG_NAME, BENCHMARK_LOG_LANGUAGE);
  const history = new HistoryStore(context.globalStorageUri.fsPath);
  const controller = new BenchmarkController({ context, log, benchLog, history });
  const provider = new BenchmarkViewProvider(context.extensionUri, controller, log, benchLog);
  const ready = controller.initialize().catch((e: unknown) => log.error(`benchmark: initialization failed: ${String(e)}`));

  const disposables: vscode.Disposable[] = [
    benchLog,
    controller,
    provider,
    vscode.window.registerWebviewViewProvider(BENCHMARK_VIEW_ID, provider),
    vscode.commands.registerCommand(COMMANDS.run, async (options?: unknown): Promise<boolean> => {
      await ready;
      if (!provider.visible) void vscode.commands.executeCommand(`${BENCHMARK_VIEW_ID}.focus`);
      return controller.run(options);
    }),
    vscode.commands.registerCommand(COMMANDS.measureConversion, async (options?: unknown): Promise<boolean> => {
      await ready;
      if (!provider.visible) void vscode.commands.executeCommand(`${BENCHMARK_VIEW_ID}.focus`);
      return controller.measureConversion(options);
    }),
    vscode.commands.registerCommand(COMMANDS.cancel, () => controller.cancel()),
    vscode.commands.registerCommand(COMMANDS.importResults, async (arg?: unknown, more?: unknown): Promise<string[]> => {
      await ready;
      let files = importArgument(arg, more);
      if (!files) {
        const picked = await vscode.window.showOpenDialog({
          title: 'Import benchmark results (bench/benchmark.py --json-out)',
          openLabel: 'Import',
          canSelectMany: true,
          defaultUri: vscode.workspace.workspaceFolders?.[0]?.uri,
          filters: { 'Benchmark results (JSON)': ['json'] },
        });
        files = picked?.map((u) => u.fsPath);
      }
      if (!files || files.length === 0) return [];
      const entries = await controller.importResults(files);
      if (entries.length > 0 && !provider.visible) void vscode.commands.executeCommand(`${BENCHMARK_VIEW_ID}.focus`);
      return entries.map((e) => e.id);
    }),
    vscode.commands.registerCommand(COMMANDS.chooseInterpreter, async (): Promise<string | undefined> => {
      await ready;
      return controller.chooseInterpreter();
    }),
    vscode.commands.registerCommand(COMMANDS.getState, (): BenchmarkViewState => controller.getState()),
    vscode.commands.registerCommand(COMMANDS.refresh, async () => {
      await ready;
      await controller.refreshEnvironment();
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => controller.setTrusted(true)),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration(`${SETTINGS_SECTION}.pythonPath`)) void controller.refreshEnvironment();
    }),
  ];
  return vscode.Disposable.from(...disposables);
}
