/** `path:line:col: severity PLnnn message [rule]` lines and one summary line, as compilers and linters print. */
import { RULES, type Severity } from '../../../common/codes';
import { isAnalysed, type AnalysedFile } from './analyze';

const ORDER: readonly Severity[] = ['error', 'warning', 'information', 'hint'];

export function countBySeverity(files: readonly AnalysedFile[]): Record<Severity, number> {
  const counts: Record<Severity, number> = { error: 0, warning: 0, information: 0, hint: 0 };
  for (const f of files) for (const d of f.findings) counts[d.severity]++;
  return counts;
}

export function summaryLine(files: readonly AnalysedFile[]): string {
  const counts = countBySeverity(files);
  const total = ORDER.reduce((n, s) => n + counts[s], 0);
  const analysed = files.filter(isAnalysed).length;
  const skipped = files.length - analysed;
  const tail = `${analysed} file${analysed === 1 ? '' : 's'} analysed${skipped ? `, ${skipped} not analysed` : ''}`;
  if (total === 0) return `No problems found (${tail}).`;
  const withFindings = files.filter((f) => f.findings.length).length;
  const parts = ORDER.filter((s) => counts[s]).map((s) => `${counts[s]} ${s === 'information' ? 'information' : s + (counts[s] === 1 ? '' : 's')}`);
  return `Found ${total} problem${total === 1 ? '' : 's'} (${parts.join(', ')}) in ${withFindings} file${withFindings === 1 ? '' : 's'} (${tail}).`;
}

export function formatText(files: readonly AnalysedFile[]): string {
  const out: string[] = [];
  for (const f of files) {
    const name = f.input.display;
    for (const d of f.findings) {
      out.push(`${name}:${d.span.startLine + 1}:${d.span.startColumn + 1}: ${d.severity} ${d.code} ${d.message} [${RULES[d.code].rule}]`);
    }
  }
  out.push(summaryLine(files));
  return out.join('\n') + '\n';
}
