/**
 * GPT-2's Conv1D (transformers.pytorch_utils.Conv1D, weight stored [in, out]) converts through the fallback's
 * fp8_conv1d_or(lambda: Conv1D(nf, nx), nf, nx): te.Linear(nx, nf) as the child `linear` of a wrapper whose state-dict
 * hooks keep Conv1D's keys and layout, the Conv1D as written where FP8 does not run. The analysis reads in = nx (the
 * 2nd argument) and out = nf (the 1st). test/python/exec.test.ts runs the result (strict loads both ways, same output,
 * a by-name loader finds no weight).
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_SETTINGS } from '../../common/settings';
import { applyEdits, fixOutcome, sourceFixes, type Fix } from '../../server/src/fixes';
import { fallbackSource } from '../../server/src/fixes/fallback-source';
import { analyse, pyCompileError } from './fixes-support';

const INPUT = readFileSync(join(__dirname, '..', 'fixtures', 'fixes', 'conv1d_gpt2.py'), 'utf8');
const SETTINGS = { ...DEFAULT_SETTINGS, convertLosingLayers: true };

describe("fixes: GPT-2's Conv1D converts through fp8_conv1d_or", () => {
  it('the verdict: a Linear with in = nx, out = nf, convertible through the wrapper, saying how the keys map', async () => {
    const { ir } = await analyse(INPUT);
    // The cross-attention branch's c_attn (2 * embed_dim) comes first, the self-attention one (3 * embed_dim) second.
    const get = (owner: string, name: string, out?: string) => ir.layers.find((l) => l.ownerClass === owner && l.name === name && (!out || String(l.outFeatures?.value) === out))!;
    for (const [owner, name, inF, outF] of [
      ['GPT2Attention', 'self.c_attn', '64', '128'], ['GPT2Attention', 'self.c_attn', '64', '192'], ['GPT2Attention', 'self.q_attn', '64', '64'], ['GPT2Attention', 'self.c_proj', '64', '64'],
      ['GPT2MLP', 'self.c_fc', '64', '256'], ['GPT2MLP', 'self.c_proj', '256', '64'],
    ]) {
      const l = get(owner, name, outF);
      assert.ok(l, `${owner}.${name}`);
      assert.equal(l.kind, 'linear');
      assert.equal(l.convertible, true, `${owner}.${name}: ${l.reasons.join(' | ')}`);
      assert.equal(l.transposedWeight, true);
      assert.equal(l.fallbackKeepsClass, 'Conv1D');
      assert.equal(String(l.inFeatures?.value), inF, `${owner}.${name} in`);
      assert.equal(String(l.outFeatures?.value), outF, `${owner}.${name} out`);
      const at = name.slice(5);
      assert.match(l.reasons.join(' '), new RegExp(`fp8_conv1d_or wrapper, whose state_dict keeps Conv1D's keys and layout \\(${at}\\.weight as \\[in, out\\], ${at}\\.bias; the te\\.Linear itself is ${at}\\.linear\\.weight, \\[out, in\\]\\)`));
      assert.match(l.reasons.join(' '), new RegExp(`finds no ${at}\\.weight parameter and reports it`));
    }
  });

  it('"convert all" wraps each call behind a lambda, keeps the arguments, extends the Conv1D class test with TE_LINEAR; the result compiles and converts nothing twice', async () => {
    const { ir } = await analyse(INPUT);
    const fix = sourceFixes(INPUT, ir, SETTINGS).find((f: Fix) => f.id === 'convert-all:file');
    assert.ok(fix, 'convert-all offered');
    const text = applyEdits(INPUT, fix.edits);
    assert.match(text, /self\.c_attn = fp8_conv1d_or\(lambda: Conv1D\(2 \* self\.embed_dim, self\.embed_dim\), 2 \* self\.embed_dim, self\.embed_dim\)/);
    assert.match(text, /self\.c_attn = fp8_conv1d_or\(lambda: Conv1D\(3 \* self\.embed_dim, self\.embed_dim\), 3 \* self\.embed_dim, self\.embed_dim\)/);
    assert.match(text, /self\.c_proj = fp8_conv1d_or\(lambda: Conv1D\(embed_dim, intermediate_size\), embed_dim, intermediate_size\)/);
    assert.match(text, /isinstance\(module, \(Conv1D, TE_LINEAR\)\)/);
    assert.equal(pyCompileError(text), undefined);
    const again = await analyse(text);
    const left = again.ir.layers.filter((l) => l.convertible === true && !l.isTe && l.name !== '');
    assert.deepEqual(left.map((l) => l.name), [], left.map((l) => `${l.name}: ${l.reasons.join(' ')}`).join('\n'));
    const kept = again.ir.layers.filter((l) => l.constructor === 'Conv1D');
    assert.ok(kept.length >= 6 && kept.every((l) => /This Conv1D is what \S+ builds where FP8 does not run/.test(l.reasons.join(' '))), kept.map((l) => l.reasons.join(' ')).join('\n'));
  });

  it('the single-layer fix gives the same call; a Conv1D built with anything but nf and nx is refused, saying why', async () => {
    const single = async (text: string, owner: string, name: string) => {
      const { ir, findings } = await analyse(text, SETTINGS);
      const i = ir.layers.findIndex((l) => l.ownerClass === owner && l.name === name);
      const finding = findings.find((f) => f.code === 'PL101' && f.layerIndex === i);
      assert.ok(finding, `PL101 on ${owner}.${name}: ${findings.map((f) => `${f.code} ${f.layerIndex}`).join(', ')}`);
      return fixOutcome(text, ir, finding, SETTINGS);
    };
    const one = (await single(INPUT, 'GPT2MLP', 'self.c_fc')).fixes[0];
    assert.match(one.title, /fp8_conv1d_or/);
    assert.match(applyEdits(INPUT, one.edits), /self\.c_fc = fp8_conv1d_or\(lambda: Conv1D\(intermediate_size, embed_dim\), intermediate_size, embed_dim\)/);

    const odd = INPUT.replace('self.c_fc = Conv1D(intermediate_size, embed_dim)', 'self.c_fc = Conv1D(intermediate_size, embed_dim, **extra)');
    const r = await single(odd, 'GPT2MLP', 'self.c_fc');
    assert.equal(r.fixes.length, 0);
    assert.match(r.refusals.join(' '), /Conv1D is built with intermediate_size, embed_dim, \*\*extra, where fp8_conv1d_or takes nf and nx only\./);
  });

  it('the fallback module defines the wrapper and its hooks, for both TE APIs', () => {
    for (const api of ['modern', 'legacy'] as const) {
      const src = fallbackSource({ api, settings: DEFAULT_SETTINGS, teName: 'te' } as Parameters<typeof fallbackSource>[0]);
      assert.match(src, /^class _PLConv1D\(torch\.nn\.Module\):$/m);
      assert.match(src, /^def fp8_conv1d_or\(fallback, nf, nx\):$/m);
      assert.match(src, /return _PLConv1D\(nf, nx, _pl_guard_rows\(te\.Linear\(nx, nf\)\)\)/);
      assert.equal(pyCompileError(src), undefined);
    }
  });
});
