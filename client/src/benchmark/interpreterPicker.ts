/**
 * "Choose interpreter…": a quick pick of the interpreters found (findInterpreters), the one in use marked, plus
 * "Enter interpreter path…" and "Automatic". The choice is written to `precisionLens.pythonPath` in the workspace
 * settings (the user settings without a folder), which works the same in local and remote windows: a quick pick
 * needs no Settings editor tab, and the value lands on the machine whose interpreter it names.
 */
import * as fs from 'node:fs';
import * as vscode from 'vscode';
import { SETTINGS_SECTION } from '../../../common/settings';
import type { InterpreterCandidate, InterpreterChoice } from '../../../common/webview-messages';
import { candidateSourceLabel } from './interpreterChain';

interface PickItem extends vscode.QuickPickItem {
  action: 'use' | 'enter' | 'automatic';
  path?: string;
}

export interface PickerHost {
  /** Finds the candidates (and puts them into the view state). */
  find(): Promise<InterpreterCandidate[]>;
  /** The interpreter in use now. */
  current(): InterpreterChoice | undefined;
  /** The picker opened or closed (the view state says so). */
  setOpen(open: boolean): void;
  log: vscode.LogOutputChannel;
}

function items(candidates: readonly InterpreterCandidate[], current: InterpreterChoice | undefined): PickItem[] {
  const inUse = current?.path;
  const found: PickItem[] = candidates.map((c) => ({
    action: 'use',
    path: c.path,
    label: c.path === inUse ? `$(check) ${c.path}` : c.path,
    description: [c.name, candidateSourceLabel(c.source)].filter(Boolean).join(' · '),
    detail: c.path === inUse ? `in use: ${current?.detail ?? ''}` : undefined,
  }));
  return [
    ...found,
    { action: 'enter', label: '', kind: vscode.QuickPickItemKind.Separator },
    { action: 'enter', label: '$(edit) Enter interpreter path…', description: 'an absolute path or a command on PATH' },
    {
      action: 'automatic',
      label: '$(sync) Automatic',
      description: 'clear precisionLens.pythonPath: the Python extensions\u2019 selection, else python3',
    },
  ];
}

/** Where the choice is written: the workspace when one is open (it names a project's environment), else the user. */
function target(): vscode.ConfigurationTarget {
  return vscode.workspace.workspaceFolders?.length ? vscode.ConfigurationTarget.Workspace : vscode.ConfigurationTarget.Global;
}

async function writeSetting(value: string | undefined): Promise<void> {
  const config = vscode.workspace.getConfiguration(SETTINGS_SECTION);
  if (value !== undefined) {
    await config.update('pythonPath', value, target());
    return;
  }
  // Automatic: no value anywhere this window reads one from (workspace, then user).
  const inspected = config.inspect<string>('pythonPath');
  if (inspected?.workspaceValue !== undefined) await config.update('pythonPath', undefined, vscode.ConfigurationTarget.Workspace);
  if (inspected?.globalValue !== undefined) await config.update('pythonPath', undefined, vscode.ConfigurationTarget.Global);
}

function validatePath(value: string): string | undefined {
  const v = value.trim();
  if (v === '') return 'Enter a path to a Python executable, or a command such as python3.';
  if ((v.startsWith('/') || /^[A-Za-z]:\\/.test(v)) && !fs.existsSync(v)) return `${v} does not exist on this machine.`;
  return undefined;
}

/** Shows the picker; resolves with the path chosen ('' for automatic), or undefined when dismissed. */
export async function pickInterpreter(host: PickerHost): Promise<string | undefined> {
  const pick = vscode.window.createQuickPick<PickItem>();
  pick.title = 'Python interpreter for the FP8 benchmark';
  pick.placeholder = 'Looking for interpreters…';
  pick.busy = true;
  pick.matchOnDescription = true;
  const chosen = new Promise<PickItem | undefined>((resolve) => {
    pick.onDidAccept(() => resolve(pick.selectedItems[0] ?? pick.activeItems[0]));
    pick.onDidHide(() => resolve(undefined));
  });
  pick.show();
  try {
    const candidates = await host.find();
    pick.items = items(candidates, host.current());
    const inUse = pick.items.find((i) => i.path !== undefined && i.path === host.current()?.path);
    if (inUse) pick.activeItems = [inUse];
    pick.placeholder = `${candidates.length} interpreter${candidates.length === 1 ? '' : 's'} found; in use: ${host.current()?.path ?? 'none yet'}`;
    pick.busy = false;
    host.setOpen(true);
    const item = await chosen;
    pick.hide();
    if (!item) return undefined;
    if (item.action === 'automatic') {
      await writeSetting(undefined);
      host.log.info('benchmark interpreter: automatic (precisionLens.pythonPath cleared)');
      return '';
    }
    const path = item.action === 'use' ? item.path : (await vscode.window.showInputBox({
      title: 'Python interpreter for the FP8 benchmark',
      prompt: 'Path to a Python executable on the machine that runs the benchmark',
      value: host.current()?.path,
      validateInput: validatePath,
      ignoreFocusOut: true,
    }))?.trim();
    if (!path) return undefined;
    await writeSetting(path);
    host.log.info(`benchmark interpreter: ${path} (chosen in the picker)`);
    return path;
  } finally {
    host.setOpen(false);
    pick.dispose();
  }
}
