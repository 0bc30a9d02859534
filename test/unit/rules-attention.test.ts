/**
 * PL107 (rules/attention.ts) and its fix (fixes/attention.ts): torch's scaled_dot_product_attention in a file whose
 * layers run through Transformer Engine goes through the fallback's fp8_attention; quiet where nothing runs TE, another
 * stack owns the layers, or the call has a mask.
 */
import * as assert from 'node:assert/strict';
import { DEFAULT_SETTINGS } from '../../common/settings';
import { applyEdits, fixOutcome, sourceFixes } from '../../server/src/fixes';
import { fallbackLacks } from '../../server/src/fixes/fallback';
import { fallbackSource } from '../../server/src/fixes/fallback-source';
import type { WorkspaceFacts } from '../../server/src/rules/types';
import { checkRule, FALLBACK_MODULE, pyCompileError } from './fixes-support';

const MODEL = [
  'import torch',
  'import torch.nn.functional as F',
  'from fp8_fallback import fp8_linear',
  '',
  '',
  'class Attention(torch.nn.Module):',
  '    def __init__(self, d, heads):',
  '        super().__init__()',
  '        self.heads = heads',
  '        self.qkv = fp8_linear(d, 3 * d)',
  '',
  '    def forward(self, x):',
  '        b, t, c = x.shape',
  '        q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))',
  '        y = F.scaled_dot_product_attention(q, k, v, attn_mask=None, is_causal=True)',
  '        return y.transpose(1, 2).reshape(b, t, c)',
  '',
].join('\n');

const check = (text: string, workspace: WorkspaceFacts = {}) => checkRule('PL107', text, workspace);
const MODULE = FALLBACK_MODULE;

