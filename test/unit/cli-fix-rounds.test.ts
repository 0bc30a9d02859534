/**
 * The work of `check --fix`'s rounds, counted through the real path. It keeps each file's tree and re-parses a fixed text from it with the round's edits recorded
 * (server/src/cli/kept-trees.ts): one parse from scratch per file, whatever the rounds; the trees it gives are those
 * of a fresh parse (lone \r, CRLF and edits next to them included), so the fixed texts and reports are the same.
 */
import * as assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { resolveSettings } from '../../common/settings';
import { main } from '../../server/src/cli';
import { analyseAll, parseCounts, type AnalysedFile } from '../../server/src/cli/analyze';
import { fixFiles, fixPlanCounts, fixTitlesFor } from '../../server/src/cli/fix';
import { checkJson } from '../../server/src/cli/format-json';
import { collectInputs } from '../../server/src/cli/files';
import { KeptTrees } from '../../server/src/cli/kept-trees';
import { emptyIR } from '../../server/src/engine/engine';
import { applyEdits, type TextEdit } from '../../server/src/fixes';
import { pythonSource } from '../../server/src/engine/lines';
import { PythonParser, type SyntaxNode, type Tree } from '../../server/src/engine/parser';

const FIXTURES = join(__dirname, '..', 'fixtures');

/** Every node of the tree with its type and both kinds of position, in document order. */
function shape(tree: Tree): string {
  const out: string[] = [];
  const visit = (n: SyntaxNode & { childCount?: number; isMissing?: boolean }): void => {
    out.push(`${n.type}${n.isMissing ? '!' : ''} ${n.startIndex}-${n.endIndex} ${n.startPosition.row}:${n.startPosition.column}-${n.endPosition.row}:${n.endPosition.column}`);
    for (let i = 0; i < (n.childCount ?? 0); i++) visit(n.child(i)! as SyntaxNode);
  };
  visit(tree.rootNode as unknown as SyntaxNode);
  return out.join('\n');
}

/** A small seeded generator (mulberry32): the same edits on every run. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Up to `n` non-overlapping edits, many of them next to a \r or a \n, inserting and removing line ends. */
function randomEdits(text: string, rnd: () => number, n: number): TextEdit[] {
  const pieces = ['\n', '\r', '\r\n', 'x', '(', ')', '    ', 'self.fc = nn.Linear(8, 8)\r', '', ':\n  ', '"'];
  const breaks = [...text.matchAll(/[\r\n]/g)].map((m) => m.index!);
  const edits: TextEdit[] = [];
  let pos = 0;
  for (let i = 0; i < n && pos < text.length; i++) {
    const near = breaks.find((b) => b >= pos + Math.floor(rnd() * 200));
    const start = near !== undefined && rnd() < 0.7 ? Math.min(text.length, near + Math.floor(rnd() * 3) - 1) : pos + Math.floor(rnd() * 300);
    if (start < pos || start > text.length) break;
    const end = Math.min(text.length, start + (rnd() < 0.5 ? 0 : Math.floor(rnd() * 4)));
    edits.push({ startOffset: start, endOffset: end, newText: pieces[Math.floor(rnd() * pieces.length)] });
    pos = end + 1;
  }
  return edits;
}

