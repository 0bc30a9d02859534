/**
 * The analysis engine shared by the language server and the CLI: text -> tree -> model IR -> findings.
 * No LSP or VS Code import here; the server adds caching, incremental parsing and debouncing around it.
 */
import { DEFAULT_SETTINGS, type PrecisionLensSettings } from '../../../common/settings';
import { predictedLoss } from '../analysis/gain-layer';
import { folderOf, slashed } from './paths';
import { analyzeTree, emptyIR, type AnalysisCache } from '../analysis/index';

export { emptyIR };
import type { ExternalDims, ExternalSites, ModelIR } from '../analysis/ir';
import { fp8Layers } from '../analysis/autocast';
import type { Parser, Tree } from './parser';
import { argumentRefusal } from '../fixes/index';
import { runRules } from '../rules/index';
import { withRefusedConversion } from '../rules/conversion';
import type { Finding, WorkspaceFacts } from '../rules/types';
import { applySuppressions } from './suppress';
import { RULES } from '../../../common/codes';

export interface DocumentAnalysis {
  ir: ModelIR;
  findings: Finding[];
}

/** A file size as the skip notes say it: KB below a megabyte (512 KB, not 0.5 MB), MB with one decimal above. */
export function sizeText(bytes: number): string {
  return bytes < 1048576 ? `${Math.ceil(bytes / 1024)} KB` : `${(bytes / 1048576).toFixed(1)} MB`;
}

/** Byte-size and binary guards: a huge or binary file gets one clear message instead of a slow parse. */
export function skipReason(text: string, settings: PrecisionLensSettings): string | undefined {
  if (text.length > settings.maxFileSize) {
    return `file is ${sizeText(text.length)}, above precisionLens.maxFileSize (${sizeText(settings.maxFileSize)}): not analysed`;
  }
  // A NUL in the first 8 KB means a binary file named .py (the same heuristic git uses).
  if (text.slice(0, 8192).includes('\u0000')) return 'binary file: not analysed';
  if (indentDeeperThan(text, MAX_INDENT_LEVELS)) return `indented more than ${MAX_INDENT_LEVELS} levels deep, which Python refuses: not analysed`;
  return undefined;
}

/**
 * CPython's tokenizer refuses more than 100 indentation levels ("too many levels of indentation"). tree-sitter-python's
 * scanner does not: at about 510 levels its indent stack overflows and corrupts the WASM instance. Such a file cannot
 * run, so it is not parsed.
 */
export const MAX_INDENT_LEVELS = 100;

/**
 * Whether the indentation of `text`'s lines (blank and comment lines aside) nests more than `limit` levels, counted as
 * tree-sitter-python's scanner nests it: a backslash-newline inside the leading whitespace is skipped and the width
 * goes on adding up (`\\` alone on a line, then ` if x:`, is one indent deeper), and the line after a line ending
 * in a backslash continues a logical line, so its smaller width closes no block (it never pops). Counting physical
 * lines alone let either shape reset the count while the parser kept nesting, up to its stack overflow.
 */
export function indentDeeperThan(text: string, limit: number): boolean {
  const stack: number[] = [0];
  let start = 0;
  // the next CR and LF at or after the line's start, found again only once passed: searching afresh on every line
  // scanned to the end of a file without CRs each time (quadratic: 0.45 s of a 1.7 MB file's check)
  let nl = -2;
  let cr = -2;
  /** The previous physical line ended in a backslash: this one continues it. */
  let continued = false;
  while (start < text.length) {
    let i = start;
    let width = 0;
    for (;; i++) {
      const c = text.charCodeAt(i);
      if (c === 32) width++;
      else if (c === 9) width = (width >> 3 << 3) + 8;
      else if (c === 12) width = 0;
      else if (c === 92 && text.charCodeAt(i + 1) === 10) i++;
      else if (c === 92 && text.charCodeAt(i + 1) === 13 && text.charCodeAt(i + 2) === 10) i += 2;
      else break;
    }
    const c = text.charCodeAt(i);
    if (i < text.length && c !== 10 && c !== 13 && c !== 35) {
      if (!continued) while (width < stack[stack.length - 1]) stack.pop();
      if (width > stack[stack.length - 1]) {
        stack.push(width);
        if (stack.length - 1 > limit) return true;
      }
    }
    if (nl !== -1 && nl < i) nl = text.indexOf('\n', i);
    if (cr !== -1 && cr < i) cr = text.indexOf('\r', i);
    const end = nl === -1 ? cr : cr === -1 ? nl : Math.min(nl, cr);
    if (end === -1) break;
    continued = end > i && text.charCodeAt(end - 1) === 92;
    start = text.charCodeAt(end) === 13 && text.charCodeAt(end + 1) === 10 ? end + 2 : end + 1;
  }
  return false;
}

