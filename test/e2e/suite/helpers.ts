/**
 * Helpers for the end-to-end suites (they run inside the real extension host). Not a suite itself: only
 * `*.test.ts` files are loaded by index.ts. Waiting is always polling a condition with a deadline, never a sleep.
 */
import * as fs from 'fs';
import * as path from 'path';
import * as vscode from 'vscode';

export const SOURCE = 'precision-lens';

/** The first (only) workspace folder: the temp copy of test/e2e/workspace that run.mjs made. */
export function workspaceRoot(): vscode.Uri {
  const folder = vscode.workspace.workspaceFolders?.[0];
  if (!folder) throw new Error('the e2e window has no workspace folder');
  return folder.uri;
}

export function workspaceFile(name: string): vscode.Uri {
  return vscode.Uri.joinPath(workspaceRoot(), name);
}

/** Opens a workspace file in an editor (which is what makes the language client send didOpen). */
export async function openFile(name: string | vscode.Uri): Promise<vscode.TextDocument> {
  const uri = typeof name === 'string' ? workspaceFile(name) : name;
  const doc = await vscode.workspace.openTextDocument(uri);
  await vscode.window.showTextDocument(doc, { preview: false });
  return doc;
}

/** Copies a workspace file under a new name (so a test that edits it leaves the original for the others). */
export async function copyFile(from: string, to: string): Promise<vscode.Uri> {
  const target = workspaceFile(to);
  await vscode.workspace.fs.copy(workspaceFile(from), target, { overwrite: true });
  return target;
}

/**
 * Polls `probe` every `intervalMs` until it returns something other than undefined/false, or throws after
 * `timeoutMs` with `what` and the last value `describe` gives (so a failure says what was seen instead).
 */
