/**
 * `source.fixAll.precisionLens` (issue 24): what `editor.codeActionsOnSave` runs. It applies the safe fixes only, the
 * ones `check --fix` applies unattended (Fix.safe: the result is equivalent and needs no review, e.g. removing an
 * unused `# noqa` code, repairing a recipe argument); never a conversion, a wrapper or a `# noqa` it would add.
 *
 * One round, from the analysis the editor shows (the same findings, settings and workspace facts), combined as
 * `check --fix` combines a round (conflicting fixes: the first wins). The result is checked before it is offered: a
 * file that parsed cleanly must still parse cleanly, else nothing is applied. A file with a syntax error gets nothing
 * (a save in the middle of an edit must not rewrite half-typed code).
 */
import { CodeActionKind } from 'vscode-languageserver/node';
import type { PrecisionLensSettings } from '../../../common/settings';
import type { ModelIR } from '../analysis/ir';
import { applyEdits, combineFixes, fixesForFinding, type Fix, type FixEnv } from '../fixes/index';
import type { Finding } from '../rules/types';

export const FIX_ALL_KIND = `${CodeActionKind.SourceFixAll}.precisionLens`;

/** Whether a requested `only` list asks for the fix-all action (`source`, `source.fixAll`, or ours). */
export function wantsFixAll(only: readonly string[] | undefined): boolean {
  return !!only && only.some((k) => FIX_ALL_KIND === k || FIX_ALL_KIND.startsWith(`${k}.`));
}

export interface FixAllResult {
  /** The combined safe fixes as one fix (undefined when there is nothing to apply, or the result was refused). */
  fix?: Fix;
  /** The safe fixes it holds. */
  applied: Fix[];
  /** Why nothing is applied although safe fixes exist (for the server log). */
  refused?: string;
}

/**
 * The safe fixes of every finding, combined; `parsesCleanly` checks the resulting text (undefined: could not tell,
 * then nothing is applied).
 */
export function fixAll(
  text: string, ir: ModelIR, findings: readonly Finding[], settings: PrecisionLensSettings, env: FixEnv,
  parsesCleanly: (text: string) => boolean | undefined,
): FixAllResult {
  const safe: Fix[] = [];
  const seen = new Set<string>();
  for (const finding of findings) {
    let fixes: Fix[];
    try {
      fixes = fixesForFinding(text, ir, finding, settings, env);
    } catch {
      continue;
    }
    for (const fix of fixes) {
      if (!fix.safe || !fix.edits.length || fix.createFiles?.length || seen.has(fix.id)) continue;
      seen.add(fix.id);
      safe.push(fix);
    }
  }
  if (!safe.length) return { applied: [] };
  if (ir.syntaxError) return { applied: [], refused: `the file has a syntax error at line ${ir.syntaxError.startLine + 1}: no fix applied on save` };
  const { edits, applied } = combineFixes(safe);
  let next: string;
  try {
    next = applyEdits(text, edits);
  } catch (e) {
    return { applied: [], refused: `the safe fixes could not be combined: ${(e as Error).message}` };
  }
  if (next === text) return { applied: [] };
  if (parsesCleanly(next) !== true) return { applied: [], refused: 'the safe fixes would leave a syntax error: none applied' };
  const codes = [...new Set(applied.flatMap((f) => f.codes))];
  return {
    applied,
    fix: {
      id: 'fix-all', kind: 'source', safe: true, codes, edits,
      title: `Fix all safe Precision Lens problems (${applied.length} fix${applied.length === 1 ? '' : 'es'}: ${codes.join(', ')})`,
    },
  };
}
