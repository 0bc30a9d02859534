// Starting a real VS Code (code-server 4.100.3) and a headless Chromium on this machine, offline.
// One module used by the end-to-end runner (test/e2e/run.mjs), the demo (scripts/demo.mjs) and the screenshot script
// (scripts/screenshots.mjs). The how and why is in shared/recipes/e2e-in-real-vscode.md: code-server bundles the VS Code
// server and web workbench, so no Electron download is needed; Debian's chromium drives the workbench.
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const repoRoot = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const codeServerDir = join(repoRoot, '.vscode-test', 'code-server');
export const codeServerEntry = join(codeServerDir, 'node_modules', 'code-server', 'out', 'node', 'entry.js');
const installedMarker = join(codeServerDir, '.installed-4.100.3');
/** Where code-server's search looks for ripgrep (scripts/install-code-server.sh links the system's rg there). */
export const codeServerRipgrep = join(codeServerDir, 'node_modules', 'code-server', 'lib', 'vscode', 'node_modules', '@vscode', 'ripgrep', 'bin', 'rg');

/** User settings for every run: nothing saves on its own, nothing phones home, no start page, no git scan. */
export const BASE_SETTINGS = {
  'files.autoSave': 'off',
  'workbench.startupEditor': 'none',
  'telemetry.telemetryLevel': 'off',
  'git.enabled': false,
  'workbench.tips.enabled': false,
  'security.workspace.trust.enabled': false,
  'extensions.ignoreRecommendations': true,
  'update.mode': 'none',
  'chat.commandCenter.enabled': false,
  'workbench.secondarySideBar.defaultVisibility': 'hidden',
};

/**
 * Makes sure code-server is installed, running scripts/install-code-server.sh when it is not, or when its ripgrep
 * link is missing and `withRipgrep` (the demo and the screenshots: Quick Open, Find in Files and `workspaceContains`
 * activation need it; the script says how to install rg when the system has none). Returns entry.js.
 */
export function ensureCodeServer({ withRipgrep = false } = {}) {
  const installed = existsSync(codeServerEntry) && existsSync(installedMarker);
  if (installed && (!withRipgrep || existsSync(codeServerRipgrep))) return codeServerEntry;
  console.log(installed ? 'code-server has no ripgrep yet: running scripts/install-code-server.sh' : 'code-server is not installed yet: running scripts/install-code-server.sh');
  const r = spawnSync('bash', [join(repoRoot, 'scripts', 'install-code-server.sh')], { stdio: 'inherit' });
  if (r.status !== 0 || !existsSync(codeServerEntry)) {
    throw new Error(`scripts/install-code-server.sh failed (exit ${r.status}); code-server is needed for this step`);
  }
  return codeServerEntry;
}

/** The Chromium to drive: $CHROMIUM_PATH, else Debian's. Undefined when none is installed. */
export function findChromium() {
  const candidates = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].filter(Boolean);
  return candidates.find((p) => existsSync(p));
}

export const CHROMIUM_HELP =
  'Chromium is not installed. Install Debian\'s build with:\n' +
  '    apt-get update && apt-get install -y chromium\n' +
  'or point CHROMIUM_PATH at a Chromium/Chrome binary.';

