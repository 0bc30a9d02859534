/**
 * Every diagnostic code has a rule page (the diagnostic's codeDescription.href and SARIF helpUri point at it), and
 * every page is well formed: title with the code, rule name and default severity from common/codes.ts, Why / Bad /
 * Good / fix / configure sections, and Python examples that actually parse.
 */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { RULES, RULE_CODES, isRuleCode } from '../../common/codes';

const DOCS = join(__dirname, '..', '..', 'docs', 'rules');
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

/** The markdown between `## heading` and the next `## `. */
function section(page: string, heading: RegExp): string | undefined {
  const lines = page.split('\n');
  const start = lines.findIndex((l) => l.startsWith('## ') && heading.test(l.slice(3)));
  if (start < 0) return undefined;
  const end = lines.findIndex((l, i) => i > start && l.startsWith('## '));
  return lines.slice(start + 1, end < 0 ? undefined : end).join('\n');
}

function pythonBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```python\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

describe('docs/rules', () => {
  const pages = new Map<string, string>();
  before(() => {
    for (const code of RULE_CODES) {
      const file = join(DOCS, `${code}.md`);
      if (existsSync(file)) pages.set(code, readFileSync(file, 'utf8'));
    }
  });

  it('has a page for every code in common/codes.ts', () => {
    const missing = RULE_CODES.filter((c) => !pages.has(c));
    assert.deepEqual(missing, [], `missing docs/rules pages: ${missing.join(', ')}`);
  });

  it('has no page for a code that does not exist', () => {
    const stray = readdirSync(DOCS).filter((f) => /^PL\d+\.md$/i.test(f) && !isRuleCode(f.replace(/\.md$/i, '')));
    assert.deepEqual(stray, []);
  });

  for (const code of RULE_CODES) {
    describe(code, () => {
      it('names the code, the rule and its default severity', () => {
        const page = pages.get(code);
        assert.ok(page, `no page for ${code}`);
        assert.match(page.split('\n')[0], new RegExp(`^# ${code}\\b`));
        assert.ok(page.includes(`\`${RULES[code].rule}\``), `${code}: rule name ${RULES[code].rule} missing`);
        assert.ok(page.includes(RULES[code].defaultSeverity), `${code}: default severity ${RULES[code].defaultSeverity} missing`);
      });

      it('has Why, Bad, Good, fix and configuration sections, with Python in Bad and Good', () => {
        const page = pages.get(code)!;
        for (const heading of [/^Why\b/, /^The fix\b/, /^Configure\b/]) assert.ok(section(page, heading) !== undefined, `${code}: no ## ${heading.source}`);
        for (const heading of [/^Bad\b/, /^Good\b/]) {
          const body = section(page, heading);
          assert.ok(body !== undefined, `${code}: no ## ${heading.source}`);
          assert.ok(pythonBlocks(body).length > 0, `${code}: ${heading.source} has no python block`);
        }
        assert.ok(page.includes(`--rule ${code}=`), `${code}: no --rule example`);
        assert.ok(page.includes('precisionLens.rules'), `${code}: no settings example`);
      });
    });
  }

  it('has Python examples that compile', function () {
    this.timeout(30000);
    const blocks: { where: string; source: string }[] = [];
    for (const [code, page] of pages) pythonBlocks(page).forEach((source, i) => blocks.push({ where: `${code} block ${i + 1}`, source }));
    assert.ok(blocks.length >= 2 * RULE_CODES.length);
    // One interpreter for all blocks: ast.parse each, report the failures.
    const script = [
      'import ast, json, sys',
      'bad = []',
      'for b in json.load(sys.stdin):',
      '    try:',
      '        compile(ast.parse(b["source"]), b["where"], "exec")',
      '    except SyntaxError as e:',
      '        bad.append(f"{b[\'where\']}: line {e.lineno}: {e.msg}")',
      'print(json.dumps(bad))',
    ].join('\n');
    const run = spawnSync(PYTHON, ['-c', script], { input: JSON.stringify(blocks), encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(JSON.parse(run.stdout), []);
  });
});
