#!/usr/bin/env node
// Checks what `npm run demo` gives a user, in the same code-server and workspace, driven by headless Chromium:
// the extension activates when the workspace opens (no file opened: the `workspaceContains` event, which needs
// code-server's search), Quick Open finds a file, and Find in Files finds text (both run ripgrep).
// Usage: npm run build && node scripts/check-demo.mjs   (exit 0 when all three work; prints what it saw)
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { codeServerRipgrep, launchChromium, onShutdown, repoRoot, startWithExtension, waitForWorkbench } from './lib/code-server.mjs';

const TIMEOUT = 60_000;
const demo = await startWithExtension({ workspaceSrc: join(repoRoot, 'examples', 'gpt') });
let browser;
const cleanup = onShutdown(() => demo.stop());
const results = [];
const check = async (name, fn) => {
  try {
    results.push([name, true, await fn()]);
  } catch (err) {
    results.push([name, false, err.message.split('\n')[0]]);
  }
};

/** Lines of the extension host logs of this code-server (its user data folder) that match `re`. */
function hostLog(re) {
  const found = [];
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (/exthost\.log$|remoteexthost\.log$/.test(e.name)) found.push(...readFileSync(p, 'utf8').split('\n').filter((l) => re.test(l)));
    }
  };
  const logs = join(demo.userDataDir, 'logs');
  if (existsSync(logs)) walk(logs);
  return found;
}

try {
  console.log(`ripgrep for code-server: ${existsSync(codeServerRipgrep) ? codeServerRipgrep : 'missing'}`);
  browser = await launchChromium();
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  await page.goto(demo.workbenchUrl);
  await waitForWorkbench(page, 90_000);

  await check('activates when the workspace opens', async () => {
    const deadline = Date.now() + TIMEOUT;
    for (;;) {
      const lines = hostLog(/precision-lens\.precision-lens/);
      const line = lines.find((l) => /activat/i.test(l));
      if (line) return line.replace(/^.*?(ExtensionService|Activating)/, '$1').slice(0, 160);
      if (Date.now() > deadline) throw new Error('no activation of precision-lens.precision-lens in the extension host log');
      await page.waitForTimeout(500);
    }
  });

  await check('Quick Open finds te_model.py', async () => {
    await page.keyboard.press('Control+P');
    const input = page.locator('.quick-input-widget input');
    await input.waitFor({ timeout: TIMEOUT });
    await input.fill('te_mod');
    const row = page.locator('.quick-input-widget .monaco-list-row', { hasText: 'te_model.py' }).first();
    await row.waitFor({ timeout: TIMEOUT });
    const text = await row.innerText();
    await page.keyboard.press('Escape');
    return text.replace(/\s+/g, ' ');
  });

  await check('Find in Files finds text', async () => {
    await page.keyboard.press('Control+Shift+F');
    const box = page.locator('.search-view .search-widget textarea, .search-view .search-widget input').first();
    await box.waitFor({ timeout: TIMEOUT });
    await box.fill('lm_head');
    await page.keyboard.press('Enter');
    const message = page.locator('.search-view .messages, .search-view .result-messages').first();
    await page.locator('.search-view .monaco-list-row').first().waitFor({ timeout: TIMEOUT });
    return ((await message.innerText().catch(() => '')) || 'results listed').replace(/\s+/g, ' ');
  });
} finally {
  if (browser) await browser.close().catch(() => {});
  cleanup();
}
for (const [name, ok, what] of results) console.log(`${ok ? 'ok  ' : 'FAIL'} ${name}: ${what}`);
const failed = results.filter((r) => !r[1]).length;
console.log(`${results.length - failed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