/**
 * Whether a file can have findings at all: the rules only run on files that import torch, Transformer Engine or a
 * library built on torch (inScope), and every such import names one of them in its text. A file without either word (data loaders,
 * configs, utilities) needs no parse for `check`.
 */
export function mayHaveFindings(text: string): boolean {
  return text.includes('torch') || text.includes('transformer_engine') || text.includes('accelerate') || text.includes('transformers')
    || text.includes('peft') || text.includes('bitsandbytes') || text.includes('lightning');
}

/** Libraries built on torch whose imports put a file in scope though it never imports torch itself. */
const TORCH_LIBRARIES = /^(accelerate|torchao|transformers|peft|bitsandbytes|lightning|pytorch_lightning|trl|deepspeed)(\.|$)/;

/** Whether the rules run on a file: it imports torch, Transformer Engine or a library built on torch. */
export function inScope(ir: ModelIR): boolean {
  return ir.importsTorch || ir.importsTe || ir.imports.some((b) => TORCH_LIBRARIES.test(b.target));
}

/** Analyses an already parsed tree; `cache` (one per document) makes re-analysis after an edit redo only what changed. */
export function analyzeParsed(
  tree: Tree, text: string, settings: PrecisionLensSettings, workspace: WorkspaceFacts, cache?: AnalysisCache, dims?: ExternalDims, sites?: ExternalSites,
  lineStarts?: readonly number[],
): DocumentAnalysis {
  const ir = analyzeTree(tree, text, cache, { dims, sites, lineStarts });
  return { ir, findings: findingsOf(ir, text, settings, workspace) };
}

/**
 * The rules on an IR, as the editor and the CLI report them (nothing for a file out of scope): a syntax error says
 * where the analysis became partial (PL002), and the file's suppressions apply here, once for both (suppress.ts).
 * `path`: the file's absolute path, for `per-file-ignores`.
 */
export function findingsOf(ir: ModelIR, text: string, settings: PrecisionLensSettings, workspace: WorkspaceFacts, path?: string): Finding[] {
  if (!inScope(ir)) return [];
  const findings = reconcileConversions(runRules({ ir, text, settings, workspace }), ir, text, settings, workspace);
  const syntax = syntaxErrorFinding(ir, settings);
  if (syntax) findings.push(syntax);
  return applySuppressions(findings, text, settings, path ?? workspace.path, ir.syntaxError?.startLine);
}

/** PL002 at the first syntax error: what lies beyond it was read by error recovery and may be missed. */
function syntaxErrorFinding(ir: ModelIR, settings: PrecisionLensSettings): Finding | undefined {
  const at = ir.syntaxError;
  const level = settings.rules.PL002;
  if (!at || level === 'off') return undefined;
  return {
    code: 'PL002',
    span: at,
    severity: level ?? RULES.PL002.defaultSeverity,
    message: `Syntax error at line ${at.startLine + 1}: analysis partial beyond this line`,
    explanation: {
      facts: ['The parser recovered from the error and the analysis read what it could, but findings after this line may be missing.'],
      fix: 'Correct the syntax error (python -m py_compile shows it), then check the file again.',
    },
  };
}

const CONVERSION_CODES = new Set(['PL101', 'PL102', 'PL103', 'PL106']);

/**
 * A layer the analysis calls convertible whose fix still refuses its arguments as written says so in its message
 * (never "can become" and then refused). Reads only the constructor calls: cheap on the keystroke path.
 */
function reconcileConversions(findings: Finding[], ir: ModelIR, text: string, settings: PrecisionLensSettings, workspace: WorkspaceFacts): Finding[] {
  return findings.map((f) => {
    const layer = f.layerIndex !== undefined && CONVERSION_CODES.has(f.code) ? ir.layers[f.layerIndex] : undefined;
    if (!layer || layer.convertible !== true) return f;
    const refusal = argumentRefusal(text, ir, layer, settings, { teVersion: workspace.teVersion, otherStack: workspace.otherStack });
    return refusal ? withRefusedConversion(f, layer, refusal) : f;
  });
}

/** Parses and analyses one document from scratch. The caller owns (and must delete) the returned tree. */
export function analyzeText(parser: Parser, text: string, settings: PrecisionLensSettings, workspace: WorkspaceFacts): DocumentAnalysis & { tree: Tree | null } {
  const tree = parser.parse(text);
  if (!tree) return { tree: null, ir: emptyIR(), findings: [] };
  return { tree, ...analyzeParsed(tree, text, settings, workspace) };
}

