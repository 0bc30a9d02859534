/**
 * `precision-lens inspect --format json` gives each model file its predicted FP8 step speedup (issue 22, item 4): the
 * `gain` object, the same estimate as the editor's CodeLens on the model class, through the BUILT command line.
 */
import * as assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureBuilt, parseJson, runCli } from './cli-harness';
import { gpt } from './gpt-model';

interface Gain {
  gpu: string; speedup: number; bf16_step_ms: number; fp8_step_ms: number; tokens: number; tokens_assumed: boolean;
  blocks: number; blocks_from: string | null; launch_bound: boolean; loses: boolean; summary: string; details: string[];
  compiled_note: string | null;
  attention_note: string | null;
}
interface InspectGainJson { version: number; files: { file: string; gain?: Gain }[] }

describe('precision-lens inspect: the model-level FP8 estimate (built CLI)', function () {
  this.timeout(120_000);
  let dir: string;
  before(() => {
    ensureBuilt();
    dir = mkdtempSync(join(tmpdir(), 'precision-lens-gain-'));
    writeFileSync(join(dir, 'gpt_small.py'), gpt(768));
    writeFileSync(join(dir, 'gpt_wide.py'), gpt(4096, 6));
    writeFileSync(join(dir, 'plain.py'), 'import torch\n\nx = torch.zeros(3)\n');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const gainOf = (out: InspectGainJson, file: string): Gain | undefined => out.files.find((f) => f.file.endsWith(file))?.gain;

  it('at width 768 FP8 loses (launch-bound), tokens and blocks say where they came from', () => {
    const out = parseJson<InspectGainJson>(runCli(['inspect', 'gpt_small.py', '--format', 'json'], dir));
    const g = gainOf(out, 'gpt_small.py');
    assert.ok(g, JSON.stringify(out.files.map((f) => Object.keys(f))));
    assert.ok(g.speedup < 1 && g.loses && g.launch_bound, JSON.stringify(g));
    assert.ok(g.fp8_step_ms > g.bf16_step_ms);
    assert.ok(Math.abs(g.speedup - g.bf16_step_ms / g.fp8_step_ms) < 1e-9, 'speedup = bf16 / fp8');
    assert.equal(g.tokens, 16384);
    assert.equal(g.tokens_assumed, true);
    assert.equal(g.blocks, 12);
    assert.equal(g.blocks_from, 'GPTConfig.n_layer');
    assert.match(g.gpu, /H200/);
    assert.match(g.summary, / per step at 16k tokens \(launch-bound\)$/);
    assert.ok(g.details.length >= 3);
    // At 8k tokens per step the launch cost weighs more: FP8 clearly loses.
    const at8k = gainOf(parseJson<InspectGainJson>(runCli(['inspect', 'gpt_small.py', '--format', 'json', '--tokens-per-step', '8192'], dir)), 'gpt_small.py')!;
    assert.match(at8k.summary, /^FP8 loses here: about 0\.\d+x per step at 8192 tokens \(launch-bound\)$/);
    assert.equal(at8k.tokens_assumed, false);
  });

  it('at width 4096 with 6 blocks FP8 gains; --tokens-per-step is read', () => {
    const out = parseJson<InspectGainJson>(runCli(['inspect', 'gpt_wide.py', '--format', 'json', '--tokens-per-step', '32768'], dir));
    const g = gainOf(out, 'gpt_wide.py')!;
    assert.ok(g && g.speedup > 1 && !g.loses && !g.launch_bound, JSON.stringify(g));
    assert.equal(g.blocks, 6);
    assert.equal(g.tokens, 32768);
    assert.equal(g.tokens_assumed, false);
    assert.match(g.summary, /^about \d\.\d+x per step at 32k tokens$/);
    assert.equal(g.compiled_note, null, 'nothing in the folder calls torch.compile');
    // Its attention is torch's SDPA: the estimate counts it in both arms and says what TE's fused attention measured.
    assert.match(g.attention_note ?? '', /^Attention is torch's scaled_dot_product_attention, counted the same in both arms; fp8_attention \(PL107\) hands it to TE's fused attention: on the NVIDIA H200 .*nanoGPT 12 x 2048 1\.24x -> 1\.29x.*llama2\.c 6 x 4096 1\.43-1\.45x -> 1\.53x\.$/);
  });

  it('the attention note: fp8_attention imported says the estimate counts it as torch\'s; no attention call, no note', () => {
    const proj = mkdtempSync(join(tmpdir(), 'precision-lens-gain-attn-'));
    try {
      const wide = gpt(4096, 6);
      writeFileSync(join(proj, 'via.py'), wide.replace('import torch.nn.functional as F', 'import torch.nn.functional as F\nfrom fp8_fallback import fp8_attention').replace('F.scaled_dot_product_attention(', 'fp8_attention('));
      writeFileSync(join(proj, 'none.py'), wide.replace(/y = F\.scaled_dot_product_attention\([^)]*\)/, 'y = v'));
      const out = parseJson<InspectGainJson>(runCli(['inspect', 'via.py', 'none.py', '--format', 'json'], proj));
      assert.match(gainOf(out, 'via.py')?.attention_note ?? '', /^Attention runs through fp8_attention \(TE's fused attention where FP8 runs\), which this estimate counts as torch's BF16 SDPA: /);
      const none = gainOf(out, 'none.py');
      assert.ok(none, 'the model without attention still has its estimate');
      assert.equal(none.attention_note, null);
    } finally {
      rmSync(proj, { recursive: true, force: true });
    }
  });

  it('with a training script that calls torch.compile, the gain carries the compiled note', () => {
    const proj = mkdtempSync(join(tmpdir(), 'precision-lens-gain-compile-'));
    try {
      writeFileSync(join(proj, 'model.py'), gpt(4096, 6));
      writeFileSync(join(proj, 'train.py'), 'import torch\nfrom model import GPT, GPTConfig\n\nmodel = torch.compile(GPT(GPTConfig()))\n');
      const g = gainOf(parseJson<InspectGainJson>(runCli(['inspect', '.', '--format', 'json'], proj)), 'model.py')!;
      assert.match(g.compiled_note ?? '', /^This project calls torch\.compile: the estimate above is eager against eager BF16\..* llama2\.c 6 x 4096: TE 1\.27x/);
    } finally {
      rmSync(proj, { recursive: true, force: true });
    }
  });

  it('a file with no Linear has no gain; files analysed in worker threads have theirs', () => {
    const out = parseJson<InspectGainJson>(runCli(['inspect', '.', '--format', 'json', '--jobs', '2'], dir));
    assert.equal(out.files.length, 3);
    assert.equal(gainOf(out, 'plain.py'), undefined);
    assert.ok(gainOf(out, 'gpt_small.py')?.loses);
    assert.equal(gainOf(out, 'gpt_wide.py')?.blocks, 6);
  });
});
