/**
 * A minimal LSP client for protocol tests: starts the BUILT server (out/server.js) as a real process and speaks
 * JSON-RPC over its stdio, so the tests exercise exactly what VS Code talks to.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { createMessageConnection, StreamMessageReader, StreamMessageWriter, type MessageConnection } from 'vscode-jsonrpc/node';

export const ROOT = join(__dirname, '..', '..');

export interface Range { start: { line: number; character: number }; end: { line: number; character: number } }

export interface PublishedDiagnostics {
  uri: string;
  version?: number;
  diagnostics: Array<{
    range: Range; code: string; message: string; severity: number; source: string; codeDescription?: { href: string }; data?: unknown;
    relatedInformation?: Array<{ location: { uri: string; range: Range }; message: string }>;
  }>;
}

export class TestClient {
  readonly connection: MessageConnection;
  private readonly child: ChildProcess;
  private readonly latest = new Map<string, PublishedDiagnostics>();
  private waiters: Array<() => void> = [];
  readonly notifications: Array<{ method: string; params: unknown }> = [];
  stderr = '';
  /** What the server registered dynamically (client/registerCapability). */
  readonly registrations: Array<{ method: string; registerOptions?: unknown }> = [];
  /** How many publishDiagnostics notifications arrived (for settle tests). */
  publishCount = 0;

  constructor(configuration: Record<string, unknown> = {}) {
    this.child = spawn(process.execPath, [join(ROOT, 'out', 'server.js'), '--stdio'], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stderr!.on('data', (d) => (this.stderr += String(d)));
    this.connection = createMessageConnection(new StreamMessageReader(this.child.stdout!), new StreamMessageWriter(this.child.stdin!));
    this.connection.onNotification('textDocument/publishDiagnostics', (p: PublishedDiagnostics) => {
      this.latest.set(p.uri, p);
      this.publishCount++;
      this.wake();
    });
    this.connection.onNotification((method: string, params: unknown) => {
      this.notifications.push({ method, params });
      this.wake();
    });
    this.connection.onRequest('workspace/configuration', (p: { items: unknown[] }) => p.items.map(() => configuration));
    this.connection.onRequest('client/registerCapability', (p: { registrations: Array<{ method: string; registerOptions?: unknown }> }) => {
      this.registrations.push(...(p?.registrations ?? []));
      this.wake();
      return null;
    });
    this.connection.onRequest('window/workDoneProgress/create', () => null);
    this.connection.listen();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    waiters.forEach((w) => w());
  }

  /**
   * `workspace` adds client capabilities (`{ workspaceEdit: { documentChanges: true, resourceOperations: ['create'] } }`),
   * `textDocument` too, beyond publishDiagnostics.versionSupport (relatedInformation, codeAction...).
   */
  async initialize(rootDir?: string, workspace: Record<string, unknown> = {}, textDocument: Record<string, unknown> = {}): Promise<unknown> {
    const folders = rootDir ? [{ uri: `file://${rootDir}`, name: 'ws' }] : null;
    const result = await this.connection.sendRequest('initialize', {
      processId: process.pid, rootUri: folders?.[0].uri ?? null, workspaceFolders: folders,
      capabilities: { workspace: { configuration: true, ...workspace }, textDocument: { publishDiagnostics: { versionSupport: true }, ...textDocument } },
    });
    await this.connection.sendNotification('initialized', {});
    return result;
  }

  open(uri: string, text: string, version = 1): Promise<void> {
    return this.connection.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'python', version, text } });
  }

  change(uri: string, version: number, contentChanges: unknown[]): Promise<void> {
    return this.connection.sendNotification('textDocument/didChange', { textDocument: { uri, version }, contentChanges });
  }

  close(uri: string): Promise<void> {
    return this.connection.sendNotification('textDocument/didClose', { textDocument: { uri } });
  }

  /** Waits until diagnostics for `uri` satisfy `predicate`, or fails after `timeoutMs` with what was last seen. */
  async diagnostics(uri: string, predicate: (p: PublishedDiagnostics) => boolean, timeoutMs = 10000): Promise<PublishedDiagnostics> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const current = this.latest.get(uri);
      if (current && predicate(current)) return current;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for diagnostics on ${uri}; last: ${JSON.stringify(current)}; server stderr: ${this.stderr}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(timer); resolve(); });
      });
    }
  }

  /** Waits for a notification (other than diagnostics) that satisfies `predicate`. */
  async notification(predicate: (n: { method: string; params: unknown }) => boolean, timeoutMs = 10000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!this.notifications.some(predicate)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for a notification; got: ${JSON.stringify(this.notifications.map((n) => n.method))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => { clearTimeout(timer); resolve(); });
      });
    }
  }

  async stop(): Promise<void> {
    try {
      // A server that no longer answers must not keep the test run (and its process) alive: kill it regardless.
      await Promise.race([this.connection.sendRequest('shutdown'), new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
      await this.connection.sendNotification('exit');
    } catch {
      // already gone
    }
    this.connection.dispose();
    this.child.kill();
  }
}
