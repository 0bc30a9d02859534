// Bundles the client, the language server and the CLI with esbuild (one CommonJS file each) and copies the
// tree-sitter WASM files next to the bundles: web-tree-sitter loads them from the bundle's directory at run time.
import * as esbuild from 'esbuild';
import { copyFileSync, mkdirSync, existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'out');
mkdirSync(out, { recursive: true });
const production = process.argv.includes('--production');

const common = {
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  sourcemap: !production,
  minify: production,
  logLevel: 'warning',
};

const entries = [
  { entryPoints: [join(root, 'client/src/extension.ts')], outfile: join(out, 'client.js'), external: ['vscode'] },
  { entryPoints: [join(root, 'server/src/server.ts')], outfile: join(out, 'server.js') },
  { entryPoints: [join(root, 'server/src/cli.ts')], outfile: join(out, 'cli.js') },
];
const e2eIndex = join(root, 'test/e2e/suite/index.ts');
if (existsSync(e2eIndex)) {
  entries.push({ entryPoints: [e2eIndex], outfile: join(out, 'test/e2e/index.js'), external: ['vscode', 'mocha'] });
}
const webview = join(root, 'client/src/sidebar/webview/main.ts');
if (existsSync(webview)) {
  entries.push({ entryPoints: [webview], outfile: join(out, 'webview.js'), platform: 'browser', format: 'iife', target: 'es2022' });
}
await Promise.all(entries.filter((e) => existsSync(e.entryPoints[0])).map((e) => esbuild.build({ ...common, ...e })));

copyFileSync(join(root, 'node_modules/web-tree-sitter/web-tree-sitter.wasm'), join(out, 'web-tree-sitter.wasm'));
// The runtime is loaded at run time, not bundled: a fresh copy of it is a fresh WASM instance (parser.ts, after a trap).
copyFileSync(join(root, 'node_modules/web-tree-sitter/web-tree-sitter.cjs'), join(out, 'web-tree-sitter.cjs'));
copyFileSync(join(root, 'node_modules/tree-sitter-python/tree-sitter-python.wasm'), join(out, 'tree-sitter-python.wasm'));
const css = join(root, 'client/src/sidebar/webview');
if (existsSync(css)) for (const f of readdirSync(css)) if (f.endsWith('.css')) copyFileSync(join(css, f), join(out, f));
console.log('built out/ (client.js, server.js, cli.js, WASM grammar)');
