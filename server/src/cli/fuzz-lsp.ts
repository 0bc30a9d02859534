/**
 * The fuzzer's language-server leg (issue 25): each mutant is also opened in the BUILT server (server.js beside the
 * CLI bundle) over real JSON-RPC on stdio, then edited a few times (single characters inserted or deleted at seeded
 * places, each a didChange of the next version), and every step must be published within a per-document time bound.
 * The server's debounce is set to 0 (PRECISION_LENS_DEBOUNCE_MS) so a step's time is the analysis and its transfer.
 * A step over the bound is run again in a fresh server (the same text, the same edits) and fails only if it is over
 * there too, as the CLI leg re-times slow inputs as fresh processes; a server that exits or stops answering is a
 * failure, and a fresh one takes its place.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from 'vscode-jsonrpc/node';
import { lineStartsOf, pointAt } from '../engine/lines';

/** One edit of the text as it is when the edit comes: [start, end) replaced by text. */
export interface PlannedEdit { start: number; end: number; text: string }

/** What one document cost in the server: each step's wall time (didOpen / didChange to its publish), the server's CPU. */
export interface LspFigure { openMs: number; editMs: number[]; cpuMs: number; diagnostics: number }

export interface LspOutcome { figure?: LspFigure; problem?: string; overMs?: number }

const INSERTS = ['x', ' ', '\n', '(', ')', ':', '#', '"', '\t', '1', ';', '\\'];

/** `count` seeded one-character edits (an insertion or a deletion), each planned on the text left by the ones before. */
export function planEdits(text: string, random: () => number, count: number): PlannedEdit[] {
  const edits: PlannedEdit[] = [];
  let t = text;
  for (let i = 0; i < count; i++) {
    let at = Math.floor(random() * (t.length + 1));
    // never inside a surrogate pair or a \r\n: an editor never places the cursor there
    const inside = (o: number): boolean => o > 0 && o < t.length && ((t.charCodeAt(o - 1) & 0xfc00) === 0xd800 || (t[o - 1] === '\r' && t[o] === '\n'));
    while (inside(at)) at--;
    let edit: PlannedEdit;
    if (t.length > 0 && at < t.length && random() < 0.4) {
      const width = (t.charCodeAt(at) & 0xfc00) === 0xd800 || (t[at] === '\r' && t[at + 1] === '\n') ? 2 : 1;
      edit = { start: at, end: at + width, text: '' };
    } else {
      edit = { start: at, end: at, text: INSERTS[Math.floor(random() * INSERTS.length)] };
    }
    edits.push(edit);
    t = t.slice(0, edit.start) + edit.text + t.slice(edit.end);
  }
  return edits;
}

function cpuMsOf(pid: number | undefined): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  } catch {
    return NaN;
  }
}

/** One server process over stdio, initialized, with a waiter per (uri, version) publish. */
export class LspDriver {
  private readonly child: ChildProcess;
  private readonly conn: MessageConnection;
  private readonly published = new Map<string, { version: number; count: number }>();
  private waiters: Array<() => void> = [];
  private exited?: string;
  private documents = 0;

  private constructor(serverJs: string) {
    this.child = spawn(process.execPath, [serverJs, '--stdio'], {
      stdio: ['pipe', 'pipe', 'ignore'], env: { ...process.env, PRECISION_LENS_DEBOUNCE_MS: '0' },
    });
    this.child.on('exit', (code, signal) => { this.exited = `the server exited (${signal ?? `code ${code}`})`; this.wake(); });
    this.child.stdin!.on('error', () => {});
    this.conn = createMessageConnection(new StreamMessageReader(this.child.stdout!), new StreamMessageWriter(this.child.stdin!));
    this.conn.onNotification('textDocument/publishDiagnostics', (p: { uri: string; version?: number; diagnostics: unknown[] }) => {
      this.published.set(p.uri, { version: p.version ?? 0, count: p.diagnostics.length });
      this.wake();
    });
    this.conn.onNotification(() => {});
    this.conn.onRequest('workspace/configuration', (p: { items: unknown[] }) => p.items.map(() => ({})));
    this.conn.onRequest(() => null);
    this.conn.onError(() => {});
    this.conn.listen();
  }

