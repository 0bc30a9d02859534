/**
 * The CLI's two-pass analysis: parse every input once (one parser, trees deleted at once), build the facts only the
 * whole set can tell (PL302 needs to know whether anything trains in FP8), then run the rules on each file's IR.
 */
import * as fs from 'node:fs';
import type { PrecisionLensSettings } from '../../../common/settings';
import { AnalysisCache, analyzeTree, emptyIR } from '../analysis';
import { dimsForFile } from '../workspace-dims';
import { sitesForFile } from '../workspace-sites';
import type { ModelIR } from '../analysis/ir';
import { factsForFile, findingsOf, inScope, mayHaveFindings, skipReason, workspaceFactsOf } from '../engine';
import { isWasmTrap, ParserTrap, type PythonParser, type Tree } from '../parser';
import { editTree, lineStartsOf } from '../incremental';
import { pythonSource } from '../lines';
import type { Finding, WorkspaceFacts } from '../rules/types';
import type { InputFile } from './files';

export interface AnalysedFile {
  input: InputFile;
  /** The text analysed (a leading BOM removed, as editors do, so columns match). */
  text: string;
  /** The file started with a byte order mark (written back by --fix). */
  bom?: boolean;
  ir?: ModelIR;
  findings: Finding[];
  /** Not analysed: too large or binary (a note, not an error). */
  skipped?: string;
  /** Analysed only in part: the analysis stopped at its work budget (a note; the findings up to there are kept). */
  incomplete?: string;
  /** Could not be read or analysed (exit code 2). */
  error?: string;
  /** Analysed by a worker thread, whose IR stayed there (see parallel.ts); `ir` tells otherwise. */
  analysed?: boolean;
  /** Fix titles per finding (same order), computed by the worker thread that holds the IR. */
  titles?: string[][];
  /** Per finding (same order), whether --fix or --fix --unsafe-fixes could fix it; from the worker thread. */
  fixability?: Array<'safe' | 'unsafe' | undefined>;
}

/** Whether the file was parsed and analysed (an IR was built), here or in a worker. */
export function isAnalysed(file: AnalysedFile): boolean {
  return file.ir !== undefined || file.analysed === true;
}

/** Reads one input; size is checked before reading so a huge file costs nothing. */
export function readInput(input: InputFile, settings: PrecisionLensSettings): AnalysedFile {
  const result: AnalysedFile = { input, text: '', findings: [] };
  try {
    const size = fs.statSync(input.absolute).size;
    if (size > settings.maxFileSize) {
      result.skipped = `file is ${(size / 1048576).toFixed(1)} MB, above the maximum file size (${(settings.maxFileSize / 1048576).toFixed(1)} MB): not analysed`;
      return result;
    }
    let text = fs.readFileSync(input.absolute, 'utf8');
    if (text.charCodeAt(0) === 0xfeff) {
      text = text.slice(1);
      result.bom = true;
    }
    result.skipped = skipReason(text, settings);
    if (!result.skipped) result.text = text;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    result.error = `cannot read file (${err.code ?? err.message})`;
  }
  return result;
}

/**
 * What a file keeps between `--fix` rounds: its tree, edited and re-parsed incrementally for the next round's text,
 * and the analysis cache, which reuses the top-level statements a round did not touch (as the server does per
 * keystroke). A round that inserts the fallback block at the top of a 10,000-layer file then re-parses a few lines
 * and copies the class instead of analysing it again.
 */
interface KeptParse {
  tree: Tree;
  source: string;
  cache: AnalysisCache;
}

const keptParses = new WeakMap<AnalysedFile, KeptParse>();

/**
 * Which files keep their parse (KeptParse): those of at least `minChars` (a smaller file parses in milliseconds),
 * while the kept texts stay under `maxChars` in all, so a batch never holds more than a few trees in WASM memory.
 */
export class KeepBudget {
  private used = 0;
  constructor(readonly minChars = 32 * 1024, readonly maxChars = 4 * 1048576) {}

  /** Whether `file` may keep a parse of `chars` characters (it already holds `held`). */
  admit(chars: number, held: number): boolean {
    if (held === 0 && chars < this.minChars) return false;
    if (this.used - held + chars > this.maxChars) return false;
    this.used += chars - held;
    return true;
  }

  free(chars: number): void {
    this.used -= chars;
  }
}

/** Deletes the tree a file kept for the next fix round (the round loop is over, or the file failed). */
export function dropKeptParse(parser: PythonParser, file: AnalysedFile, budget?: KeepBudget): void {
  const kept = keptParses.get(file);
  if (!kept) return;
  keptParses.delete(file);
  budget?.free(kept.source.length);
  parser.release(kept.tree);
}

/**
 * The one edit that turns `before` into `after` (common prefix and suffix kept), recorded on `tree`: a fix round's
 * edits lie between the first and the last changed character, and tree-sitter re-parses that span and what it
 * touches. Never splits a surrogate pair.
 */
