/**
 * SARIF 2.1.0 for code-scanning uploads (GitHub, Azure DevOps). One run; rules from common/codes.ts with helpUri to the
 * rule page; columns in UTF-16 code units, which is SARIF's default `columnKind` and what the other formats use.
 */
import { pathToFileURL } from 'node:url';
import { RULES, RULE_CODES, ruleDocUrl, SOURCE, type RuleCode, type Severity } from '../../../common/codes';
import type { Finding } from '../rules/types';
import type { AnalysedFile } from './analyze';
import { explanationText } from '../rules/explain';
import { oneBased } from './positions';

const LEVEL: Record<Severity, 'error' | 'warning' | 'note'> = { error: 'error', warning: 'warning', information: 'note', hint: 'note' };
const SRCROOT = '%SRCROOT%';

/** Percent-encodes a relative path for a URI reference, keeping the '/' separators. */
function uriOfRelative(display: string): string {
  return display.split('/').map(encodeURIComponent).join('/');
}

export function sarif(files: readonly AnalysedFile[], opts: { version: string; cwd: string; fixTitles: (f: AnalysedFile, d: Finding) => string[] }): object {
  const ruleIndex = new Map<RuleCode, number>(RULE_CODES.map((c, i) => [c, i]));
  const results = [];
  for (const f of files) {
    const relative = !f.input.display.startsWith('/');
    const artifactLocation = relative
      ? { uri: uriOfRelative(f.input.display), uriBaseId: SRCROOT }
      : { uri: pathToFileURL(f.input.absolute).href };
    for (const d of f.findings) {
      const p = oneBased(d.span);
      const titles = opts.fixTitles(f, d);
      results.push({
        ruleId: d.code,
        ruleIndex: ruleIndex.get(d.code),
        level: LEVEL[d.severity],
        message: { text: d.message },
        locations: [{
          physicalLocation: {
            artifactLocation,
            region: { startLine: p.line, startColumn: p.column, endLine: p.endLine, endColumn: p.endColumn },
          },
        }],
        ...(d.related?.length ? {
          relatedLocations: d.related.map((r, id) => {
            const q = oneBased(r.span);
            return { id, message: { text: r.message }, physicalLocation: { artifactLocation, region: { startLine: q.line, startColumn: q.column, endLine: q.endLine, endColumn: q.endColumn } } };
          }),
        } : {}),
        properties: { severity: d.severity, rule: RULES[d.code].rule, explanation: explanationText(d), ...(titles.length ? { fixes: titles } : {}) },
      });
    }
  }
  const notifications = files
    .filter((f) => f.skipped || f.error)
    .map((f) => ({
      level: f.error ? 'error' : 'note',
      message: { text: `${f.input.display}: ${f.skipped ?? f.error}` },
    }));
  return {
    $schema: 'https://json.schemastore.org/sarif-2.1.0.json',
    version: '2.1.0',
    runs: [{
      tool: {
        driver: {
          name: SOURCE,
          version: opts.version,
          semanticVersion: opts.version,
          informationUri: 'https://github.com/precision-lens/precision-lens',
          rules: RULE_CODES.map((code) => ({
            id: code,
            name: RULES[code].rule,
            shortDescription: { text: RULES[code].summary },
            helpUri: ruleDocUrl(code),
            help: { text: `${RULES[code].summary}. See ${ruleDocUrl(code)}` },
            defaultConfiguration: { level: LEVEL[RULES[code].defaultSeverity] },
            properties: { defaultSeverity: RULES[code].defaultSeverity },
          })),
        },
      },
      originalUriBaseIds: { [SRCROOT]: { uri: pathToFileURL(opts.cwd.endsWith('/') ? opts.cwd : `${opts.cwd}/`).href } },
      columnKind: 'utf16CodeUnits',
      invocations: [{ executionSuccessful: !files.some((f) => f.error), toolExecutionNotifications: notifications }],
      results,
    }],
  };
}
