/**
 * `precision-lens check` / `inspect` as a process: the JSON contract (shapes, 1-based positions in UTF-16 units), the
 * text format, exit codes, --fail-on, --rule, directory discovery, and inputs that must not crash it.
 */
import * as assert from 'node:assert/strict';
import { mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { RULES, RULE_CODES } from '../../common/codes';
import { ensureBuilt, parseJson, runCli, scratchCopy, type CheckJson } from './cli-harness';

interface InspectJson {
  version: number;
  files: {
    file: string;
    layers: { line: number; column: number; endLine: number; endColumn: number; name: string; constructor: string; kind: string; role: string;
      convertible: boolean | 'uncertain'; teEquivalent: string | null; inFeatures: number | null; outFeatures: number | null; reasons: string[] }[];
    autocastRegions: { line: number; endLine: number; api: string; backwardInside: number[] }[];
    weightTying: { line: number; text: string }[];
  }[];
}

/** 1-based line and UTF-16 column of the first occurrence of `needle`. */
function positionOf(text: string, needle: string): { line: number; column: number } {
  const offset = text.indexOf(needle);
  assert.ok(offset >= 0, `${needle} not in fixture`);
  const before = text.slice(0, offset);
  return { line: before.split('\n').length, column: offset - (before.lastIndexOf('\n') + 1) + 1 };
}

describe('precision-lens check (built CLI)', function () {
  this.timeout(120_000);
  let dir: string;
  let dispose: () => void;
  before(() => {
    ensureBuilt();
    ({ dir, dispose } = scratchCopy());
  });
  after(() => dispose());

  describe('--format json', () => {
    it('has the contract shape, 1-based positions and rule names from common/codes.ts', () => {
      const run = runCli(['check', 'project', '--format', 'json'], dir);
      const out = parseJson<CheckJson>(run);
      assert.equal(out.version, 1);
      assert.ok(out.diagnostics.length > 0, run.stderr);
      for (const d of out.diagnostics) {
        assert.deepEqual(
          Object.keys(d).filter((k) => ['file', 'line', 'column', 'endLine', 'endColumn', 'code', 'rule', 'severity', 'message', 'fixes'].includes(k)).sort(),
          ['code', 'column', 'endColumn', 'endLine', 'file', 'fixes', 'line', 'message', 'rule', 'severity'],
        );
        assert.ok(d.file === 'project/model.py' || d.file === 'project/train.py', d.file);
        assert.ok(RULE_CODES.includes(d.code as never), d.code);
        assert.equal(d.rule, RULES[d.code as keyof typeof RULES].rule);
        assert.ok(['error', 'warning', 'information', 'hint'].includes(d.severity));
        assert.ok(d.line >= 1 && d.column >= 1 && (d.endLine > d.line || (d.endLine === d.line && d.endColumn >= d.column)));
        assert.ok(Array.isArray(d.fixes) && d.fixes.every((t) => typeof t === 'string'));
        assert.ok(d.message.length > 0);
      }
      const model = readFileSync(join(dir, 'project/model.py'), 'utf8');
      const fc = out.diagnostics.find((d) => d.file === 'project/model.py' && d.code === 'PL101' && d.line === positionOf(model, 'nn.Linear(n_embd, 4 * n_embd)').line);
      assert.ok(fc, 'PL101 on c_fc');
      const call = 'nn.Linear(n_embd, 4 * n_embd)';
      assert.deepEqual({ line: fc.line, column: fc.column }, positionOf(model, call));
      assert.equal(fc.endColumn, fc.column + call.length);
      const train = readFileSync(join(dir, 'project/train.py'), 'utf8');
      const backward = out.diagnostics.find((d) => d.code === 'PL301');
      assert.ok(backward, 'PL301');
      assert.equal(backward.file, 'project/train.py');
      assert.equal(backward.line, positionOf(train, 'loss.backward()').line);
    });

    it('diagnostics are ordered by file, then position', () => {
      const out = parseJson<CheckJson>(runCli(['check', 'project', 'info', '--format', 'json'], dir));
      const keys = out.diagnostics.map((d) => [d.file, d.line, d.column] as const);
      const sorted = [...keys].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] - b[1] || a[2] - b[2]));
      assert.deepEqual(keys, sorted);
    });

    it('offers fix titles for findings that have a quick fix', () => {
      const out = parseJson<CheckJson>(runCli(['check', 'fixable', '--format', 'json'], dir));
      assert.ok(out.diagnostics.some((d) => d.fixes.length > 0), JSON.stringify(out.diagnostics, null, 1));
    });

    it('counts columns in UTF-16 code units, 1-based', () => {
      const text = readFileSync(join(dir, 'unicode/heads.py'), 'utf8');
      const out = parseJson<CheckJson>(runCli(['check', 'unicode/heads.py', '--format', 'json'], dir));
      const d = out.diagnostics.find((x) => x.code === 'PL101');
      assert.ok(d, JSON.stringify(out));
      const expected = positionOf(text, 'nn.Linear(1024, 1024)');
      assert.deepEqual({ line: d.line, column: d.column }, expected);
      // "é😀" is 3 UTF-16 units (1 + a surrogate pair), 2 code points: the column must count units.
      const line = text.split('\n')[expected.line - 1];
      assert.equal(expected.column, line.indexOf('nn.Linear') + 1);
      assert.notEqual(expected.column, [...line.slice(0, line.indexOf('nn.Linear'))].length + 1);
    });
  });

  describe('PL302 is decided over all inputs (two passes)', () => {
    it('on the model file checked alone (nothing there trains, the model is trained elsewhere) says nothing of FP8 being off, and still flags its TE lm-head', () => {
      const out = parseJson<CheckJson>(runCli(['check', 'project/model.py', '--format', 'json'], dir));
      assert.ok(!out.diagnostics.some((d) => d.code === 'PL302'), JSON.stringify(out.diagnostics.map((d) => d.code)));
      // Issue 23: the training step that enables FP8 lies outside the files analysed, so the TE head runs in FP8 there.
      assert.ok(out.diagnostics.some((d) => d.code === 'PL201'), JSON.stringify(out.diagnostics.map((d) => d.code)));
    });

    it('flags TE layers when the inputs train the model but never enter FP8 autocast', () => {
      const plain = join(dir, 'project', 'train_plain.py');
      writeFileSync(plain, [
        'import torch', 'from model import GPT', '', 'model = GPT()', 'opt = torch.optim.AdamW(model.parameters())',
        'loss = model(torch.zeros(1, 8, dtype=torch.long)).float().mean()', 'loss.backward()', 'opt.step()', '',
      ].join('\n'));
      try {
        const out = parseJson<CheckJson>(runCli(['check', 'project/model.py', 'project/train_plain.py', '--format', 'json'], dir));
        const pl302 = out.diagnostics.filter((d) => d.code === 'PL302');
        // On the layers (what is off) and on the training step (where the fix goes), both warnings.
        assert.deepEqual(pl302.map((d) => [d.file, d.severity]), [['project/model.py', 'warning'], ['project/train_plain.py', 'warning']], JSON.stringify(out.diagnostics.map((d) => d.code)));
        assert.match(pl302[0].message, /no FP8 autocast reaches them: FP8 is off/);
        assert.match(pl302[0].explanation, /the analysed files train the model/);
        assert.match(pl302[1].message, /^This training step runs te\.\* layers without FP8 autocast: FP8 is off/);
      } finally {
        rmSync(plain, { force: true });
      }
    });

    it('no te.* conversion in a model file that an analysed training script converts with torchao; other files keep theirs', () => {
      const conv = join(dir, 'project', 'train_ao.py');
      const other = join(dir, 'project', 'other_model.py');
      writeFileSync(conv, 'import torch\nfrom torchao.float8 import convert_to_float8_training\nfrom model import GPT\nm = GPT()\nif torch.cuda.get_device_capability() >= (8, 9):\n    convert_to_float8_training(m, module_filter_fn=lambda mod, fqn: fqn != "lm_head")\n');
      writeFileSync(other, 'import torch.nn as nn\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(1024, 4096)\n');
      try {
        const alone = parseJson<CheckJson>(runCli(['check', 'project/model.py', 'project/other_model.py', '--format', 'json', '--fail-on', 'none'], dir));
        assert.ok(alone.diagnostics.some((d) => d.code === 'PL101' && d.file === 'project/model.py'));
        const out = parseJson<CheckJson>(runCli(['check', 'project/model.py', 'project/other_model.py', 'project/train_ao.py', '--format', 'json', '--fail-on', 'none'], dir));
        assert.ok(!out.diagnostics.some((d) => d.code === 'PL101' && d.file === 'project/model.py'), JSON.stringify(out.diagnostics.map((d) => `${d.file}:${d.code}`)));
        assert.ok(out.diagnostics.some((d) => d.code === 'PL101' && d.file === 'project/other_model.py'));
      } finally {
        rmSync(conv, { force: true });
        rmSync(other, { force: true });
      }
    });

    it('counts an autocast context made by a factory or an ExitStack as FP8 autocast', () => {
      const ctx = join(dir, 'project', 'train_ctx.py');
      writeFileSync(ctx, [
        'import contextlib', 'import torch', 'import transformer_engine.pytorch as te', 'from model import GPT', '',
        'def fp8_context(recipe=None):', '    return te.autocast(enabled=True, recipe=recipe)', '',
        'def step(model, opt, x):', '    with contextlib.ExitStack() as stack:', '        stack.enter_context(fp8_context())',
        '        loss = model(x).float().mean()', '    loss.backward()', '    opt.step()', '',
      ].join('\n'));
      try {
        const out = parseJson<CheckJson>(runCli(['check', 'project/model.py', 'project/train_ctx.py', '--format', 'json'], dir));
        assert.ok(!out.diagnostics.some((d) => d.code === 'PL302'), JSON.stringify(out.diagnostics.map((d) => d.code)));
      } finally {
        rmSync(ctx, { force: true });
      }
    });

    it('is quiet when the training script with the autocast region is among the inputs, and the TE head becomes PL201', () => {
      const out = parseJson<CheckJson>(runCli(['check', 'project/model.py', 'project/train.py', '--format', 'json'], dir));
      assert.ok(!out.diagnostics.some((d) => d.code === 'PL302'));
      assert.ok(out.diagnostics.some((d) => d.code === 'PL201' && d.file === 'project/model.py'));
    });
  });

  describe('--format text', () => {
    it('prints path:line:col: severity CODE message [rule] and a summary line', () => {
      const run = runCli(['check', 'project'], dir);
      const lines = run.stdout.trimEnd().split('\n');
      // Last: how to apply the fixes, as ruff says it, after the conversions the gain table leaves in BF16 if any.
      if (/^\[\*\] \d+ conversions? left in BF16/.test(lines[lines.length - 1])) lines.pop();
      assert.match(lines.pop()!, /^\[\*\] .*fixable with --fix/);
      const summary = lines.pop()!;
      assert.ok(lines.length > 0);
      for (const l of lines) assert.match(l, /^project\/(model|train)\.py:\d+:\d+: (error|warning|information|hint) PL\d{3} .+ \[[a-z0-9-]+\]$/);
      assert.match(summary, /^Found \d+ problems? \(.*\) in 2 files \(2 files analysed\)\.$/);
      const json = parseJson<CheckJson>(runCli(['check', 'project', '--format', 'json'], dir));
      assert.equal(lines.length, json.diagnostics.length);
      const first = json.diagnostics[0];
      assert.equal(lines[0], `${first.file}:${first.line}:${first.column}: ${first.severity} ${first.code} ${first.message} [${first.rule}]`);
    });

    it('says so when there is nothing to report', () => {
      const run = runCli(['check', 'clean'], dir);
      assert.equal(run.status, 0);
      assert.equal(run.stdout, 'No problems found (1 file analysed).\n');
    });
  });

  describe('exit codes and --fail-on', () => {
    it('0 with no findings', () => {
      assert.equal(runCli(['check', 'clean', '--format', 'json'], dir).status, 0);
    });
    it('1 with a warning (default --fail-on warning)', () => {
      assert.equal(runCli(['check', 'project'], dir).status, 1);
    });
    it('0 with information findings only, 1 once --fail-on information', () => {
      const info = runCli(['check', 'info', '--format', 'json'], dir);
      assert.ok(parseJson<CheckJson>(info).diagnostics.length > 0);
      assert.equal(info.status, 0);
      assert.equal(runCli(['check', 'info', '--fail-on', 'information'], dir).status, 1);
      assert.equal(runCli(['check', 'info', '--fail-on=hint'], dir).status, 1);
    });
    it('--fail-on error ignores warnings, --fail-on none ignores everything', () => {
      assert.equal(runCli(['check', 'project', '--fail-on', 'error'], dir).status, 0);
      assert.equal(runCli(['check', 'project', '--fail-on', 'none'], dir).status, 0);
    });
    it('--rule raises a rule to error', () => {
      assert.equal(runCli(['check', 'project', '--fail-on', 'error', '--rule', 'PL301=error'], dir).status, 1);
    });
    it('2 with a message on stderr for a missing path', () => {
      const run = runCli(['check', 'no/such/dir'], dir);
      assert.equal(run.status, 2);
      assert.match(run.stderr, /no\/such\/dir: no such file or directory/);
      assert.equal(run.stdout, '');
    });
    it('2 when one of several paths is missing, after reporting the others', () => {
      const run = runCli(['check', 'project', 'missing.py', '--format', 'json'], dir);
      assert.equal(run.status, 2);
      assert.ok(parseJson<CheckJson>(run).diagnostics.length > 0);
      assert.match(run.stderr, /missing\.py/);
    });
    for (const args of [
      [], ['lint', 'x'], ['check'], ['check', 'project', '--format', 'xml'], ['check', 'project', '--fail-on', 'fatal'],
      ['check', 'project', '--rule', 'PL999=off'], ['check', 'project', '--rule', 'PL101'], ['check', 'project', '--bogus'],
      ['check', 'project', '--unsafe-fixes=yes'], ['inspect', 'project', '--format', 'text'], ['check', 'project', '--format'],
    ]) {
      it(`2 on a usage error: ${args.join(' ') || '(no arguments)'}`, () => {
        const run = runCli(args, dir);
        assert.equal(run.status, 2);
        assert.match(run.stderr, /^precision-lens: /);
        assert.match(run.stderr, /Usage:/);
      });
    }
    it('--help and --version exit 0', () => {
      const help = runCli(['--help'], dir);
      assert.equal(help.status, 0);
      assert.match(help.stdout, /precision-lens check PATH/);
      assert.match(runCli(['--version'], dir).stdout, /^\d+\.\d+\.\d+\n$/);
    });
  });

  describe('--rule', () => {
    it('PLnnn=off removes the rule, a rule name works too, severities are overridden', () => {
      const all = parseJson<CheckJson>(runCli(['check', 'project', '--format', 'json'], dir)).diagnostics;
      assert.ok(all.some((d) => d.code === 'PL101') && all.some((d) => d.code === 'PL301'));
      const off = parseJson<CheckJson>(runCli(['check', 'project', '--format', 'json', '--rule', 'PL101=off', '--rule', 'backward-in-autocast=off'], dir)).diagnostics;
      assert.ok(!off.some((d) => d.code === 'PL101' || d.code === 'PL301'));
      assert.equal(off.length, all.filter((d) => d.code !== 'PL101' && d.code !== 'PL301').length);
      const raised = parseJson<CheckJson>(runCli(['check', 'project', '--format', 'json', '--rule', 'PL101=error'], dir)).diagnostics;
      assert.ok(raised.filter((d) => d.code === 'PL101').every((d) => d.severity === 'error'));
    });
    it('--te-api legacy accepts the old API (no PL303)', () => {
      const modern = parseJson<CheckJson>(runCli(['check', 'project', '--format', 'json', '--te-api', 'modern'], dir)).diagnostics;
      assert.ok(modern.some((d) => d.code === 'PL303'));
      const legacy = parseJson<CheckJson>(runCli(['check', 'project', '--format', 'json', '--te-api', 'legacy'], dir)).diagnostics;
      assert.ok(!legacy.some((d) => d.code === 'PL303'));
    });
  });

  describe('inputs', () => {
    it('recurses into directories for *.py, skipping .git, node_modules, __pycache__, venvs, and survives symlink loops', () => {
      const root = join(dir, 'tree');
      for (const d of ['src/pkg/deep', '.git', 'node_modules/pkg', '__pycache__', '.venv/lib', 'venv', 'env-custom', 'lib/site-packages/torch']) mkdirSync(join(root, d), { recursive: true });
      const layer = 'import torch.nn as nn\nfc = nn.Linear(1024, 1024)\n';
      for (const f of ['src/a.py', 'src/pkg/deep/b.py', '.git/c.py', 'node_modules/pkg/d.py', '__pycache__/e.py', '.venv/lib/f.py', 'venv/g.py',
        'env-custom/h.py', 'lib/site-packages/torch/i.py', 'src/notes.txt', 'src/script.pyw']) writeFileSync(join(root, f), layer);
      writeFileSync(join(root, 'env-custom/pyvenv.cfg'), 'home = /usr/bin\n');
      symlinkSync('..', join(root, 'src/pkg/loop')); // a directory loop
      symlinkSync('a.py', join(root, 'src/alias.py')); // the same file twice
      symlinkSync('nowhere.py', join(root, 'src/dangling.py'));
      const run = runCli(['inspect', 'tree', '--format', 'json'], dir);
      assert.equal(run.status, 0, run.stderr);
      const files = parseJson<InspectJson>(run).files.map((f) => f.file);
      assert.deepEqual(files, ['tree/src/a.py', 'tree/src/pkg/deep/b.py']);
    });

    it('analyses an explicit file whatever its extension', () => {
      const run = runCli(['inspect', 'tree/src/notes.txt'], dir);
      assert.equal(run.status, 0, run.stderr);
      assert.equal(parseJson<InspectJson>(run).files[0].layers.length, 1);
    });

    it('reports broken Python without crashing', () => {
      const run = runCli(['check', 'broken', '--format', 'json', '--fail-on', 'none'], dir);
      assert.equal(run.status, 0, run.stderr);
      assert.equal(parseJson<CheckJson>(run).version, 1);
      assert.doesNotMatch(run.stderr, /internal error|analysis failed/);
      assert.equal(runCli(['inspect', 'broken'], dir).status, 0);
    });

    it('skips a binary .py with a note on stderr', () => {
      const bin = join(dir, 'binary');
      mkdirSync(bin, { recursive: true });
      writeFileSync(join(bin, 'weights.py'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x00, 0x00, 0x0d, 0xff, 0xfe, 0x00, 0x01]));
      writeFileSync(join(bin, 'ok.py'), readFileSync(join(dir, 'info/mlp.py')));
      const run = runCli(['check', 'binary', '--format', 'json'], dir);
      assert.equal(run.status, 0);
      assert.match(run.stderr, /binary\/weights\.py: binary file: not analysed/);
      const out = parseJson<CheckJson & { notAnalysed: { file: string }[] }>(run);
      assert.ok(out.diagnostics.every((d) => d.file === 'binary/ok.py'));
      assert.deepEqual(out.notAnalysed.map((n) => n.file), ['binary/weights.py']);
    });

    it('skips a file above --max-file-size with a note; a run that analysed nothing exits 2 (issue 25)', () => {
      const run = runCli(['check', 'info/mlp.py', '--max-file-size', '100'], dir);
      assert.equal(run.status, 2);
      assert.match(run.stderr, /no file was analysed: the input was skipped/);
      assert.match(run.stderr, /info\/mlp\.py: file is .* not analysed/);
      assert.match(run.stdout, /No problems found \(0 files analysed, 1 not analysed\)/);
    });

    it('handles a file with a byte order mark and CRLF line ends', () => {
      const text = readFileSync(join(dir, 'info/mlp.py'), 'utf8').replace(/\n/g, '\r\n');
      mkdirSync(join(dir, 'crlf'), { recursive: true });
      writeFileSync(join(dir, 'crlf/mlp.py'), `\ufeff${text}`);
      const plain = parseJson<CheckJson>(runCli(['check', 'info/mlp.py', '--format', 'json'], dir)).diagnostics;
      const crlf = parseJson<CheckJson>(runCli(['check', 'crlf/mlp.py', '--format', 'json'], dir)).diagnostics;
      assert.deepEqual(crlf.map((d) => [d.code, d.line, d.column]), plain.map((d) => [d.code, d.line, d.column]));
    });
  });

  describe('inspect --format json', () => {
    it('has the contract shape with 1-based positions', () => {
      const run = runCli(['inspect', 'project', '--format', 'json'], dir);
      assert.equal(run.status, 0, run.stderr);
      const out = parseJson<InspectJson>(run);
      assert.equal(out.version, 1);
      assert.deepEqual(out.files.map((f) => f.file), ['project/model.py', 'project/train.py']);
      const model = out.files[0];
      const text = readFileSync(join(dir, 'project/model.py'), 'utf8');
      for (const l of model.layers) {
        for (const k of ['line', 'column', 'endLine', 'endColumn', 'name', 'constructor', 'kind', 'role', 'convertible', 'teEquivalent', 'inFeatures', 'outFeatures', 'reasons']) {
          assert.ok(k in l, `layer lacks ${k}`);
        }
        assert.ok(Array.isArray(l.reasons));
      }
      const head = model.layers.find((l) => l.constructor === 'te.Linear');
      assert.ok(head);
      assert.equal(head.role, 'lm_head');
      assert.deepEqual({ line: head.line, column: head.column }, positionOf(text, 'te.Linear(n_embd, vocab_size'));
      const fc = model.layers.find((l) => l.line === positionOf(text, 'nn.Linear(n_embd, 4').line);
      assert.ok(fc);
      assert.equal(fc.inFeatures, 768);
      assert.equal(fc.outFeatures, 3072);
      // Beyond the fixed fields: the facets, and each dimension with its value and where it came from.
      const extra = fc as unknown as { facets: Record<string, { state: string; check: string }>; dims: { in: { value: number; source: { kind: string } } } };
      assert.deepEqual(['structure', 'role', 'shape'].map((k) => extra.facets[k].state), ['ok', 'ok', 'ok']);
      assert.equal(extra.facets.shape.check, 'fp8-gemm-shape');
      assert.equal(extra.dims.in.value, 768);
      assert.ok(extra.dims.in.source.kind, 'the source of in_features');
      const train = out.files[1];
      const ttext = readFileSync(join(dir, 'project/train.py'), 'utf8');
      assert.equal(train.autocastRegions.length, 1);
      const region = train.autocastRegions[0];
      assert.equal(region.line, positionOf(ttext, 'with te.fp8_autocast').line);
      assert.equal(region.api, 'fp8_autocast');
      assert.deepEqual(region.backwardInside, [positionOf(ttext, 'loss.backward()').line]);
      assert.ok(region.endLine >= region.backwardInside[0]);
      assert.deepEqual(train.weightTying, []);
      assert.ok(model.layers.every((l) => (l as unknown as { builtAt: unknown }).builtAt === null), 'layers built in place have no builtAt');
    });

    it('a layer a factory function builds is reported at the call site, with builtAt at the constructor inside the factory', () => {
      mkdirSync(join(dir, 'factory'), { recursive: true });
      const text = [
        'import torch.nn as nn',
        '',
        'def FeedForward(dim, mult=4):',
        '    return nn.Sequential(',
        '        nn.Linear(dim, dim * mult),',
        '        nn.GELU(),',
        '        nn.Linear(dim * mult, dim),',
        '    )',
        '',
        'class Block(nn.Module):',
        '    def __init__(self, dim):',
        '        super().__init__()',
        '        self.ff = FeedForward(dim)',
        '',
      ].join('\n');
      writeFileSync(join(dir, 'factory/model.py'), text);
      const out = parseJson<InspectJson>(runCli(['inspect', 'factory/model.py', '--format', 'json'], dir));
      const linears = out.files[0].layers.filter((l) => l.constructor === 'nn.Linear') as unknown as Array<{ line: number; builtAt: { line: number; column: number } | null }>;
      const site = positionOf(text, 'FeedForward(dim)').line;
      assert.deepEqual(linears.map((l) => [l.line, l.builtAt]), [
        [site, positionOf(text, 'nn.Linear(dim, dim * mult)')],
        [site, positionOf(text, 'nn.Linear(dim * mult, dim)')],
      ]);
    });
  });
});