function editCovering(tree: Tree, before: string, after: string): void {
  const min = Math.min(before.length, after.length);
  let start = 0;
  while (start < min && before.charCodeAt(start) === after.charCodeAt(start)) start++;
  if (start > 0 && start < min && isLowSurrogate(before.charCodeAt(start))) start--;
  let tail = 0;
  while (tail < min - start && before.charCodeAt(before.length - 1 - tail) === after.charCodeAt(after.length - 1 - tail)) tail++;
  if (tail > 0 && tail < min - start && isLowSurrogate(before.charCodeAt(before.length - tail))) tail--;
  editTree(tree, before, lineStartsOf(before), { startOffset: start, endOffset: before.length - tail, text: after.slice(start, after.length - tail) });
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff;
}

/** Parses `source`, from the tree a file kept when it is one of the current runtime (that tree is edited, then deleted). */
function parseFrom(parser: PythonParser, source: string, kept: KeptParse | undefined): Tree | null {
  if (!kept || !parser.owns(kept.tree)) return parser.parse(source);
  editCovering(kept.tree, kept.source, source);
  return parser.parse(source, kept.tree);
}

/**
 * Pass 1 for one file: parse and build the IR; the tree is deleted before returning, unless `keep` admits the file
 * (fix rounds: the next call re-parses from it and reuses its analysis cache). With `findingsOnly` (check, --fix:
 * only findings are wanted), a file that cannot have any gets an empty IR without being parsed. `others`: the run's
 * other inputs, whose calls of this file's classes give sizes (workspace-sites.ts).
 */
export async function buildIR(parser: PythonParser, file: AnalysedFile, findingsOnly = false, settings?: PrecisionLensSettings, others: readonly InputFile[] = [], keep?: KeepBudget): Promise<void> {
  if (file.skipped || file.error) return dropKeptParse(parser, file, keep);
  if (findingsOnly && !mayHaveFindings(file.text)) {
    dropKeptParse(parser, file, keep);
    file.ir = emptyIR();
    return;
  }
  // A WASM trap on an earlier file retired the runtime: this file gets a fresh one.
  await parser.renew();
  const source = pythonSource(file.text);
  const kept = keptParses.get(file);
  keptParses.delete(file);
  const keeping = keep?.admit(source.length, kept?.source.length ?? 0) ?? false;
  if (kept && !keeping) keep?.free(kept.source.length);
  let tree;
  try {
    tree = parseFrom(parser, source, kept);
  } catch (e) {
    // Only this file fails: it is reported as not analysed and the run goes on.
    if (keeping) keep?.free(source.length);
    if (!(e instanceof ParserTrap)) throw e;
    file.skipped = e.message;
    return;
  }
  if (!tree) {
    if (keeping) keep?.free(source.length);
    file.error = 'the parser gave no tree';
    return;
  }
  const cache = keeping ? kept?.cache ?? new AnalysisCache() : undefined;
  let ok = false;
  try {
    const sites = others.length > 1 ? sitesForFile(file.input.absolute, source, others.map((o) => ({ path: o.absolute, shown: o.display }))) : undefined;
    file.ir = analyzeTree(tree, source, cache, { dims: settings ? dimsForFile(settings, file.input.absolute) : undefined, sites });
    if (file.ir.incomplete) file.incomplete = file.ir.incomplete;
    ok = true;
  } catch (e) {
    if (isWasmTrap(e)) {
      parser.retire(e);
      file.skipped = new ParserTrap(e).message;
    } else file.error = `analysis failed: ${(e as Error).message}`;
  } finally {
    if (ok && keeping && cache) keptParses.set(file, { tree, source, cache });
    else {
      if (keeping) keep?.free(source.length);
      parser.release(tree);
      // A fresh runtime for the next file if this one grew the WASM memory far (buildIR renews it first).
      parser.recycleIfLarge();
    }
  }
}

/** Pass 2 for one file: rules on the IR (what engine.analyzeParsed does, without parsing again). */
export function runFileRules(file: AnalysedFile, settings: PrecisionLensSettings, workspace: WorkspaceFacts): void {
  file.findings = [];
  const ir = file.ir;
  if (!ir || !inScope(ir)) return;
  try {
    file.findings = findingsOf(ir, pythonSource(file.text), settings, factsForFile(workspace, file.input.absolute));
  } catch (e) {
    file.error = `rules failed: ${(e as Error).message}`;
  }
}

export function factsOf(files: readonly AnalysedFile[], base: WorkspaceFacts = {}): WorkspaceFacts {
  return workspaceFactsOf(files.flatMap((f) => (f.ir ? [f.ir] : [])), base);
}

/** Both passes over every input; `keep`: files that keep their parse for --fix (KeepBudget). */
export async function analyseAll(parser: PythonParser, inputs: readonly InputFile[], settings: PrecisionLensSettings, base: WorkspaceFacts = {}, findingsOnly = false, keep?: KeepBudget): Promise<{ files: AnalysedFile[]; workspace: WorkspaceFacts }> {
  const files: AnalysedFile[] = [];
  for (const input of inputs) {
    const file = readInput(input, settings);
    await buildIR(parser, file, findingsOnly, settings, inputs, keep);
    files.push(file);
  }
  const workspace = factsOf(files, base);
  for (const file of files) runFileRules(file, settings, workspace);
  return { files, workspace };
}
