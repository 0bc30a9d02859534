/**
 * The workspace scan kept current: the full scan once the client is initialised, then the files the client's watcher
 * reports created, changed or deleted (workspace/didChangeWatchedFiles) are read again, one batch at a time and after
 * the full scan, so that a new training script or a new construction site counts without a restart. No LSP here.
 */
import { forgetSites } from './sites';
import { inScan, scanWorkspace, updateScan, type ScanResult } from './scan';

export class WorkspaceScan {
  current: ScanResult | undefined;
  private queue: Promise<void> = Promise.resolve();

  /** `updated` is called with each new result (the first one from the full scan). */
  constructor(private readonly roots: readonly string[], private readonly updated: (scan: ScanResult, paths?: readonly string[]) => void) {}

  /** The full scan (no roots: none). Failures are the caller's to log. */
  start(): Promise<void> {
    if (!this.roots.length) return Promise.resolve();
    this.queue = this.queue.then(async () => {
      this.current = await scanWorkspace([...this.roots]);
      this.updated(this.current);
    });
    return this.queue;
  }

  /** Files the watcher reported (any paths: those the scan would not read are ignored). Resolves when applied. */
  changed(paths: readonly string[]): Promise<void> {
    const ours = [...new Set(paths)].filter((p) => inScan(this.roots, p));
    if (!ours.length) return Promise.resolve();
    for (const p of ours) forgetSites(p);
    this.queue = this.queue.then(async () => {
      if (!this.current) return;
      this.current = await updateScan(this.current, ours);
      this.updated(this.current, ours);
    }, () => undefined);
    return this.queue;
  }
}
