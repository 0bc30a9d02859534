#!/usr/bin/env node
// Takes the README screenshots from a real VS Code (code-server) with Precision Lens installed, on a temp copy of
// examples/gpt, driven by headless Chromium:
//   docs/screenshots/diagnostics.png  model.py with its squiggles and the Problems panel
//   docs/screenshots/hover.png        the hover of a PL101 diagnostic
//   docs/screenshots/quickfix.png     the quick fix menu (Control+.) on c_attn
//   docs/screenshots/codelens.png     the model-level FP8 estimate, a CodeLens over `class GPT`
//   docs/screenshots/sidebar.png      the Precision Lens benchmark view (no GPU here: Run and the backends say why)
//   docs/screenshots/interpreter.png  its "Choose interpreter…" quick pick
//   docs/screenshots/results-h200.png the view with the H200 llama-7b-slice run (bench/results/h200/*.json, imported
//                                     with "Precision Lens: Import Benchmark Results (JSON)…"): charts and table
//   docs/screenshots/compare-h200.png the 7B and 70B slice runs selected together: the comparison
//   docs/screenshots/inference.png    the view's Inference tab, with the H200 --mode inference run of llama-7b-slice
//                                     imported (bench/results/h200/2026-12-02/infer-llama-7b-slice-eager.json)
//   docs/screenshots/ab-h200.png      an H200 A/B ("Measure conversion", --mode ab) imported: nanoGPT 12 x 2048 converted
//                                     vs original BF16 vs torchao compiled, with the verdict against torchao
//                                     (bench/results/h200/2026-12-04-peer/ab-nanogpt-12x2048-8x2048-eager.json)
//   docs/screenshots/ab-compiled-h200.png  the compile path (PL306) A/B imported: llama2.c 6 x 4096 converted by one
//                                     command (torch.compile(fp8_for_compile(model))) vs compiled BF16 vs torchao
//                                     (bench/results/h200/2026-12-04-compiled-path/ab-llama2c-ao-6x4096-6x4096-compiled.json)
//   docs/screenshots/loss-check-h100.png  a loss check imported: llama2.c from its random init on held-out text, with
//                                     BF16 from rounded weights; the arms parted at the first steps' spikes, where
//                                     that BF16 run parts too, the verdict asking for a warm start
//                                     (bench/results/h200/2026-12-05-h100-loss-seeds/loss-llama2c-...-seed11.json)
// The view keeps VS Code's default sidebar width in every picture: that is the width it must fit.
// Usage: npm run build && node scripts/screenshots.mjs [--out DIR] [--only diagnostics,hover,quickfix,codelens,...,interpreter,results-h200,compare-h200,inference,ab-h200,ab-compiled-h200,loss-check-h100]
// Each step that fails is reported and the script goes on; the exit code is 1 when any step failed.
// SCREENSHOTS_DEBUG=DIR saves the window of a failed step as DIR/failed-<step>.png.
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { build, CHROMIUM_HELP, findChromium, launchChromium, onShutdown, repoRoot, startWithExtension, waitForWorkbench } from './lib/code-server.mjs';

