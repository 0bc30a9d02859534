/**
 * When each open document is analysed. An edit waits for the debounce (the user may still be typing; a later edit of
 * the same document supersedes it and restarts the wait); a background re-analysis (settings, workspace facts, a new
 * parser runtime) is due at once. Due documents run one per turn of the event loop, so the edits read in between are
 * queued at once and a fresh edit never waits behind every other open document: documents with an edit come before
 * background re-analyses, the oldest pending edit first (what bounds the slowest answer). No LSP here: tests drive it
 * with their own clock.
 */
export interface SchedulerClock {
  now(): number;
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  /** Runs `fn` after pending I/O has been read (Node: setImmediate). */
  defer(fn: () => void): void;
}

export const nodeClock: SchedulerClock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
  defer: (fn) => setImmediate(fn),
};

interface Pending {
  /** When it may run. */
  due: number;
  /** When its oldest unanswered edit came (undefined: a background re-analysis only). */
  editedAt?: number;
}

export class AnalysisScheduler {
  private readonly pending = new Map<string, Pending>();
  private timer: unknown;
  private timerDue = Infinity;
  private running = false;
  private stopped = false;

  /**
   * `overdueMs`: how long one document's run may hold the queue; past it the queue goes on (the run itself is left to
   * finish) and `overdue` is told. A run waits on nothing but the client's answers, which have deadlines of their own:
   * this one is the last guard against a wait that never ends stopping all analysis.
   */
  constructor(
    private readonly run: (uri: string) => Promise<void>,
    private readonly debounceMs: number,
    private readonly clock: SchedulerClock = nodeClock,
    private readonly overdueMs = 10000,
    private readonly overdue: (uri: string) => void = () => {},
  ) {}

  /** The document changed: analyse it once the debounce has passed without another change. */
  edited(uri: string): void {
    const now = this.clock.now();
    const p = this.pending.get(uri);
    this.pending.set(uri, { due: now + this.debounceMs, editedAt: p?.editedAt ?? now });
    this.wake();
  }

  /** Bring the document up to date as soon as possible (a pending edit keeps its debounce). */
  background(uri: string): void {
    if (this.pending.has(uri)) return;
    this.pending.set(uri, { due: this.clock.now() });
    this.wake();
  }

  /** The document closed: nothing to run for it. */
  cancel(uri: string): void {
    this.pending.delete(uri);
  }

  get size(): number {
    return this.pending.size;
  }

  stop(): void {
    this.stopped = true;
    this.pending.clear();
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** The next due document: edited before background, the oldest edit first, then the earliest due. */
  private pick(now: number): string | undefined {
    let best: string | undefined;
    let bp: Pending | undefined;
    for (const [uri, p] of this.pending) {
      if (p.due > now) continue;
      if (!bp || before(p, bp)) { best = uri; bp = p; }
    }
    return best;
  }

  /** Runs due documents one at a time, or sets one timer for the earliest due. */
  private wake(): void {
    if (this.running || this.stopped) return;
    let earliest = Infinity;
    for (const p of this.pending.values()) if (p.due < earliest) earliest = p.due;
    if (earliest === Infinity) return;
    const now = this.clock.now();
    if (earliest <= now) {
      this.running = true;
      this.clock.defer(() => void this.step());
      return;
    }
    if (this.timer !== undefined && this.timerDue <= earliest) return;
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timerDue = earliest;
    this.timer = this.clock.setTimeout(() => { this.timer = undefined; this.timerDue = Infinity; this.wake(); }, earliest - now);
  }

  private async step(): Promise<void> {
    const uri = this.stopped ? undefined : this.pick(this.clock.now());
    if (uri !== undefined) {
      this.pending.delete(uri);
      let timer: unknown;
      try {
        await Promise.race([
          this.run(uri),
          new Promise<void>((resolve) => { timer = this.clock.setTimeout(() => { this.overdue(uri); resolve(); }, this.overdueMs); }),
        ]);
      } catch {
        // run() reports its own failures; the queue goes on.
      } finally {
        this.clock.clearTimeout(timer);
      }
    }
    this.running = false;
    this.wake();
  }
}

function before(a: Pending, b: Pending): boolean {
  if ((a.editedAt === undefined) !== (b.editedAt === undefined)) return a.editedAt !== undefined;
  if (a.editedAt !== undefined && b.editedAt !== undefined && a.editedAt !== b.editedAt) return a.editedAt < b.editedAt;
  return a.due < b.due;
}
