/**
 * `check --fix`, as in ruff: applies the quick fixes that change no behaviour (`safe`), file by file, re-analysing
 * after each round so a fix that only becomes possible after another (or a second finding the first one exposed) is
 * applied too; at most four rounds. `--unsafe-fixes` also applies the others, except an edit that would add the file's
 * first bare Transformer Engine import: the FP8 fallback wrapper goes in first, and the next round's conversions go
 * through its factories, so the file still runs without TE. PL303's migration needs TE >= 2.9 to be known (its fix is
 * `safe` only then). Files are replaced atomically (temp file + rename); `--diff` prints a unified diff instead.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { RuleCode } from '../../../common/codes';
import type { PrecisionLensSettings } from '../../../common/settings';
import { applyEdits, combineFixes, fixesForFinding, sourceFixes, type Fix, type FixEnv, type TextEdit } from '../fixes';
import type { PythonParser } from '../engine/parser';
import type { ModelIR } from '../analysis/ir';
import type { Finding } from '../rules/types';
import { locateFallbackModule } from '../engine/fallback-location';
import { fallbackLacks } from '../fixes/fallback';
import { unifiedDiff } from './unified-diff';
import { buildIR, factsOf, runFileRules, type AnalysedFile } from './analyze';
import { trains } from '../engine/engine';
import { encodeSource } from './encoding';
import type { KeptTrees } from './kept-trees';

const MAX_ROUNDS = 4;

/**
 * The time one file's --fix may take (its first analysis and its rounds) before no further round starts: each round
 * re-analyses the whole file, so on files near maxFileSize the rounds alone would pass the 2 s a file may cost. The
 * first round always runs (every run makes progress and what it writes compiles); a later one only when the time spent
 * plus the last round's cost stays within the budget. What is left is said (AnalysedFile.incomplete): a second run
 * applies it. Real model files (up to a few hundred KB) finish all their rounds far inside it.
 */
export const FIX_TIME_BUDGET_MS = 1500;

/** A top-level (unguarded) Transformer Engine import in generated text: the file would need TE to import. */
const BARE_TE_IMPORT = /^(?:import transformer_engine|from transformer_engine)/m;

/** Per edit object: the fallback's shared edits (the inline block) come with every conversion of a file, tested once. */
const bareImportSeen = new WeakMap<TextEdit, boolean>();
function addsBareTeImport(edit: TextEdit): boolean {
  let hit = bareImportSeen.get(edit);
  if (hit === undefined) bareImportSeen.set(edit, hit = BARE_TE_IMPORT.test(edit.newText));
  return hit;
}

const precomputed = new WeakMap<AnalysedFile, Map<Finding, string[]>>();

/** Titles of the quick fixes offered for one finding (what the editor's light bulb shows). */
export function fixTitlesFor(file: AnalysedFile, finding: Finding, settings: PrecisionLensSettings, env: FixEnv = {}): string[] {
  if (file.titles) {
    // Computed by the worker thread that analysed the file (its IR stayed there).
    let byFinding = precomputed.get(file);
    if (!byFinding) precomputed.set(file, byFinding = new Map(file.findings.map((f, i) => [f, file.titles![i] ?? []])));
    const titles = byFinding.get(finding);
    if (titles) return titles;
  }
  if (!file.ir) return [];
  try {
    return fixesOf(file, finding, settings, env).map((f) => f.title);
  } catch {
    return [];
  }
}

/** How many findings had their fixes planned in this process (tests count them: a round plans only what it may apply). */
export const fixPlanCounts = { findings: 0 };

/** The fixes last computed per finding, with what they were computed from (a finding belongs to one analysis). */
const fixMemo = new WeakMap<Finding, { text: string; ir: ModelIR; settings: PrecisionLensSettings; env: FixEnv; fixes: Fix[] }>();

/**
 * fixesForFinding, computed once per finding for the same text, IR, settings and environment: `check --format json`
 * wants both the titles and the fixability of every finding (a 10,000-layer class: 10,000 conversions planned twice).
 */
function fixesOf(file: AnalysedFile, finding: Finding, settings: PrecisionLensSettings, env: FixEnv): Fix[] {
  const hit = fixMemo.get(finding);
  if (hit && hit.text === file.text && hit.ir === file.ir && hit.settings === settings && hit.env === env) return hit.fixes;
  fixPlanCounts.findings++;
  const fixes = fixesForFinding(file.text, file.ir!, finding, settings, env);
  fixMemo.set(finding, { text: file.text, ir: file.ir!, settings, env, fixes });
  return fixes;
}

/** One fix applied by --fix, for --show-fixes. */
export interface AppliedFix {
  file: string;
  codes: RuleCode[];
  title: string;
}