describe('check --fix: the work of the rounds', function () {
  this.timeout(120_000);
  let parser: PythonParser;
  before(async () => { parser = await PythonParser.create(); });
  after(() => parser.dispose());

  it('a tree re-parsed from its kept tree and the recorded edits is the tree of a fresh parse (CR, CRLF, lone \\r)', () => {
    const base = readFileSync(join(FIXTURES, 'cli', 'fixable', 'block.py'), 'utf8');
    const texts = [base, base.replace(/\n/g, '\r\n'), base.replace(/\n/g, '\r'), base.replace(/\n/g, (_, i: number) => (i % 3 ? '\n' : i % 2 ? '\r' : '\r\n'))];
    const rnd = random(13);
    let compared = 0;
    for (const text of texts) {
      for (let k = 0; k < 25; k++) {
        const kept = new KeptTrees();
        const file: AnalysedFile = { input: { absolute: '/x.py', display: 'x.py' }, text, findings: [], ir: emptyIR() };
        const tree = parser.parse(pythonSource(text))!;
        assert.ok(kept.keep(parser, file, tree));
        const edits = randomEdits(text, rnd, 1 + Math.floor(rnd() * 12));
        const after = applyEdits(text, edits);
        kept.edited(file, edits, after);
        file.text = after;
        const old = kept.takeBase(parser, file);
        assert.ok(old, 'the kept tree is offered');
        const incremental = parser.parse(pythonSource(after), old)!;
        const fresh = parser.parse(pythonSource(after))!;
        try {
          assert.equal(shape(incremental), shape(fresh), `edits ${JSON.stringify(edits)} on ${JSON.stringify(text.slice(0, 80))}`);
          compared++;
        } finally {
          parser.release(incremental);
          parser.release(fresh);
        }
      }
    }
    assert.equal(compared, 100);
  });

  it('--fix gives the same fixed texts and report with kept trees as with fresh parses, over the fix fixtures', async () => {
    const settings = resolveSettings({});
    const dir = mkdtempSync(join(tmpdir(), 'pl-kept-'));
    try {
      let changed = 0;
      for (const sub of ['cli', 'fixes']) {
        const runs: Array<{ texts: string[]; json: string }> = [];
        for (const keep of [false, true]) {
          const copy = join(dir, `${sub}-${keep}`);
          cpSync(join(FIXTURES, sub), copy, { recursive: true });
          const inputs = collectInputs([copy], copy).files;
          const trees = keep ? new KeptTrees() : undefined;
          const { files } = await analyseAll(parser, inputs, settings, {}, true, trees);
          const outcome = await fixFiles(parser, files, settings, { write: false, diff: false, unsafe: true, env: {}, trees });
          if (keep) changed = outcome.changedFiles;
          const json = JSON.stringify(checkJson(files, (f, finding) => fixTitlesFor(f, finding, settings)));
          runs.push({ texts: files.map((f) => f.text), json: json.split(copy).join('DIR') });
        }
        assert.deepEqual(runs[1].texts, runs[0].texts, `${sub}: fixed texts`);
        assert.equal(runs[1].json, runs[0].json, `${sub}: report`);
        assert.ok(changed > 0, `${sub}: some files were fixed`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('through the CLI: one parse from scratch per file, each later round from the kept tree', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pl-kept-cli-'));
    try {
      const block = readFileSync(join(FIXTURES, 'cli', 'fixable', 'block.py'), 'utf8');
      writeFileSync(join(dir, 'block.py'), block);
      writeFileSync(join(dir, 'block_crlf.py'), block.replace(/\n/g, '\r\n'));
      writeFileSync(join(dir, 'block_cr.py'), block.replace(/\n/g, '\r'));
      const full = parseCounts.full;
      const incremental = parseCounts.incremental;
      let stdout = '';
      const code = await main(['check', dir, '--fix', '--unsafe-fixes', '--convert-losing-layers', '--isolated', '--format', 'json'], { stdout: (s) => { stdout += s; }, stderr: () => {}, cwd: dir });
      assert.equal(code === 0 || code === 1, true, `exit ${code}`);
      assert.ok(JSON.parse(stdout).diagnostics, 'a report');
      assert.equal(parseCounts.full - full, 3, 'one parse from scratch per file');
      // block.py needs two rounds with --unsafe-fixes (the fallback module's factories, then what they enable).
      assert.ok(parseCounts.incremental - incremental >= 3, `${parseCounts.incremental - incremental} re-parses from a kept tree`);
      for (const name of ['block.py', 'block_crlf.py', 'block_cr.py']) assert.notEqual(readFileSync(join(dir, name), 'utf8').replace(/\r\n?/g, '\n'), block, `${name} was fixed`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('the fallback round plans only the findings up to the one offering the wrapper, not every conversion after it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pl-rounds-'));
    try {
      const layers = Array.from({ length: 40 }, (_, i) => `        self.fc${i} = nn.Linear(64, 64)`).join('\n');
      const forward = Array.from({ length: 40 }, (_, i) => `        x = self.fc${i}(x)`).join('\n');
      writeFileSync(join(dir, 'model.py'), `import torch\nimport torch.nn as nn\nimport transformer_engine.pytorch as te\n\n\nclass Block(nn.Module):\n    def __init__(self):\n        super().__init__()\n${layers}\n        self.norm = te.LayerNorm(64)\n\n    def forward(self, x):\n${forward}\n        return self.norm(x)\n`);
      const planned = fixPlanCounts.findings;
      const log: string[] = [];
      const code = await main(['check', dir, '--fix', '--unsafe-fixes', '--convert-losing-layers', '--isolated', '--show-fixes'], { stdout: (s) => { log.push(s); }, stderr: (s) => { log.push(s); }, cwd: dir });
      assert.equal(code === 0 || code === 1, true, `exit ${code}: ${log.join('')}`);
      const text = log.join('');
      assert.match(text, /FP8 fallback/, 'the fallback round ran');
      assert.match(text, /40 × .*Convert/, 'then the 40 conversions');
      // round 1: the PL401 finding (first, on the TE import) only; round 2: 40 conversions (+ PL401); round 3: what is left.
      const n = fixPlanCounts.findings - planned;
      assert.ok(n < 2 * 40, `${n} findings planned for 40 conversions`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  it('past its time budget a file starts no further round, says what is left, and a second run applies it', async () => {
    const settings = resolveSettings({});
    const dir = mkdtempSync(join(tmpdir(), 'pl-budget-'));
    try {
      const block = readFileSync(join(FIXTURES, 'cli', 'fixable', 'block.py'), 'utf8');
      const fixedBy = async (budgetMs: number | undefined, name: string): Promise<{ file: AnalysedFile; applied: number }> => {
        writeFileSync(join(dir, name), block);
        const inputs = collectInputs([join(dir, name)], dir).files;
        const { files } = await analyseAll(parser, inputs, settings, {}, true);
        const outcome = await fixFiles(parser, files, settings, { write: false, diff: false, unsafe: true, env: {}, budgetMs });
        return { file: files[0], applied: outcome.appliedFixes };
      };
      // block.py needs two rounds with --unsafe-fixes: the fallback wrapper, then the conversions through it.
      const whole = await fixedBy(undefined, 'whole.py');
      assert.equal(whole.file.incomplete, undefined, 'a small file finishes inside the budget, with no note');
      const first = await fixedBy(0, 'cut.py');
      assert.ok(first.applied >= 1 && first.applied < whole.applied, `${first.applied} of ${whole.applied} fixes in the first round`);
      assert.match(first.file.incomplete ?? '', /^--fix stopped after 1 round \(\d+\.\d s, its time budget per file\): run it again to apply the rest$/);
      assert.notEqual(first.file.text, block, 'the first round was applied');
      // A second run (budget 0 again: one round) takes it from there to the same text as one unbudgeted run.
      writeFileSync(join(dir, 'cut.py'), first.file.text);
      const inputs = collectInputs([join(dir, 'cut.py')], dir).files;
      const { files } = await analyseAll(parser, inputs, settings, {}, true);
      const outcome = await fixFiles(parser, files, settings, { write: false, diff: false, unsafe: true, env: {}, budgetMs: 0 });
      assert.equal(first.applied + outcome.appliedFixes, whole.applied);
      assert.equal(files[0].text, whole.file.text);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