/** A fresh temp folder for one run (removed by the `stop()` of whatever uses it). */
export function makeTempDir(prefix = 'precision-lens-') {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Copies a folder (a fixture or demo workspace) to `dest`; web VS Code saves edits into the folder it opens. */
export function copyWorkspace(src, dest) {
  cpSync(src, dest, { recursive: true, filter: (p) => !/(^|\/)(__pycache__|\.pytest_cache)(\/|$)/.test(p) });
  return dest;
}

/**
 * Installs the repository as an extension into `extensionsDir` by linking it under the folder name VS Code gives an
 * installed extension (`publisher.name-version`). The extension then runs exactly as a user's would (not as an
 * Extension Development Host); `npm run build` must have produced out/ first.
 */
export function linkExtension(extensionsDir) {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
  mkdirSync(extensionsDir, { recursive: true });
  const target = join(extensionsDir, `${pkg.publisher}.${pkg.name}-${pkg.version}`);
  if (!existsSync(target)) symlinkSync(repoRoot, target, 'dir');
  return target;
}

/**
 * Starts code-server detached (its own process group, so `stop()` ends the extension host and language server too).
 * Resolves once it listens. Options:
 *   port        0 (default) lets the OS pick; the real port is read from the log line.
 *   host        127.0.0.1 unless told otherwise.
 *   settings    extra user settings merged over BASE_SETTINGS.
 *   extensionsDir  where installed extensions live (default: an empty folder in the temp dir).
 *   onLog       called with each line code-server prints (default: kept quiet, last lines shown on failure).
 *   readyTimeoutMs  how long to wait for the "listening" line.
 *   env         extra environment variables (the extension host and the language server inherit them).
 */
export async function startCodeServer(opts = {}) {
  const entry = ensureCodeServer({ withRipgrep: opts.withRipgrep });
  const tmp = opts.tmp ?? makeTempDir('precision-lens-cs-');
  const userDataDir = join(tmp, 'user-data');
  const extensionsDir = opts.extensionsDir ?? join(tmp, 'extensions');
  mkdirSync(join(userDataDir, 'User'), { recursive: true });
  mkdirSync(extensionsDir, { recursive: true });
  mkdirSync(join(tmp, 'xdg-config'), { recursive: true });
  mkdirSync(join(tmp, 'xdg-data'), { recursive: true });
  writeFileSync(join(userDataDir, 'User', 'settings.json'), JSON.stringify({ ...BASE_SETTINGS, ...(opts.settings ?? {}) }, null, 2));

  const host = opts.host ?? '127.0.0.1';
  const args = [
    entry, '--bind-addr', `${host}:${opts.port ?? 0}`, '--auth', 'none',
    '--user-data-dir', userDataDir, '--extensions-dir', extensionsDir,
    '--disable-telemetry', '--disable-update-check', '--disable-workspace-trust',
    '--disable-getting-started-override', '--ignore-last-opened',
    ...(opts.extraArgs ?? []),
  ];
  const env = {
    ...process.env,
    // code-server reads $PORT itself and lets it override --bind-addr: the port is the one chosen here.
    PORT: undefined,
    XDG_CONFIG_HOME: join(tmp, 'xdg-config'),
    XDG_DATA_HOME: join(tmp, 'xdg-data'),
    EXTENSIONS_GALLERY: '{}',
    // An inherited ELECTRON_RUN_AS_NODE or NODE_OPTIONS (from a debugger, tsx...) must not leak into the extension host.
    NODE_OPTIONS: '',
    ...(opts.env ?? {}),
  };
  delete env.PORT;
  const child = spawn(process.execPath, args, { env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  const recent = [];
  let stopped = false;
  const stop = () => {
    if (!stopped) {
      stopped = true;
      killGroup(child.pid);
    }
    if (!opts.keepTemp && !opts.tmp) rmSync(tmp, { recursive: true, force: true, maxRetries: 3 });
  };

  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error(`code-server did not start within ${(opts.readyTimeoutMs ?? 60000) / 1000} s`)),
      opts.readyTimeoutMs ?? 60000);
    let settled = false;
    const fail = (err) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      stop();
      reject(new Error(`${err.message}\n--- code-server output ---\n${recent.join('\n')}`));
    };
    const onLine = (line) => {
      recent.push(line);
      if (recent.length > 40) recent.shift();
      opts.onLog?.(line);
      const m = /HTTP server listening on https?:\/\/[^\s]*:(\d+)\//.exec(line);
      if (m && !settled) {
        settled = true;
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
      if (/EADDRINUSE/.test(line)) fail(new Error(`port ${opts.port} is in use`));
    };
    lines(child.stdout, onLine);
    lines(child.stderr, onLine);
    child.on('error', fail);
    child.on('exit', (code, signal) => fail(new Error(`code-server exited early (${signal ?? code})`)));
  });

  const base = `http://${host}:${port}`;
  return {
    port, host, tmp, userDataDir, extensionsDir, process: child, stop, recentLog: recent,
    /** The workbench URL opening `folder`, optionally with a test payload (see recipe). */
    url(folder, payload) {
      let u = `${base}/?folder=${encodeURIComponent(folder)}`;
      if (payload) u += `&payload=${encodeURIComponent(JSON.stringify(payload))}`;
      return u;
    },
    /** `vscode-remote://` URI of a path on this machine, as the workbench payload wants it. */
    remote(path) {
      return `vscode-remote://${host}:${port}${path}`;
    },
  };
}

