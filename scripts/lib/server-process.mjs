// What the scripts that drive the BUILT language server over stdio share (load-test.mjs, keystroke-bench.mjs): the
// server process with its JSON-RPC connection, and the figures read from /proc about it.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { createMessageConnection, StreamMessageReader, StreamMessageWriter } = require('vscode-jsonrpc/node');

/** `node [nodeArgs] serverJs --stdio`, stderr passed through, with a connection on its stdin/stdout (not listening yet). */
export function startServer(serverJs, nodeArgs = [], options = {}) {
  const child = spawn(process.execPath, [...nodeArgs, serverJs, '--stdio'], { stdio: ['pipe', 'pipe', 'inherit'], ...options });
  const conn = createMessageConnection(new StreamMessageReader(child.stdout), new StreamMessageWriter(child.stdin));
  return { child, conn };
}

/** CPU seconds the process has used, user and system, from /proc: a figure the machine's other load barely moves. */
export function cpuOf(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return { user: Number(f[11]) / 100, system: Number(f[12]) / 100 };
}

/** The process's resident memory in MB (NaN once it is gone). */
export function rssOf(pid) {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** The q-quantile of xs by rank (no interpolation): a latency that was measured. */
export function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((s.length - 1) * q))];
}
