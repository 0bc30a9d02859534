/**
 * Issue 24 through the CLI process: suppressions (`# noqa`, file-level, per-file-ignores, exclude), the unused-noqa
 * hint and its fix, --add-noqa, --statistics, --output-format github, --exit-zero, encodings kept by --fix, the PL401
 * loop on code our own fix wrote, syntax errors and paths that match no .py file.
 */
import * as assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt, parseJson, ROOT, runCli, type CheckJson } from './cli-harness';

const MODEL = `import torch
import torch.nn as nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(1024, 1024)  # noqa: PL101
        self.b = nn.Linear(1024, 1024)  # noqa
        self.c = nn.Linear(  # noqa: PL101
            1024, 4096)
        self.d = nn.Linear(1024, 1024)
        self.e = nn.LayerNorm(1024)  # noqa: PL101, E501
        s = "# noqa: PL101"; self.f = nn.Linear(1024, 1024)
`;

describe('cli: suppressions and adoption (issue 24)', function () {
  this.timeout(60_000);
  let dir: string;
  before(() => ensureBuilt());
  beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'pl-suppress-')); });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const check = (...args: string[]) => runCli(['check', ...args], dir);
  const diags = (...args: string[]) => parseJson<CheckJson>(check(...args, '--format', 'json')).diagnostics;
  const lines = (d: CheckJson['diagnostics']) => d.map((x) => `${x.line} ${x.code}`).sort();

  it('# noqa: CODES and a bare # noqa silence their line (and a construction\'s first line); strings are not comments', () => {
    writeFileSync(join(dir, 'm.py'), MODEL);
    // a (PL101 noqa), b (bare), c (first line) silenced; d, e (PL102 is not PL101), f (noqa inside a string) reported;
    // e's PL101 is unused (PL001), E501 is another linter's
    assert.deepEqual(lines(diags('m.py')), ['12 PL101', '13 PL001', '13 PL102', '14 PL101']);
  });

  it('the unused-noqa fix removes only our unused code; --fix applies it (safe)', () => {
    writeFileSync(join(dir, 'm.py'), MODEL);
    const d = diags('m.py').find((x) => x.code === 'PL001')!;
    assert.deepEqual(d.fixes, ['Remove unused suppression']);
    check('m.py', '--fix');
    const after = readFileSync(join(dir, 'm.py'), 'utf8');
    assert.match(after, /self\.e = nn\.LayerNorm\(1024\) {2}# noqa: E501\n/);
    assert.ok(!lines(diags('m.py')).some((l) => l.endsWith('PL001')));
  });

  it('# precision-lens: noqa[: codes] silences the file, or those codes in it', () => {
    writeFileSync(join(dir, 'all.py'), `# precision-lens: noqa\n${MODEL}`);
    writeFileSync(join(dir, 'some.py'), `# precision-lens: noqa: PL102\n${MODEL}`);
    assert.deepEqual(diags('all.py'), []);
    assert.deepEqual(lines(diags('some.py')), ['13 PL101', '14 PL001', '15 PL101']);
  });

  it('[tool.precision-lens] per-file-ignores, exclude and extend-exclude (with --force-exclude for named files)', () => {
    mkdirSync(join(dir, 'legacy'));
    mkdirSync(join(dir, 'tests'));
    const plain = MODEL.replace(/ {2}# noqa.*$/gm, '');
    writeFileSync(join(dir, 'legacy', 'old.py'), plain);
    writeFileSync(join(dir, 'tests', 'test_m.py'), plain);
    writeFileSync(join(dir, 'm.py'), plain);
    writeFileSync(join(dir, 'pyproject.toml'), '[tool.precision-lens]\nextend-exclude = ["legacy"]\n[tool.precision-lens.per-file-ignores]\n"tests/**" = ["PL101"]\n');
    const found = diags('.');
    assert.ok(!found.some((d) => d.file.startsWith('legacy/')), 'excluded folder skipped');
    assert.deepEqual(found.filter((d) => d.file.startsWith('tests/')).map((d) => d.code), ['PL102']);
    assert.ok(found.some((d) => d.file === 'm.py' && d.code === 'PL101'));
    assert.ok(diags('legacy/old.py').length > 0, 'a file named on the command line is checked');
    assert.deepEqual(diags('legacy/old.py', '--force-exclude'), []);
  });

  it('--add-noqa baselines every finding, says how many, and a second run adds nothing; check then exits 0', () => {
    const plain = MODEL.replace(/ {2}# noqa.*$/gm, '');
    writeFileSync(join(dir, 'm.py'), plain.replace('import torch\n', 'import torch\nimport transformer_engine.pytorch as te\n') + '        with te.fp8_autocast():\n            pass\n');
    assert.ok(check('m.py').status === 1);
    const first = check('m.py', '--add-noqa');
    assert.match(first.stderr, /added [1-9]\d* noqa directives? in 1 file/);
    const text = readFileSync(join(dir, 'm.py'), 'utf8');
    assert.match(text, /self\.c = nn\.Linear\( {2}# noqa: PL101\n/);
    const second = check('m.py', '--add-noqa');
    assert.match(second.stderr, /added 0 noqa directives in 0 files/);
    assert.equal(readFileSync(join(dir, 'm.py'), 'utf8'), text);
    const after = check('m.py');
    assert.equal(after.status, 0, after.stdout);
  });

  it('--add-noqa on many files with --jobs 4 baselines every file (a worker-analysed file once got nothing)', () => {
    // found on timm's tree (docs/realcode.md): files analysed on a worker thread came back without their text, so
    // --add-noqa wrote nothing into them and check still failed; which files went to a worker varied from run to run
    const plain = MODEL.replace(/ {2}# noqa.*$/gm, '');
    // enough text that the workers get files while the main thread works through the largest ones
    for (let i = 0; i < 24; i++) writeFileSync(join(dir, `m${i}.py`), plain.repeat(40 + i));
    assert.equal(check('.', '--fail-on', 'hint', '--jobs', '4').status, 1);
    const first = check('.', '--add-noqa', '--jobs', '4');
    assert.match(first.stderr, /added \d+ noqa directives in 24 files/);
    const after = check('.', '--fail-on', 'hint', '--jobs', '4');
    assert.equal(after.status, 0, after.stdout);
    assert.match(check('.', '--add-noqa', '--jobs', '4').stderr, /added 0 noqa directives in 0 files/);
  });

  it('--statistics counts per code; --output-format github writes annotations; --format still works; --exit-zero', () => {
    writeFileSync(join(dir, 'm.py'), MODEL.replace(/ {2}# noqa.*$/gm, '') + 'import transformer_engine.pytorch as te\nwith te.fp8_autocast():\n    pass\n');
    const stats = check('m.py', '--statistics');
    assert.match(stats.stdout, /^\s*5\tPL101\t\[ \] linear-to-te$/m);
    assert.match(stats.stdout, /^\s*1\tPL102\t/m);
    const gh = check('m.py', '--output-format', 'github');
    assert.equal(gh.status, 1);
    assert.match(gh.stdout, /^::notice title=Precision Lens \(PL101\),file=m\.py,line=8,col=18,endLine=8,endColumn=39::m\.py:8:18: PL101 /m);
    assert.match(gh.stdout, /^::warning title=Precision Lens \(PL401\),file=m\.py,/m);
    assert.equal(check('m.py', '--format', 'github').stdout, gh.stdout);
    assert.equal(check('m.py', '--exit-zero').status, 0);
  });

  it('--fix keeps a latin-1 file\'s bytes outside the fix ranges; one it cannot encode stays untouched, with a message', () => {
    const head = Buffer.from('# -*- coding: latin-1 -*-\nimport torch\nimport torch.nn as nn\nNAME = "caf\xe9"  # caf\xe9\n', 'latin1');
    const body = Buffer.from('\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.a = nn.Linear(1024, 1024)  # noqa: PL999 PL101\n', 'latin1');
    writeFileSync(join(dir, 'l.py'), Buffer.concat([head, body]));
    check('l.py', '--fix');
    const after = readFileSync(join(dir, 'l.py'));
    assert.ok(after.subarray(0, head.length).equals(head), 'bytes before the fix kept');
    assert.ok(after.includes(Buffer.from('# noqa: PL101\n', 'latin1')), after.toString('latin1'));
    // invalid UTF-8 with no cookie: never rewritten (the bytes would become U+FFFD)
    const bad = Buffer.concat([Buffer.from('import torch\nNAME = "caf'), Buffer.from([0xe9]), Buffer.from('"\nx = torch.nn.Linear(10, 10)  # noqa: PL999\n')]);
    writeFileSync(join(dir, 'bad.py'), bad);
    const run = check('bad.py', '--fix');
    assert.ok(readFileSync(join(dir, 'bad.py')).equals(bad));
    assert.match(run.stderr, /not valid UTF-8/);
  });

  it('PL401: after check --fix --unsafe-fixes on the example, a second run reports nothing of ours on code we wrote and changes nothing', () => {
    cpSync(join(ROOT, 'examples', 'gpt'), join(dir, 'gpt'), { recursive: true });
    runCli(['check', 'gpt', '--fix', '--unsafe-fixes'], dir);
    const left = diags('gpt');
    assert.deepEqual(left.filter((d) => d.code === 'PL401'), []);
    const te = readFileSync(join(dir, 'gpt', 'te_model.py'), 'utf8');
    assert.match(te, /with fp8_autocast_context\(/);
    const again = runCli(['check', 'gpt', '--fix', '--unsafe-fixes'], dir);
    assert.match(again.stderr, /applied 0 fixes in 0 files/);
  });

  it('a syntax error is a diagnostic (PL002) at its position; no .py in a folder is exit 2, an empty folder a warning', () => {
    writeFileSync(join(dir, 's.py'), 'import torch\nimport torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        self.a = nn.Linear(1024, 1024\n        self.b = nn.Linear(1024, 1024)\n');
    const d = diags('s.py').find((x) => x.code === 'PL002');
    assert.ok(d);
    assert.equal(d.line, 5);
    assert.match(d.message, /analysis partial beyond this line/);
    mkdirSync(join(dir, 'nopy'));
    writeFileSync(join(dir, 'nopy', 'notes.txt'), 'x');
    const none = check('nopy');
    assert.equal(none.status, 2);
    assert.match(none.stderr, /nopy: no \.py file in this folder/);
    mkdirSync(join(dir, 'empty'));
    const empty = check('empty');
    assert.equal(empty.status, 0);
    assert.match(empty.stderr, /warning: empty: empty folder/);
  });
});