/** Whether `port` on `host` can be listened on right now. */
export function isPortFree(port, host = '127.0.0.1') {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(false));
    probe.listen(port, host, () => probe.close(() => resolve(true)));
  });
}

/** Builds out/ with scripts/build.mjs (esbuild, about a second). Throws when the build fails. */
export function build() {
  const r = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'build.mjs')], { stdio: 'inherit' });
  if (r.status !== 0) throw new Error('the build (scripts/build.mjs) failed');
}

/**
 * Starts code-server with this repository installed as an extension (see linkExtension) and a temp copy of
 * `workspaceSrc` to open (`settings`: extra user settings). Used by the demo and the screenshot script. `port`: the preferred port; when it is taken,
 * a free one is used instead (said on stderr).
 */
export async function startWithExtension({ workspaceSrc, port = 0, host = '127.0.0.1', inPlace = false, onLog, settings } = {}) {
  const tmp = makeTempDir('precision-lens-demo-');
  const workspace = inPlace ? workspaceSrc : copyWorkspace(workspaceSrc, join(tmp, 'workspace'));
  const extensionsDir = join(tmp, 'extensions');
  linkExtension(extensionsDir);
  if (port !== 0 && !(await isPortFree(port, host))) {
    console.error(`port ${port} is in use: using a free port instead`);
    port = 0;
  }
  mkdirSync(join(tmp, 'cs'), { recursive: true });
  let server;
  try {
    server = await startCodeServer({ tmp: join(tmp, 'cs'), port, host, extensionsDir, onLog, settings, withRipgrep: true });
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  const stopServer = server.stop;
  return {
    ...server,
    workspace,
    workbenchUrl: server.url(workspace),
    stop() {
      stopServer();
      rmSync(tmp, { recursive: true, force: true, maxRetries: 3 });
    },
  };
}

/** Kills a detached process group: SIGTERM, then SIGKILL for what is left a moment later. */
export function killGroup(pid) {
  if (!pid) return;
  try { process.kill(-pid, 'SIGTERM'); } catch { /* already gone */ }
  // Synchronous grace period: exit handlers cannot wait on timers.
  const deadline = Date.now() + 1500;
  while (Date.now() < deadline) {
    try { process.kill(-pid, 0); } catch { return; }
    spawnSync('sleep', ['0.1']);
  }
  try { process.kill(-pid, 'SIGKILL'); } catch { /* gone */ }
}

/** Launches headless Chromium with the recipe's flags through playwright-core. */
export async function launchChromium({ headless = true } = {}) {
  const executablePath = findChromium();
  if (!executablePath) throw new Error(CHROMIUM_HELP);
  const { chromium } = await import('playwright-core');
  return chromium.launch({
    executablePath,
    headless,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
}

/** Waits until the workbench has rendered in `page`. */
export async function waitForWorkbench(page, timeoutMs = 60000) {
  await page.waitForSelector('.monaco-workbench', { timeout: timeoutMs });
}

/** Runs `cleanup` once on exit, Ctrl+C, SIGTERM or an uncaught error. */
export function onShutdown(cleanup) {
  let done = false;
  const once = () => {
    if (done) return;
    done = true;
    try { cleanup(); } catch (err) { console.error(err); }
  };
  process.on('exit', once);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.on(sig, () => {
      once();
      process.exit(130);
    });
  }
  return once;
}

function lines(stream, cb) {
  let buf = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk) => {
    buf += chunk;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      cb(buf.slice(0, i).replace(/\r$/, ''));
      buf = buf.slice(i + 1);
    }
  });
  stream.on('end', () => { if (buf) cb(buf); });
}
