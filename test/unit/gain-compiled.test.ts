/**
 * The compiled torchao rows (issue 22, part 1): bench/tools/gemm_table.py --compile measures torchao (and BF16) with
 * every layer in torch.compile, bench/tools/gain_data.py --compiled merges that run into the table as its own backends
 * against their own baseline ("bf16-compiled"). On test/fixtures/gain/synthetic-gemm-table-merged.json, made by
 *   python3 bench/tools/gain_data.py test/fixtures/gain/synthetic-gemm-table.json \
 *     test/fixtures/gain/synthetic-gemm-table-merged.json --compiled test/fixtures/gain/synthetic-compiled-run.json
 * (both inputs hand-made and labelled synthetic: compiled BF16 1.1 ms and tensorwise 1.5x at 8192 x 4096 x 4096,
 * rowwise not measured), and the shipped H200 table, which says "not measured" for torchao until its compiled run is
 * merged: never a number it does not hold.
 */
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_SETTINGS, type PrecisionLensSettings } from '../../common/settings';
import { backendStatus, GainTableError, layerGain, parseGainTable, predictStep, type GainTable } from '../../server/src/analysis/gain';
import { compiledLines, h200Table, predictModel, predictModelFor, tableBackendOf, torchaoLines } from '../../server/src/analysis/gain-layer';
import { modelCodeLenses } from '../../server/src/lsp/codelens';
import { analyse } from './fixes-support';
import { gpt } from './gpt-model';

const FIX = join(__dirname, '..', 'fixtures', 'gain');
const read = (f: string): Record<string, unknown> => JSON.parse(readFileSync(join(FIX, f), 'utf8'));
const close = (a: number, b: number, eps = 1e-3) => assert.ok(Math.abs(a - b) <= eps * Math.max(1, Math.abs(b)), `${a} != ${b}`);
const withSettings = (extra: Partial<PrecisionLensSettings>): PrecisionLensSettings => ({ ...DEFAULT_SETTINGS, ...extra });

describe('gain: compiled torchao rows, against compiled BF16', () => {
  let merged: GainTable;
  let eager: GainTable;
  before(() => {
    merged = parseGainTable(read('synthetic-gemm-table-merged.json'));
    eager = parseGainTable(read('synthetic-gemm-table.json'));
  });

  it('parses the merged table: the compiled backends, their baseline and the compiled run', () => {
    const tw = merged.backends['torchao-tensorwise'];
    assert.ok(tw.available && tw.compiled);
    assert.equal(tw.baseline, 'bf16-compiled');
    assert.ok(merged.backends['bf16-compiled'].compiled);
    assert.equal(merged.backends['te-delayed'].compiled, false);
    assert.equal(merged.backends['te-delayed'].baseline, 'bf16');
    assert.equal(merged.compiledRun?.date, '2026-12-05T00:00:00Z');
    assert.equal(merged.compiledRun?.shapes, 'dynamic');
    assert.equal(eager.compiledRun, null);
  });

  it('reads a compiled row against the compiled BF16 times, not the eager ones', () => {
    const g = layerGain(merged, 'torchao-tensorwise', { m: 8192, k: 4096, n: 4096 });
    close(g.ratio, 1.5);
    close(g.bf16Ms, 1.1);  // compiled BF16; the eager bf16 row holds 1.228 here
    close(g.fp8Ms, 1.1 / 1.5);
    assert.ok(g.compiled);
    assert.equal(g.baseline, 'bf16-compiled');
    close(g.hostBf16Ms!, 0.05);  // the compiled BF16's host time (the eager bf16 of this version-1 fixture has none)
    close(g.hostFp8Ms!, 0.06);
    // The eager rows still read the eager baseline.
    const te = layerGain(merged, 'te-delayed', { m: 8192, k: 4096, n: 4096 });
    close(te.bf16Ms, 1.2283);
    assert.equal(te.compiled, false);
  });

  it('predicts a model step with a compiled backend from compiled GEMM times, and says the rest is eager', () => {
    const layers = [
      { name: 'attn.qkv', m: 8192, k: 4096, n: 4096, convert: true, count: 2 },
      { name: 'router', m: 8192, k: 4096, n: 1024, convert: false, count: 2 },
    ];
    const p = predictStep(merged, 'torchao-tensorwise', { layers, tokens: 8192, blocks: { count: 2, width: 4096 } });
    close(p.gemmBf16Ms, 2 * 1.1 + 2 * 0.31);
    close(p.gemmFp8Ms, 2 * 1.1 / 1.5 + 2 * 0.31);
    assert.match(p.notes.join(' '), /measured compiled \(against compiled BF16\).*eager BF16 measurements/);
    const te = predictStep(merged, 'te-delayed', { layers, tokens: 8192, blocks: { count: 2, width: 4096 } });
    assert.doesNotMatch(te.notes.join(' '), /compiled/);
  });

  it('backendStatus: measured (compiled or not), or "not measured" with the reason, never a throw', () => {
    assert.deepEqual(backendStatus(merged, 'torchao-tensorwise'), { measured: true, backend: 'torchao-tensorwise', compiled: true, baseline: 'bf16-compiled' });
    assert.deepEqual(backendStatus(merged, 'te-delayed'), { measured: true, backend: 'te-delayed', compiled: false, baseline: 'bf16' });
    const rw = backendStatus(merged, 'torchao-rowwise');
    assert.ok(!rw.measured && /^not measured: torchao float8 training failed: synthetic$/.test(rw.reason), JSON.stringify(rw));
    const absent = backendStatus(eager, 'torchao-rowwise');
    assert.ok(!absent.measured && /has no torchao-rowwise rows/.test(absent.reason), JSON.stringify(absent));
    assert.throws(() => layerGain(merged, 'torchao-rowwise', { m: 512, k: 1024, n: 1024 }), /was not measured: torchao float8 training failed/);
  });

  it('refuses a backend whose baseline the table does not hold', () => {
    const bad = read('synthetic-gemm-table-merged.json') as { backends: Record<string, Record<string, unknown>> };
    delete bad.backends['bf16-compiled'];
    assert.throws(() => parseGainTable(bad), (e: unknown) => e instanceof GainTableError && /torchao-tensorwise\.baseline "bf16-compiled" is not a measured backend/.test(e.message));
  });
});

