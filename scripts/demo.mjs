#!/usr/bin/env node
// `npm run demo`: a real VS Code (code-server, in the browser) with Precision Lens installed, opening examples/gpt.
// The extension is installed by linking this repository into a fresh extensions folder, so what runs is the
// extension as built in out/ (npm run demo builds first), not an Extension Development Host.
//
//   --port N or PORT=N (default 8080; a free port is used when it is taken)   --host H or HOST=H (default 127.0.0.1)
//   --in-place   open examples/gpt itself instead of a temp copy (edits then land in the repository)
//   --verbose    print code-server's log
// Stop with Ctrl+C: code-server, the extension host and the language server are ended and the temp folder removed.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { build, onShutdown, repoRoot, startWithExtension } from './lib/code-server.mjs';

const args = process.argv.slice(2);
const verbose = args.includes('--verbose');
const option = (name) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
const portText = option('--port') ?? process.env.PORT ?? '8080';
const port = Number(portText);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`precision-lens demo: the port must be a number from 0 to 65535, got "${portText}" (--port N or PORT=N)`);
  process.exit(2);
}
if (!existsSync(join(repoRoot, 'out', 'client.js'))) build();

let demo;
try {
  demo = await startWithExtension({
    workspaceSrc: join(repoRoot, 'examples', 'gpt'),
    port,
    host: option('--host') ?? process.env.HOST ?? '127.0.0.1',
    inPlace: args.includes('--in-place'),
    onLog: verbose ? (l) => console.log(`[code-server] ${l}`) : undefined,
  });
} catch (e) {
  console.error(`precision-lens demo: could not start code-server: ${e instanceof Error ? e.message : e}`);
  console.error('Run `bash scripts/install-code-server.sh` if code-server is missing; --verbose prints its log.');
  process.exit(1);
}
onShutdown(() => {
  demo.stop();
  console.log('\nPrecision Lens demo stopped.');
});
demo.process.on('exit', (code, signal) => {
  console.error(`code-server exited (${signal ?? code})`);
  process.exit(1);
});

console.log(`
  Precision Lens demo is running (VS Code ${'1.100'} in the browser, code-server 4.100.3).

    Open:  ${demo.workbenchUrl}

  Workspace: ${demo.workspace}${args.includes('--in-place') ? '' : ' (a temp copy of examples/gpt)'}
  Try: open model.py (PL101 on the projections, lm_head left alone), te_model.py (PL301, PL201),
       Ctrl+. on a squiggle for quick fixes, and the Precision Lens icon in the activity bar for the benchmark.
  Press Ctrl+C to stop.
`);