export async function waitFor<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  { timeoutMs = 30_000, intervalMs = 50, describe }: { timeoutMs?: number; intervalMs?: number; describe?: () => string } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${describe ? `\nlast seen: ${describe()}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** The diagnostic's code as a string (`PL101`), whether given plain or with a link target. */
export function codeOf(d: vscode.Diagnostic): string {
  return typeof d.code === 'object' && d.code !== null ? String(d.code.value) : String(d.code ?? '');
}

/** Precision Lens diagnostics currently shown for `uri`. */
export function ours(uri: vscode.Uri): vscode.Diagnostic[] {
  return vscode.languages.getDiagnostics(uri).filter((d) => d.source === SOURCE);
}

/** One line per diagnostic: `PL101 12:16-12:80 message`, 0-based, for failure messages. */
export function describeDiagnostics(uri: vscode.Uri): string {
  const ds = ours(uri);
  if (ds.length === 0) return '(no precision-lens diagnostics)';
  return ds.map((d) => `${codeOf(d)} ${fmtRange(d.range)} ${d.message.split('\n')[0]}`).join('\n  ');
}

export function fmtRange(r: vscode.Range): string {
  return `${r.start.line}:${r.start.character}-${r.end.line}:${r.end.character}`;
}

/** Waits until the diagnostics of `uri` satisfy `ok`; returns them. */
export function waitForDiagnostics(
  uri: vscode.Uri,
  ok: (ds: vscode.Diagnostic[]) => boolean,
  what: string,
  timeoutMs = 30_000,
): Promise<vscode.Diagnostic[]> {
  return waitFor(() => {
    const ds = ours(uri);
    return ok(ds) ? ds : undefined;
  }, what, { timeoutMs, describe: () => describeDiagnostics(uri) });
}

/** The 0-based line number of the only line containing `needle` (or matching it); throws when there is none or several. */
export function lineOf(doc: vscode.TextDocument, needle: string | RegExp): number {
  const hits: number[] = [];
  for (let i = 0; i < doc.lineCount; i++) {
    const text = doc.lineAt(i).text;
    if (typeof needle === 'string' ? text.includes(needle) : needle.test(text)) hits.push(i);
  }
  if (hits.length !== 1) throw new Error(`expected exactly one line containing ${String(needle)}, found ${hits.length}`);
  return hits[0];
}

/**
 * The range of the call that starts with `callee(` on the line containing `lineNeedle`, up to its matching closing
 * parenthesis (which may be on a later line): e.g. `nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)`.
 */
export function callRange(doc: vscode.TextDocument, lineNeedle: string, callee: string): vscode.Range {
  const line = lineOf(doc, lineNeedle);
  const col = doc.lineAt(line).text.indexOf(`${callee}(`);
  if (col < 0) throw new Error(`no ${callee}( on line ${line}`);
  const text = doc.getText();
  const start = doc.offsetAt(new vscode.Position(line, col));
  let depth = 0;
  for (let i = start + callee.length; i < text.length; i++) {
    if (text[i] === '(') depth++;
    else if (text[i] === ')' && --depth === 0) return new vscode.Range(doc.positionAt(start), doc.positionAt(i + 1));
  }
  throw new Error(`unbalanced parentheses after ${callee}( on line ${line}`);
}

/** Diagnostics with `code` whose range lies on line `line`. */
export function onLine(ds: vscode.Diagnostic[], code: string, line: number): vscode.Diagnostic[] {
  return ds.filter((d) => codeOf(d) === code && d.range.start.line <= line && d.range.end.line >= line);
}

/** What test/e2e/dom-probes.mjs benchmarkView() reports of the real webview. */
export interface BenchmarkViewSnapshot {
  width: number;
  appWidth: number;
  run?: { disabled: boolean; title: string };
  runReason?: string;
  validation?: string;
  interpreter?: string;
  chooseInterpreter: boolean;
  /** The form's selected tab ('train' | 'inference') and the ids of its visible number fields. */
  mode?: string;
  fields: string[];
  backends: Array<{ id: string; label: string; checked: boolean; disabled: boolean; reason?: string }>;
  history: Array<{ text: string; checked: boolean }>;
  details?: { heading: string; text: string; evalLoss: Array<{ arm: string; value: string }>; verdict?: string; arms: string[]; peerVerdict?: string };
  /** The "Loss check" box next to Measure conversion, its help line and "Warm start" field when shown, Measure's reason. */
  lossCheck?: { checked: boolean; disabled: boolean; visible: boolean; help?: string; warmStart?: { value: string; disabled: boolean }; roundedStart?: { checked: boolean; disabled: boolean }; abReason?: string };
  results?: { heading: string };
  /** Cut values, words broken across lines, anything wider than the view. */
  problems: string[];
}

const DOM_MARKER = '__PRECISION_LENS_E2E_DOM__';
let domRequests = 0;

/**
 * Asks test/e2e/run.mjs for a DOM probe of the benchmark webview (playwright evaluates test/e2e/dom-probes.mjs in
 * its frame) and returns what it found. The request travels as a log line, the answer as a file in the run's temp
 * folder (the parent of the workspace copy).
 */
export async function viewSnapshot(): Promise<BenchmarkViewSnapshot> {
  return domProbe<BenchmarkViewSnapshot>('benchmarkView');
}

/** Runs one of test/e2e/dom-probes.mjs's PROBES in the benchmark webview and returns its value. */
export async function domProbe<T>(probe: string): Promise<T> {
  const out = path.join(path.dirname(workspaceRoot().fsPath), 'dom', `${process.pid}-${++domRequests}.json`);
  console.log(`${DOM_MARKER}${JSON.stringify({ probe, out })}`);
  const answer = await waitFor(() => fs.existsSync(out) && (JSON.parse(fs.readFileSync(out, 'utf8')) as { ok: boolean; value?: T; error?: string }),
    `the DOM probe answer ${out}`, { timeoutMs: 30_000, intervalMs: 100 });
  if (!answer.ok || answer.value === undefined) throw new Error(`DOM probe failed: ${answer.error}`);
  return answer.value;
}

/** Polls the webview until `ok(snapshot)` holds (the view renders each state the host sends a moment later). */
export async function waitForView(ok: (s: BenchmarkViewSnapshot) => boolean, what: string, timeoutMs = 30_000): Promise<BenchmarkViewSnapshot> {
  let last: BenchmarkViewSnapshot | undefined;
  return waitFor(async () => {
    last = await viewSnapshot();
    return ok(last) ? last : undefined;
  }, what, { timeoutMs, intervalMs: 200, describe: () => JSON.stringify(last, null, 1)?.slice(0, 3000) ?? 'no snapshot' });
}
