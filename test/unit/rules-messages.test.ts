/**
 * Every rule's messages over every fixture (and, printed only, over ../shared/corpus when present): a message is one
 * sentence, median <= 100 characters, none over 160, and no sentence is said twice within a finding (message and
 * explanation together).
 */
import * as assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { RULE_CODES } from '../../common/codes';
import { resolveSettings } from '../../common/settings';
import { analyzeText, workspaceFactsOf } from '../../server/src/engine/engine';
import { createPythonParser, type Parser } from '../../server/src/engine/parser';
import { explanationMarkdown, explanationText, sentences } from '../../server/src/rules/explain';
import type { Finding } from '../../server/src/rules/types';

const ROOT = join(__dirname, '..', '..');

function pythonFiles(dir: string, out: string[] = []): string[] {
  if (!existsSync(dir)) return out;
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) pythonFiles(p, out);
    else if (name.endsWith('.py')) out.push(p);
  }
  return out;
}

interface Walked { file: string; finding: Finding }

/** Findings of every rule on the files, with the workspace facts of the set (so PL302 and the stack rules speak). */
function walk(parser: Parser, files: string[]): Walked[] {
  const texts = files.map((f) => readFileSync(f, 'utf8'));
  const settings = resolveSettings({ targetGpu: 'ada' });
  const irs = texts.map((t) => { const r = analyzeText(parser, t, settings, {}); r.tree?.delete(); return r.ir; });
  const facts = workspaceFactsOf(irs);
  const out: Walked[] = [];
  texts.forEach((t, i) => {
    const r = analyzeText(parser, t, settings, facts);
    r.tree?.delete();
    for (const finding of r.findings) out.push({ file: files[i], finding });
  });
  return out;
}

function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s.length ? s[Math.floor(s.length / 2)] : 0;
}

/** The sentence said twice within a finding's message and explanation, if any. */
function repeated(f: Finding): string | undefined {
  const all = [f.message, ...(f.explanation?.facts ?? []), f.explanation?.consequence ?? '', f.explanation?.fix ?? ''].flatMap(sentences);
  const seen = new Set<string>();
  for (const s of all) {
    const key = s.toLowerCase().replace(/\W+/g, ' ').trim();
    if (key.length < 12) continue;
    if (seen.has(key)) return s;
    seen.add(key);
  }
  return undefined;
}

describe('rules: messages are one short sentence, the rest is evidence and explanation', () => {
  let parser: Parser;
  let walked: Walked[];

  before(async () => {
    parser = await createPythonParser();
    // test/fixtures/messages/train_without_autocast.py is its own workspace: with the others it would see their autocast.
    const alone = join(ROOT, 'test', 'fixtures', 'messages', 'train_without_autocast.py');
    // A training script that compiles its model (PL306) is read alone too: with the others it would see their te.* layers.
    const compiles = join(ROOT, 'test', 'fixtures', 'compile-project', 'train.py');
    const files = [...pythonFiles(join(ROOT, 'test', 'fixtures')), ...pythonFiles(join(ROOT, 'examples'))].filter((f) => f !== alone && f !== compiles);
    walked = [...walk(parser, files), ...walk(parser, [alone]), ...walk(parser, [compiles])];
  });
  after(() => parser.delete());

  it('the fixtures exercise every rule', () => {
    const codes = new Set(walked.map((w) => w.finding.code));
    assert.deepEqual(RULE_CODES.filter((c) => !codes.has(c)), []);
  });

  it('median message <= 100 characters, none over 160', () => {
    const lengths = walked.map((w) => w.finding.message.length);
    const long = walked.filter((w) => w.finding.message.length > 160).map((w) => `${w.finding.code} ${w.finding.message}`);
    assert.deepEqual(long, []);
    assert.ok(median(lengths) <= 100, `median ${median(lengths)}`);
  });

  it('a message is one sentence', () => {
    const many = walked.filter((w) => sentences(w.finding.message).length > 1).map((w) => `${w.finding.code} ${w.finding.message}`);
    assert.deepEqual(many, []);
  });

  it('no sentence is repeated within a finding (message and explanation)', () => {
    const twice = walked.flatMap((w) => { const s = repeated(w.finding); return s ? [`${w.finding.code} ${w.file}: ${s}`] : []; });
    assert.deepEqual(twice, []);
  });

  it('every finding explains itself: facts or a consequence, and the hover links the rule page without repeating the message', () => {
    for (const { finding } of walked) {
      assert.ok(explanationText(finding).length > 0, `${finding.code} ${finding.message}: empty explanation`);
      const md = explanationMarkdown(finding);
      assert.match(md, new RegExp(`docs/rules/${finding.code}\\.md`));
      assert.ok(!md.includes(finding.message), `${finding.code}: the hover repeats the message`);
    }
  });

  it('evidence lies in the file and says something', () => {
    for (const { file, finding } of walked) {
      const length = readFileSync(file, 'utf8').length;
      for (const r of finding.related ?? []) {
        assert.ok(r.message.length > 0 && r.message.length <= 120, r.message);
        assert.ok(r.span.startOffset >= 0 && r.span.endOffset <= length && r.span.startOffset <= r.span.endOffset, `${finding.code}: ${JSON.stringify(r.span)}`);
      }
    }
  });

  it('prints the figures on ../shared/corpus when it is there (no assertion: the corpus is not part of the project)', () => {
    const corpus = join(ROOT, '..', 'shared', 'corpus');
    const files = pythonFiles(corpus);
    const fixtures = walked.map((w) => w.finding.message.length);
    console.log(`      fixtures: ${walked.length} messages, median ${median(fixtures)}, longest ${Math.max(0, ...fixtures)}`);
    if (!files.length) return;
    const found = walk(parser, files);
    const lengths = found.map((w) => w.finding.message.length);
    const over = found.filter((w) => w.finding.message.length > 160).length;
    const twice = found.filter((w) => repeated(w.finding)).length;
    console.log(`      corpus: ${found.length} messages in ${files.length} files, median ${median(lengths)}, longest ${Math.max(0, ...lengths)}, ${over} over 160, ${twice} with a repeated sentence`);
  });
});