const argv = process.argv.slice(2);
const opt = (name) => { const i = argv.indexOf(name); return i >= 0 ? argv[i + 1] : undefined; };
const outDir = resolve(opt('--out') ?? join(repoRoot, 'docs', 'screenshots'));
const only = opt('--only')?.split(',');
const want = (name) => !only || only.includes(name);
const TIMEOUT = 45_000;
/** The H200 runs the results pictures show (bench/results/h200/, written by benchmark.py --json-out). */
const H200_RUNS = ['llama-7b-slice.json', 'llama-70b-slice.json'];
/** The inference run the Inference picture shows (benchmark.py --mode inference --json-out). */
const INFERENCE_RUN = join(repoRoot, 'bench', 'results', 'h200', '2026-12-02', 'infer-llama-7b-slice-eager.json');
/** The A/B run the A/B picture shows (benchmark.py --mode ab --json-out, what `precision-lens measure` runs). */
const AB_RUN = join(repoRoot, 'bench', 'results', 'h200', '2026-12-04-peer', 'ab-nanogpt-12x2048-8x2048-eager.json');
/** The compile path's A/B (PL306: the converted train.py compiles fp8_for_compile(model)), every arm compiled. */
const AB_COMPILED_RUN = join(repoRoot, 'bench', 'results', 'h200', '2026-12-04-compiled-path', 'ab-llama2c-ao-6x4096-6x4096-compiled.json');
const LOSS_CHECK_RUN = join(repoRoot, 'bench', 'results', 'h200', '2026-12-05-h100-loss-seeds', 'loss-llama2c-12x2048-8x2048-eager-200-seed11.json');
const VIEW_SELECTOR = '.activitybar .action-item a[aria-label^="Precision Lens"], .activitybar .action-item [aria-label^="Precision Lens"]';

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
    // The server's explanation card comes with the diagnostic's message (it may arrive a moment after it).
    await page.waitForFunction(() => [...document.querySelectorAll('.monaco-hover:not(.hidden)')].some((h) => h.textContent.includes('linear-to-te')), null, { timeout: TIMEOUT });
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

  await step('codelens', async () => {
    await modelWithSquiggles();
    await focusEditor(page);
    await goToLine(page, lineOf('class GPT(') + 1);
    // The model-level FP8 estimate is a CodeLens over the model class (the server answers after the analysis).
    await page.waitForFunction(() => [...document.querySelectorAll('.monaco-editor .codelens-decoration')].some((d) => /FP8/.test(d.textContent)), null, { timeout: TIMEOUT });
    await shot(page, 'codelens');
  }, page);

  await step('sidebar', async () => {
    await page.click(VIEW_SELECTOR, { timeout: TIMEOUT });
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

  await step('interpreter', async () => {
    const view = await benchmarkFrame(page);
    await view.click('#choose-interpreter');
    await page.waitForSelector('.quick-input-widget .monaco-list-row', { timeout: TIMEOUT });
    await page.waitForFunction(() => !/Looking for/.test(document.querySelector('.quick-input-widget input')?.placeholder ?? ''), undefined, { timeout: TIMEOUT });
    await shot(page, 'interpreter');
    await page.keyboard.press('Escape');
  }, page);

  // The H200 results: the real --json-out files of bench/results/h200, imported through the command palette and
  // the file dialog, as a user would; then the runs are picked in the view's history.
  let imported;
  const importH200 = () => (imported ??= (async () => {
    await modelWithSquiggles(); // the editor beside the view shows model.py, as in the other pictures
    await openBenchmarkView(page);
    for (const [i, name] of H200_RUNS.entries()) {
      await runCommand(page, 'Precision Lens: Import Benchmark Results (JSON)');
      await pickFile(page, join(repoRoot, 'bench', 'results', 'h200', name));
      await waitForView(page, (text, n) => text.includes(`History (${n})`), i + 1, `the history to list ${i + 1} run(s)`);
    }
    // A tall window at the default sidebar width: the history, the charts and the stacked results in one picture.
    await page.keyboard.press('Escape');
    await runCommand(page, 'View: Hide Panel').catch(() => {});
    await page.setViewportSize({ width: 1440, height: 1600 });
  })());

  await step('results-h200', async () => {
    await importH200();
    const view = await benchmarkFrame(page);
    await selectRuns(view, ['llama-7b-slice']);
    await waitForView(page, (text) => /Run of .*: llama-7b-slice/.test(text) && text.includes('Throughput'), undefined, 'the 7B run details');
    await scrollView(view, 'section.history');
    await shot(page, 'results-h200');
  }, page);

  await step('compare-h200', async () => {
    await importH200();
    const view = await benchmarkFrame(page);
    await selectRuns(view, ['llama-7b-slice', 'llama-70b-slice']);
    await waitForView(page, (text) => text.includes('Comparison'), undefined, 'the comparison');
    await scrollView(view, 'section.details');
    await shot(page, 'compare-h200');
  }, page);

  await step('inference', async () => {
    await importH200();
    await runCommand(page, 'Precision Lens: Import Benchmark Results (JSON)');
    await pickFile(page, INFERENCE_RUN);
    const view = await benchmarkFrame(page);
    await view.click('#tab-inference');
    await selectRuns(view, ['llama-7b-slice · inference']);
    await waitForView(page, (text) => text.includes('Decode (tokens/s)') && text.includes('next-token agreement'), undefined, 'the inference run');
    await scrollView(view, '#benchmark-form');
    await shot(page, 'inference');
  }, page);

  // An A/B run's --json-out imported into the H200 history, selected in the Training tab, its details in view.
  const importedAb = (name, file, ready, what) => step(name, async () => {
    await importH200();
    await runCommand(page, 'Precision Lens: Import Benchmark Results (JSON)');
    await pickFile(page, file);
    const view = await benchmarkFrame(page);
    await view.click('#tab-train'); // the tab with Measure conversion
    // The import selects the run it added, alone (several A/B runs of this workload may be in the history by now).
    await waitForView(page, (text) => /A\/B run of .*: pl_workload:build/.test(text) && ready(text), undefined, what);
    await scrollView(view, 'section.details');
    await shot(page, name);
  }, page);
  await importedAb('ab-h200', AB_RUN, (text) => text.includes('the conversion is ahead'), 'the A/B run with its verdict');
  await importedAb('ab-compiled-h200', AB_COMPILED_RUN, (text) => text.includes('torchao Float8Linear'), 'the compile-path A/B run');
  await importedAb('loss-check-h100', LOSS_CHECK_RUN, (text) => text.includes('parts too (step 1'), 'the loss check with its verdict');
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
    // What the window showed when the step failed (SCREENSHOTS_DEBUG=dir), for diagnosis; never in docs/.
    if (process.env.SCREENSHOTS_DEBUG) await page?.screenshot({ path: join(process.env.SCREENSHOTS_DEBUG, `failed-${name}.png`) }).catch(() => {});
  }
}

