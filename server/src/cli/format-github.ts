/**
 * GitHub Actions workflow commands (`::warning file=...,line=...::message`): each finding becomes an annotation on
 * the pull request's diff, as `ruff check --output-format github` does. Errors are `error`, warnings `warning`,
 * information and hints `notice`.
 */
import { RULES, type Severity } from '../../../common/codes';
import type { AnalysedFile } from './analyze';
import { oneBased } from './positions';

const LEVEL: Record<Severity, string> = { error: 'error', warning: 'warning', information: 'notice', hint: 'notice' };

/** A message's escapes (the workflow command format: %, CR, LF). */
function escapeData(s: string): string {
  return s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

/** A property's escapes: those of a message, and the `:` and `,` that separate properties. */
function escapeProperty(s: string): string {
  return escapeData(s).replace(/:/g, '%3A').replace(/,/g, '%2C');
}

export function formatGithub(files: readonly AnalysedFile[]): string {
  const out: string[] = [];
  for (const f of files) {
    for (const d of f.findings) {
      const at = oneBased(d.span);
      const props = [
        `title=${escapeProperty(`Precision Lens (${d.code})`)}`, `file=${escapeProperty(f.input.display)}`,
        `line=${at.line}`, `col=${at.column}`, `endLine=${at.endLine}`, `endColumn=${at.endColumn}`,
      ].join(',');
      out.push(`::${LEVEL[d.severity]} ${props}::${escapeData(`${f.input.display}:${at.line}:${at.column}: ${d.code} ${d.message} [${RULES[d.code].rule}]`)}`);
    }
    // What was not analysed is said too: a notice on the file.
    const note = f.skipped ?? f.error;
    if (note) out.push(`::${f.error ? 'error' : 'notice'} title=${escapeProperty('Precision Lens')},file=${escapeProperty(f.input.display)}::${escapeData(`${f.input.display}: ${note}`)}`);
  }
  return out.length ? `${out.join('\n')}\n` : '';
}

/** `--statistics`: one line per code, most frequent first: count, code, [*] when fixable, the rule's name. */
export function formatStatistics(files: readonly AnalysedFile[], fixable: (file: AnalysedFile, index: number) => boolean, json: boolean): string {
  const rows = new Map<string, { count: number; fixable: number }>();
  for (const f of files) {
    f.findings.forEach((d, i) => {
      const row = rows.get(d.code) ?? { count: 0, fixable: 0 };
      row.count++;
      if (fixable(f, i)) row.fixable++;
      rows.set(d.code, row);
    });
  }
  const sorted = [...rows].sort((a, b) => b[1].count - a[1].count || (a[0] < b[0] ? -1 : 1));
  if (json) {
    return `${JSON.stringify(sorted.map(([code, r]) => ({ code, name: RULES[code as keyof typeof RULES].rule, count: r.count, fixable: r.fixable })), null, 2)}\n`;
  }
  const width = String(sorted[0]?.[1].count ?? 0).length;
  return sorted.map(([code, r]) => `${String(r.count).padStart(width)}\t${code}\t${r.fixable ? '[*]' : '[ ]'} ${RULES[code as keyof typeof RULES].rule}\n`).join('');
}