export interface FixOutcome {
  /** The files after fixing, re-analysed with facts recomputed over the whole set. */
  files: AnalysedFile[];
  /** Unified diff of every change (when not writing). */
  diff: string;
  changedFiles: number;
  appliedFixes: number;
  applied: AppliedFix[];
  errors: string[];
}

/** How --fix treats one fix: applied by --fix (`safe`), only with --unsafe-fixes (`unsafe`), or never in batch. */
export type BatchClass = 'safe' | 'unsafe' | undefined;

/**
 * `safe` fixes change no behaviour. Others are `unsafe`, except PL303's migration while the TE version is unknown
 * (its fix is safe once it is known) and, unless the file already needs TE, an edit that adds a bare TE import
 * (`needsWrapper`: applied after the fallback wrapper, through its factories).
 */
export function batchClass(fix: Fix, ir: ModelIR): { cls: BatchClass; needsWrapper?: boolean } {
  if (!fix.edits.length) return { cls: undefined };
  if (fix.predictedLoss) return { cls: undefined };
  if (fix.safe) return { cls: 'safe' };
  if (fix.codes.includes('PL303')) return { cls: undefined };
  if (!ir.teImportUnguarded && fix.edits.some(addsBareTeImport)) return { cls: 'unsafe', needsWrapper: true };
  return { cls: 'unsafe' };
}

/** The best batch class among a finding's fixes (what the summary counts as fixable). */
export function fixabilityOf(file: AnalysedFile, finding: Finding, settings: PrecisionLensSettings, env: FixEnv): BatchClass {
  if (!file.ir) return undefined;
  let best: BatchClass;
  try {
    for (const fix of fixesOf(file, finding, settings, env)) {
      const { cls } = batchClass(fix, file.ir);
      if (cls === 'safe') return 'safe';
      best ??= cls;
    }
  } catch {
    return undefined;
  }
  return best;
}

/** The fixes of one round, in finding order; ids already applied in an earlier round are not offered again. */
function roundFixesOf(file: AnalysedFile, settings: PrecisionLensSettings, applied: ReadonlySet<string>, mode: FixMode & { fileEnv: FixEnv }, limit = Infinity): Fix[] {
  const candidates: Fix[] = [];
  const seen = new Set<string>();
  let wrapperWanted = false;
  for (const finding of file.findings) {
    let fixes: Fix[];
    try {
      fixes = fixesOf(file, finding, settings, mode.fileEnv);
    } catch {
      continue;
    }
    for (const fix of fixes) {
      if (seen.has(fix.id) || applied.has(fix.id)) continue;
      const { cls, needsWrapper } = batchClass(fix, file.ir!);
      if (cls !== 'safe' && !(cls === 'unsafe' && mode.unsafe)) continue;
      if (needsWrapper) { wrapperWanted = true; continue; }
      // The fallback wrapper first, alone in its round: the next round's conversions then use its factories. The first
      // one offered is the round, so the findings after it are not planned (PL401 on the TE import comes first: a
      // 5,000-layer class's conversions were planned only to be dropped).
      if (fix.id === 'insert-wrapper') return [fix];
      seen.add(fix.id);
      candidates.push(fix);
      if (candidates.length >= limit) return candidates;
    }
  }
  if (wrapperWanted) {
    const wrapper = sourceFixes(file.text, file.ir!, settings, { env: mode.fileEnv }).find((f) => f.id === 'insert-wrapper');
    if (wrapper && !applied.has(wrapper.id)) return [wrapper];
  }
  return candidates;
}

/** Whether a further round would apply anything (said only then: a finished file gets no note). */
function hasMoreFixes(file: AnalysedFile, settings: PrecisionLensSettings, applied: ReadonlySet<string>, opts: FixMode, created: ReadonlySet<string>): boolean {
  if (!file.ir) return false;
  try {
    // One is enough to know: the findings after it are not planned.
    return roundFixesOf(file, settings, applied, { ...opts, fileEnv: envFor(file, settings, opts, created) }, 1).length > 0;
  } catch {
    return false;
  }
}

/** What --fix may apply and where the result goes. */
export interface FixMode {
  write: boolean;
  /** Make the unified diff of the changes (default: when not writing, --diff); false: only the fixed texts. */
  diff?: boolean;
  /** --unsafe-fixes. */
  unsafe: boolean;
  env: FixEnv;
  /**
   * The project's folder (where its pyproject.toml is, else the inputs' common folder): conversions there go through
   * the project's one fallback module (settings.fallbackModule), created once; none: an inline block per file.
   */
  projectRoot?: string;
  /** The files' trees, kept by their analysis: a round re-parses from the last tree with the round's edits. */
  trees?: KeptTrees;
  /** Per file, the time after which no further round starts (FIX_TIME_BUDGET_MS unless a test sets it). */
  budgetMs?: number;
}

