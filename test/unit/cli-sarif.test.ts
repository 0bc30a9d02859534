/** `check --format sarif`: a SARIF 2.1.0 log that code-scanning services accept, consistent with the JSON output. */
import * as assert from 'node:assert/strict';
import { RULES, RULE_CODES, ruleDocUrl } from '../../common/codes';
import { ensureBuilt, parseJson, runCli, scratchCopy, type CheckJson } from './cli-harness';

interface SarifLog {
  $schema: string;
  version: string;
  runs: {
    tool: { driver: { name: string; version: string; rules: { id: string; name: string; shortDescription: { text: string }; helpUri: string; defaultConfiguration: { level: string } }[] } };
    originalUriBaseIds: Record<string, { uri: string }>;
    columnKind: string;
    results: {
      ruleId: string; ruleIndex: number; level: string; message: { text: string };
      locations: { physicalLocation: { artifactLocation: { uri: string; uriBaseId?: string }; region: { startLine: number; startColumn: number; endLine: number; endColumn: number } } }[];
    }[];
  }[];
}

describe('precision-lens check --format sarif (built CLI)', function () {
  this.timeout(120_000);
  let dir: string;
  let dispose: () => void;
  let log: SarifLog;
  let json: CheckJson;
  let status: number | null;
  before(() => {
    ensureBuilt();
    ({ dir, dispose } = scratchCopy());
    const run = runCli(['check', 'project', 'info', '--format', 'sarif'], dir);
    status = run.status;
    log = parseJson<SarifLog>(run);
    json = parseJson<CheckJson>(runCli(['check', 'project', 'info', '--format', 'json'], dir));
  });
  after(() => dispose());

  it('is a SARIF 2.1.0 log with one run', () => {
    assert.equal(log.version, '2.1.0');
    assert.match(log.$schema, /sarif-2\.1\.0/);
    assert.equal(log.runs.length, 1);
    assert.equal(log.runs[0].columnKind, 'utf16CodeUnits');
    assert.equal(status, 1, 'exit code follows --fail-on as for the other formats');
  });

  it('declares every rule of common/codes.ts with its page as helpUri', () => {
    const { driver } = log.runs[0].tool;
    assert.equal(driver.name, 'precision-lens');
    assert.match(driver.version, /^\d+\.\d+\.\d+/);
    assert.deepEqual(driver.rules.map((r) => r.id), RULE_CODES);
    for (const r of driver.rules) {
      const code = r.id as keyof typeof RULES;
      assert.equal(r.name, RULES[code].rule);
      assert.equal(r.helpUri, ruleDocUrl(code));
      assert.match(r.helpUri, new RegExp(`docs/rules/${code}\\.md$`));
      assert.ok(r.shortDescription.text.length > 0);
      assert.equal(r.defaultConfiguration.level, { error: 'error', warning: 'warning', information: 'note', hint: 'note' }[RULES[code].defaultSeverity]);
    }
  });

  it('has one result per diagnostic, with level, relative uri and 1-based region', () => {
    const { results, originalUriBaseIds, tool } = log.runs[0];
    assert.equal(results.length, json.diagnostics.length);
    assert.ok(originalUriBaseIds['%SRCROOT%'].uri.startsWith('file:///'));
    assert.ok(originalUriBaseIds['%SRCROOT%'].uri.endsWith('/'));
    results.forEach((r, i) => {
      const d = json.diagnostics[i];
      assert.equal(r.ruleId, d.code);
      assert.equal(tool.driver.rules[r.ruleIndex].id, r.ruleId);
      assert.equal(r.level, { error: 'error', warning: 'warning', information: 'note', hint: 'note' }[d.severity]);
      assert.equal(r.message.text, d.message);
      const loc = r.locations[0].physicalLocation;
      assert.equal(loc.artifactLocation.uri, d.file);
      assert.equal(loc.artifactLocation.uriBaseId, '%SRCROOT%');
      assert.doesNotMatch(loc.artifactLocation.uri, /^\//);
      assert.deepEqual(loc.region, { startLine: d.line, startColumn: d.column, endLine: d.endLine, endColumn: d.endColumn });
      // The evidence as relatedLocations (as JSON's `related`), the explanation as a property.
      const related = (r as unknown as { relatedLocations?: Array<{ message: { text: string }; physicalLocation: { region: { startLine: number } } }> }).relatedLocations ?? [];
      assert.deepEqual(related.map((x) => [x.physicalLocation.region.startLine, x.message.text]), d.related.map((x) => [x.line, x.message]));
      assert.equal((r as unknown as { properties: { explanation: string } }).properties.explanation, d.explanation);
    });
    assert.ok(results.some((r) => r.level === 'warning') && results.some((r) => r.level === 'note'));
  });

  it('is an empty result list, exit 0, when there is nothing to report', () => {
    const run = runCli(['check', 'clean', '--format', 'sarif'], dir);
    assert.equal(run.status, 0);
    assert.deepEqual(parseJson<SarifLog>(run).runs[0].results, []);
  });
});