describe('gain: which table backend a benchmark backend is predicted from', () => {
  it('maps the sidebar / benchmark / A/B ids', () => {
    const cs = withSettings({ te: { ...DEFAULT_SETTINGS.te, recipe: 'Float8CurrentScaling' } });
    const ds = withSettings({ te: { ...DEFAULT_SETTINGS.te, recipe: 'DelayedScaling' } });
    assert.equal(tableBackendOf('te', cs), 'te-current');
    assert.equal(tableBackendOf('te', ds), 'te-delayed');
    assert.equal(tableBackendOf('converted', ds), 'te-delayed');
    assert.equal(tableBackendOf('torchao', ds), 'torchao-tensorwise');
    assert.equal(tableBackendOf('torchao-original', ds), 'torchao-tensorwise');
    assert.equal(tableBackendOf('torchao-rowwise', ds), 'torchao-rowwise');
    assert.equal(tableBackendOf('torch-fp8', ds), 'torch-fp8');
    for (const none of ['bf16', 'original', 'modelopt', 'nope']) assert.equal(tableBackendOf(none, ds), undefined, none);
  });
});

describe('gain: torchao on the shipped H200 table', function () {
  this.timeout(60000);

  it('says "not measured" (no number) until the compiled run is merged, then predicts from the compiled rows', async () => {
    const t = h200Table()!;
    const a = await analyse(gpt(4096, 6), DEFAULT_SETTINGS);
    for (const b of ['torchao-tensorwise', 'torchao-rowwise']) {
      const p = predictModelFor(a.ir, DEFAULT_SETTINGS, b)!;
      assert.ok(p, b);
      if (!t.compiledRun) {
        assert.ok(!p.measured, b);
        assert.match(p.reason, /^not measured: /);
      } else if (p.measured) {
        assert.ok(p.prediction.step.layers.every((l) => l.compiled && l.baseline === 'bf16-compiled'));
        assert.ok(p.prediction.step.speedup > 0);
      }
    }
    const lines = torchaoLines(a.ir, DEFAULT_SETTINGS);
    assert.equal(lines.length, 1);
    if (!t.compiledRun) {
      assert.match(lines[0], /^torchao instead \(convert_to_float8_training, compiled\): not measured: /);
      assert.doesNotMatch(lines[0], /\d\.\d\dx/);
    }
    // The model lens's details (what "show the numbers" lists) end with that line.
    const text = gpt(4096, 6);
    const lens = modelCodeLenses(text, (await analyse(text, DEFAULT_SETTINGS)).ir, DEFAULT_SETTINGS);
    assert.equal(lens.length, 1);
    const details = lens[0].command!.arguments![1] as string[];
    assert.equal(details[details.length - 1], lines[0]);
    // TE's prediction is unchanged by the torchao rows (the default backend of the settings).
    assert.equal(predictModelFor(a.ir, DEFAULT_SETTINGS, 'te')!.measured, true);
    assert.equal(predictModel(a.ir, DEFAULT_SETTINGS)!.step.backend, 'te-current');
  });

  it('where the project compiles, the lens details say the estimate is eager and give the compiled A/B figures', async () => {
    assert.deepEqual(compiledLines(false), []);
    assert.deepEqual(compiledLines(undefined), []);
    const data = JSON.parse(readFileSync(join(__dirname, '..', '..', 'server', 'src', 'analysis', 'data', 'compiled-ab-h200.json'), 'utf8')) as { runs: { model: string; layers: number; width: number; source: string }[] };
    const [line] = compiledLines(true);
    assert.match(line, /^This project calls torch\.compile: the estimate above is eager against eager BF16\./);
    for (const r of data.runs) {
      assert.ok(line.includes(`${r.model} ${r.layers} x ${r.width}: TE `), line);
      assert.ok(existsSync(join(__dirname, '..', '..', r.source.split(' ')[0])), `the figures' source ${r.source} is in the repository`);
    }
    const text = gpt(4096, 6);
    const ir = (await analyse(text, DEFAULT_SETTINGS)).ir;
    const details = (compiles: boolean) => modelCodeLenses(text, ir, DEFAULT_SETTINGS, compiles)[0].command!.arguments![1] as string[];
    assert.equal(details(true).length, details(false).length + 1);
    assert.equal(details(true)[details(true).length - 1], line);
  });

  it('a file with no Linear to predict says nothing for torchao either', async () => {
    const a = await analyse('import torch\nx = torch.zeros(3)\n', DEFAULT_SETTINGS);
    assert.equal(predictModelFor(a.ir, DEFAULT_SETTINGS, 'torchao'), undefined);
    assert.deepEqual(torchaoLines(a.ir, DEFAULT_SETTINGS), []);
  });
});
