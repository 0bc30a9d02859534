/**
 * The benchmark runner against real processes: cancel kills the whole tree (child and grandchildren, also one that
 * ignores SIGTERM), events arrive typed, and every way a process can end maps to a user message.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { BenchEvent } from '../../common/bench-events';
import { isProcessAlive, killProcessTree, spawnTree, waitUntil } from '../../client/src/benchmark/processTree';
import { BenchmarkOutcome, buildProbeArgs, buildRunArgs, outcomeToUserError, startBenchmark } from '../../client/src/benchmark/runner';

const POSIX = process.platform !== 'win32';
const hasBash = POSIX && spawnSync('bash', ['-c', 'true']).status === 0;

/** Reads `count` pids that the script prints, one per line, on stdout. */
function readPids(child: ReturnType<typeof spawnTree>, count: number): Promise<number[]> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    const timer = setTimeout(() => reject(new Error(`no ${count} pids in ${JSON.stringify(buffer)}`)), 10000);
    child.stdout!.on('data', (d: Buffer) => {
      buffer += d.toString();
      const pids = buffer.split('\n').filter((l) => /^\d+$/.test(l.trim())).map(Number);
      if (pids.length >= count) {
        clearTimeout(timer);
        resolve(pids.slice(0, count));
      }
    });
  });
}

describe('benchmark process tree', function () {
  this.timeout(20000);

  it('kills a bash child and its background grandchild', async function () {
    if (!hasBash) this.skip();
    const child = spawnTree('bash', ['-c', 'sleep 100 & echo $!; echo $$; sleep 100']);
    const [grandchild, shell] = await readPids(child, 2);
    assert.equal(shell, child.pid);
    assert.ok(isProcessAlive(shell) && isProcessAlive(grandchild), 'both start alive');
    await killProcessTree(child.pid!, { graceMs: 2000 });
    assert.ok(await waitUntil(() => !isProcessAlive(shell) && !isProcessAlive(grandchild), 5000), 'both pids are gone');
  });

  it('escalates to SIGKILL when a grandchild ignores SIGTERM', async function () {
    if (!hasBash) this.skip();
    const script = `
const { spawn } = require('node:child_process');
const g = spawn(process.execPath, ['-e', "process.on('SIGTERM', () => {}); console.log(process.pid); setInterval(() => {}, 1000)"], { stdio: ['ignore', 'inherit', 'inherit'] });
process.on('SIGTERM', () => {});
console.log(process.pid);
setInterval(() => {}, 1000);`;
    const child = spawnTree(process.execPath, ['-e', script]);
    const pids = await readPids(child, 2);
    const started = Date.now();
    await killProcessTree(child.pid!, { graceMs: 500 });
    assert.ok(await waitUntil(() => pids.every((p) => !isProcessAlive(p)), 5000), `pids ${pids.join(', ')} are gone`);
    assert.ok(Date.now() - started >= 450, 'waited for the grace period before SIGKILL');
  });

  it('BenchmarkProcess.cancel kills a python child that spawned a grandchild, and reports cancelled', async function () {
    const python = ['python3', '/usr/bin/python3'].find((p) => spawnSync(p, ['-c', 'pass']).status === 0);
    if (!python || !POSIX) this.skip();
    const code = [
      'import subprocess, sys, time, json',
      "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(100)'])",
      "print(json.dumps({'event': 'progress', 'phase': 'pids', 'step': g.pid, 'total': 0}), flush=True)",
      'time.sleep(100)',
    ].join('\n');
    let grandchild: number | undefined;
    const proc = startBenchmark({ command: python!, args: ['-c', code] }, {
      onEvent: (e) => {
        if (e.event === 'progress' && e.phase === 'pids') grandchild = e.step;
      },
    });
    assert.ok(await waitUntil(() => grandchild !== undefined, 10000), 'grandchild pid reported');
    const child = proc.pid!;
    assert.ok(isProcessAlive(child) && isProcessAlive(grandchild!));
    await proc.cancel();
    const outcome = await proc.done;
    assert.equal(outcome.cancelled, true);
    assert.ok(!isProcessAlive(child), 'child gone');
    assert.ok(await waitUntil(() => !isProcessAlive(grandchild!), 3000), 'grandchild gone');
    assert.equal(outcomeToUserError(outcome, python!), undefined, 'a cancelled run is not an error');
  });
});

