/**
 * The history of benchmark runs on disk: one JSON file in the extension's global storage, written atomically
 * (temp file + rename, so a crash never leaves half a file), read back after a restart. A corrupt file is set aside
 * and the history starts empty with a message; it never throws at the user. Pure Node: no `vscode` import.
 */
import { promises as fs } from 'node:fs';
import * as path from 'node:path';
import type { HistoryEntry } from '../../../common/webview-messages';

export const HISTORY_FILE = 'benchmark-history.json';
const FORMAT_VERSION = 1;

interface HistoryFile {
  version: number;
  runs: HistoryEntry[];
}

export interface HistoryLoadResult {
  entries: HistoryEntry[];
  /** Set when the file existed but could not be used. */
  message?: string;
}

/** Writes `data` to `file` atomically: a temp file in the same directory, flushed, then renamed over the target. */
export async function writeFileAtomic(file: string, data: string): Promise<void> {
  await fs.mkdir(path.dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}.tmp`;
  try {
    const handle = await fs.open(temp, 'w');
    try {
      await handle.writeFile(data, 'utf8');
      await handle.sync();
    } finally {
      await handle.close();
    }
    await fs.rename(temp, file);
  } catch (error) {
    await fs.rm(temp, { force: true }).catch(() => undefined);
    throw error;
  }
}

function isHistoryEntry(value: unknown): value is HistoryEntry {
  if (typeof value !== 'object' || value === null) return false;
  const e = value as Record<string, unknown>;
  return (
    typeof e.id === 'string' &&
    typeof e.startedAt === 'number' &&
    typeof e.options === 'object' && e.options !== null &&
    typeof (e.options as Record<string, unknown>).workload === 'string' &&
    Array.isArray(e.results) &&
    e.results.every((r) => typeof r === 'object' && r !== null && typeof (r as Record<string, unknown>).backend === 'string' && Array.isArray((r as Record<string, unknown>).losses))
  );
}

export class HistoryStore {
  readonly file: string;
  private runs: HistoryEntry[] = [];
  /** Writes are serialized: two quick changes must not rename over each other out of order. */
  private writing: Promise<void> = Promise.resolve();

  constructor(directory: string, private readonly maxEntries = 100) {
    this.file = path.join(directory, HISTORY_FILE);
  }

  /** Newest first. */
  get entries(): HistoryEntry[] {
    return [...this.runs];
  }

  /** Reads the file; a missing file is an empty history, a corrupt one is set aside with a message. */
  async load(): Promise<HistoryLoadResult> {
    let text: string;
    try {
      text = await fs.readFile(this.file, 'utf8');
    } catch (error) {
      this.runs = [];
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { entries: [] };
      return { entries: [], message: `The benchmark history could not be read (${(error as Error).message}).` };
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (error) {
      return this.setAside(`it is not valid JSON: ${(error as Error).message}`);
    }
    const runs = (parsed as Partial<HistoryFile> | null)?.runs;
    if (typeof parsed !== 'object' || parsed === null || !Array.isArray(runs)) return this.setAside('it has no list of runs');
    const valid = runs.filter(isHistoryEntry);
    this.runs = valid.sort((a, b) => b.startedAt - a.startedAt).slice(0, this.maxEntries);
    const dropped = runs.length - valid.length;
    return {
      entries: this.entries,
      message: dropped > 0 ? `${dropped} unreadable run${dropped === 1 ? ' was' : 's were'} left out of the benchmark history.` : undefined,
    };
  }

  /** Adds (or replaces, by id) a run and saves. */
  async add(entry: HistoryEntry): Promise<void> {
    this.runs = [entry, ...this.runs.filter((r) => r.id !== entry.id)].sort((a, b) => b.startedAt - a.startedAt).slice(0, this.maxEntries);
    await this.save();
  }

  /** Removes a run and saves; false when there was no such run. */
  async remove(id: string): Promise<boolean> {
    const before = this.runs.length;
    this.runs = this.runs.filter((r) => r.id !== id);
    if (this.runs.length === before) return false;
    await this.save();
    return true;
  }

  get(id: string): HistoryEntry | undefined {
    return this.runs.find((r) => r.id === id);
  }

  private save(): Promise<void> {
    const data: HistoryFile = { version: FORMAT_VERSION, runs: this.runs };
    const text = JSON.stringify(data);
    const next = this.writing.catch(() => undefined).then(() => writeFileAtomic(this.file, text));
    this.writing = next;
    return next;
  }

  private async setAside(why: string): Promise<HistoryLoadResult> {
    this.runs = [];
    const aside = `${this.file}.corrupt-${Date.now()}`;
    let kept = '';
    try {
      await fs.rename(this.file, aside);
      kept = ` The unreadable file was kept as ${path.basename(aside)}.`;
    } catch {
      // Could not move it: the next save replaces it.
    }
    return { entries: [], message: `The benchmark history could not be read (${why}); starting a new history.${kept}` };
  }
}
