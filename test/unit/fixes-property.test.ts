/**
 * Properties every fix must have, on every fixture and every real model file in corpus/ (git-ignored; skipped when
 * absent): applied alone, and all together, the result parses with no new ERROR nodes, compiles with Python, adds no
 * bare Transformer Engine import to a file that had none, and a second pass does not offer an applied fix again
 * (idempotence).
 */
import * as assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MECHANICS_SETTINGS } from './fixes-support';
import { applyEdits, combineFixes, fixesForFinding, sourceFixes, type Fix } from '../../server/src/fixes';
import { analyse, FIXTURES, pyCompileMany } from './fixes-support';

const CORPUS = join(__dirname, '..', '..', 'corpus');

function pyFiles(dir: string): string[] {
  return existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith('.py')).sort().map((f) => join(dir, f)) : [];
}

/** Every fix offered for the text: each finding's quick fixes, then the file's and each class's source actions. */
async function allFixes(text: string): Promise<{ fixes: Fix[]; errorNodes: number }> {
  const { ir, findings, errorNodes } = await analyse(text);
  const fixes: Fix[] = [];
  for (const f of findings) fixes.push(...fixesForFinding(text, ir, f, MECHANICS_SETTINGS));
  fixes.push(...sourceFixes(text, ir, MECHANICS_SETTINGS));
  for (const c of ir.classes) fixes.push(...sourceFixes(text, ir, MECHANICS_SETTINGS, { className: c.name }).filter((f) => f.id.startsWith('convert-all:class:')));
  const seen = new Set<string>();
  return { fixes: fixes.filter((f) => !seen.has(f.id) && seen.add(f.id)), errorNodes };
}

async function checkFile(file: string): Promise<{ fixes: number; problems: string[] }> {
  const text = readFileSync(file, 'utf8');
  const { fixes, errorNodes } = await allFixes(text);
  const problems: string[] = [];
  const outputs: { label: string; text: string; applied: Fix[] }[] = fixes.map((f) => ({ label: f.id, text: applyEdits(text, f.edits), applied: [f] }));
  const together = combineFixes(fixes);
  outputs.push({ label: `all together (${together.applied.length} of ${fixes.length})`, text: applyEdits(text, together.edits), applied: together.applied });

  // No edit leaves a bare (top-level, unguarded) TE import in a file that had none: the fallback comes with it.
  const BARE_TE = /^(import transformer_engine|from transformer_engine)\b/m;
  if (!BARE_TE.test(text)) for (const o of outputs) if (BARE_TE.test(o.text)) problems.push(`${o.label}: adds a bare Transformer Engine import`);
  const compileErrors = pyCompileMany(outputs.map((o) => o.text));
  for (const [i, o] of outputs.entries()) {
    if (compileErrors.has(i)) problems.push(`${o.label}: does not compile: ${compileErrors.get(i)}`);
    const again = await allFixes(o.text);
    if (again.errorNodes > errorNodes) problems.push(`${o.label}: ${again.errorNodes - errorNodes} new ERROR nodes`);
    const appliedIds = new Set(o.applied.map((f) => f.id));
    const repeated = again.fixes.filter((f) => appliedIds.has(f.id) && f.edits.length);
    if (repeated.length) problems.push(`${o.label}: offered again after applying: ${repeated.map((f) => f.id).join(', ')}`);
  }
  return { fixes: fixes.length, problems };
}

describe('fixes: properties over fixtures and corpus', function () {
  this.timeout(300_000);
  const files = [...pyFiles(FIXTURES), ...pyFiles(join(FIXTURES, 'project')), ...pyFiles(CORPUS)];
  for (const file of files) {
    it(file.replace(/.*\/(fixtures|corpus)\//, '$1/'), async () => {
      const { problems } = await checkFile(file);
      assert.deepEqual(problems, []);
    });
  }
  if (!pyFiles(CORPUS).length) it.skip('corpus/*.py (absent: fetch the files listed in shared/corpus/SOURCES.tsv)', () => undefined);
});