/** What one file contributes to the workspace facts (computed once per IR: the server merges them on every publish). */
export interface FileFacts {
  autocast: boolean;
  compile: boolean;
  training: boolean;
  /** Builds te.* layers that FP8 autocast changes (directly or through the FP8 fallback's factories). */
  te: boolean;
  /** Modules this file imports -> the other stack it uses (empty when it uses none). */
  stackImports: Record<string, string>;
  /**
   * Builds torch.nn.Linear layers that could run in FP8 (`candidates`), and whether one of them is predicted to gain
   * from it (`gains`: the H200 table at the default tokens per step, analysis/gain-layer.ts predictedLoss): PL306 does
   * not offer FP8 to a compiled model that only has layers FP8 slows down.
   */
  candidates: boolean;
  gains: boolean;
  /** torchao float8 all-gather turned on (PL702 / PL703), FSDP1's wrapper, torchao's scale precompute: what the
   *  at-scale rules ask of the files in reach when the config, the sharding and the training step are apart. */
  allGather: boolean;
  fsdp1: boolean;
  precompute: boolean;
}

/** The layers FP8 could take (torch.nn.Linear, not the lm-head or a tiny router), and whether one is predicted to gain. */
function fp8Candidates(ir: ModelIR): { candidates: boolean; gains: boolean } {
  const linears = ir.layers.filter((l) => !l.isTe && l.kind === 'linear' && l.convertible !== false && l.role !== 'lm_head');
  return { candidates: linears.length > 0, gains: linears.some((l) => !predictedLoss(ir, l, DEFAULT_SETTINGS)) };
}

const fileFactsCache = new WeakMap<ModelIR, FileFacts>();

export function fileFactsOf(ir: ModelIR): FileFacts {
  let facts = fileFactsCache.get(ir);
  if (facts) return facts;
  const stack = otherStackOf(ir);
  const stackImports: Record<string, string> = {};
  if (stack) for (const mod of importedModules(ir)) stackImports[mod] ??= stack;
  const called = (kind: string): boolean => ir.calls.some((c) => c.kind === kind);
  facts = {
    autocast: hasAutocast(ir), compile: called('compile'), training: trains(ir), te: fp8Layers(ir).length > 0, stackImports, ...fp8Candidates(ir),
    allGather: called('float8_allgather'), fsdp1: called('fsdp1'), precompute: called('float8_precompute'),
  };
  fileFactsCache.set(ir, facts);
  return facts;
}

/** The workspace facts of a set of files, from their shares. */
export function mergeFileFacts(files: Iterable<FileFacts>, base: WorkspaceFacts = {}): WorkspaceFacts {
  let anyAutocastRegion = false;
  let anyCompile = false;
  let anyTraining = false;
  let anyTeLayers = false;
  let candidates = false;
  let gains = false;
  const stackImports: Record<string, string> = {};
  for (const f of files) {
    for (const [mod, stack] of Object.entries(f.stackImports)) stackImports[mod] ??= stack;
    anyAutocastRegion ||= f.autocast;
    anyCompile ||= f.compile;
    anyTraining ||= f.training;
    anyTeLayers ||= f.te;
    candidates ||= f.candidates;
    gains ||= f.gains;
  }
  const facts: WorkspaceFacts = { ...base, anyAutocastRegion, anyCompile, anyTraining, anyTeLayers };
  // Known only where some file builds layers FP8 could take (a training script alone tells nothing about its model).
  if (candidates) facts.anyFp8Gains = gains;
  if (Object.keys(stackImports).length) facts.stackImports = { ...base.stackImports, ...stackImports };
  return facts;
}

/** Facts that only the set of files as a whole can tell (PL302 needs to know whether anything trains in FP8). */
export function workspaceFactsOf(irs: Iterable<ModelIR>, base: WorkspaceFacts = {}): WorkspaceFacts {
  return mergeFileFacts([...irs].map(fileFactsOf), base);
}

/** Every module a file imports, with its dotted prefixes (`from pkg.model import GPT` -> pkg, pkg.model, pkg.model.GPT). */
export function importedModules(ir: ModelIR): string[] {
  const out = new Set<string>();
  for (const b of ir.imports) {
    const parts = b.target.replace(/^\.+/, '').split('.');
    for (let i = 1; i <= parts.length; i++) out.add(parts.slice(0, i).join('.'));
  }
  return [...out];
}

/**
 * The other stack that applies to the file at `path`: one used by a file that imports it (by its module name, the
 * file's name or its dotted path: `model`, `pkg.model`; a package's `__init__.py` by the package name).
 */
export function stackFor(ws: WorkspaceFacts, path: string): string | undefined {
  const map = ws.stackImports;
  if (!map) return undefined;
  const parts = slashed(path).replace(/\.py$/, '').split('/').filter(Boolean);
  if (parts[parts.length - 1] === '__init__') parts.pop();
  // The folder the file's top-level name lives in: a bare `from model import GPT` reaches only the model.py there.
  const home = `/${parts.slice(0, -1).join('/')}`;
  for (let i = parts.length - 1; i >= 0; i--) {
    const key = parts.slice(i).join('.');
    const hit = map[key];
    const dirs = i === parts.length - 1 ? ws.stackDirs?.[key] : undefined;
    if (hit && (!dirs || dirs.some((d) => slashed(d).replace(/\/+$/, '') === home))) return hit;
  }
  return undefined;
}

