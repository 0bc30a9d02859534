/**
 * `check --fix`: applies the quick fixes marked `safe`, file by file, re-analysing after each round so a fix that
 * only becomes possible after another (or a second finding the first one exposed) is applied too; at most three
 * rounds. Files are replaced atomically (temp file + rename); `--diff` prints a unified diff instead of writing.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { PrecisionLensSettings } from '../../../common/settings';
import { applyEdits, combineFixes, fixesForFinding, type Fix } from '../fixes';
import type { Parser } from '../parser';
import type { Finding } from '../rules/types';
import { buildIR, factsOf, runFileRules, type AnalysedFile } from './analyze';

const MAX_ROUNDS = 3;

const precomputed = new WeakMap<AnalysedFile, Map<Finding, string[]>>();

/** Titles of the quick fixes offered for one finding (what the editor's light bulb shows). */
export function fixTitlesFor(file: AnalysedFile, finding: Finding, settings: PrecisionLensSettings): string[] {
  if (file.titles) {
    // Computed by the worker thread that analysed the file (its IR stayed there).
    let byFinding = precomputed.get(file);
    if (!byFinding) precomputed.set(file, byFinding = new Map(file.findings.map((f, i) => [f, file.titles![i] ?? []])));
    const titles = byFinding.get(finding);
    if (titles) return titles;
  }
  if (!file.ir) return [];
  try {
    return fixesForFinding(file.text, file.ir, finding, settings, {}).map((f) => f.title);
  } catch {
    return [];
  }
}

export interface FixOutcome {
  /** The files after fixing, re-analysed with facts recomputed over the whole set. */
  files: AnalysedFile[];
  /** Unified diff of every change (when not writing). */
  diff: string;
  changedFiles: number;
  appliedFixes: number;
  errors: string[];
}

/** The safe fixes of one round, in finding order; ids already applied in an earlier round are not offered again. */
function safeFixesOf(file: AnalysedFile, settings: PrecisionLensSettings, applied: ReadonlySet<string>): Fix[] {
  const candidates: Fix[] = [];
  const seen = new Set<string>();
  for (const finding of file.findings) {
    let fixes: Fix[];
    try {
      fixes = fixesForFinding(file.text, file.ir!, finding, settings, {});
    } catch {
      continue;
    }
    for (const fix of fixes) {
      if (!fix.safe || fix.edits.length === 0 || seen.has(fix.id) || applied.has(fix.id)) continue;
      seen.add(fix.id);
      candidates.push(fix);
    }
  }
  return candidates;
}

/** Writes next to the target, then renames over it: a reader never sees half a file. */
export function writeAtomically(target: string, text: string): void {
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

export function fixFiles(parser: Parser, files: AnalysedFile[], settings: PrecisionLensSettings, opts: { write: boolean }): FixOutcome {
  const outcome: FixOutcome = { files, diff: '', changedFiles: 0, appliedFixes: 0, errors: [] };
  let workspace = factsOf(files);
  let createTwoFilesPatch: typeof import('diff').createTwoFilesPatch | undefined;
  let FILE_HEADERS_ONLY: typeof import('diff').FILE_HEADERS_ONLY | undefined;
  for (const file of files) {
    if (!file.ir || file.findings.length === 0) continue;
    const original = file.text;
    const appliedIds = new Set<string>();
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const { edits, applied } = combineFixes(safeFixesOf(file, settings, appliedIds));
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
      file.text = next;
      buildIR(parser, file, true);
      if (file.error) break;
      workspace = factsOf(files);
      runFileRules(file, settings, workspace);
    }
    if (file.text === original) continue;
    outcome.changedFiles++;
    if (opts.write) {
      try {
        writeAtomically(file.input.absolute, file.bom ? `\ufeff${file.text}` : file.text);
      } catch (e) {
        outcome.errors.push(`${file.input.display}: could not write: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      }
    } else {
      if (!createTwoFilesPatch) ({ createTwoFilesPatch, FILE_HEADERS_ONLY } = require('diff') as typeof import('diff'));
      // git's convention for an absolute path: `a/tmp/x.py`, not `a//tmp/x.py` (what `patch -p1` from / expects).
      const name = file.input.display.replace(/\\/g, '/').replace(/^(?:[A-Za-z]:)?\/+/, '');
      const patch = createTwoFilesPatch(`a/${name}`, `b/${name}`, original, file.text, undefined, undefined, { context: 3, headerOptions: FILE_HEADERS_ONLY });
      outcome.diff += patch.endsWith('\n') ? patch : `${patch}\n`;
    }
  }
  // Facts may have changed (a wrapped training step adds an autocast region): report on the fixed set as a whole.
  workspace = factsOf(files);
  for (const file of files) runFileRules(file, settings, workspace);
  return outcome;
}
