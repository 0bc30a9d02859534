/**
 * server/src/analysis/gain.ts on test/fixtures/gain/synthetic-gemm-table.json: a hand-made 2 x 2 x 2 table (M 512/8192,
 * K and N 1024/4096), labelled synthetic, so every expected value below can be worked out by hand. Also: the table the
 * real tool writes (bench/tools/gemm_table.py --device cpu --quick) parses.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  describeRatio, GainTableError, interpolateLog, layerGain, parseGainTable, phaseStepMs, predictStep, STEP_OVERLAP, type GainTable,
} from '../../server/src/analysis/gain';

const ROOT = join(__dirname, '..', '..');
const FIXTURE = join(ROOT, 'test', 'fixtures', 'gain', 'synthetic-gemm-table.json');
const raw = (): Record<string, unknown> => JSON.parse(readFileSync(FIXTURE, 'utf8'));
const close = (a: number, b: number, eps = 1e-3) => assert.ok(Math.abs(a - b) <= eps * Math.max(1, Math.abs(b)), `${a} != ${b}`);

describe('gain: the FP8 gain table and the predicted speedup', () => {
  let table: GainTable;
  before(() => { table = parseGainTable(raw()); });

  it('parses the fixture, which says it is synthetic', () => {
    assert.equal(table.notABenchmark, true);
    assert.match(table.note ?? '', /SYNTHETIC/);
    assert.match(table.gpu.name ?? '', /SYNTHETIC/);
    assert.deepEqual(table.grid, { m: [512, 8192], k: [1024, 4096], n: [1024, 4096] });
    assert.equal(table.backends['te-current'].available, false);
    assert.match(table.backends['te-current'].reason ?? '', /not importable/);
    assert.ok(table.block);
  });

  it('reads a grid point exactly', () => {
    const g = layerGain(table, 'te-delayed', { m: 8192, k: 4096, n: 4096 });
    close(g.ratio, 1.8);
    close(g.bf16Ms, 1.2283);
    close(g.fp8Ms, 1.2283 / 1.8);
    assert.equal(g.extrapolated, false);
    assert.deepEqual(g.notes, []);
    close(layerGain(table, 'te-delayed', { m: 512, k: 1024, n: 1024 }).ratio, 0.8);
  });

  it('interpolates in log space: 2048 tokens is halfway between 512 and 8192', () => {
    // M: log-halfway; K = N = 1024: ratios 0.8 and 1.0 -> geometric mean.
    close(layerGain(table, 'te-delayed', { m: 2048, k: 1024, n: 1024 }).ratio, Math.sqrt(0.8 * 1.0));
    // Every axis halfway: the geometric mean of all eight corners.
    const all = [0.8, 0.9, 0.9, 1.0, 1.0, 1.2, 1.2, 1.8];
    const g = layerGain(table, 'te-delayed', { m: 2048, k: 2048, n: 2048 });
    close(g.ratio, Math.exp(all.reduce((s, r) => s + Math.log(r), 0) / 8));
    assert.equal(g.extrapolated, false);
    // A quarter of the way in log M (1024 = 512 * 16^0.25).
    close(layerGain(table, 'te-delayed', { m: 1024, k: 4096, n: 4096 }).ratio, Math.exp(0.75 * Math.log(1.0) + 0.25 * Math.log(1.8)));
  });

  it('clamps at the edges and says it extrapolated; times above the grid grow with the work, below it stay at the floor', () => {
    const big = layerGain(table, 'te-delayed', { m: 32768, k: 14336, n: 4096 });
    close(big.ratio, 1.8);
    assert.equal(big.extrapolated, true);
    assert.match(big.notes.join(' '), /M above 8192, K above 4096/);
    close(big.bf16Ms, 1.2283 * (32768 / 8192) * (14336 / 4096));
    const small = layerGain(table, 'te-delayed', { m: 64, k: 768, n: 1024 });
    close(small.ratio, 0.8);
    close(small.bf16Ms, 0.0546);
    assert.match(small.notes.join(' '), /M below 512, K below 1024/);
  });

  it('leaves out failed (null) cells and re-weights the others', () => {
    // torchao-tensorwise [0][0][0] is null: at the corner itself the next cells along M are not neighbours, so only
    // the interior point sees the gap.
    const g = layerGain(table, 'torchao-tensorwise', { m: 2048, k: 1024, n: 1024 });
    close(g.ratio, 0.6); // the only non-null corner with weight
    assert.match(g.notes.join(' '), /1 neighbouring cell\(s\) failed/);
    assert.throws(() => layerGain(table, 'torchao-tensorwise', { m: 512, k: 1024, n: 1024 }), /no measured cell near M=512/);
  });

  it('refuses an unknown or unmeasured backend with the reason', () => {
    assert.throws(() => layerGain(table, 'nope', { m: 512, k: 1024, n: 1024 }), /has no backend "nope" \(it has: bf16, te-delayed/);
    assert.throws(() => layerGain(table, 'te-current', { m: 512, k: 1024, n: 1024 }), /was not measured: Transformer Engine not importable/);
  });

  it('interpolateLog works for any rank', () => {
    const r = interpolateLog([[1, 100]], ['x'], [1, 100], [10]);
    close(r.value!, 10);
    assert.equal(r.extrapolated, false);
    const e = interpolateLog([[1, 100]], ['x'], [1, 100], [1000]);
    close(e.value!, 100);
    assert.deepEqual(e.clamped, ['x above 100']);
    assert.equal(interpolateLog([[1, 100]], ['x'], [null, null], [10]).value, undefined);
  });

  it('predicts a model step: GEMMs, non-GEMM time, lm-head + loss, optimizer', () => {
    // Two blocks of width 4096 at 8192 tokens, four Linears each (two 4096 x 4096, two 4096 -> 4096 via the grid
    // point), plus the lm-head and the loss from the block table with vocab 32000.
    const layers = [
      { name: 'attn.qkv', m: 8192, k: 4096, n: 4096, convert: true, count: 2 },
      { name: 'mlp.fc', m: 8192, k: 4096, n: 4096, convert: true, count: 2 },
      { name: 'router', m: 8192, k: 4096, n: 1024, convert: false, count: 2 },
    ];
    const p = predictStep(table, 'te-delayed', {
      layers, tokens: 8192, blocks: { count: 2, width: 4096 }, lmHead: { width: 4096, vocab: 32000 }, params: 1e9,
    });
    const t44 = 1.2283;
    const t41 = 0.3445;
    const gemmBf16 = 4 * t44 + 2 * t41;
    const gemmFp8 = 4 * t44 / 1.8 + 2 * t41;
    const rest = 2 * 5.0 + 14.0 + 3.0 + 1e9 * 0.01 * 1e-6;
    close(p.gemmBf16Ms, gemmBf16);
    close(p.gemmFp8Ms, gemmFp8);
    close(p.restMs, rest);
    close(p.rest.optimizerMs, 10);
    close(p.speedup, (gemmBf16 + rest) / (gemmFp8 + rest));
    assert.equal(p.converted, 4);
    assert.deepEqual(p.losing, []);
    assert.equal(p.extrapolated, false);
    assert.match(p.notes.join(' '), /not a benchmark/);
  });

  it('a small model whose converted layers lose is predicted to lose, and names them', () => {
    const p = predictStep(table, 'te-delayed', {
      layers: [{ name: 'fc', m: 512, k: 1024, n: 1024, convert: true, count: 12 }], tokens: 512,
      blocks: { count: 12, width: 1024, activation: 'swiglu' },
    });
    assert.ok(p.speedup < 1, `speedup ${p.speedup}`);
    assert.deepEqual(p.losing, ['fc']);
    // SwiGLU: the block's GELU time swapped for SwiGLU's.
    close(p.rest.nonGemmMs, 12 * (0.2 - 0.02 + 0.03));
    // Converting nothing predicts exactly 1.
    const none = predictStep(table, 'te-delayed', { layers: [{ name: 'fc', m: 512, k: 1024, n: 1024, convert: false }], tokens: 512 });
    close(none.speedup, 1);
  });

  it('scales the lm-head and loss to the model vocabulary', () => {
    const p = predictStep(table, 'te-delayed', { layers: [], tokens: 512, lmHead: { width: 1024, vocab: 64000 } });
    close(p.rest.lmHeadMs, 0.6);
    close(p.rest.lossMs, 0.4);
  });

  it('models the host in two phases (blocks, then lm-head + loss + optimizer) and takes one max over the step', () => {
    // The fixture made version 2: every Linear costs the host 0.2 ms in BF16 and 1.0 ms in TE, a block's non-GEMM
    // parts 2.0 ms (timed in 6 regions of 0.1 ms each, which come off), the loss 0.5 ms and AdamW 0.3 ms.
    const d = raw() as Record<string, any>;
    d.schema_version = 2;
    const fill = (v: number) => d.grid.m.map(() => d.grid.k.map(() => d.grid.n.map(() => v)));
    d.backends.bf16.host_ms = fill(0.2);
    d.backends['te-delayed'].host_ms = fill(1.0);
    d.block.host_ms = { non_gemm_ms: [[2.0, 2.0], [2.0, 2.0]], loss_ms: [0.5, 0.5] };
    d.block.adamw.host_ms = 0.3;
    d.host_model = { bf16: { per_region_ms: 0.1, per_layer_ms: 0.2 } };
    const t2 = parseGainTable(d);
    const p = predictStep(t2, 'te-delayed', {
      layers: [{ name: 'fc', m: 512, k: 1024, n: 1024, convert: true, count: 12 }], tokens: 512,
      blocks: { count: 12, width: 1024 }, lmHead: { width: 1024, vocab: 32000 }, params: 1e6,
    });
    const ph = p.phases!;
    assert.ok(ph, 'phases where the table has the host');
    const hostBlocks = 12 * (2.0 - 6 * 0.1);
    close(ph.blocks.hostBf16Ms, hostBlocks + 12 * 0.2);
    close(ph.blocks.hostFp8Ms, hostBlocks + 12 * 1.0);
    close(ph.tail.hostMs, 0.5 + 0.3);
    close(ph.tail.gpuMs, p.rest.lmHeadMs + p.rest.lossMs + p.rest.optimizerMs);
    close(ph.blocks.gpuBf16Ms + ph.tail.gpuMs, p.gemmBf16Ms + p.normsBf16Ms + p.restMs);
    close(p.hostFp8Ms!, ph.blocks.hostFp8Ms + ph.tail.hostMs);
    // The adopted rule: one max over the whole step, in each arm.
    assert.equal(STEP_OVERLAP, 'step');
    close(p.bf16StepMs, Math.max(ph.blocks.gpuBf16Ms + ph.tail.gpuMs, p.hostBf16Ms!));
    close(p.fp8StepMs, Math.max(ph.blocks.gpuFp8Ms + ph.tail.gpuMs, p.hostFp8Ms!));
    assert.equal(p.hostBound.fp8, p.hostFp8Ms! > ph.blocks.gpuFp8Ms + ph.tail.gpuMs);
  });

  it('phaseStepMs: one max over the step, or a max per phase summed', () => {
    const ph = { blocks: { gpuBf16Ms: 10, gpuFp8Ms: 8, hostBf16Ms: 5, hostFp8Ms: 20 }, tail: { gpuMs: 6, hostMs: 1 } };
    // The host's lead in the blocks covers the tail's GPU time under 'step', not under 'phases'.
    assert.equal(phaseStepMs(ph, 'bf16', 'step'), 16);
    assert.equal(phaseStepMs(ph, 'fp8', 'step'), 21);
    assert.equal(phaseStepMs(ph, 'bf16', 'phases'), 16);
    assert.equal(phaseStepMs(ph, 'fp8', 'phases'), 26);
  });

  it('rejects tables that are not the format, saying what is wrong', () => {
    const bad = (mutate: (d: Record<string, any>) => void, msg: RegExp) => {
      const d = raw() as Record<string, any>;
      mutate(d);
      assert.throws(() => parseGainTable(d), (e: unknown) => e instanceof GainTableError && msg.test(e.message));
    };
    bad((d) => { d.schema = 'x'; }, /not a gain table/);
    bad((d) => { d.schema_version = 3; }, /schema_version 3 is not supported/);
    bad((d) => { d.incomplete = true; }, /incomplete/);
    bad((d) => { d.grid.m = [8192, 512]; }, /grid.m must be strictly increasing/);
    bad((d) => { d.backends['te-delayed'].ratio[1].pop(); }, /te-delayed.ratio\[1\] must have 2 rows/);
    bad((d) => { d.backends['te-delayed'].ratio[0][0][0] = -1; }, /not a positive number/);
    bad((d) => { delete d.backends.bf16; }, /no bf16 baseline/);
    bad((d) => { d.block.loss_ms = [1]; }, /block.loss_ms must have 2 cells/);
    assert.throws(() => parseGainTable(null), /must be a JSON object/);
  });

  it('describes a ratio in words', () => {
    assert.equal(describeRatio(1.83), 'about 1.8x');
    assert.equal(describeRatio(0.88), 'FP8 loses here: about 0.88x');
    assert.equal(describeRatio(1.02), 'about even (1.02x)');
  });

  it('parses the table bench/tools/gemm_table.py writes (CPU, not a benchmark)', function () {
    const py = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
    if (spawnSync(py, ['-c', 'import torch'], { encoding: 'utf8' }).status !== 0) this.skip();
    this.timeout(120_000);
    const dir = mkdtempSync(join(tmpdir(), 'pl-gain-'));
    try {
      const r = spawnSync(py, [join(ROOT, 'bench', 'tools', 'gemm_table.py'), '--device', 'cpu', '--quick', '--out', dir],
        { encoding: 'utf8', env: { ...process.env, CUDA_VISIBLE_DEVICES: '' }, timeout: 110_000 });
      assert.equal(r.status, 0, r.stderr);
      const t = parseGainTable(JSON.parse(readFileSync(join(dir, 'gemm-table.json'), 'utf8')));
      assert.equal(t.notABenchmark, true);
      assert.equal(t.backends['te-delayed'].available, false);
      const g = layerGain(t, 'torch-fp8', { m: 24, k: 24, n: 24 });
      assert.ok(g.ratio > 0 && g.bf16Ms > 0);
      const p = predictStep(t, 'torch-fp8', {
        layers: [{ name: 'fc', m: 32, k: 32, n: 32, convert: true }], tokens: 32,
        blocks: { count: 1, width: 32 }, lmHead: { width: 32, vocab: 512 }, params: 1000,
      });
      assert.ok(p.speedup > 0 && p.restMs > 0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
