/**
 * The mocha entry point that VS Code loads inside the extension host (`extensionTestsPath`). test/e2e/run.mjs starts
 * everything; scripts/build.mjs bundles this file to out/test/e2e/index.js.
 *
 * Every `test/e2e/suite/*.test.ts` is a suite: add a file, nothing else. How that works in a single esbuild bundle:
 * the `require(`./${name}.test.ts`)` below is a glob-style require, which esbuild resolves at build time by bundling
 * every file matching `./*.test.ts` in this folder; at run time the names come from this folder's listing, so a suite
 * that exists but was not bundled (a stale out/) fails loudly instead of being skipped.
 *
 * Suites may use the BDD interface (`describe`/`it`/`before`...) or TDD (`suite`/`test`/`suiteSetup`...): both are
 * installed as globals before each suite file is evaluated. E2E_GREP (environment) filters tests by full title.
 */
import * as fs from 'fs';
import * as path from 'path';
import Mocha from 'mocha';

/** Marker line that test/e2e/run.mjs reads the counts from (it prints the closing `N passed, N failed`). */
const RESULT_MARKER = '__PRECISION_LENS_E2E_RESULT__';

/** test/e2e/suite in the repository; out/test/e2e/index.js sits three levels below the root. */
function suiteSourceDir(): string {
  return path.resolve(__dirname, '..', '..', '..', 'test', 'e2e', 'suite');
}

/** Names (without `.test.ts`) of every suite file, sorted so the order is stable. */
export function suiteNames(dir = suiteSourceDir()): string[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.test.ts'))
    .map((f) => f.slice(0, -'.test.ts'.length))
    .sort();
}

function loadSuite(name: string): void {
  // Glob-style require: esbuild bundles every ./*.test.ts here. Keep the template literal in this exact form.
  require(`./${name}.test.ts`);
}

/** Called by VS Code's test runner in the extension host; rejects when any test fails. */
export function run(): Promise<void> {
  const mocha = new Mocha({ ui: 'bdd', color: false, timeout: 60_000, reporter: 'spec' });
  if (process.env.E2E_GREP) mocha.grep(new RegExp(process.env.E2E_GREP));
  // TDD globals next to the BDD ones, so a suite written either way loads.
  Mocha.interfaces.tdd(mocha.suite);

  const names = suiteNames();
  for (const name of names) {
    const file = path.join(suiteSourceDir(), `${name}.test.ts`);
    mocha.suite.emit('pre-require', globalThis, file, mocha);
    try {
      loadSuite(name);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      return Promise.reject(new Error(`cannot load e2e suite ${name}.test.ts (rebuild with npm run build?): ${message}`));
    }
    mocha.suite.emit('require', undefined, file, mocha);
    mocha.suite.emit('post-require', globalThis, file, mocha);
  }
  console.log(`e2e suites: ${names.join(', ')}`);

  return new Promise((resolve, reject) => {
    const runner = mocha.run((failures) => {
      const stats = runner.stats ?? { passes: 0, failures, pending: 0 };
      console.log(`${RESULT_MARKER}${JSON.stringify({ passed: stats.passes, failed: stats.failures, pending: stats.pending })}`);
      if (failures > 0) reject(new Error(`${failures} end-to-end test(s) failed`));
      else resolve();
    });
    // Each failure is printed the moment it happens, so a CI log shows it even if the reporter's epilogue is cut off
    // when the workbench closes.
    runner.on('fail', (test, err) => {
      const e = err instanceof Error ? err : new Error(String(err));
      console.log(`e2e FAILED: ${test.fullTitle()}\n${e.stack ?? e.message}`);
    });
  });
}
