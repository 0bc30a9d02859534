/**
 * The predicted FP8 gain of the model files a compiling training script imports, read from disk when they are not
 * open in the editor (PL306). The CLI analyses every input, so `precision-lens check proj/` knows that nanoGPT's
 * model.py at GPT-2 small's width loses in FP8 and keeps PL306 quiet on train.py; the editor, with only train.py open,
 * knew nothing of model.py and offered FP8 to a model the analysis predicts slower. This module gives the editor the
 * same fact: for each open script that compiles, the modules it imports that are workspace files (a bare or relative
 * name in the script's folder, `from model import GPT`; a dotted one in the folder or under a workspace root,
 * `from pkg.model import GPT`) are parsed and analysed as the CLI does (the file's sizes from its settings and config
 * files, construction sites from the workspace), and only their candidates/gains share is kept.
 *
 * Bounded: at most MAX_FILES_PER_SCRIPT modules per script and MAX_TRACKED in all, each under MAX_BYTES; a file is
 * analysed again only when its modification time, size or sizes change. The work runs after the publish that asked
 * for it (setImmediate), one file per event-loop turn, so a keystroke in the script never waits for it.
 */
import { statSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import type { PrecisionLensSettings } from '../../../common/settings';
import { analyzeTree } from '../analysis';
import type { ModelIR } from '../analysis/ir';
import { fileFactsOf, skipReason } from '../engine/engine';
import type { PythonParser } from '../engine/parser';
import { slashed } from '../engine/paths';
import { dimsForFile } from './dims';
import { sitesForFile } from './sites';

export const MAX_FILES_PER_SCRIPT = 16;
export const MAX_TRACKED = 64;
const MAX_BYTES = 2_000_000;

/** What an imported model file says about FP8 (engine FileFacts' share): whether it builds candidates, and whether one gains. */
export interface ImportedGain {
  candidates: boolean;
  gains: boolean;
  /** The file builds te.* layers (a script's torch checkpoint around them is PL701's). */
  te?: boolean;
}

interface Entry {
  /** mtime, size and the sizes the IR read: when one changes, the file is analysed again. */
  key: string;
  result?: ImportedGain;
}

export interface ImportedGainsHost {
  parser: () => PythonParser | undefined;
  /** The settings that apply to the file (editor settings with its project's [tool.precision-lens] laid over them). */
  settings: (path: string) => Promise<PrecisionLensSettings>;
  /** The workspace's Python files (the scan's list): dotted imports and construction sites are looked for there. */
  workspaceFiles: () => readonly string[];
  /** Whether the editor has the file open (its facts then come from its own analysis). */
  isOpen: (path: string) => boolean;
  /** Called when what the tracked files say changed: the workspace facts are then merged again. */
  changed: () => void;
  log?: (message: string) => void;
}

/**
 * The workspace files a script's imports name, most specific first: `from model import GPT` (target `model.GPT`) in
 * `/p/train.py` is `/p/model.py` (or `/p/model/__init__.py`); `from pkg.model import GPT` is `/p/pkg/model.py` or a
 * workspace file ending in `/pkg/model.py`. `exists` is asked of the folder's candidates; the workspace list answers the rest.
 */
export function importedFiles(script: string, ir: ModelIR, workspaceFiles: readonly string[], exists: (path: string) => boolean): string[] {
  const dir = dirname(script);
  const out: string[] = [];
  let listed: string[] | undefined;
  for (const b of ir.imports) {
    if (out.length >= MAX_FILES_PER_SCRIPT) break;
    const parts = b.target.replace(/^\.+/, '').split('.').filter(Boolean);
    for (let i = parts.length; i >= 1; i--) {
      const mod = parts.slice(0, i).join('/');
      const near = [join(dir, `${mod}.py`), join(dir, mod, '__init__.py')].find(exists);
      const hit = near ?? (parts.length > 1 && i > 1 ? workspaceFiles[(listed ??= workspaceFiles.map(slashed)).findIndex((f) => f.endsWith(`/${mod}.py`) || f.endsWith(`/${mod}/__init__.py`))] : undefined);
      if (hit) {
        if (hit !== script && !out.includes(hit)) out.push(hit);
        break;
      }
    }
  }
  return out;
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** A model file's candidates/gains share, from its text analysed as the CLI analyses an input (its sizes from the
 *  settings and config files, construction sites from the other files); undefined when it cannot be analysed here. */
export function gainOfText(parser: PythonParser, path: string, text: string, settings: PrecisionLensSettings, dims: ReturnType<typeof dimsForFile>, others: readonly string[]): ImportedGain | undefined {
  if (parser.needsRenewal || skipReason(text, settings)) return undefined;
  const sites = others.length ? sitesForFile(path, text, others.map((p) => ({ path: p, shown: relative(dirname(path), p) }))) : undefined;
  const tree = parser.parse(text);
  if (!tree) return undefined;
  try {
    const { candidates, gains, te } = fileFactsOf(analyzeTree(tree, text, undefined, { dims, sites }));
    return { candidates, gains, ...(te ? { te } : {}) };
  } finally {
    parser.release(tree);
  }
}

/** What the CLI read of the files a compiling input imports, by path and modification: `check train.py` and each --fix
 *  round read model.py once. */
const readOnce = new Map<string, { key: string; result?: ImportedGain }>();

/**
 * The CLI's side (cli/analyze.ts): the model files a compiling or checkpointing input imports that are not inputs themselves, read
 * from disk and analysed for their share, so `precision-lens check train.py` knows what `check DIR` knows. Bounded as
 * the editor's reader: MAX_FILES_PER_SCRIPT per script, each under MAX_BYTES and the run's maximum file size.
 */
export function importedGainsOf(parser: PythonParser, script: string, ir: ModelIR, settings: PrecisionLensSettings, inputs: readonly string[]): [string, ImportedGain][] {
  // A script that compiles (PL306 asks what its model gains) or checkpoints (PL701 asks whether its model runs te.*).
  if (!fileFactsOf(ir).compile && !ir.calls.some((c) => c.kind === 'checkpoint')) return [];
  const out: [string, ImportedGain][] = [];
  for (const path of importedFiles(script, ir, inputs, isFile)) {
    if (inputs.includes(path)) continue;
    let stat;
    try {
      stat = statSync(path);
    } catch {
      continue;
    }
    if (stat.size > Math.min(MAX_BYTES, settings.maxFileSize)) continue;
    const dims = dimsForFile(settings, path);
    const key = JSON.stringify([stat.mtimeMs, stat.size, dims, settings.maxFileSize, inputs.length]);
    let entry = readOnce.get(path);
    if (entry?.key !== key) {
      let text: string;
      try {
        text = readFileSync(path, 'utf8');
      } catch {
        continue;
      }
      const result = gainOfText(parser, path, text, settings, dims, inputs);
      entry = { key, ...(result ? { result } : {}) };
      readOnce.set(path, entry);
    }
    if (entry.result) out.push([path, entry.result]);
  }
  return out;
}

export class ImportedModelGains {
  private readonly entries = new Map<string, Entry>();
  /** Files to (re)analyse, in order; each runs in its own event-loop turn. */
  private readonly queue = new Set<string>();
  private running = false;
  /** Bumped whenever a tracked file's answer changes: the workspace facts' cache key. */
  generation = 0;
  /** Per script, the files its imports named, for the imports and workspace list they were resolved from (a keystroke
   *  in the script that leaves its imports as they were stats nothing again). */
  private readonly resolved = new Map<string, { imports: string; workspace: readonly string[]; files: string[] }>();

  constructor(private readonly host: ImportedGainsHost) {}

  /** A script was analysed: when it compiles a model, the files it imports are brought up to date (later, not now). */
  track(script: string, ir: ModelIR): void {
    if (!fileFactsOf(ir).compile) return;
    const workspace = this.host.workspaceFiles();
    const imports = ir.imports.map((b) => b.target).join('\n');
    let r = this.resolved.get(script);
    if (!r || r.imports !== imports || r.workspace !== workspace) {
      r = { imports, workspace, files: importedFiles(script, ir, workspace, isFile) };
      this.resolved.set(script, r);
    }
    for (const file of r.files) {
      if (this.host.isOpen(file)) continue;
      if (!this.entries.has(file) && this.entries.size >= MAX_TRACKED) break;
      this.queue.add(file);
    }
    this.pump();
  }

  /** A file changed or was deleted on disk (the watcher): it is looked at again, if tracked. */
  touched(path: string): void {
    if (!this.entries.has(path)) return;
    this.queue.add(path);
    this.pump();
  }

  /** The tracked files' answers: [path, share] for each file that was read (not those open, which speak for themselves). */
  facts(): [string, ImportedGain][] {
    const out: [string, ImportedGain][] = [];
    for (const [path, e] of this.entries) if (e.result && !this.host.isOpen(path)) out.push([path, e.result]);
    return out;
  }

  private pump(): void {
    if (this.running || !this.queue.size) return;
    this.running = true;
    setImmediate(() => {
      const next = this.queue.values().next().value as string;
      this.queue.delete(next);
      this.refresh(next)
        .catch((e) => this.host.log?.(`reading ${next} for its predicted FP8 gain failed: ${e instanceof Error ? e.message : String(e)}`))
        .finally(() => {
          this.running = false;
          this.pump();
        });
    });
  }

  /** Reads and analyses one file when its key changed; bumps the generation when its answer did. */
  private async refresh(path: string): Promise<void> {
    const before = this.entries.get(path);
    let stat: { mtimeMs: number; size: number } | undefined;
    try {
      const s = statSync(path);
      if (s.isFile()) stat = s;
    } catch { /* gone */ }
    if (!stat || stat.size > MAX_BYTES) {
      // Deleted, or too large to read here: it says nothing (as in the workspace scan).
      if (before) {
        this.entries.delete(path);
        if (before.result) this.bump();
      }
      return;
    }
    const settings = await this.host.settings(path);
    const dims = dimsForFile(settings, path);
    const key = JSON.stringify([stat.mtimeMs, stat.size, dims, settings.maxFileSize, this.host.workspaceFiles().length]);
    if (before?.key === key) return;
    const result = this.analyse(path, readFileSync(path, 'utf8'), settings, dims);
    this.entries.set(path, { key, ...(result ? { result } : {}) });
    if (JSON.stringify(before?.result) !== JSON.stringify(result)) this.bump();
  }

  private analyse(path: string, text: string, settings: PrecisionLensSettings, dims: ReturnType<typeof dimsForFile>): ImportedGain | undefined {
    const parser = this.host.parser();
    return parser ? gainOfText(parser, path, text, settings, dims, this.host.workspaceFiles()) : undefined;
  }

  private bump(): void {
    this.generation++;
    this.host.changed();
  }
}
