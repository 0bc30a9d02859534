#!/usr/bin/env node
// End-to-end tests in a real VS Code: code-server 4.100.3 (the VS Code 1.100 server and web workbench) driven by
// headless Debian Chromium. Mocha runs INSIDE the real extension host (test/e2e/suite/index.ts, bundled to
// out/test/e2e/index.js by scripts/build.mjs), with the real language client and server, on a temp copy of
// examples/gpt plus test/e2e/workspace. The exit code is mocha's verdict; the last line is `N passed, N failed`.
//
// Environment:
//   E2E_TIMEOUT_MS   overall deadline (default 300000): past it everything is killed and the run fails.
//   E2E_GREP         only run tests whose full title matches this regular expression.
//   E2E_SKIP_BUILD=1 do not run scripts/build.mjs first (npm test has just built).
//   E2E_VERBOSE=1    also print code-server's log and browser console errors.
//   E2E_KEEP=1       keep the temp folder (workspace copy, user data, logs) and print where it is.
//   CHROMIUM_PATH    a Chromium other than /usr/bin/chromium.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { format } from 'node:util';
import {
  CHROMIUM_HELP, copyWorkspace, ensureCodeServer, findChromium, launchChromium, makeTempDir, onShutdown, repoRoot,
  startCodeServer,
} from '../../scripts/lib/code-server.mjs';
import { PROBES } from './dom-probes.mjs';

const started = Date.now();
const deadlineMs = Number(process.env.E2E_TIMEOUT_MS ?? 300_000);
const verbose = process.env.E2E_VERBOSE === '1';
const RESULT_MARKER = '__PRECISION_LENS_E2E_RESULT__';
/** A test asks for a DOM probe (test/e2e/dom-probes.mjs) of a webview: `{id, probe, out}` follows the marker. */
const DOM_MARKER = '__PRECISION_LENS_E2E_DOM__';
const testsIndex = join(repoRoot, 'out', 'test', 'e2e', 'index.js');
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;

/** Counts reported by the mocha index inside the extension host (undefined until it reports). */
let counts;
let server;
let browser;
let tmp;

const cleanup = onShutdown(() => {
  server?.stop();
  if (tmp && process.env.E2E_KEEP !== '1') spawnSync('rm', ['-rf', tmp]);
  else if (tmp) console.log(`e2e: kept ${tmp}`);
});

/** Workbench chatter that says nothing about the tests (shown with E2E_VERBOSE=1). */
const NOISE = [
  /^Ignoring fetching additional builtin extensions/, /^Updating additional builtin extensions cache/,
  /^Creating a socket/, /^Resolv(ing|ed) connection token/, /^\[Service Worker\]/, /^ChatSessionStore:/,
  /^Creation of workbench contribution '[^']*' took \d+ms/,
  /ripgrep\/bin\/rg ENOENT/, // code-server's ripgrep download is skipped offline; only search needs it
];

let finishing = false;
/** Prints the verdict line and exits. A run that executed no test never passes. */
async function finish(code, why) {
  if (finishing) return;
  finishing = true;
  if (why) console.error(`e2e: ${why}`);
  // Chromium first (its own process tree, closed through playwright), then the code-server process group.
  if (browser) await Promise.race([browser.close().catch(() => {}), new Promise((r) => setTimeout(r, 3000))]);
  let passed = counts?.passed ?? 0;
  let failed = counts?.failed ?? 0;
  if (code === 0 && passed === 0) {
    console.error('e2e: no test ran; treating the run as failed');
    code = 1;
  }
  if (code !== 0 && failed === 0) failed = 1; // a crash before or outside mocha still counts as a failure
  console.log(`e2e: finished in ${elapsed()} with exit code ${code}`);
  console.log(`${passed} passed, ${failed} failed`);
  cleanup();
  process.exit(code);
}

const deadline = setTimeout(() => finish(1, `overall deadline of ${deadlineMs / 1000} s passed: killed code-server and Chromium`), deadlineMs);