describe('benchmark runner', function () {
  this.timeout(20000);
  const node = process.execPath;

  function run(script: string, options?: { timeoutMs?: number }): Promise<{ outcome: BenchmarkOutcome; events: BenchEvent[]; stderr: string[]; text: string[] }> {
    const events: BenchEvent[] = [];
    const stderr: string[] = [];
    const text: string[] = [];
    const proc = startBenchmark({ command: node, args: ['-e', script] }, {
      onEvent: (e) => events.push(e),
      onStderr: (l) => stderr.push(l),
      onStdoutText: (l) => text.push(l),
    }, options);
    return proc.done.then((outcome) => ({ outcome, events, stderr, text }));
  }

  it('parses events written in odd chunks, forwards stderr lines and stray stdout text', async () => {
    const { outcome, events, stderr, text } = await run(`
const w = (s) => process.stdout.write(s);
w('{"event":"progress","pha'); w('se":"warmup","step":1,"total":2}\\r');
w('\\nnot json\\n{"event":"result","backend":"bf16","tokens_per_s":10,"losses":[1,NaN]}\\n');
process.stderr.write('phase one\\r\\nphase t'); process.stderr.write('wo\\n');`);
    assert.equal(outcome.exitCode, 0);
    assert.deepEqual(events.map((e) => e.event), ['progress', 'result']);
    assert.deepEqual(stderr, ['phase one', 'phase two']);
    assert.deepEqual(text, ['not json']);
    assert.equal(outcomeToUserError(outcome, 'node'), undefined);
  });

  it('maps a fatal error event to its explanation (never a stack trace)', async () => {
    const { outcome } = await run(`
console.log(JSON.stringify({event:'error',code:'no_cuda',message:'no CUDA device: the benchmark needs an NVIDIA GPU; you can still use diagnostics and fixes',hint:'run it on a GPU machine',fatal:true}));
console.error('Traceback (most recent call last):\\n  File "x.py", line 1, in <module>\\nRuntimeError: boom');
process.exit(4);`);
    const error = outcomeToUserError(outcome, 'python3');
    assert.ok(error);
    assert.equal(error.title, 'No CUDA device');
    assert.match(error.message, /no CUDA device/);
    assert.equal(error.hint, 'run it on a GPU machine');
    assert.doesNotMatch(`${error.message} ${error.hint}`, /Traceback|File "/);
  });

  it('a process that dies without an error event: "benchmark exited with code N" and the last stderr lines', async () => {
    const { outcome } = await run(`console.error('loading model'); console.error('Segmentation fault (core dumped)'); process.exit(139);`);
    const error = outcomeToUserError(outcome, 'python3');
    assert.ok(error);
    assert.match(error.message, /^benchmark exited with code 139/);
    assert.match(error.message, /Segmentation fault/);
    assert.match(error.details ?? '', /loading model\nSegmentation fault/);
  });

  it('a known exit status without an event still gets its title', async () => {
    const { outcome } = await run('process.exit(3)');
    const error = outcomeToUserError(outcome, 'python3');
    assert.equal(error?.title, 'PyTorch not installed');
    assert.match(error?.message ?? '', /benchmark exited with code 3/);
  });

  it('non-fatal errors with results are a finished run; without results the first error explains', async () => {
    const script = (withResult: boolean) => `
console.log(JSON.stringify({event:'error',code:'te_missing',message:'Transformer Engine not installed',fatal:false,backend:'te'}));
${withResult ? "console.log(JSON.stringify({event:'result',backend:'bf16',tokens_per_s:1,losses:[]}));" : ''}
process.exit(6);`;
    const ok = await run(script(true));
    assert.equal(outcomeToUserError(ok.outcome, 'python3', true), undefined);
    const bad = await run(script(false));
    assert.equal(outcomeToUserError(bad.outcome, 'python3', false)?.title, 'Transformer Engine not installed');
  });

  it('an interpreter that does not exist', async () => {
    const proc = startBenchmark({ command: '/nonexistent/python3', args: ['x.py'] }, {});
    const outcome = await proc.done;
    const error = outcomeToUserError(outcome, '/nonexistent/python3');
    assert.equal(error?.code, 'interpreter_not_found');
    assert.match(error?.message ?? '', /\/nonexistent\/python3/);
    assert.match(error?.hint ?? '', /precisionLens\.pythonPath/);
  });

  it('kills a probe that runs past its time limit', async () => {
    const started = Date.now();
    const { outcome } = await run('setInterval(() => {}, 1000)', { timeoutMs: 300 });
    assert.ok(Date.now() - started < 5000);
    assert.equal(outcome.timedOut, true);
    assert.equal(outcomeToUserError(outcome, 'python3')?.code, 'timeout');
  });

  it('builds the documented command lines', () => {
    assert.deepEqual(
      buildRunArgs('/ext/bench/benchmark.py', { workload: 'pkg.model:build', backends: ['bf16', 'te'], steps: 20, warmup: 5, batch: 4, seq: 2048, compile: false }, { jsonOut: '/tmp/r.json', workspace: '/ws' }),
      ['/ext/bench/benchmark.py', '--workload', 'pkg.model:build', '--backends', 'bf16,te', '--steps', '20', '--warmup', '5', '--batch', '4', '--seq', '2048', '--no-compile', '--json-out', '/tmp/r.json', '--workspace', '/ws'],
    );
    assert.deepEqual(buildProbeArgs('/b.py'), ['/b.py', '--probe']);
  });
});
