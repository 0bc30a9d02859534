/**
 * `--fix` rounds that keep the tree and the analysis cache (KeepBudget: re-parse from the edited tree, reuse the
 * statements a round did not touch) give exactly what full re-parses and fresh analyses give: same fixed texts, same
 * diff, same fixes and findings, on every fixture and on generated huge classes (flat, multi-line, error-recovered).
 */
import * as assert from 'node:assert/strict';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { resolveSettings } from '../../common/settings';
import { analyseAll, KeepBudget } from '../../server/src/cli/analyze';
import { fixFiles } from '../../server/src/cli/fix';
import type { InputFile } from '../../server/src/cli/files';
import { PythonParser } from '../../server/src/parser';
import { generateLargeClass } from '../../scripts/gen-large-model.mjs';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';

function pyFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir).sort()) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) pyFiles(p, out);
    else if (e.endsWith('.py')) out.push(p);
  }
  return out;
}

/** --fix --unsafe-fixes --diff of `inputs` in one run, with or without kept parses. */
async function fixRun(parser: PythonParser, inputs: InputFile[], keep?: KeepBudget): Promise<unknown> {
  const settings = resolveSettings({});
  const { files } = await analyseAll(parser, inputs, settings, {}, true, keep);
  const out = await fixFiles(parser, files, settings, { write: false, unsafe: true, env: {}, keep });
  return {
    diff: out.diff, applied: out.applied, errors: out.errors,
    files: out.files.map((f) => ({ text: f.text, error: f.error, skipped: f.skipped, findings: f.findings.map((x) => [x.code, x.span, x.message, x.severity, x.related, x.layerIndex]) })),
  };
}

describe('--fix rounds with kept parses (incremental re-parse + analysis cache)', function () {
  this.timeout(300_000);
  let parser: PythonParser;
  before(async () => { parser = await PythonParser.create(); });
  after(() => parser.dispose());

  it('every fixture, one file at a time: same outcome as full re-parses', async () => {
    const fixtures = pyFiles(join(__dirname, '..', 'fixtures'));
    assert.ok(fixtures.length > 50);
    for (const f of fixtures) {
      const input = [{ absolute: f, display: f }];
      // minChars 0: every file keeps its parse, whatever its size.
      assert.deepEqual(await fixRun(parser, input, new KeepBudget(0)), await fixRun(parser, input), f);
    }
  });

  it('all fixtures in one run, with a budget that admits only some: same outcome', async () => {
    const inputs = pyFiles(join(__dirname, '..', 'fixtures', 'fixes')).map((f) => ({ absolute: f, display: f }));
    assert.deepEqual(await fixRun(parser, inputs, new KeepBudget(0, 20_000)), await fixRun(parser, inputs));
  });

  it('huge classes (flat, multi-line, error-recovered): same outcome', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pl-rounds-'));
    try {
      for (const shape of ['flat', 'multiline', 'broken'] as const) {
        const f = join(dir, `${shape}.py`);
        writeFileSync(f, generateLargeClass({ layers: 600, shape }));
        const input = [{ absolute: f, display: f }];
        const parse = parser.parse.bind(parser);
        let incremental = 0;
        parser.parse = ((text, old) => { if (old) incremental++; return parse(text, old); }) as typeof parse;
        const kept = await fixRun(parser, input, new KeepBudget(0));
        parser.parse = parse;
        assert.ok(incremental >= 1, `${shape}: the rounds re-parsed from the kept tree (${incremental})`);
        assert.deepEqual(kept, await fixRun(parser, input), shape);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