async function shot(page, name) {
  const file = join(outDir, `${name}.png`);
  if (name === 'sidebar' || name === 'inference' || name.endsWith('-h200')) await page.mouse.move(1200, 600); // no tooltip in the picture
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
  // The exact name: `hasText: 'model.py'` alone also matches bench_model.py, which sorts first.
  const exact = new RegExp(`^${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`);
  const row = page.locator('.explorer-folders-view .monaco-list-row').filter({ has: page.locator('.label-name', { hasText: exact }) }).first();
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


async function openBenchmarkView(page) {
  if (await benchmarkFrame(page, 1000).catch(() => undefined)) return;
  await page.click(VIEW_SELECTOR, { timeout: TIMEOUT });
  await benchmarkFrame(page);
}

/** The frame of the benchmark webview (the inner one, with the view's `#app`). */
async function benchmarkFrame(page, timeoutMs = TIMEOUT) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const f of page.frames()) {
      const found = await f.evaluate(() => !!document.querySelector('#app section.history')).catch(() => false);
      if (found) return f;
    }
    if (Date.now() > deadline) throw new Error('no benchmark webview frame');
    await page.waitForTimeout(200);
  }
}

/** Waits until the benchmark view's text satisfies `test(text, arg)`. */
async function waitForView(page, test, arg, what) {
  const deadline = Date.now() + TIMEOUT;
  for (;;) {
    const view = await benchmarkFrame(page).catch(() => undefined);
    const text = view ? await view.evaluate(() => document.body.innerText).catch(() => '') : '';
    if (test(text, arg)) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await page.waitForTimeout(200);
  }
}

/** Runs a command by its palette title (F1, type, Enter). */
async function runCommand(page, title) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ timeout: TIMEOUT });
  await input.fill(`>${title}`);
  const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: title }).first();
  await row.waitFor({ timeout: TIMEOUT });
  await page.keyboard.press('Enter');
}

/** Answers code-server's file dialog (a quick input holding a path) with `file`. */
async function pickFile(page, file) {
  const input = page.locator('.quick-input-widget input');
  await page.waitForFunction(() => {
    const el = document.querySelector('.quick-input-widget input');
    return !!el && el.offsetParent !== null && el.value.startsWith('/');
  }, undefined, { timeout: TIMEOUT });
  // The dialog fills in its start folder after it opens, and completes as it goes: type the path until it holds
  // exactly that (and has had time to validate it), then accept it.
  const deadline = Date.now() + TIMEOUT;
  for (let settled = 0; settled < 3;) {
    if (Date.now() > deadline) throw new Error(`the file dialog did not take ${file}`);
    if ((await input.inputValue()) === file) settled++;
    else {
      settled = 0;
      await input.fill(file);
    }
    await page.waitForTimeout(250);
  }
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => {
    const w = document.querySelector('.quick-input-widget');
    return !w || w.style.display === 'none' || w.offsetParent === null;
  }, undefined, { timeout: TIMEOUT });
}

/** Checks exactly the history rows whose text contains each of `workloads` (the view keeps the last two). */
async function selectRuns(view, workloads) {
  const rows = view.locator('.history-list li');
  const n = await rows.count();
  for (let i = 0; i < n; i++) {
    const row = rows.nth(i);
    const text = await row.innerText();
    const want = workloads.some((w) => new RegExp(`\\b${w}\\b`).test(text));
    const box = row.locator('input[type=checkbox]');
    if ((await box.isChecked()) !== want) await box.click();
  }
}

async function scrollView(view, selector) {
  await view.evaluate((sel) => document.querySelector(sel)?.scrollIntoView({ block: 'start' }), selector);
  await view.page().waitForTimeout(300);
}
