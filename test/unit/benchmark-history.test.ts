/**
 * The run history on disk: it survives a restart (a new store instance reads what the old one wrote), writes are
 * atomic (no temp files left, never a half-written file), and a corrupt file gives an empty history with a message.
 */
import * as assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { HistoryEntry } from '../../common/webview-messages';
import { HISTORY_FILE, HistoryStore, writeFileAtomic } from '../../client/src/benchmark/historyStore';

function entry(id: string, startedAt: number, tokensPerS = 1000): HistoryEntry {
  return {
    id,
    startedAt,
    finishedAt: startedAt + 60000,
    options: { workload: 'gpt-125m', backends: ['bf16', 'torch-fp8'], steps: 30, warmup: 10, batch: 16, seq: 1024, compile: true },
    gpu: 'NVIDIA H200',
    capability: '9.0',
    results: [
      { backend: 'bf16', tokensPerS, peakMemoryBytes: 2 ** 33, stepTimeMedianMs: 10, losses: [3, 2.5, 2] },
      { backend: 'torch-fp8', tokensPerS: tokensPerS * 1.3, peakMemoryBytes: 2 ** 32, stepTimeMedianMs: 8, losses: [3, 2.6, 2.01] },
    ],
    ratios: [{ backend: 'torch-fp8', speedup: 1.3, memory: 0.5 }],
  };
}

describe('benchmark history store', () => {
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pl-history-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('starts empty when there is no file, without a message', async () => {
    const store = new HistoryStore(join(dir, 'does', 'not', 'exist'));
    assert.deepEqual(await store.load(), { entries: [] });
  });

  it('survives a restart: a new instance reads what the old one wrote, newest first', async () => {
    const first = new HistoryStore(dir);
    await first.load();
    await first.add(entry('a', 1000));
    await first.add(entry('b', 3000));
    await first.add(entry('c', 2000));
    assert.equal(await first.remove('c'), true);
    assert.equal(await first.remove('nope'), false);

    const second = new HistoryStore(dir);
    const loaded = await second.load();
    assert.equal(loaded.message, undefined);
    assert.deepEqual(loaded.entries.map((e) => e.id), ['b', 'a']);
    assert.deepEqual(loaded.entries[1], entry('a', 1000));
    assert.equal(second.get('b')?.results[1].tokensPerS, 1300);
  });

  it('writes atomically: many quick saves leave one valid file and no temp files', async () => {
    const store = new HistoryStore(dir);
    await store.load();
    await Promise.all(Array.from({ length: 20 }, (_, i) => store.add(entry(`r${i}`, i))));
    assert.deepEqual(readdirSync(dir), [HISTORY_FILE]);
    const onDisk = JSON.parse(readFileSync(join(dir, HISTORY_FILE), 'utf8'));
    assert.equal(onDisk.version, 1);
    assert.equal(onDisk.runs.length, 20);
  });

  it('a failed write leaves the old file intact and no temp file', async () => {
    const file = join(dir, 'x.json');
    await writeFileAtomic(file, 'old');
    // The target is a non-empty directory: the rename must fail.
    const blocked = join(dir, 'blocked');
    await writeFileAtomic(join(blocked, 'inner'), 'x');
    await assert.rejects(writeFileAtomic(blocked, 'new'));
    assert.equal(readFileSync(file, 'utf8'), 'old');
    assert.deepEqual(readdirSync(dir).sort(), ['blocked', 'x.json']);
  });

  it('keeps at most maxEntries runs', async () => {
    const store = new HistoryStore(dir, 3);
    await store.load();
    for (let i = 0; i < 5; i++) await store.add(entry(`r${i}`, i));
    assert.deepEqual(store.entries.map((e) => e.id), ['r4', 'r3', 'r2']);
  });

  it('a corrupt file: empty history with a message, the file set aside, no crash', async () => {
    writeFileSync(join(dir, HISTORY_FILE), '{"version":1,"runs":[{"id":"a"', 'utf8');
    const store = new HistoryStore(dir);
    const loaded = await store.load();
    assert.deepEqual(loaded.entries, []);
    assert.match(loaded.message ?? '', /could not be read/);
    assert.ok(readdirSync(dir).some((f) => f.startsWith(`${HISTORY_FILE}.corrupt-`)), 'the unreadable file is kept aside');
    await store.add(entry('new', 5));
    assert.deepEqual((await new HistoryStore(dir).load()).entries.map((e) => e.id), ['new']);
  });

  it('wrong shapes: not an object, no runs list, invalid entries dropped with a message', async () => {
    for (const text of ['[]', 'null', '{"version":1}', '"x"']) {
      writeFileSync(join(dir, HISTORY_FILE), text, 'utf8');
      const loaded = await new HistoryStore(dir).load();
      assert.deepEqual(loaded.entries, [], text);
      assert.ok(loaded.message, text);
    }
    writeFileSync(join(dir, HISTORY_FILE), JSON.stringify({ version: 1, runs: [entry('ok', 1), { id: 5 }, { id: 'x', startedAt: 1, options: {}, results: [] }] }), 'utf8');
    const loaded = await new HistoryStore(dir).load();
    assert.deepEqual(loaded.entries.map((e) => e.id), ['ok']);
    assert.match(loaded.message ?? '', /2 unreadable runs/);
  });
});