describe('PL107: torch\'s attention in a model whose layers run through TE', () => {
  it('fires on the call, with the measured gain in the explanation', async () => {
    const { findings } = await check(MODEL);
    assert.equal(findings.length, 1);
    const [f] = findings;
    assert.equal(f.severity, 'information');
    assert.equal(f.span.startLine, 14);
    assert.equal(f.message, 'torch\'s attention in an FP8 model: fp8_attention runs it in TE\'s fused attention where FP8 runs, the same result');
    assert.ok(f.message.length <= 120);
    assert.match(f.explanation!.consequence!, /1\.243x to 1\.290x/);
  });

  const spellings: [string, string][] = [
    ['torch.nn.functional.', MODEL.replace('F.scaled_dot_product_attention', 'torch.nn.functional.scaled_dot_product_attention')],
    ['imported bare', MODEL.replace('import torch.nn.functional as F', 'from torch.nn.functional import scaled_dot_product_attention').replace('F.scaled_dot_product_attention', 'scaled_dot_product_attention')],
    ['te.Linear built directly', MODEL.replace('from fp8_fallback import fp8_linear', 'import transformer_engine.pytorch as te').replace('fp8_linear(d, 3 * d)', 'te.Linear(d, 3 * d)')],
  ];
  for (const [what, text] of spellings) {
    it(`fires for ${what}`, async () => {
      assert.equal((await check(text)).findings.length, 1);
    });
  }

  const quiet: [string, string, WorkspaceFacts?][] = [
    ['nothing runs TE', MODEL.replace('from fp8_fallback import fp8_linear', '').replace('fp8_linear(d, 3 * d)', 'torch.nn.Linear(d, 3 * d)')],
    ['the call has a mask', MODEL.replace('attn_mask=None', 'attn_mask=mask')],
    ['a positional mask', MODEL.replace('q, k, v, attn_mask=None', 'q, k, v, mask')],
    ['another stack owns the layers', MODEL, { otherStack: 'fp8_for_compile' }],
    ['someone else\'s scaled_dot_product_attention', MODEL.replace('import torch.nn.functional as F', 'import my_kernels as F')],
    ['already through fp8_attention', MODEL.replace('F.scaled_dot_product_attention', 'fp8_attention')],
  ];
  for (const [what, text, ws] of quiet) {
    it(`quiet when ${what}`, async () => {
      assert.deepEqual((await check(text, ws)).findings.map((f) => f.message), []);
    });
  }

  it('the fix renames the callee, keeps the arguments and imports fp8_attention; the result compiles and is quiet', async () => {
    const { ir, findings } = await check(MODEL);
    const { fixes } = fixOutcome(MODEL, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: MODULE });
    assert.equal(fixes.length, 1);
    assert.equal(fixes[0].title, 'Run this attention in TE\'s fused kernel where FP8 runs: fp8_attention(...) via fp8_fallback');
    assert.equal(fixes[0].safe, false);
    const out = applyEdits(MODEL, fixes[0].edits);
    assert.match(out, /^from fp8_fallback import fp8_attention, fp8_linear$/m);
    assert.match(out, /^ {8}y = fp8_attention\(q, k, v, attn_mask=None, is_causal=True\)$/m);
    assert.equal(pyCompileError(out), undefined);
    assert.deepEqual((await check(out)).findings, []);
  });

  it('a module written before fp8_attention existed: the fix refuses and says what to do', async () => {
    const { ir, findings } = await check(MODEL);
    const old = { ...MODULE, lacks: fallbackLacks('# precision-lens: fp8 fallback\ndef fp8_linear(*a):\n    pass\n') };
    assert.ok(old.lacks?.includes('fp8_attention'));
    const outcome = fixOutcome(MODEL, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: old });
    assert.equal(outcome.fixes.length, 0);
    assert.match(outcome.refusals.join(' '), /fp8_fallback\.py was written before fp8_attention existed; delete it and apply the fix again/);
  });

  it('a file with its own inline fallback block: the block defines fp8_attention, no import is added', async () => {
    const block = fallbackSource({ api: 'modern', settings: DEFAULT_SETTINGS, teName: 'te', hasTorch: true });
    const text = MODEL.replace('from fp8_fallback import fp8_linear\n', `${block}\n`);
    const { ir, findings } = await check(text);
    assert.equal(findings.length, 1);
    const [fix] = fixOutcome(text, ir, findings[0], DEFAULT_SETTINGS).fixes;
    assert.ok(fix, 'offered');
    const out = applyEdits(text, fix.edits);
    assert.doesNotMatch(out, /import fp8_attention/);
    assert.match(out, /y = fp8_attention\(q, k, v/);
    assert.equal(pyCompileError(out), undefined);
  });

  it('convert-all renames the attention in the classes it converts, says so, and leaves it where PL107 is off', async () => {
    const plain = MODEL.replace('from fp8_fallback import fp8_linear\n', '').replace('fp8_linear(d, 3 * d)', 'torch.nn.Linear(4096, 3 * 4096)')
      + '\n\nclass Other(torch.nn.Module):\n    def forward(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v)\n';
    const { ir } = await check(plain);
    const settings = { ...DEFAULT_SETTINGS, convertLosingLayers: true };
    const env = { fallbackModule: MODULE };
    const byClass = sourceFixes(plain, ir, settings, { className: 'Attention', env }).find((f) => f.id === 'convert-all:class:Attention')!;
    assert.match(byClass.title, /^Convert 1 layer in class Attention to FP8 \(with fallback; attention through fp8_attention\)$/);
    const out = applyEdits(plain, byClass.edits);
    assert.match(out, /^ {8}y = fp8_attention\(q, k, v, attn_mask=None, is_causal=True\)$/m);
    assert.match(out, /^ {8}return F\.scaled_dot_product_attention\(q, k, v\)$/m, 'another class: untouched');
    assert.match(out, /^from fp8_fallback import fp8_attention, fp8_linear$/m);
    assert.equal(pyCompileError(out), undefined);
    const file = sourceFixes(plain, ir, settings, { env }).find((f) => f.id === 'convert-all:file')!;
    assert.match(file.title, /attention through fp8_attention \(2 calls\)/);
    const off = { ...settings, rules: { PL107: 'off' as const } };
    const quiet = sourceFixes(plain, ir, off, { env }).find((f) => f.id === 'convert-all:file')!;
    assert.doesNotMatch(quiet.title, /attention/);
    assert.doesNotMatch(applyEdits(plain, quiet.edits), /fp8_attention/);
  });
});
