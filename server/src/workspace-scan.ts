/**
 * A cheap scan of the workspace's Python files for FP8 autocast, training steps and torch.compile, so that PL302 ("TE
 * layers but no autocast anywhere") is never raised from one model file when a training script elsewhere wraps it in
 * autocast, nor in a workspace that does not train at all (a model library).
 * A textual pre-filter is enough here: it only decides whether PL302 may speak, and false positives keep it quiet.
 */
import { promises as fs } from 'node:fs';
import { join } from 'node:path';

const SKIP_DIRS = new Set(['.git', 'node_modules', '__pycache__', '.venv', 'venv', 'env', 'site-packages', '.tox', 'build', 'dist', '.mypy_cache']);
const AUTOCAST = /\b(?:fp8_autocast|autocast)\s*\(/;
const TE_HINT = /transformer_engine/;
/** A training step: backward(), an optimizer step, a trainer's fit. */
const TRAIN = /\.backward\s*\(|\b\w*(optim|optimizer|opt)\w*\s*\.\s*step\s*\(|\.fit\s*\(/;
/** A whole-model FP8 conversion or weight-quantization stack (one stack at a time: no te.* conversions then). */
const OTHER_STACK = /\bconvert_to_float8_training\s*\(|\bBitsAndBytesConfig\s*\(|\bload_in_(?:4|8)bit\s*=\s*True|\bprepare_model_for_kbit_training\s*\(|mixed_precision\s*=\s*["']fp8["']/;
const COMPILE = /\btorch\.compile\s*\(|\bcompile\s*\(\s*model/;

export interface ScanResult {
  files: number;
  autocastFiles: Set<string>;
  compileFiles: Set<string>;
  trainFiles: Set<string>;
  /** Files that convert the model to FP8 with torchao/accelerate or quantize it (bitsandbytes / QLoRA), with the
   *  module names they import (and their dotted prefixes). */
  stackFiles: Map<string, string[]>;
  /** The scan stopped early (file budget), so absence of autocast is not proven. */
  truncated: boolean;
  /** The Python files it read (at most MAX_LISTED): where construction sites of a file's classes are looked for. */
  pythonFiles: string[];
}

const MAX_LISTED = 1000;

/** Walks `roots` (at most `maxFiles` .py files, files over `maxBytes` skipped). */
export async function scanWorkspace(roots: string[], maxFiles = 5000, maxBytes = 2_000_000): Promise<ScanResult> {
  const result: ScanResult = { files: 0, autocastFiles: new Set(), compileFiles: new Set(), trainFiles: new Set(), stackFiles: new Map(), truncated: false, pythonFiles: [] };
  const queue = [...roots];
  while (queue.length) {
    const dir = queue.pop()!;
    let entries: import('node:fs').Dirent[];
    try {
      entries = await fs.readdir(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) {
        if (!SKIP_DIRS.has(entry.name) && !entry.name.startsWith('.')) queue.push(path);
      } else if (entry.isFile() && entry.name.endsWith('.py')) {
        if (result.files >= maxFiles) {
          result.truncated = true;
          return result;
        }
        result.files++;
        try {
          const stat = await fs.stat(path);
          if (stat.size > maxBytes) continue;
          const text = await fs.readFile(path, 'utf8');
          if (result.pythonFiles.length < MAX_LISTED) result.pythonFiles.push(path);
          if (AUTOCAST.test(text) && TE_HINT.test(text)) result.autocastFiles.add(path);
          if (COMPILE.test(text)) result.compileFiles.add(path);
          if (TRAIN.test(text)) result.trainFiles.add(path);
          if (OTHER_STACK.test(text)) result.stackFiles.set(path, importedModuleNames(text));
        } catch {
          // unreadable file: it cannot train anything
        }
      }
    }
  }
  return result;
}

/** Module names a file imports (`from pkg.model import X`, `import a.b`), with their dotted prefixes. */
function importedModuleNames(text: string): string[] {
  const out = new Set<string>();
  for (const m of text.matchAll(/^[ \t]*(?:from[ \t]+\.*([\w.]+)[ \t]+import|import[ \t]+([\w.]+))/gm)) {
    const parts = (m[1] ?? m[2]).split('.');
    for (let i = 1; i <= parts.length; i++) out.add(parts.slice(0, i).join('.'));
  }
  return [...out];
}
