/**
 * PL701 (rules/scale.ts) and its fix (fixes/scale.ts): torch's activation checkpoint in a file whose layers run through
 * Transformer Engine recomputes them outside TE's FP8 autocast; the fix calls the fallback's fp8_checkpoint (TE's
 * checkpoint where FP8 runs). Quiet where nothing runs TE, another stack owns the layers, or the call is TE's own.
 */
import * as assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_SETTINGS } from '../../common/settings';
import { applyEdits, fixOutcome } from '../../server/src/fixes';
import { fallbackLacks } from '../../server/src/fixes/fallback';
import { fallbackSource } from '../../server/src/fixes/fallback-source';
import type { WorkspaceFacts } from '../../server/src/rules/types';
import { checkRule, FALLBACK_MODULE, pyCompileError } from './fixes-support';

const MODEL = [
  'import torch',
  'from torch.utils.checkpoint import checkpoint',
  'from fp8_fallback import fp8_linear',
  '',
  '',
  'class Block(torch.nn.Module):',
  '    def __init__(self, d):',
  '        super().__init__()',
  '        self.fc = fp8_linear(d, d)',
  '',
  '    def forward(self, x):',
  '        return x + self.fc(x)',
  '',
  '',
  'class Net(torch.nn.Module):',
  '    def __init__(self, d, n):',
  '        super().__init__()',
  '        self.blocks = torch.nn.ModuleList(Block(d) for _ in range(n))',
  '',
  '    def forward(self, x):',
  '        for block in self.blocks:',
  '            x = checkpoint(block, x, use_reentrant=False)',
  '        return x',
  '',
].join('\n');

const check = (text: string, workspace: WorkspaceFacts = {}) => checkRule('PL701', text, workspace);
const MODULE = FALLBACK_MODULE;