/** The file's fallback module, seen through the files this run created (or, with --diff, would create). */
function envFor(file: AnalysedFile, settings: PrecisionLensSettings, mode: FixMode, created: ReadonlySet<string>): FixEnv {
  if (!mode.projectRoot) return mode.env;
  const fallbackModule = locateFallbackModule(file.input.absolute, [mode.projectRoot], settings.fallbackModule, (p) => created.has(p) || fs.existsSync(p), file.text);
  if (fallbackModule?.exists && !created.has(fallbackModule.path)) {
    const lacks = lacksOf(created, fallbackModule.path);
    if (lacks) fallbackModule.lacks = lacks;
  }
  return fallbackModule ? { ...mode.env, fallbackModule } : mode.env;
}

/** Per --fix run (its set of created files), what each existing module lacks: read once, not every round of every file. */
const lacksByRun = new WeakMap<ReadonlySet<string>, Map<string, string[] | undefined>>();
function lacksOf(run: ReadonlySet<string>, path: string): string[] | undefined {
  let known = lacksByRun.get(run);
  if (!known) lacksByRun.set(run, known = new Map());
  if (!known.has(path)) {
    let lacks: string[] | undefined;
    try {
      lacks = fallbackLacks(fs.readFileSync(path, 'utf8'));
    } catch { /* unreadable: the import will say so */ }
    known.set(path, lacks);
  }
  return known.get(path);
}

/** A unified diff in git's naming: `a/tmp/x.py`, not `a//tmp/x.py` (what `patch -p1` from / expects). */
function patchOf(display: string, before: string | undefined, after: string): string {
  const name = display.replace(/\\/g, '/').replace(/^(?:[A-Za-z]:)?\/+/, '');
  const patch = unifiedDiff(before === undefined ? '/dev/null' : `a/${name}`, `b/${name}`, before ?? '', after);
  return patch.endsWith('\n') ? patch : `${patch}\n`;
}

/** Writes next to the target, then renames over it: a reader never sees half a file. */
export function writeAtomically(target: string, text: string | Buffer): void {
  const real = fs.realpathSync(target); // replace the file a symlink points to, not the link
  const mode = fs.statSync(real).mode & 0o7777;
  const tmp = path.join(path.dirname(real), `.${path.basename(real)}.precision-lens-${process.pid}.tmp`);
  try {
    fs.writeFileSync(tmp, text, { mode });
    fs.renameSync(tmp, real);
  } catch (e) {
    try { fs.unlinkSync(tmp); } catch { /* already gone */ }
    throw e;
  }
}

/**
 * Writes a file's new text in its own encoding with its BOM (cli/encoding.ts); throws (with the reason) when the text
 * cannot be written back exactly, and then the file is left as it was.
 */
export function writeSource(file: AnalysedFile, text: string): void {
  const { bytes, error } = encodeSource(file.bom ? `\ufeff${text}` : text, file.encoding);
  if (!bytes) throw new Error(error);
  writeAtomically(file.input.absolute, bytes);
}

export async function fixFiles(parser: PythonParser, files: AnalysedFile[], settings: PrecisionLensSettings, opts: FixMode): Promise<FixOutcome> {
  const outcome: FixOutcome = { files, diff: '', changedFiles: 0, appliedFixes: 0, applied: [], errors: [] };
  /** Files this run created (the fallback module), or would create with --diff. */
  const created = new Set<string>();
  // Training scripts last, their findings re-derived first: the conversions of the model files make the facts that
  // tell a training script its step must enter FP8 autocast (PL302), so one run converts the model and wraps the step.
  // Except a script that compiles its model (PL306): it goes first, and its fp8_for_compile is the project's FP8 stack,
  // which the model files' findings then see (no te.* conversion under torchao's).
  const training = (f: AnalysedFile) => !!f.ir && trains(f.ir);
  const compiling = (f: AnalysedFile) => opts.unsafe && f.findings.some((x) => x.code === 'PL306');
  const first = files.filter(compiling);
  const order = [...first, ...files.filter((f) => !compiling(f) && !training(f)), ...files.filter((f) => !compiling(f) && training(f))];
  const before = new Map(files.map((f) => [f, f.text]));
  for (const file of order) {
    if (opts.unsafe && (training(file) || first.length)) runFileRules(file, settings, factsOf(files));
    await fixFile(parser, file, files, settings, opts, created, outcome);
    opts.trees?.release(parser, file);
  }
  // A file left as it was may have findings now that another file converted (PL701 in a file whose blocks another
  // module defines, which came first in the order): those get their rounds, so one run leaves no such finding behind.
  if (opts.unsafe && outcome.changedFiles) {
    const workspace = factsOf(files);
    for (const file of order) {
      if (file.text !== before.get(file) || !file.ir) continue;
      const seen = new Set(file.findings.map(findingKey));
      runFileRules(file, settings, workspace);
      if (file.findings.some((f) => !seen.has(findingKey(f)))) await fixFile(parser, file, files, settings, opts, created, outcome);
    }
  }
  // Facts may have changed (a wrapped training step adds an autocast region): report on the fixed set as a whole.
  const workspace = factsOf(files);
  for (const file of files) runFileRules(file, settings, workspace);
  return outcome;
}

