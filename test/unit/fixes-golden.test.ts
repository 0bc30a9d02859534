/**
 * Golden tests: every fix on fixtures written for it, real parser + analysis + rules, output compared with
 * test/fixtures/fixes/<name>.<case>.expected.py. UPDATE_GOLDEN=1 rewrites the expected files (then read the diff).
 */
import * as assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RuleCode } from '../../common/codes';
import { type PrecisionLensSettings } from '../../common/settings';
import { MECHANICS_SETTINGS } from './fixes-support';
import { applyEdits, fixOutcome, sourceFixOutcome, type Fix, type FixEnv } from '../../server/src/fixes';
import type { Finding } from '../../server/src/rules/types';
import { analyse, FIXTURES, pyCompileError, settingsWith } from './fixes-support';

interface GoldenCase {
  input: string;
  name: string;
  /** A quick fix: the finding's code, and which finding (by the layer name or the text at its span). */
  code?: RuleCode;
  at?: string;
  /** A source action. */
  source?: { className?: string; selection?: [string, string] };
  /** Which fix (id prefix); default the first. */
  fix?: string;
  settings?: PrecisionLensSettings;
  env?: FixEnv;
  /** The expected output of another case (same input) this one must equal. */
  same?: string;
}

const legacy = settingsWith({ apiVersion: 'legacy' });
const modern = settingsWith({ apiVersion: 'modern' });
/** The project's fallback module beside the file (fixes import it; the created module itself is golden in fixes-project). */
const MODULE: FixEnv = { fallbackModule: { importFrom: 'fp8_fallback', path: '/ws/fp8_fallback.py', exists: true } };
const CASES: GoldenCase[] = [
  { input: 'convert_linear.py', name: 'up-module', code: 'PL101', at: 'self.up', env: MODULE },
  { input: 'convert_norms.py', name: 'all-class-module', source: { className: 'Block' }, fix: 'convert-all:class:Block', env: MODULE },
  { input: 'te_unguarded_legacy.py', name: 'pl401-module', code: 'PL401', settings: legacy, env: MODULE },
  { input: 'train_tabs.py', name: 'step-module', source: {}, fix: 'wrap-training-step', env: MODULE },
  { input: 'convert_linear.py', name: 'up', code: 'PL101', at: 'self.up' },
  { input: 'convert_linear.py', name: 'down', code: 'PL101', at: 'self.down' },
  { input: 'convert_linear.py', name: 'all', source: {}, fix: 'convert-all:file' },
  { input: 'convert_norms.py', name: 'ln-modern', code: 'PL102', at: 'self.ln' },
  { input: 'convert_norms.py', name: 'ln-legacy', code: 'PL102', at: 'self.ln', settings: legacy },
  { input: 'convert_norms.py', name: 'gemma-rms', code: 'PL103', at: 'self.norm' },
  { input: 'convert_norms.py', name: 'all-class', source: { className: 'Block' }, fix: 'convert-all:class:Block' },
  { input: 'te_alias.py', name: 'qkv', code: 'PL101', at: 'self.qkv' },
  { input: 'gpt_convert_all.py', name: 'all', source: {}, fix: 'convert-all:file' },
  { input: 'gpt_convert_all.py', name: 'mlp', source: { className: 'MLP' }, fix: 'convert-all:class:MLP' },
  { input: 'exec_gpt.py', name: 'wrapper', source: {}, fix: 'insert-wrapper' },
  { input: 'exec_gpt.py', name: 'wrapper-legacy', source: {}, fix: 'insert-wrapper', settings: legacy },
  { input: 'exec_gpt.py', name: 'wrapper-auto-old-te', source: {}, fix: 'insert-wrapper', env: { teVersion: '2.5.0' } },
  { input: 'exec_gpt.py', name: 'step', source: {}, fix: 'wrap-training-step' },
  { input: 'train_tabs.py', name: 'step', source: {}, fix: 'wrap-training-step' },
  { input: 'train_tabs.py', name: 'selection', source: { selection: ['logits = model(x)', 'optimizer.step()'] }, fix: 'wrap-selection' },
  { input: 'te_unguarded_legacy.py', name: 'pl401', code: 'PL401', settings: legacy },
  // With the TE version unknown the generated code follows the file (legacy here); the modern setting overrides that.
  { input: 'te_unguarded_legacy.py', name: 'pl401-modern', code: 'PL401', settings: modern },
  { input: 'te_unguarded_legacy.py', name: 'pl401-auto', code: 'PL401', same: 'pl401' },
  { input: 'backward_inside.py', name: 'pl301', code: 'PL301', at: 'loss.backward()' },
  { input: 'te_head.py', name: 'revert', code: 'PL201', fix: 'keep-bf16' },
  { input: 'te_head.py', name: 'outside', code: 'PL201', fix: 'head-outside-fp8' },
  { input: 'te_head.py', name: 'outside-legacy', code: 'PL201', fix: 'head-outside-fp8', settings: legacy },
  { input: 'deprecated_api.py', name: 'import', code: 'PL303', at: 'from transformer_engine' },
  { input: 'deprecated_api.py', name: 'autocast', code: 'PL303', at: 'te.fp8_autocast' },
  { input: 'deprecated_api.py', name: 'model-init', code: 'PL303', at: 'te.fp8_model_init' },
  { input: 'deprecated_api.py', name: 'e5m2', code: 'PL304', at: 'fp8_format=Format.E5M2' },
  { input: 'deprecated_api.py', name: 'interval', code: 'PL304', at: 'interval=4' },
  { input: 'compile_recipe.py', name: 'current-scaling', code: 'PL305' },
  { input: 'checkpoint_load.py', name: 'strict', code: 'PL501', at: 'model.load_state_dict' },
  { input: 'checkpoint_load.py', name: 'strict-true', code: 'PL501', at: 'other.load_state_dict' },
  // FP8 post-training quantization: calibrates on the file's val_loader, called after the training loop...
  { input: 'ptq_train.py', name: 'ptq', source: {}, fix: 'ptq-fp8' },
  // ...or, in a model file with no data, takes the calibration batches as a parameter.
  { input: 'ptq_model.py', name: 'ptq', source: {}, fix: 'ptq-fp8' },
  // PL601 on torchao quantize_ without filter_fn: a filter that leaves the lm-head found by role out.
  { input: 'ptq_torchao.py', name: 'filter', code: 'PL601', at: 'self.lm_head', fix: 'ptq-torchao-filter' },
  // PL601 on ModelOpt: the disabling wildcard for the head found by role, after a copied FP8_DEFAULT_CFG (0.47's list
  // form) or inside a literal quant_cfg list; PL603 the calibration bound; PL604 E5M2 -> E4M3; PL606 mto.save.
  { input: 'ptq_modelopt.py', name: 'disable-head', code: 'PL601', at: 'self.decoder', fix: 'ptq-modelopt-disable' },
  { input: 'ptq_modelopt_literal.py', name: 'disable-head', code: 'PL601', at: 'self.output', fix: 'ptq-modelopt-disable' },
  { input: 'ptq_modelopt.py', name: 'calib-size', code: 'PL603', fix: 'ptq-calib-size' },
  { input: 'ptq_modelopt.py', name: 'e4m3', code: 'PL604', fix: 'ptq-e4m3' },
  { input: 'ptq_torchao_e5m2.py', name: 'e4m3', code: 'PL604', fix: 'ptq-e4m3' },
  { input: 'ptq_modelopt.py', name: 'mto-save', code: 'PL606', fix: 'ptq-mto-save' },
  // PL605 (target Ampere): the quantize statement guarded by the GPU's compute capability, BF16 with one line elsewhere.
  { input: 'ptq_modelopt.py', name: 'gpu-guard', code: 'PL605', fix: 'ptq-gpu-guard', settings: { ...MECHANICS_SETTINGS, targetGpu: 'ampere' } },
  { input: 'ptq_torchao.py', name: 'gpu-guard', code: 'PL605', fix: 'ptq-gpu-guard', settings: { ...MECHANICS_SETTINGS, targetGpu: 'ampere' } },
  // PL602 with a validation loader in scope: a forward_loop over 512 of its samples.
  { input: 'ptq_modelopt_nocalib.py', name: 'forward-loop', code: 'PL602', fix: 'ptq-forward-loop' },
];

