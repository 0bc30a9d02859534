/**
 * The CLI's two-pass analysis: parse every input once (one parser, trees deleted at once), build the facts only the
 * whole set can tell (PL302 needs to know whether anything trains in FP8), then run the rules on each file's IR.
 */
import type { PrecisionLensSettings } from '../../../common/settings';
import { analyzeTree, emptyIR } from '../analysis';
import { dimsForFile } from '../workspace/dims';
import { sitesForFile } from '../workspace/sites';
import { importedGainsOf, type ImportedGain } from '../workspace/gains';
import type { ModelIR } from '../analysis/ir';
import { factsForFile, fileFactsOf, pathFacts, findingsOf, inScope, mayHaveFindings, sizeText, skipReason, workspaceFactsOf } from '../engine/engine';
import { isWasmTrap, ParserTrap, type PythonParser } from '../engine/parser';
import { pythonSource } from '../engine/lines';
import type { Finding, WorkspaceFacts } from '../rules/types';
import { readAtMost, type InputFile } from './files';
import { decodeSource, type SourceEncoding } from './encoding';
import type { TreeReuse } from './kept-trees';

/** The parses of this process, from scratch and from a kept tree (tests read them: a --fix round should not start over). */
export const parseCounts = { full: 0, incremental: 0 };

export interface AnalysedFile {
  input: InputFile;
  /** The text analysed (a leading BOM removed, as editors do, so columns match). */
  text: string;
  /** The file started with a byte order mark (written back by --fix). */
  bom?: boolean;
  /** Its source encoding (cli/encoding.ts): what --fix and --add-noqa encode their writes with. */
  encoding?: SourceEncoding;
  ir?: ModelIR;
  findings: Finding[];
  /** Not analysed: too large or binary (a note, not an error). */
  skipped?: string;
  /** Analysed only in part: the analysis stopped at its work budget (a note; the findings up to there are kept). */
  incomplete?: string;
  /** How long its first parse and analysis took (--fix counts it against the file's time budget). */
  analysisMs?: number;
  /** Could not be read or analysed (exit code 2). */
  error?: string;
  /** Analysed by a worker thread, whose IR stayed there (see parallel.ts); `ir` tells otherwise. */
  analysed?: boolean;
  /** A compiling script's imported model files that are not inputs, read for their predicted FP8 gain (PL306). */
  importedGains?: [string, ImportedGain][];
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
    // Never more than the limit is read, whatever the file system says the size is.
    const read = readAtMost(input.absolute, settings.maxFileSize);
    if ('refused' in read) {
      result.error = read.refused;
      return result;
    }
    if ('over' in read) {
      result.skipped = `file is ${read.exact ? sizeText(read.over) : `over ${sizeText(settings.maxFileSize)}`}, above the maximum file size (${sizeText(settings.maxFileSize)}): not analysed`;
      return result;
    }
    // Decoded as Python would (PEP 263 cookie, else UTF-8), so --fix writes every other byte back as it was.
    const decoded = decodeSource(read.bytes);
    let text = decoded.text;
    result.encoding = decoded.encoding;
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
 * Pass 1 for one file: parse and build the IR; the tree is deleted before returning. With `findingsOnly` (check,
 * --fix: only findings are wanted), a file that cannot have any gets an empty IR without being parsed. `others`: the
 * run's other inputs, whose calls of this file's classes give sizes (workspace/sites.ts).
 *
 * With `trees` (--fix) the tree is kept instead, and the next parse of the file (after a fix round) starts from it
 * with the round's edits recorded on it (kept-trees.ts): a 700 KB mutant's re-parse drops from about 0.5 s to 0.05 s.
 */
export async function buildIR(parser: PythonParser, file: AnalysedFile, findingsOnly = false, settings?: PrecisionLensSettings, others: readonly InputFile[] = [], trees?: TreeReuse): Promise<void> {
  const started = performance.now();
  try {
    await parseAndAnalyse(parser, file, findingsOnly, settings, others, trees);
    file.importedGains = undefined;
    if (file.ir && settings) {
      // Given train.py alone, the model it imports still says whether FP8 pays (as `check DIR` and the editor know).
      try {
        file.importedGains = importedGainsOf(parser, file.input.absolute, file.ir, settings, others.map((o) => o.absolute));
      } catch (e) {
        if (!isWasmTrap(e) && !(e instanceof ParserTrap)) throw e;
        // The imported file broke the parser: it says nothing; the next file gets a fresh runtime.
        if (isWasmTrap(e)) parser.retire(e);
      }
    }
  } finally {
    file.analysisMs ??= performance.now() - started;
  }
}

async function parseAndAnalyse(parser: PythonParser, file: AnalysedFile, findingsOnly: boolean, settings: PrecisionLensSettings | undefined, others: readonly InputFile[], trees: TreeReuse | undefined): Promise<void> {
  const old = trees?.takeBase(parser, file);
  if (file.skipped || file.error) return void parser.release(old);
  if (findingsOnly && !mayHaveFindings(file.text)) {
    parser.release(old);
    file.ir = emptyIR();
    return;
  }
  // A WASM trap on an earlier file retired the runtime: this file gets a fresh one.
  await parser.renew();
  const source = pythonSource(file.text);
  let tree;
  try {
    tree = parser.parse(source, old);
    parseCounts[old ? 'incremental' : 'full']++;
  } catch (e) {
    // Only this file fails: it is reported as not analysed and the run goes on.
    if (!(e instanceof ParserTrap)) throw e;
    file.skipped = e.message;
    return;
  }
  if (!tree) {
    file.error = 'the parser gave no tree';
    return;
  }
  try {
    const sites = others.length > 1 ? sitesForFile(file.input.absolute, source, others.map((o) => ({ path: o.absolute, shown: o.display }))) : undefined;
    file.ir = analyzeTree(tree, source, undefined, { dims: settings ? dimsForFile(settings, file.input.absolute) : undefined, sites });
    if (file.ir.incomplete) file.incomplete = file.ir.incomplete;
  } catch (e) {
    if (isWasmTrap(e)) {
      parser.retire(e);
      file.skipped = new ParserTrap(e).message;
    } else file.error = `analysis failed: ${(e as Error).message}`;
  } finally {
    if (!trees?.keep(parser, file, tree)) parser.release(tree);
    // A fresh runtime for the next file if this one grew the WASM memory far (buildIR renews it first).
    parser.recycleIfLarge();
  }
}

/** What each file's findings were last computed from (runFileRules): the same inputs give the same findings. */
const rulesInputs = new WeakMap<AnalysedFile, { ir: ModelIR; text: string; settings: PrecisionLensSettings; facts: string }>();

/**
 * Pass 2 for one file: rules on the IR (what engine.analyzeParsed does, without parsing again). Not re-run when the
 * IR, the text, the settings and the file's workspace facts are those of its last run (--fix reports on the fixed set
 * after the rounds, whose last one usually saw the same facts).
 */
export function runFileRules(file: AnalysedFile, settings: PrecisionLensSettings, workspace: WorkspaceFacts): void {
  const ir = file.ir;
  const facts = factsForFile(workspace, file.input.absolute);
  const key = JSON.stringify(facts);
  const last = rulesInputs.get(file);
  if (ir && last && last.ir === ir && last.text === file.text && last.settings === settings && last.facts === key && !file.error) return;
  rulesInputs.delete(file);
  file.findings = [];
  if (!ir || !inScope(ir)) return;
  try {
    file.findings = findingsOf(ir, pythonSource(file.text), settings, facts);
    rulesInputs.set(file, { ir, text: file.text, settings, facts: key });
  } catch (e) {
    file.error = `rules failed: ${(e as Error).message}`;
  }
}

export function factsOf(files: readonly AnalysedFile[], base: WorkspaceFacts = {}): WorkspaceFacts {
  const facts = workspaceFactsOf(files.flatMap((f) => (f.ir ? [f.ir] : [])), base);
  const imported = files.flatMap((f) => f.importedGains ?? []);
  const te = imported.filter(([, g]) => g.te).map(([path]) => path);
  return { ...facts, ...pathFacts(files.flatMap((f) => (f.ir ? [[f.input.absolute, fileFactsOf(f.ir)] as const] : [])), { gains: imported, te }) };
}

/** Both passes over every input; `trees`: where trees are kept for a later parse of the same file (--fix). */
export async function analyseAll(parser: PythonParser, inputs: readonly InputFile[], settings: PrecisionLensSettings, base: WorkspaceFacts = {}, findingsOnly = false, trees?: TreeReuse): Promise<{ files: AnalysedFile[]; workspace: WorkspaceFacts }> {
  const files: AnalysedFile[] = [];
  for (const input of inputs) {
    const file = readInput(input, settings);
    await buildIR(parser, file, findingsOnly, settings, inputs, trees);
    files.push(file);
  }
  const workspace = factsOf(files, base);
  for (const file of files) runFileRules(file, settings, workspace);
  return { files, workspace };
}
