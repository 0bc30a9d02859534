/**
 * The language server's analysis scheduler (server/src/lsp/scheduler.ts) on a fake clock: debounce, supersession, the order
 * of due documents, one document per event-loop turn.
 */
import { strict as assert } from 'node:assert';
import { AnalysisScheduler, type SchedulerClock } from '../../server/src/lsp/scheduler';

/** A clock whose time moves only when told; deferred work and timers run in order of their time. */
class FakeClock implements SchedulerClock {
  time = 0;
  private seq = 0;
  private timers: { at: number; seq: number; fn: () => void; live: boolean }[] = [];
  private deferred: (() => void)[] = [];
  now(): number { return this.time; }
  setTimeout(fn: () => void, ms: number): unknown {
    const t = { at: this.time + ms, seq: this.seq++, fn, live: true };
    this.timers.push(t);
    return t;
  }
  clearTimeout(h: unknown): void { (h as { live: boolean }).live = false; }
  defer(fn: () => void): void { this.deferred.push(fn); }
  /** Runs deferred work (and the microtasks it starts) until none is left, then timers due by `until`. */
  async advance(until: number): Promise<void> {
    for (;;) {
      while (this.deferred.length) { this.deferred.shift()!(); await new Promise((r) => setImmediate(r)); }
      const next = this.timers.filter((t) => t.live && t.at <= until).sort((a, b) => a.at - b.at || a.seq - b.seq)[0];
      if (!next) break;
      next.live = false;
      this.time = Math.max(this.time, next.at);
      next.fn();
    }
    this.time = Math.max(this.time, until);
  }
}

describe('server: analysis scheduler', () => {
  let clock: FakeClock;
  let ran: string[];
  let scheduler: AnalysisScheduler;
  beforeEach(() => {
    clock = new FakeClock();
    ran = [];
    scheduler = new AnalysisScheduler(async (uri) => { ran.push(uri); }, 100, clock);
  });

  it('waits for the debounce, and a later edit of the same document supersedes the earlier one', async () => {
    scheduler.edited('a');
    await clock.advance(60);
    scheduler.edited('a');
    await clock.advance(150);
    assert.deepEqual(ran, []);
    await clock.advance(160);
    assert.deepEqual(ran, ['a']);
    await clock.advance(1000);
    assert.deepEqual(ran, ['a']);
  });

  it('runs due edited documents before background re-analyses, the oldest unanswered edit first', async () => {
    scheduler = new AnalysisScheduler(async (uri) => {
      ran.push(uri);
      // A slow analysis: when it ends, both edits below are past their debounce.
      if (uri === 'slow') clock.time = 300;
      if (uri === 'slow') for (const b of ['b1', 'b2']) scheduler.background(b);
    }, 100, clock);
    scheduler.edited('first');
    clock.time = 10;
    scheduler.edited('second');
    // 'first' is edited again: its oldest unanswered edit (at 0) still comes before the one of 'second' (at 10).
    clock.time = 50;
    scheduler.edited('first');
    scheduler.background('slow');
    await clock.advance(50);
    await clock.advance(400);
    assert.deepEqual(ran, ['slow', 'first', 'second', 'b1', 'b2']);
  });

  it('lets an edit read between two due documents overtake the background ones still queued', async () => {
    scheduler = new AnalysisScheduler(async (uri) => {
      ran.push(uri);
      // While 'b1' is analysed an edit of 'x' arrives, and its debounce passes before the next turn.
      if (uri === 'b1') { scheduler.edited('x'); clock.time += 150; }
    }, 100, clock);
    for (const uri of ['b1', 'b2', 'b3']) scheduler.background(uri);
    await clock.advance(clock.time);
    assert.deepEqual(ran, ['b1', 'x', 'b2', 'b3']);
  });

  it('forgets a closed document, keeps a pending edit\'s debounce on a background request, and stops', async () => {
    scheduler.edited('a');
    scheduler.background('a');
    scheduler.edited('gone');
    scheduler.cancel('gone');
    await clock.advance(50);
    assert.deepEqual(ran, []);
    await clock.advance(200);
    assert.deepEqual(ran, ['a']);
    scheduler.edited('a');
    scheduler.stop();
    await clock.advance(1000);
    assert.deepEqual(ran, ['a']);
    assert.equal(scheduler.size, 0);
  });

  it('goes on after a run that throws', async () => {
    scheduler = new AnalysisScheduler(async (uri) => { ran.push(uri); if (uri === 'bad') throw new Error('boom'); }, 100, clock);
    scheduler.background('bad');
    scheduler.background('good');
    await clock.advance(0);
    assert.deepEqual(ran, ['bad', 'good']);
  });
});
