/**
 * The benchmark sidebar: a webview view that renders the host-owned state. The webview is disposable at any time
 * (hidden views get no messages, closed ones lose their DOM): on every resolve and every time it becomes visible the
 * host sends the full state again, so closing and reopening the view restores it.
 */
import { randomBytes } from 'node:crypto';
import * as vscode from 'vscode';
import { HostToWebviewMessage, isWebviewToHostMessage, WebviewToHostMessage } from '../../../common/webview-messages';
import type { BenchmarkController } from '../benchmark/controller';

export const BENCHMARK_VIEW_ID = 'precisionLens.benchmark';

export class BenchmarkViewProvider implements vscode.WebviewViewProvider, vscode.Disposable {
  private view: vscode.WebviewView | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private viewDisposables: vscode.Disposable[] = [];

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly controller: BenchmarkController,
    private readonly log: vscode.LogOutputChannel,
    private readonly benchLog: vscode.OutputChannel,
  ) {
    this.disposables.push(
      controller.onDidChangeState(() => this.postState()),
      controller.onDidProgress((message) => this.post(message)),
    );
  }

  resolveWebviewView(webviewView: vscode.WebviewView): void {
    for (const d of this.viewDisposables) d.dispose();
    this.view = webviewView;
    const outDir = vscode.Uri.joinPath(this.extensionUri, 'out');
    webviewView.webview.options = { enableScripts: true, localResourceRoots: [outDir] };
    webviewView.webview.html = renderHtml(webviewView.webview, outDir);
    this.viewDisposables = [
      webviewView.webview.onDidReceiveMessage((message: unknown) => void this.onMessage(message)),
      webviewView.onDidChangeVisibility(() => {
        if (webviewView.visible) this.postState();
      }),
      webviewView.onDidDispose(() => {
        if (this.view === webviewView) this.view = undefined;
      }),
    ];
    this.postState();
  }

  /** Whether the view currently exists and is visible. */
  get visible(): boolean {
    return this.view?.visible ?? false;
  }

  private post(message: HostToWebviewMessage): void {
    // A hidden webview drops messages; it gets the full state again when it becomes visible.
    if (!this.view?.visible) return;
    void this.view.webview.postMessage(message).then(undefined, (e: unknown) => this.log.debug(`webview post failed: ${String(e)}`));
  }

  private postState(): void {
    this.post({ type: 'state', state: this.controller.getState() });
  }

  private async onMessage(raw: unknown): Promise<void> {
    if (!isWebviewToHostMessage(raw)) {
      this.log.warn(`benchmark view: ignored an unknown message ${JSON.stringify(raw)?.slice(0, 200)}`);
      return;
    }
    const message: WebviewToHostMessage = raw;
    try {
      switch (message.type) {
        case 'ready':
          this.postState();
          break;
        case 'run':
          await this.controller.run(message.options);
          break;
        case 'measureConversion':
          await this.controller.measureConversion({ ...message.options, prompt: true });
          break;
        case 'cancel':
          await this.controller.cancel();
          break;
        case 'refreshEnvironment':
          await this.controller.refreshEnvironment();
          break;
        case 'copyMarkdown':
          await this.controller.copyMarkdown(this.controller.markdownFor(message.runIds));
          break;
        case 'copyCurrentMarkdown':
          await this.controller.copyMarkdown(this.controller.currentMarkdown());
          break;
        case 'deleteRun':
          await this.controller.deleteRun(message.id);
          break;
        case 'openLog':
          this.benchLog.show(true);
          break;
        case 'chooseInterpreter':
          await this.controller.chooseInterpreter();
          break;
        case 'manageTrust':
          await vscode.commands.executeCommand('workbench.trust.manage');
          break;
        case 'formChanged':
          this.controller.rememberOptions(message.options);
          break;
      }
    } catch (e) {
      this.log.error(`benchmark view: ${message.type} failed: ${e instanceof Error ? e.message : String(e)}`);
      void vscode.window.showErrorMessage(`Precision Lens benchmark: ${e instanceof Error ? e.message : String(e)}`);
    }
  }

  dispose(): void {
    for (const d of [...this.viewDisposables, ...this.disposables]) d.dispose();
  }
}

/** The view's HTML: strict CSP, one nonce'd script, one stylesheet, nothing inline. */
export function renderHtml(webview: vscode.Webview, outDir: vscode.Uri): string {
  const nonce = randomBytes(16).toString('base64');
  const script = webview.asWebviewUri(vscode.Uri.joinPath(outDir, 'webview.js'));
  const style = webview.asWebviewUri(vscode.Uri.joinPath(outDir, 'webview.css'));
  const csp = [
    "default-src 'none'",
    `style-src ${webview.cspSource}`,
    `script-src 'nonce-${nonce}'`,
    `img-src ${webview.cspSource} data:`,
    `font-src ${webview.cspSource}`,
  ].join('; ');
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${style.toString()}">
<title>FP8 Benchmark</title>
</head>
<body>
<main id="app" aria-busy="true"><p class="muted">Loading the benchmark view…</p></main>
<script nonce="${nonce}" src="${script.toString()}"></script>
</body>
</html>`;
}