async function main() {
  const chromiumPath = findChromium();
  if (!chromiumPath) {
    console.error(CHROMIUM_HELP);
    return finish(1, 'cannot run the end-to-end tests without Chromium');
  }

  if (process.env.E2E_SKIP_BUILD !== '1') {
    const b = spawnSync(process.execPath, [join(repoRoot, 'scripts', 'build.mjs')], { stdio: 'inherit' });
    if (b.status !== 0) return finish(1, 'npm run build failed');
  }
  if (!existsSync(testsIndex)) return finish(1, `${testsIndex} is missing: scripts/build.mjs did not bundle test/e2e/suite/index.ts`);
  if (!existsSync(join(repoRoot, 'out', 'client.js'))) console.warn('e2e: warning: out/client.js is missing: the extension cannot activate');

  ensureCodeServer();
  tmp = makeTempDir('precision-lens-e2e-');
  // The demo workspace (examples/gpt) is what the tests open, so the README's demo and the tests cannot drift apart;
  // test/e2e/workspace adds the files only the tests need.
  const workspace = copyWorkspace(join(repoRoot, 'examples', 'gpt'), join(tmp, 'workspace'));
  copyWorkspace(join(repoRoot, 'test', 'e2e', 'workspace'), workspace);
  mkdirSync(join(tmp, 'cs'), { recursive: true });

  server = await startCodeServer({
    tmp: join(tmp, 'cs'),
    // mocha's reporter runs in the extension host, whose stdout is no terminal: no colour codes in CI logs
    env: { NO_COLOR: '1', FORCE_COLOR: '0' },
    // The workspace's models are 64-wide toys that run on the CPU; the H200 table predicts FP8 to lose on them, so
    // "convert all" would leave them in BF16 (tested in test/unit/gain-wired.test.ts). The editor's conversion
    // mechanics are what these tests drive: conversions on.
    settings: { 'precisionLens.convertLosingLayers': true },
    onLog: verbose ? (l) => console.log(`[code-server] ${l}`) : undefined,
  });
  console.log(`e2e: code-server listening on 127.0.0.1:${server.port} (${elapsed()})`);

  browser = await launchChromium();
  const page = await browser.newPage();
  if (verbose) {
    page.on('console', (m) => { if (m.type() === 'error') console.log(`[browser] ${m.text()}`); });
    page.on('pageerror', (e) => console.log(`[browser] ${e.message}`));
  }
  // Registered before goto: the workbench looks these up as soon as it loads the test payload.
  await page.exposeFunction('codeAutomationLog', (_type, args) => {
    const line = format(...(Array.isArray(args) ? args : [args]));
    const at = line.indexOf(RESULT_MARKER);
    if (at >= 0) {
      try { counts = JSON.parse(line.slice(at + RESULT_MARKER.length)); } catch { /* malformed: leave unknown */ }
      return;
    }
    const dom = line.indexOf(DOM_MARKER);
    if (dom >= 0) {
      void answerDomProbe(page, line.slice(dom + DOM_MARKER.length));
      return;
    }
    if (verbose || !NOISE.some((re) => re.test(line))) console.log(line);
  });
  await page.exposeFunction('codeAutomationExit', (code) => {
    // Let the last log lines arrive before closing.
    setTimeout(() => finish(Number(code) === 0 ? 0 : 1), 1500);
  });

  const payload = [
    ['extensionDevelopmentPath', server.remote(repoRoot)],
    ['extensionTestsPath', server.remote(testsIndex)],
    ['skipWelcome', 'true'],
  ];
  await page.goto(server.url(workspace, payload));
  console.log(`e2e: workbench opened ${workspace} (${elapsed()})`);
}

/**
 * Runs a DOM probe in the frame of the benchmark webview and writes `{ok, value}` or `{ok: false, error}` to the
 * file the test named (inside this run's temp folder: the test polls for it).
 */
async function answerDomProbe(page, request) {
  let req;
  try {
    req = JSON.parse(request);
  } catch {
    return;
  }
  if (!tmp || typeof req.out !== 'string' || !req.out.startsWith(tmp) || !PROBES[req.probe]) return;
  let answer;
  try {
    const frame = await benchmarkFrame(page);
    answer = { ok: true, value: await frame.evaluate(PROBES[req.probe]) };
  } catch (err) {
    answer = { ok: false, error: String(err?.message ?? err) };
  }
  mkdirSync(dirname(req.out), { recursive: true });
  writeFileSync(`${req.out}.tmp`, JSON.stringify(answer));
  renameSync(`${req.out}.tmp`, req.out);
}

/** The frame that holds the benchmark view's document (the inner frame of its webview). */
async function benchmarkFrame(page, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const f of page.frames()) {
      if (await f.evaluate(() => !!document.querySelector('#app section.history')).catch(() => false)) return f;
    }
    if (Date.now() > deadline) throw new Error('no benchmark webview frame (is the view open?)');
    await new Promise((r) => setTimeout(r, 200));
  }
}

main().catch((err) => finish(1, err?.stack ?? String(err)));