function findingFor(text: string, findings: Finding[], irLayers: { name: string }[], c: GoldenCase): Finding {
  const matches = findings.filter((f) => f.code === c.code && (!c.at
    || (f.layerIndex !== undefined && irLayers[f.layerIndex].name === c.at)
    || text.slice(f.span.startOffset, f.span.endOffset).startsWith(c.at)
    || text.slice(f.span.startOffset, f.span.endOffset).includes(c.at)));
  assert.ok(matches.length, `no ${c.code} finding at ${c.at ?? 'any place'}; findings: ${findings.map((f) => `${f.code}@${f.span.startLine + 1}`).join(', ')}`);
  return matches[0];
}

async function fixFor(text: string, c: GoldenCase): Promise<Fix> {
  const settings = c.settings ?? MECHANICS_SETTINGS;
  const { ir, findings } = await analyse(text, settings);
  let fixes: Fix[];
  if (c.source) {
    const selection = c.source.selection && {
      startOffset: text.indexOf(c.source.selection[0]),
      endOffset: text.indexOf(c.source.selection[1]) + c.source.selection[1].length,
    };
    fixes = sourceFixOutcome(text, ir, settings, { className: c.source.className, selection, env: c.env }).fixes;
  } else {
    const out = fixOutcome(text, ir, findingFor(text, findings, ir.layers, c), settings, c.env);
    fixes = out.fixes;
    assert.ok(fixes.length, `no fix offered: ${out.refusals.join(' ')}`);
  }
  const fix = c.fix ? fixes.find((f) => f.id.startsWith(c.fix!)) : fixes[0];
  assert.ok(fix, `no fix ${c.fix}; offered: ${fixes.map((f) => f.id).join(', ')}`);
  return fix;
}

describe('fixes: golden outputs', () => {
  for (const c of CASES) {
    it(`${c.input} ${c.name}`, async () => {
      const text = readFileSync(join(FIXTURES, c.input), 'utf8');
      const fix = await fixFor(text, c);
      const out = applyEdits(text, fix.edits);
      const expectedPath = join(FIXTURES, 'expected', `${c.input.replace(/\.py$/, '')}.${c.same ?? c.name}.py`);
      if (process.env.UPDATE_GOLDEN || !existsSync(expectedPath)) writeFileSync(expectedPath, out);
      assert.equal(out, readFileSync(expectedPath, 'utf8'));
      const before = await analyse(text);
      const after = await analyse(out);
      assert.equal(after.errorNodes, before.errorNodes, 'the fix added syntax errors');
      assert.equal(pyCompileError(out), undefined);
    });
  }
});