/** For the bare module names files import with another stack, the folders of those files (WorkspaceFacts.stackDirs). */
export function bareStackDirs(files: Iterable<readonly [path: string, modules: readonly string[]]>): Record<string, string[]> | undefined {
  const out: Record<string, string[]> = {};
  for (const [path, modules] of files) {
    const dir = folderOf(path);
    for (const mod of modules) if (!mod.includes('.') && !(out[mod] ??= []).includes(dir)) out[mod].push(dir);
  }
  return Object.keys(out).length ? out : undefined;
}

/**
 * The facts that need the files' paths (which project a te.* layer, a compile call, a predicted loss or another
 * stack's import belongs to), from each file's path and share; `scanned` adds what the editor's workspace scan found
 * in files not open. One implementation for the CLI's inputs and the editor's documents.
 */
export function pathFacts(
  files: Iterable<readonly [path: string, facts: FileFacts]>,
  scanned: {
    te?: Iterable<string>; compile?: Iterable<string>; importers?: Iterable<readonly [string, readonly string[]]>;
    /** Files not open whose candidates/gains share was read from disk (workspace/gains.ts: the models a compiling script imports). */
    gains?: Iterable<readonly [string, Pick<FileFacts, 'candidates' | 'gains'>]>;
    allGather?: Iterable<string>; fsdp1?: Iterable<string>; precompute?: Iterable<string>;
  } = {},
): Pick<WorkspaceFacts, 'teFiles' | 'compileFiles' | 'fp8GainFiles' | 'fp8LoseFiles' | 'stackDirs' | 'allGatherFiles' | 'fsdp1Files' | 'precomputeFiles'> {
  const te = new Set(scanned.te ?? []);
  const compile = new Set(scanned.compile ?? []);
  const allGather = new Set(scanned.allGather ?? []);
  const fsdp1 = new Set(scanned.fsdp1 ?? []);
  const precompute = new Set(scanned.precompute ?? []);
  const importers = [...(scanned.importers ?? [])];
  const gain: string[] = [];
  const lose: string[] = [];
  for (const [path, f] of files) {
    if (f.te) te.add(path);
    if (f.compile) compile.add(path);
    if (f.allGather) allGather.add(path);
    if (f.fsdp1) fsdp1.add(path);
    if (f.precompute) precompute.add(path);
    const mods = Object.keys(f.stackImports);
    if (mods.length) importers.push([path, mods]);
    if (f.candidates) (f.gains ? gain : lose).push(path);
  }
  for (const [path, f] of scanned.gains ?? []) {
    if (f.candidates && !gain.includes(path) && !lose.includes(path)) (f.gains ? gain : lose).push(path);
  }
  const stackDirs = bareStackDirs(importers);
  return {
    ...(stackDirs ? { stackDirs } : {}),
    ...(te.size ? { teFiles: [...te].sort() } : {}),
    ...(compile.size ? { compileFiles: [...compile].sort() } : {}),
    ...(gain.length ? { fp8GainFiles: gain.sort() } : {}),
    ...(lose.length ? { fp8LoseFiles: lose.sort() } : {}),
    ...(allGather.size ? { allGatherFiles: [...allGather].sort() } : {}),
    ...(fsdp1.size ? { fsdp1Files: [...fsdp1].sort() } : {}),
    ...(precompute.size ? { precomputeFiles: [...precompute].sort() } : {}),
  };
}

/** The workspace facts for one file: `otherStack` resolved for its path. */
export function factsForFile(ws: WorkspaceFacts, path: string): WorkspaceFacts {
  const stack = stackFor(ws, path);
  return stack ? { ...ws, otherStack: stack, path } : { ...ws, path };
}

/** The whole-model FP8 conversion or weight-quantization stack a file uses, if any (`convert_to_float8_training`). */
export function otherStackOf(ir: ModelIR): string | undefined {
  return ir.fp8Conversions[0]?.callee ?? ir.quantization[0]?.callee;
}

/** A file that enters FP8 autocast, or makes an enabled autocast context for its caller to enter. */
export function hasAutocast(ir: ModelIR): boolean {
  return ir.autocastRegions.some((r) => !r.disabled) || ir.autocastContexts.length > 0;
}

/** A file with a training step: backward(), an optimizer step. */
export function trains(ir: ModelIR): boolean {
  return ir.calls.some((c) => c.kind === 'backward' || c.kind === 'optimizer_step');
}