describe('PL701: torch\'s activation checkpoint around te.* layers', () => {
  it('fires on the call as a warning: one sentence with the verdict and the action, the reason in the explanation', async () => {
    const { findings } = await check(MODEL);
    assert.equal(findings.length, 1);
    const [f] = findings;
    assert.equal(f.severity, 'warning');
    assert.equal(f.span.startLine, 21);
    assert.equal(f.message, 'torch\'s checkpoint recomputes te.* layers outside FP8 autocast, in BF16; use fp8_checkpoint (TE\'s checkpoint)');
    assert.ok(f.message.length <= 125);
    assert.match(f.explanation!.facts!.join(' '), /enters the forward's autocast and recipe again/);
  });

  const spellings: [string, string][] = [
    ['torch.utils.checkpoint.checkpoint', MODEL.replace('from torch.utils.checkpoint import checkpoint\n', 'import torch.utils.checkpoint\n').replace('x = checkpoint(', 'x = torch.utils.checkpoint.checkpoint(')],
    ['the module under another name', MODEL.replace('from torch.utils.checkpoint import checkpoint', 'import torch.utils.checkpoint as cp').replace('x = checkpoint(', 'x = cp.checkpoint(')],
    ['te.Linear built directly', MODEL.replace('from fp8_fallback import fp8_linear', 'import transformer_engine.pytorch as te').replace('fp8_linear(d, d)', 'te.Linear(d, d)')],
  ];
  for (const [what, text] of spellings) {
    it(`fires for ${what}`, async () => {
      assert.equal((await check(text)).findings.length, 1);
    });
  }

  const quiet: [string, string, WorkspaceFacts?][] = [
    ['nothing runs TE', MODEL.replace('from fp8_fallback import fp8_linear', '').replace('fp8_linear(d, d)', 'torch.nn.Linear(d, d)')],
    ['another stack owns the layers', MODEL, { otherStack: 'fp8_for_compile' }],
    ['TE\'s own checkpoint', MODEL.replace('from torch.utils.checkpoint import checkpoint', 'import transformer_engine.pytorch as te').replace('x = checkpoint(', 'x = te.distributed.checkpoint(')],
    ['someone else\'s checkpoint', MODEL.replace('from torch.utils.checkpoint import checkpoint', 'from deepspeed.checkpointing import checkpoint')],
    ['already through fp8_checkpoint', MODEL.replace('from torch.utils.checkpoint import checkpoint', 'from fp8_fallback import fp8_checkpoint').replace('x = checkpoint(', 'x = fp8_checkpoint(')],
  ];
  for (const [what, text, ws] of quiet) {
    it(`quiet when ${what}`, async () => {
      assert.deepEqual((await check(text, ws)).findings.map((f) => f.message), []);
    });
  }

  it('the fix renames the callee, keeps the arguments and imports fp8_checkpoint; the result compiles and is quiet', async () => {
    const { ir, findings } = await check(MODEL);
    const { fixes } = fixOutcome(MODEL, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: MODULE });
    assert.equal(fixes.length, 1);
    assert.equal(fixes[0].title, 'Recompute in FP8 with TE\'s checkpoint where FP8 runs: fp8_checkpoint(...) via fp8_fallback');
    assert.equal(fixes[0].safe, false);
    const out = applyEdits(MODEL, fixes[0].edits);
    assert.match(out, /^from fp8_fallback import fp8_checkpoint, fp8_linear$/m);
    assert.match(out, /^ {12}x = fp8_checkpoint\(block, x, use_reentrant=False\)$/m);
    assert.equal(pyCompileError(out), undefined);
    assert.deepEqual((await check(out)).findings, []);
  });

  it('a module written before fp8_checkpoint existed: the fix refuses and says what to do', async () => {
    const { ir, findings } = await check(MODEL);
    const old = { ...MODULE, lacks: fallbackLacks('# precision-lens: fp8 fallback\ndef fp8_linear(*a):\n    pass\n') };
    assert.ok(old.lacks?.includes('fp8_checkpoint'));
    const outcome = fixOutcome(MODEL, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: old });
    assert.equal(outcome.fixes.length, 0);
    assert.match(outcome.refusals.join(' '), /fp8_fallback\.py was written before fp8_checkpoint existed; delete it and apply the fix again/);
  });

  it('a file with its own inline fallback block: the block defines fp8_checkpoint, no import is added', async () => {
    const block = fallbackSource({ api: 'modern', settings: DEFAULT_SETTINGS, teName: 'te', hasTorch: true });
    const text = MODEL.replace('from fp8_fallback import fp8_linear\n', `${block}\n`);
    const { ir, findings } = await check(text);
    assert.equal(findings.length, 1);
    const [fix] = fixOutcome(text, ir, findings[0], DEFAULT_SETTINGS).fixes;
    assert.ok(fix, 'offered');
    const out = applyEdits(text, fix.edits);
    assert.doesNotMatch(out, /import fp8_checkpoint/);
    assert.match(out, /x = fp8_checkpoint\(block, x/);
    assert.equal(pyCompileError(out), undefined);
  });

  it('a training script whose model runs through TE in another file: fires where te.* layers are in reach, not elsewhere', async () => {
    const SCRIPT = [
      'import torch',
      'from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper',
      'from model import GPT',
      '',
      'model = GPT()',
      'model.blocks = torch.nn.ModuleList(checkpoint_wrapper(b) for b in model.blocks)',
      '',
    ].join('\n');
    const inReach = await check(SCRIPT, { path: '/p/train.py', teFiles: ['/p/model.py'] });
    assert.equal(inReach.findings.length, 1);
    assert.match(inReach.findings[0].message, /^checkpoint_wrapper recomputes te\.\* layers/);
    assert.deepEqual((await check(SCRIPT, { path: '/p/train.py', teFiles: ['/q/other.py'] })).findings, []);
    assert.deepEqual((await check(SCRIPT, { path: '/p/train.py' })).findings, [], 'no te.* layers anywhere');
  });

  it('Hugging Face\'s gradient_checkpointing_enable on a model whose layers run through TE: the fix hands the model through fp8_gradient_checkpointing', async () => {
    const SCRIPT = [
      'import torch',
      'from modeling import MyModel',
      '',
      'model = MyModel.from_pretrained("ckpt")',
      'model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})',
      'optimizer = torch.optim.AdamW(model.parameters())',
      '',
    ].join('\n');
    const facts = { path: '/p/train.py', teFiles: ['/p/modeling.py'] };
    const { ir, findings } = await check(SCRIPT, facts);
    assert.deepEqual(findings.map((f) => [f.span.startLine, f.message]), [[4, 'gradient_checkpointing_enable makes the layers recompute te.* in BF16 with torch\'s checkpoint; use fp8_gradient_checkpointing']]);
    const { fixes } = fixOutcome(SCRIPT, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: MODULE });
    assert.equal(fixes[0].title, 'Recompute in FP8 with TE\'s checkpoint where FP8 runs: fp8_gradient_checkpointing(model) via fp8_fallback');
    const out = applyEdits(SCRIPT, fixes[0].edits);
    assert.match(out, /^fp8_gradient_checkpointing\(model\)\.gradient_checkpointing_enable\(gradient_checkpointing_kwargs=\{"use_reentrant": False\}\)$/m);
    assert.match(out, /^from fp8_fallback import fp8_gradient_checkpointing$/m);
    assert.equal(pyCompileError(out), undefined);
    assert.deepEqual((await check(out, facts)).findings, [], 'handed through: quiet');
    assert.deepEqual((await check(SCRIPT, { path: '/p/train.py' })).findings, [], 'a library model, no te.* layers: quiet');
  });

  describe('torch\'s checkpoint_wrapper without checkpoint_fn (FSDP\'s activation checkpointing)', () => {
    const WRAPPED = MODEL.replace('from torch.utils.checkpoint import checkpoint',
      'from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper')
      .replace('torch.nn.ModuleList(Block(d) for _ in range(n))', 'torch.nn.ModuleList(checkpoint_wrapper(Block(d)) for _ in range(n))')
      .replace('x = checkpoint(block, x, use_reentrant=False)', 'x = block(x)');

    it('fires on the wrapper call, saying to pass checkpoint_fn', async () => {
      const { findings } = await check(WRAPPED);
      assert.equal(findings.length, 1);
      assert.equal(findings[0].span.startLine, 17);
      assert.equal(findings[0].message, 'checkpoint_wrapper recomputes te.* layers outside FP8 autocast, in BF16; pass checkpoint_fn=fp8_checkpoint (TE\'s checkpoint)');
    });

    const quiet: [string, string][] = [
      ['checkpoint_fn is given', WRAPPED.replace('checkpoint_wrapper(Block(d))', 'checkpoint_wrapper(Block(d), checkpoint_fn=te_checkpoint)')],
      ['a **kwargs splat may give it', WRAPPED.replace('checkpoint_wrapper(Block(d))', 'checkpoint_wrapper(Block(d), **ac_kwargs)')],
      ['another library\'s checkpoint_wrapper', WRAPPED.replace('from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import', 'from my_ac import')],
    ];
    for (const [what, text] of quiet) {
      it(`quiet when ${what}`, async () => {
        assert.deepEqual((await check(text)).findings.map((f) => f.message), []);
      });
    }

    const impls: [string, string, string][] = [
      ['the default (NO_REENTRANT)', 'checkpoint_wrapper(Block(d))', 'checkpoint_wrapper(Block(d), checkpoint_fn=fp8_checkpoint, use_reentrant=False)'],
      ['CheckpointImpl.REENTRANT', 'checkpoint_wrapper(Block(d), checkpoint_impl=CheckpointImpl.REENTRANT)', 'checkpoint_wrapper(Block(d), checkpoint_impl=CheckpointImpl.REENTRANT, checkpoint_fn=fp8_checkpoint, use_reentrant=True)'],
      ['a trailing comma', 'checkpoint_wrapper(Block(d),)', 'checkpoint_wrapper(Block(d), checkpoint_fn=fp8_checkpoint, use_reentrant=False)'],
    ];
    for (const [what, before, after] of impls) {
      it(`the fix passes checkpoint_fn=fp8_checkpoint with the use_reentrant of ${what}; the result compiles and is quiet`, async () => {
        const text = WRAPPED.replace('checkpoint_wrapper(Block(d))', before);
        const { ir, findings } = await check(text);
        const { fixes } = fixOutcome(text, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: MODULE });
        assert.equal(fixes[0].title, 'Recompute in FP8 with TE\'s checkpoint where FP8 runs: checkpoint_fn=fp8_checkpoint via fp8_fallback');
        const out = applyEdits(text, fixes[0].edits);
        assert.ok(out.includes(after), out);
        assert.match(out, /^from fp8_fallback import fp8_checkpoint, fp8_linear$/m);
        assert.equal(pyCompileError(out), undefined);
        assert.deepEqual((await check(out)).findings, []);
      });
    }

    it('checkpoint_impl chosen at run time: the fix refuses and says what to pass', async () => {
      const text = WRAPPED.replace('checkpoint_wrapper(Block(d))', 'checkpoint_wrapper(Block(d), checkpoint_impl=impl)');
      const { ir, findings } = await check(text);
      const outcome = fixOutcome(text, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: MODULE });
      assert.equal(outcome.fixes.length, 0);
      assert.match(outcome.refusals.join(' '), /checkpoint_impl=impl is chosen at run time; pass checkpoint_fn=fp8_checkpoint and the use_reentrant it means by hand/);
    });
  });

  it('checkpoint_sequential: fires with its own action; the fix calls fp8_checkpoint_sequential with the same arguments', async () => {
    const text = MODEL.replace('from torch.utils.checkpoint import checkpoint', 'import torch.utils.checkpoint as cp')
      .replace('        for block in self.blocks:\n            x = checkpoint(block, x, use_reentrant=False)\n', '        x = cp.checkpoint_sequential(self.blocks, 2, x, use_reentrant=False)\n');
    const { ir, findings } = await check(text);
    assert.deepEqual(findings.map((f) => f.message), ['torch\'s checkpoint_sequential recomputes te.* layers outside FP8 autocast, in BF16; use fp8_checkpoint_sequential']);
    const { fixes } = fixOutcome(text, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: MODULE });
    assert.equal(fixes[0].title, 'Recompute in FP8 with TE\'s checkpoint where FP8 runs: fp8_checkpoint_sequential(...) via fp8_fallback');
    const out = applyEdits(text, fixes[0].edits);
    assert.ok(out.includes('        x = fp8_checkpoint_sequential(self.blocks, 2, x, use_reentrant=False)\n'), out);
    assert.match(out, /^from fp8_fallback import fp8_checkpoint_sequential, fp8_linear$/m);
    assert.equal(pyCompileError(out), undefined);
    assert.deepEqual((await check(out)).findings, []);
  });

  describe('FSDP\'s apply_activation_checkpointing and the wrapper bound with partial (llama-recipes, accelerate)', () => {
    const FSDP_AC = MODEL.replace('from torch.utils.checkpoint import checkpoint\n', [
      'from functools import partial',
      'from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (',
      '    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,',
      ')',
      '',
    ].join('\n')).replace('x = checkpoint(block, x, use_reentrant=False)', 'x = block(x)') + [
      '',
      '',
      'def apply_ac(model):',
      '    wrapper = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)',
      '    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper, check_fn=lambda m: isinstance(m, Block))',
      '',
    ].join('\n');

    it('fires on the partial, not on the call that is given it', async () => {
      const { findings } = await check(FSDP_AC);
      assert.deepEqual(findings.map((f) => [f.span.startLine, f.message]), [
        [29, 'checkpoint_wrapper recomputes te.* layers outside FP8 autocast, in BF16; pass checkpoint_fn=fp8_checkpoint (TE\'s checkpoint)'],
      ]);
      assert.match(findings[0].explanation!.facts![0], /^partial\(checkpoint_wrapper, \.\.\.\) without checkpoint_fn/);
    });

    const partials: [string, string, string][] = [
      ['NO_REENTRANT', 'partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)', 'partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT, checkpoint_fn=fp8_checkpoint, use_reentrant=False)'],
      ['REENTRANT given by position', 'partial(checkpoint_wrapper, None, CheckpointImpl.REENTRANT)', 'partial(checkpoint_wrapper, None, CheckpointImpl.REENTRANT, checkpoint_fn=fp8_checkpoint, use_reentrant=True)'],
      ['functools.partial, the default impl', 'functools.partial(checkpoint_wrapper)', 'functools.partial(checkpoint_wrapper, checkpoint_fn=fp8_checkpoint, use_reentrant=False)'],
    ];
    for (const [what, before, after] of partials) {
      it(`the fix gives the partial checkpoint_fn=fp8_checkpoint (${what}); the result compiles and is quiet`, async () => {
        let text = FSDP_AC.replace('partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)', before);
        if (before.startsWith('functools.')) text = `import functools\n${text}`;
        const { ir, findings } = await check(text);
        assert.equal(findings.length, 1);
        const { fixes } = fixOutcome(text, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: MODULE });
        const out = applyEdits(text, fixes[0].edits);
        assert.ok(out.includes(after), out);
        assert.equal(pyCompileError(out), undefined);
        assert.deepEqual((await check(out)).findings, []);
      });
    }

    const APPLY_DEFAULT = FSDP_AC.replace('    wrapper = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)\n', '')
      .replace('checkpoint_wrapper_fn=wrapper, ', '');
    it('apply_activation_checkpointing with its default wrapper fires on the call; the fix gives it TE\'s checkpoint', async () => {
      const { ir, findings } = await check(APPLY_DEFAULT);
      assert.equal(findings.length, 1);
      assert.equal(findings[0].message, 'apply_activation_checkpointing recomputes te.* layers outside FP8 autocast, in BF16; wrap with checkpoint_fn=fp8_checkpoint');
      assert.ok(findings[0].message.length <= 125);
      const { fixes } = fixOutcome(APPLY_DEFAULT, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: MODULE });
      assert.equal(fixes[0].title, 'Recompute in FP8 with TE\'s checkpoint where FP8 runs: checkpoint_wrapper_fn with checkpoint_fn=fp8_checkpoint via fp8_fallback');
      const out = applyEdits(APPLY_DEFAULT, fixes[0].edits);
      assert.ok(out.includes('apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block), checkpoint_wrapper_fn=partial(checkpoint_wrapper, checkpoint_fn=fp8_checkpoint, use_reentrant=False))'), out);
      assert.equal(pyCompileError(out), undefined);
      assert.deepEqual((await check(out)).findings, []);
    });

    it('given torch\'s bare checkpoint_wrapper: the fix replaces it; with nothing imported, it imports partial and the wrapper', async () => {
      const text = APPLY_DEFAULT.replace('apply_activation_checkpointing(model, ', 'apply_activation_checkpointing(model, checkpoint_wrapper_fn=checkpoint_wrapper, ');
      const { ir, findings } = await check(text);
      assert.equal(findings.length, 1);
      const out = applyEdits(text, fixOutcome(text, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: MODULE }).fixes[0].edits);
      assert.ok(out.includes('apply_activation_checkpointing(model, checkpoint_wrapper_fn=partial(checkpoint_wrapper, checkpoint_fn=fp8_checkpoint, use_reentrant=False), check_fn='), out);
      assert.deepEqual((await check(out)).findings, []);

      const bare = 'import torch\nimport torch.distributed.algorithms._checkpoint.checkpoint_wrapper as ac\nfrom fp8_fallback import fp8_linear\n\n\ndef wrap(model):\n    model.fc = fp8_linear(8, 8)\n    ac.apply_activation_checkpointing(model)\n';
      const b = await check(bare);
      assert.equal(b.findings.length, 1);
      const outBare = applyEdits(bare, fixOutcome(bare, b.ir, b.findings[0], DEFAULT_SETTINGS, { fallbackModule: MODULE }).fixes[0].edits);
      assert.ok(outBare.includes('ac.apply_activation_checkpointing(model, checkpoint_wrapper_fn=partial(ac.checkpoint_wrapper, checkpoint_fn=fp8_checkpoint, use_reentrant=False))'), outBare);
      assert.match(outBare, /^from functools import partial$/m);
      assert.equal(pyCompileError(outBare), undefined);
      assert.deepEqual((await check(outBare)).findings, []);
    });

    const quiet: [string, string][] = [
      ['the partial is given checkpoint_fn', FSDP_AC.replace('checkpoint_impl=CheckpointImpl.NO_REENTRANT)', 'checkpoint_impl=CheckpointImpl.NO_REENTRANT, checkpoint_fn=te_checkpoint)')],
      ['partial binds another function', FSDP_AC.replace('partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)', 'partial(my_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)')],
      ['apply_activation_checkpointing is given kwargs by splat', APPLY_DEFAULT.replace('check_fn=lambda m: isinstance(m, Block))', '**ac_kwargs)')],
      ['another library\'s partial', FSDP_AC.replace('from functools import partial', 'from mylib import partial')],
    ];
    for (const [what, text] of quiet) {
      it(`quiet when ${what}`, async () => {
        assert.deepEqual((await check(text)).findings.map((f) => f.message), []);
      });
    }

    it('a partial whose name is taken by something else: the apply fix refuses and says what to pass', async () => {
      const text = APPLY_DEFAULT.replace('from functools import partial\n', 'from mylib import partial\n');
      const { ir, findings } = await check(text);
      assert.equal(findings.length, 1);
      const outcome = fixOutcome(text, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: MODULE });
      assert.equal(outcome.fixes.length, 0);
      assert.match(outcome.refusals.join(' '), /partial names something else in this file; pass checkpoint_wrapper_fn=functools\.partial\(checkpoint_wrapper, checkpoint_fn=fp8_checkpoint, use_reentrant=False\) by hand/);
    });
  });

  describe('PL702: torchao float8 all-gather with FSDP1', () => {
    const FSDP1 = [
      'import torch',
      'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP',
      'from torchao.float8 import Float8LinearConfig, convert_to_float8_training',
      '',
      '',
      'def build(model):',
      '    config = Float8LinearConfig(enable_fsdp_float8_all_gather=True, force_recompute_fp8_weight_in_bwd=True)',
      '    convert_to_float8_training(model, config=config)',
      '    return FSDP(model, use_orig_params=True)',
      '',
    ].join('\n');
    const pl702 = (text: string) => checkRule('PL702', text);

    it('an error on the config, FSDP1\'s wrap as evidence', async () => {
      const { findings } = await pl702(FSDP1);
      assert.equal(findings.length, 1);
      assert.equal(findings[0].severity, 'error');
      assert.equal(findings[0].span.startLine, 6);
      assert.equal(findings[0].message, 'float8 all-gather needs FSDP2 (fully_shard) and this file shards with FSDP1; turn it off or move to fully_shard');
      assert.deepEqual(findings[0].related?.map((r) => r.span.startLine), [8]);
    });

    const quiet: [string, string][] = [
      ['FSDP2 shards (fully_shard)', FSDP1.replace('from torch.distributed.fsdp import FullyShardedDataParallel as FSDP', 'from torch.distributed.fsdp import fully_shard').replace('return FSDP(model, use_orig_params=True)', 'return fully_shard(model)')],
      ['the flag is off', FSDP1.replace('enable_fsdp_float8_all_gather=True', 'enable_fsdp_float8_all_gather=False')],
      ['the flag is not a literal', FSDP1.replace('enable_fsdp_float8_all_gather=True', 'enable_fsdp_float8_all_gather=args.fp8_all_gather')],
      ['another library\'s FSDP', FSDP1.replace('from torch.distributed.fsdp import FullyShardedDataParallel as FSDP', 'from fairscale.nn import FullyShardedDataParallel as FSDP')],
    ];
    for (const [what, text] of quiet) {
      it(`quiet when ${what}`, async () => {
        assert.deepEqual((await pl702(text)).findings.map((f) => f.message), []);
      });
    }

    it('fires for torch.distributed.fsdp.FullyShardedDataParallel written out', async () => {
      const text = FSDP1.replace('from torch.distributed.fsdp import FullyShardedDataParallel as FSDP', 'import torch.distributed.fsdp').replace('return FSDP(', 'return torch.distributed.fsdp.FullyShardedDataParallel(');
      assert.equal((await pl702(text)).findings.length, 1);
    });

    it('across files: the config here, FSDP1 in a file of its folder or one it imports; quiet for another project\'s', async () => {
      const config = FSDP1.replace('from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n', '').replace('    return FSDP(model, use_orig_params=True)', '    return model');
      const facts = (fsdp1Files: string[]): WorkspaceFacts => ({ path: '/p/train/float8_setup.py', fsdp1Files: [...fsdp1Files, '/p/train/float8_setup.py'].sort() });
      const beside = await checkRule('PL702', config, facts(['/p/train/train.py']));
      assert.deepEqual(beside.findings.map((f) => f.message), ['float8 all-gather needs FSDP2 (fully_shard) and train.py shards with FSDP1; turn it off or move to fully_shard']);
      assert.match(beside.findings[0].explanation!.facts.join(' '), /\/p\/train\/train\.py wraps a model with FullyShardedDataParallel \(FSDP1\)/);
      assert.deepEqual((await checkRule('PL702', config, facts(['/p/other/train.py']))).findings, []);
      assert.deepEqual((await checkRule('PL702', config, { path: '/p/train/float8_setup.py' })).findings, []);
      // The config imports the module that shards (`from dist.shard import wrap`): in reach though in another folder.
      const importing = `from dist.shard import wrap\n${config}`;
      assert.equal((await checkRule('PL702', importing, facts(['/p/dist/shard.py']))).findings.length, 1);
    });

    it('the fix turns the flag off, safe, and the file is quiet after', async () => {
      const { ir, findings } = await pl702(FSDP1);
      const { fixes } = fixOutcome(FSDP1, ir, findings[0], DEFAULT_SETTINGS);
      assert.equal(fixes.length, 1);
      assert.equal(fixes[0].safe, true);
      const out = applyEdits(FSDP1, fixes[0].edits);
      assert.match(out, /Float8LinearConfig\(enable_fsdp_float8_all_gather=False, force_recompute_fp8_weight_in_bwd=True\)/);
      assert.equal(pyCompileError(out), undefined);
      assert.deepEqual((await pl702(out)).findings, []);
    });
  });

  describe('PL703: float8 all-gather without precomputed scales', () => {
    const TRAIN = readFileSync(join(__dirname, '..', 'fixtures', 'messages', 'float8_fsdp2_train.py'), 'utf8');
    const pl703 = (text: string) => checkRule('PL703', text);

    it('information on the optimizer step, the config as evidence', async () => {
      const { findings } = await pl703(TRAIN);
      assert.equal(findings.length, 1);
      assert.equal(findings[0].severity, 'information');
      assert.equal(TRAIN.split('\n')[findings[0].span.startLine].trim(), 'optimizer.step()');
      assert.equal(findings[0].message, 'each float8 weight all-reduces its own scale; precompute_float8_dynamic_scale_for_fsdp(model) after this step does one');
      assert.deepEqual(findings[0].related?.map((r) => TRAIN.split('\n')[r.span.startLine].trim()), ['config = Float8LinearConfig(enable_fsdp_float8_all_gather=True)']);
    });

    const quiet: [string, string][] = [
      ['the scales are precomputed', TRAIN.replace('        optimizer.zero_grad()', '        precompute_float8_dynamic_scale_for_fsdp(model)\n        optimizer.zero_grad()')],
      ['float8 all-gather is off', TRAIN.replace('enable_fsdp_float8_all_gather=True', 'enable_fsdp_float8_all_gather=False')],
      ['FSDP1 shards (PL702 says it)', TRAIN.replace('from torch.distributed.fsdp import fully_shard', 'from torch.distributed.fsdp import FullyShardedDataParallel as FSDP').replace('fully_shard(model)', 'model = FSDP(model)')],
      ['no optimizer step in the file', TRAIN.replace('        optimizer.step()\n', '')],
    ];
    for (const [what, text] of quiet) {
      it(`quiet when ${what}`, async () => {
        assert.deepEqual((await pl703(text)).findings.map((f) => f.message), []);
      });
    }

    it('across files: the config in a file of its folder or one it imports; quiet where a file in reach precomputes or shards with FSDP1', async () => {
      const loop = TRAIN.replace(/^.*Float8LinearConfig.*$/gm, '').replace(/^.*convert_to_float8_training.*$/gm, '');
      assert.ok(!/Float8LinearConfig|convert_to_float8_training/.test(loop));
      const facts = (extra: WorkspaceFacts): WorkspaceFacts => ({ path: '/p/train.py', allGatherFiles: ['/p/float8_setup.py'], ...extra });
      const hit = await pl703(loop).then(() => checkRule('PL703', loop, facts({})));
      assert.equal(hit.findings.length, 1);
      assert.equal(loop.split('\n')[hit.findings[0].span.startLine].trim(), 'optimizer.step()');
      assert.match(hit.findings[0].explanation!.facts[0], /^\/p\/float8_setup\.py turns torchao's float8 all-gather on/);
      assert.deepEqual((await checkRule('PL703', loop, facts({ precomputeFiles: ['/p/hooks.py'] }))).findings, []);
      assert.deepEqual((await checkRule('PL703', loop, facts({ fsdp1Files: ['/p/shard.py'] }))).findings, []);
      assert.deepEqual((await checkRule('PL703', loop, { path: '/p/train.py', allGatherFiles: ['/q/float8_setup.py'] })).findings, []);
    });

    it('the fix calls it after the step with the converted model and imports it; the result compiles and is quiet', async () => {
      const { ir, findings } = await pl703(TRAIN);
      const { fixes } = fixOutcome(TRAIN, ir, findings[0], DEFAULT_SETTINGS);
      assert.equal(fixes.length, 1);
      assert.equal(fixes[0].title, 'Precompute the float8 scales in one all-reduce: precompute_float8_dynamic_scale_for_fsdp(model) after the step');
      const out = applyEdits(TRAIN, fixes[0].edits);
      assert.ok(out.includes('        optimizer.step()\n        precompute_float8_dynamic_scale_for_fsdp(model)\n        optimizer.zero_grad()\n'), out);
      assert.match(out, /^from torchao\.float8 import precompute_float8_dynamic_scale_for_fsdp$/m);
      assert.equal(pyCompileError(out), undefined);
      assert.deepEqual((await pl703(out)).findings, []);
    });

    it('refuses, saying why, where the step shares its line with a condition or the model is converted elsewhere', async () => {
      const oneLine = TRAIN.replace('        optimizer.step()', '        if step % 2: optimizer.step()');
      const a = await pl703(oneLine);
      assert.match(fixOutcome(oneLine, a.ir, a.findings[0], DEFAULT_SETTINGS).refusals.join(' '), /the optimizer step is not a statement of its own/);
      const elsewhere = TRAIN.replace('    convert_to_float8_training(model, config=config)\n', '');
      const b = await pl703(elsewhere);
      assert.match(fixOutcome(elsewhere, b.ir, b.findings[0], DEFAULT_SETTINGS).refusals.join(' '), /the model converted with convert_to_float8_training is not in this file/);
    });
  });
});
