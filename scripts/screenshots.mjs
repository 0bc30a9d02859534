#!/usr/bin/env node
// Takes the README screenshots from a real VS Code (code-server) with Precision Lens installed, on a temp copy of
// examples/gpt, driven by headless Chromium:
//   docs/screenshots/diagnostics.png  model.py with its squiggles and the Problems panel
//   docs/screenshots/hover.png        the hover of a PL101 diagnostic
//   docs/screenshots/quickfix.png     the quick fix menu (Control+.) on c_attn
//   docs/screenshots/sidebar.png      the Precision Lens benchmark view
// Usage: npm run build && node scripts/screenshots.mjs [--out DIR] [--only diagnostics,hover,...]
// Each step that fails is reported and the script goes on; the exit code is 1 when any step failed.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build, CHROMIUM_HELP, findChromium, launchChromium, onShutdown, repoRoot, startWithExtension, waitForWorkbench } from './lib/code-server.mjs';

const argv = process.argv.slice(2);
const opt = (name) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : undefined; };
const outDir = resolve(opt('--out') ?? join(repoRoot, 'docs', 'screenshots'));
const only = opt('--only')?.split(',');
const want = (name) => !only || only.includes(name);
const TIMEOUT = 45_000;

if (!findChromium()) {
  console.error(CHROMIUM_HELP);
  process.exit(1);
}
if (!argv.includes('--no-build')) build();
mkdirSync(outDir, { recursive: true });

const cs = await startWithExtension({
  workspaceSrc: join(repoRoot, 'examples', 'gpt'),
  settings: {
    'workbench.colorTheme': 'Default Dark Modern',
    'editor.minimap.enabled': false,
    'editor.stickyScroll.enabled': false,
    // Debian's python3 has torch (python3-torch); the first python3 on PATH may not
    ...(existsSync('/usr/bin/python3') ? { 'precisionLens.pythonPath': '/usr/bin/python3' } : {}),
  },
});
let browser;
const cleanup = onShutdown(() => cs.stop());
const failures = [];

try {
  browser = await launchChromium();
  const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  await page.goto(cs.workbenchUrl);
  await waitForWorkbench(page, 90_000);
  console.log(`workbench up at ${cs.workbenchUrl}`);

  let editorReady;
  /** model.py open with its squiggles drawn (once; the editor steps share it). */
  const modelWithSquiggles = () => (editorReady ??= (async () => {
    await openFromExplorer(page, 'model.py');
    // Information squiggles (PL101) or warnings: the language server has answered.
    await page.waitForSelector('.monaco-editor .squiggly-info, .monaco-editor .squiggly-warning', { timeout: TIMEOUT });
    await goToLine(page, lineOf('self.c_attn = nn.Linear(') + 1);
  })());

  await step('diagnostics', async () => {
    await modelWithSquiggles();
    await page.keyboard.press('Control+Shift+M'); // the Problems panel lists the findings under the editor
    await page.waitForSelector('.markers-panel .monaco-list-row', { timeout: TIMEOUT });
    await focusEditor(page);
    await shot(page, 'diagnostics');
  }, page);

  await step('hover', async () => {
    await modelWithSquiggles();
    await focusEditor(page);
    await goToLine(page, lineOf('self.c_attn = nn.Linear(') + 1, 24);
    await page.keyboard.press('Control+K');
    await page.keyboard.press('Control+I'); // editor.action.showHover
    await page.waitForSelector('.monaco-hover:not(.hidden) .hover-contents, .monaco-hover:not(.hidden) .hover-row', { timeout: TIMEOUT });
    await shot(page, 'hover');
    await page.keyboard.press('Escape');
  }, page);

  await step('quickfix', async () => {
    await modelWithSquiggles();
    await focusEditor(page);
    await goToLine(page, lineOf('self.c_attn = nn.Linear(') + 1, 24);
    await page.keyboard.press('Control+.');
    await page.waitForSelector('.action-widget .monaco-list-row', { timeout: TIMEOUT });
    await shot(page, 'quickfix');
    await page.keyboard.press('Escape');
  }, page);

  await step('sidebar', async () => {
    await page.click('.activitybar .action-item a[aria-label^="Precision Lens"], .activitybar .action-item [aria-label^="Precision Lens"]', { timeout: TIMEOUT });
    // The view is a webview: wait for its document to render some text.
    const deadline = Date.now() + TIMEOUT;
    for (;;) {
      const texts = await Promise.all(page.frames().filter((f) => /webview|vscode-cdn|fake\.html|index\.html/.test(f.url()))
        .map((f) => f.evaluate(() => document.body?.innerText?.trim() ?? '').catch(() => '')));
      if (texts.some((t) => t.length > 20)) break;
      if (Date.now() > deadline) throw new Error('the benchmark view rendered no text');
      await page.waitForTimeout(250);
    }
    await shot(page, 'sidebar');
  }, page);
} catch (err) {
  failures.push(`setup: ${err.message}`);
} finally {
  if (browser) await browser.close().catch(() => {});
  cleanup();
}
if (failures.length) {
  console.error(`screenshots failed:\n  ${failures.join('\n  ')}`);
  process.exit(1);
}
console.log(`screenshots written to ${outDir}`);

async function step(name, fn, page) {
  if (!want(name)) return;
  try {
    // whatever a failed step left open (quick input, menus) must not cover the editor
    for (let i = 0; i < 2; i++) await page?.keyboard.press('Escape');
    await fn();
  } catch (err) {
    failures.push(`${name}: ${err.message.split('\n')[0]}`);
  }
}

async function shot(page, name) {
  const file = join(outDir, `${name}.png`);
  if (name === 'sidebar') await page.mouse.move(900, 600); // no activity bar tooltip in the picture
  await page.screenshot({ path: file });
  console.log(`wrote ${file}`);
}

/** 0-based line of `needle` in examples/gpt/model.py (the workspace is a copy of it). */
function lineOf(needle) {
  const i = readFileSync(join(repoRoot, 'examples', 'gpt', 'model.py'), 'utf8').split('\n').findIndex((l) => l.includes(needle));
  if (i < 0) throw new Error(`${needle} not in examples/gpt/model.py`);
  return i;
}

async function openFromExplorer(page, name) {
  const row = page.locator('.explorer-folders-view .monaco-list-row', { hasText: name }).first();
  await row.waitFor({ timeout: TIMEOUT });
  await row.click();
  await page.waitForSelector(`.tabs-container .tab[aria-label^="${name}"]`, { timeout: TIMEOUT });
  await focusEditor(page);
}

async function focusEditor(page) {
  await page.keyboard.press('Control+1'); // workbench.action.focusFirstEditorGroup: no click that an overlay can eat
}

async function goToLine(page, line, column) {
  await page.keyboard.press('Control+G');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ timeout: TIMEOUT });
  await input.fill(`:${line}${column ? `:${column}` : ''}`);
  await page.keyboard.press('Enter');
}