  static async start(serverJs: string): Promise<LspDriver> {
    const d = new LspDriver(serverJs);
    await d.conn.sendRequest('initialize', { processId: process.pid, rootUri: null, workspaceFolders: null, capabilities: { workspace: { configuration: true }, textDocument: { publishDiagnostics: { versionSupport: true } } } });
    await d.conn.sendNotification('initialized', {});
    return d;
  }

  get alive(): boolean { return !this.exited; }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    w.forEach((f) => f());
  }

  /** Resolves with the wall time until `uri` is published at `version` or later, or with the reason it was not. */
  private async until(uri: string, version: number, started: number, deadlineMs: number): Promise<number | string> {
    for (;;) {
      const p = this.published.get(uri);
      if (p && p.version >= version) return performance.now() - started;
      if (this.exited) return this.exited;
      const left = started + deadlineMs - performance.now();
      if (left <= 0) return `no diagnostics for version ${version} within ${deadlineMs} ms`;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(timer); resolve(); });
      });
    }
  }

  /**
   * Opens `text`, applies `edits` one didChange at a time, closes it. `boundMs` is the per-step bound; `giveUpMs`
   * how long a step may take before the server is taken for stuck (the document is then a failure).
   */
  async document(text: string, edits: readonly PlannedEdit[], boundMs: number, giveUpMs: number): Promise<LspOutcome> {
    const uri = `file:///precision-lens-fuzz/doc-${this.documents++}.py`;
    const cpu0 = cpuMsOf(this.child.pid);
    let started = performance.now();
    await this.conn.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'python', version: 1, text } });
    const open = await this.until(uri, 1, started, giveUpMs);
    if (typeof open === 'string') return { problem: `didOpen: ${open}` };
    const editMs: number[] = [];
    let t = text;
    for (let i = 0; i < edits.length; i++) {
      const e = edits[i];
      const starts = lineStartsOf(t);
      const a = pointAt(starts, e.start);
      const b = pointAt(starts, e.end);
      const version = i + 2;
      started = performance.now();
      await this.conn.sendNotification('textDocument/didChange', {
        textDocument: { uri, version },
        contentChanges: [{ range: { start: { line: a.row, character: a.column }, end: { line: b.row, character: b.column } }, text: e.text }],
      });
      t = t.slice(0, e.start) + e.text + t.slice(e.end);
      const ms = await this.until(uri, version, started, giveUpMs);
      if (typeof ms === 'string') return { problem: `didChange ${i + 1} of ${edits.length}: ${ms}` };
      editMs.push(ms);
    }
    const diagnostics = this.published.get(uri)?.count ?? 0;
    await this.conn.sendNotification('textDocument/didClose', { textDocument: { uri } });
    this.published.delete(uri);
    const figure: LspFigure = { openMs: open, editMs, cpuMs: cpuMsOf(this.child.pid) - cpu0, diagnostics };
    const worst = Math.max(open, ...editMs);
    return worst > boundMs ? { figure, overMs: worst } : { figure };
  }

  /** Shutdown and exit when it still answers, killed regardless. */
  async stop(): Promise<void> {
    if (!this.exited) {
      try {
        await Promise.race([this.conn.sendRequest('shutdown'), new Promise((r) => setTimeout(r, 1000).unref())]);
        await this.conn.sendNotification('exit');
      } catch { /* gone */ }
    }
    this.conn.dispose();
    this.child.kill('SIGKILL');
  }
}

export function describeLsp(f: LspFigure): string {
  return `open ${f.openMs.toFixed(0)} ms, edits ${f.editMs.map((m) => m.toFixed(0)).join('/')} ms, server CPU ${f.cpuMs.toFixed(0)} ms, ${f.diagnostics} diagnostics`;
}