const findingKey = (f: Finding) => `${f.code}:${f.span.startOffset}`;

/** The fix rounds of one file, then its write (or its diff). */
async function fixFile(parser: PythonParser, file: AnalysedFile, files: AnalysedFile[], settings: PrecisionLensSettings, opts: FixMode, created: Set<string>, outcome: FixOutcome): Promise<void> {
  if (!file.ir || file.findings.length === 0) return;
  if (file.encoding?.unwritable && opts.write) {
    file.incomplete = [file.incomplete, `fixes not applied: ${file.encoding.unwritable}`].filter(Boolean).join('; ');
    return;
  }
  const original = file.text;
  const appliedIds = new Set<string>();
  const budgetMs = opts.budgetMs ?? FIX_TIME_BUDGET_MS;
  // The file's first analysis counts: the budget is for the file, not for its rounds alone.
  const began = performance.now() - (file.analysisMs ?? 0);
  let lastRoundMs = 0;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const roundStart = performance.now();
    if (round > 0 && roundStart - began + lastRoundMs > budgetMs) {
      if (hasMoreFixes(file, settings, appliedIds, opts, created)) {
        const spent = ((roundStart - began) / 1000).toFixed(1);
        // Every round before this one ran to its end (one that did not broke the loop): `round` of them.
        file.incomplete = [file.incomplete, `--fix stopped after ${round} round${round === 1 ? '' : 's'} (${spent} s, its time budget per file): run it again to apply the rest`]
          .filter(Boolean).join('; ');
      }
      break;
    }
    const fileEnv = envFor(file, settings, opts, created);
    const { edits, applied } = combineFixes(roundFixesOf(file, settings, appliedIds, { ...opts, fileEnv }));
    if (applied.length === 0) break;
    let next: string;
    try {
      next = applyEdits(file.text, edits);
    } catch (e) {
      outcome.errors.push(`${file.input.display}: could not apply fixes: ${(e as Error).message}`);
      break;
    }
    for (const fix of applied) appliedIds.add(fix.id);
    if (next === file.text) break;
    outcome.appliedFixes += applied.length;
    for (const fix of applied) outcome.applied.push({ file: file.input.display, codes: fix.codes, title: fix.title });
    for (const f of applied.flatMap((x) => x.createFiles ?? [])) {
      if (created.has(f.path) || fs.existsSync(f.path)) continue;
      created.add(f.path);
      const display = path.relative(path.dirname(file.input.absolute), f.path);
      const shown = path.join(path.dirname(file.input.display), display);
      if (!opts.write) { if (opts.diff ?? true) outcome.diff += patchOf(shown, undefined, f.text); continue; }
      try {
        fs.writeFileSync(f.path, f.text, { flag: 'wx' });
      } catch (e) {
        outcome.errors.push(`${shown}: could not create: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      }
    }
    opts.trees?.edited(file, edits, next);
    file.text = next;
    await buildIR(parser, file, true, settings, files.map((f) => f.input), opts.trees);
    if (file.error) break;
    runFileRules(file, settings, factsOf(files));
    lastRoundMs = performance.now() - roundStart;
  }
  if (file.text === original) return;
  const encoded = encodeSource(file.text, file.encoding);
  if (opts.write && !encoded.bytes) {
    // A character the file's encoding cannot hold: the file stays as it was, and says why.
    file.incomplete = [file.incomplete, `fixes not applied: ${encoded.error}`].filter(Boolean).join('; ');
    file.text = original;
    await buildIR(parser, file, true, settings, files.map((f) => f.input));
    runFileRules(file, settings, factsOf(files));
    return;
  }
  outcome.changedFiles++;
  if (opts.write) {
    try {
      writeSource(file, file.text);
    } catch (e) {
      outcome.errors.push(`${file.input.display}: could not write: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
    }
  } else if (opts.diff ?? true) {
    outcome.diff += patchOf(file.input.display, original, file.text);
  }
}
