/**
 * A cheap scan of the workspace's Python files for FP8 autocast, training steps and torch.compile, so that PL302 ("TE
 * layers but no autocast anywhere") is never raised from one model file when a training script elsewhere wraps it in
 * autocast, nor in a workspace that does not train at all (a model library).
 * A textual pre-filter is enough here: it only decides whether PL302 may speak, and false positives keep it quiet.
 */
import { promises as fs } from 'node:fs';
import { join, relative, sep } from 'node:path';
import { wrapperRanges } from '../analysis/known';

const SKIP_DIRS = new Set(['.git', 'node_modules', '__pycache__', '.venv', 'venv', 'env', 'site-packages', '.tox', 'build', 'dist', '.mypy_cache']);
const AUTOCAST = /\b(?:fp8_autocast|autocast)\s*\(/;
const TE_HINT = /transformer_engine/;
/** The FP8 fallback's context, entered by a training script that imports it from the project's module. */
const FALLBACK_AUTOCAST = /\bfp8_autocast_context\s*\(/;
/** te.* layers FP8 autocast changes, built directly or through the FP8 fallback's factories. */
const TE_LAYER = /\b(?:te|pytorch)\.(?:Linear|LayerNorm|RMSNorm|LayerNormLinear|LayerNormMLP|TransformerLayer|GroupedLinear)\s*\(|\bfp8_(?:linear|parallel_linear|layernorm|rmsnorm)(?:_or|_from)?\s*\(/;
/** A training step: backward(), an optimizer step, a trainer's fit. */
const TRAIN = /\.backward\s*\(|\b\w*(optim|optimizer|opt)\w*\s*\.\s*step\s*\(|\.fit\s*\(/;
/** A whole-model FP8 conversion or weight-quantization stack (one stack at a time: no te.* conversions then). */
const OTHER_STACK = /\bconvert_to_float8_training\s*\(|(?<!def )\bfp8_for_compile\s*\(|\bBitsAndBytesConfig\s*\(|\bload_in_(?:4|8)bit\s*=\s*True|\bprepare_model_for_kbit_training\s*\(|mixed_precision\s*=\s*["']fp8["']/;
const COMPILE = /\btorch\.compile\s*\(|\bcompile\s*\(\s*model/;
/** torchao's float8 all-gather turned on, FSDP1's wrapper, torchao's scale precompute (PL702 / PL703 across files). */
const ALL_GATHER = /\benable_fsdp_float8_all_gather\s*=\s*True\b/;
// torch's FSDP1 only, as the rule's own call check (analysis/calls.ts): fairscale's class of the same name is not it.
const FSDP1 = /\bfrom[ \t]+torch\.distributed\.fsdp[\w.]*[ \t]+import[^\n]*\bFullyShardedDataParallel\b|\btorch\.distributed\.fsdp\.(?:fully_sharded_data_parallel\.)?FullyShardedDataParallel\b/;
const PRECOMPUTE = /\bprecompute_float8_dynamic_scale_for_fsdp\s*\(/;

export interface ScanResult {
  files: number;
  autocastFiles: Set<string>;
  compileFiles: Set<string>;
  trainFiles: Set<string>;
  /** Files that build te.* layers (outside the fallback's own code). */
  teFiles: Set<string>;
  /** Files that turn torchao's float8 all-gather on, shard with FSDP1, precompute the float8 scales. */
  allGatherFiles: Set<string>;
  fsdp1Files: Set<string>;
  precomputeFiles: Set<string>;
  /** Files that convert the model to FP8 with torchao/accelerate or quantize it (bitsandbytes / QLoRA), with the
   *  module names they import (and their dotted prefixes). */
  stackFiles: Map<string, string[]>;
  /** The scan stopped early (file budget), so absence of autocast is not proven. */
  truncated: boolean;
  /** The Python files it read (at most MAX_LISTED): where construction sites of a file's classes are looked for. */
  pythonFiles: string[];
}

const MAX_LISTED = 1000;
/** Files larger than this are listed as seen but not read (the full scan and its updates alike). */
const MAX_SCANNED_BYTES = 2_000_000;

/** Walks `roots` (at most `maxFiles` .py files, files over `maxBytes` skipped). */
export async function scanWorkspace(roots: string[], maxFiles = 5000, maxBytes = MAX_SCANNED_BYTES): Promise<ScanResult> {
  const result: ScanResult = { files: 0, autocastFiles: new Set(), compileFiles: new Set(), trainFiles: new Set(), teFiles: new Set(), allGatherFiles: new Set(), fsdp1Files: new Set(), precomputeFiles: new Set(), stackFiles: new Map(), truncated: false, pythonFiles: [] };
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
        await readInto(result, path, maxBytes);
      }
    }
  }
  return result;
}

/**
 * What one file says, added to `result` (a file over `maxBytes` or unreadable says nothing). Returns whether the path
 * is a file at all (read or not), so that an update need not stat it again.
 */
async function readInto(result: ScanResult, path: string, maxBytes: number): Promise<boolean> {
  let isFile = false;
  try {
    const stat = await fs.stat(path);
    isFile = stat.isFile();
    if (!isFile || stat.size > maxBytes) return isFile;
    const text = await fs.readFile(path, 'utf8');
    if (result.pythonFiles.length < MAX_LISTED) result.pythonFiles.push(path);
    // The FP8 fallback's own code (the project's module, or an inline block) defines an autocast helper; a definition
    // is no autocast region, or every project the fixes converted would silence PL302 before its step is wrapped.
    const used = withoutWrapper(text);
    if ((AUTOCAST.test(used) && TE_HINT.test(used)) || FALLBACK_AUTOCAST.test(used)) result.autocastFiles.add(path);
    if (TE_LAYER.test(used)) result.teFiles.add(path);
    if (COMPILE.test(text)) result.compileFiles.add(path);
    if (ALL_GATHER.test(text)) result.allGatherFiles.add(path);
    if (FSDP1.test(text)) result.fsdp1Files.add(path);
    if (PRECOMPUTE.test(text)) result.precomputeFiles.add(path);
    if (TRAIN.test(text)) result.trainFiles.add(path);
    if (OTHER_STACK.test(text)) result.stackFiles.set(path, importedModuleNames(text));
  } catch {
    // unreadable (or gone since it was listed): it cannot train anything
  }
  return isFile;
}

/** The text without the FP8 fallback blocks the fixes write (between their marker lines). */
function withoutWrapper(text: string): string {
  const ranges = wrapperRanges(text);
  if (!ranges.length) return text;
  let out = '';
  let at = 0;
  for (const [from, to] of ranges) { out += text.slice(at, from); at = to; }
  return out + text.slice(at);
}

/** Whether a path is one the scan would have read: a .py file under a root, outside the skipped folders. */
export function inScan(roots: readonly string[], path: string): boolean {
  if (!path.endsWith('.py')) return false;
  const root = roots.find((r) => path === r || path.startsWith(r.endsWith(sep) ? r : r + sep));
  if (!root) return false;
  const dirs = relative(root, path).split(sep).slice(0, -1);
  return !dirs.some((d) => SKIP_DIRS.has(d) || d.startsWith('.'));
}

/**
 * The scan after files were created, changed or deleted (the client's file watcher): each path is forgotten, then
 * read again if it still exists. Returns a new result (the old one may still be compared against); unchanged paths
 * keep what the full scan found. A truncated scan stays truncated: new files are not counted against its budget.
 */
export async function updateScan(previous: ScanResult, paths: readonly string[], maxBytes = MAX_SCANNED_BYTES): Promise<ScanResult> {
  const gone = new Set(paths);
  const result: ScanResult = {
    files: previous.files,
    autocastFiles: new Set([...previous.autocastFiles].filter((p) => !gone.has(p))),
    compileFiles: new Set([...previous.compileFiles].filter((p) => !gone.has(p))),
    trainFiles: new Set([...previous.trainFiles].filter((p) => !gone.has(p))),
    teFiles: new Set([...previous.teFiles].filter((p) => !gone.has(p))),
    allGatherFiles: new Set([...previous.allGatherFiles].filter((p) => !gone.has(p))),
    fsdp1Files: new Set([...previous.fsdp1Files].filter((p) => !gone.has(p))),
    precomputeFiles: new Set([...previous.precomputeFiles].filter((p) => !gone.has(p))),
    stackFiles: new Map([...previous.stackFiles].filter(([p]) => !gone.has(p))),
    truncated: previous.truncated,
    pythonFiles: previous.pythonFiles.filter((p) => !gone.has(p)),
  };
  const listed = new Set(previous.pythonFiles);
  for (const path of gone) {
    const exists = await readInto(result, path, maxBytes);
    if (exists && !listed.has(path)) result.files++;
    if (!exists && listed.has(path)) result.files--;
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
