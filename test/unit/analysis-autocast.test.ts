import { strict as assert } from 'node:assert';
import { analyze, initParser, py } from './analysis-helpers';

describe('analysis: autocast regions and notable calls', () => {
  before(initParser);

  it('finds both TE autocast APIs, nested calls, and backward inside but not after', () => {
    const ir = analyze(py`
      import torch
      import transformer_engine.pytorch as te
      from transformer_engine.pytorch import fp8_autocast
      from transformer_engine.common.recipe import DelayedScaling, Format
      recipe = DelayedScaling(fp8_format=Format.HYBRID, amax_history_len=16, interval=1)
      def step(model, x, opt):
          with te.fp8_autocast(enabled=True, fp8_recipe=recipe):
              out = model(x)
              for i in range(2):
                  with torch.no_grad():
                      model.probe(x)
              out.sum().backward()
          loss = out.sum()
          loss.backward()
          opt.step()
      def step2(model, x):
          with te.autocast(recipe=recipe):
              y = model(x)
          with fp8_autocast(enabled=False):
              z = model.head(y)
          with transformer_engine.pytorch.fp8_autocast():
              pass
          with torch.autocast("cuda", dtype=torch.bfloat16):
              w = model(x)
    `);
    assert.equal(ir.autocastRegions.length, 4);
    const [r1, r2, r3, r4] = ir.autocastRegions;
    assert.equal(r1.api, 'fp8_autocast');
    assert.equal(r1.args.fp8_recipe, 'recipe');
    assert.equal(r1.disabled, false);
    assert.equal(r1.ownerFunction, 'step');
    assert.ok(r1.calls.some((c) => c.callee === 'model.probe'));
    assert.equal(r1.backwardInside.length, 1);
    assert.equal(r1.backwardInside[0].span.startLine, 11);
    assert.equal(r2.api, 'autocast');
    assert.equal(r2.args.recipe, 'recipe');
    assert.equal(r3.disabled, true);
    assert.equal(r4.api, 'fp8_autocast');
    const bw = ir.calls.filter((c) => c.kind === 'backward');
    assert.equal(bw.length, 2);
    assert.equal(ir.recipes[0].recipe, 'DelayedScaling');
    assert.equal(ir.recipes[0].args.interval, '1');
    assert.ok(ir.recipes[0].argSpans.interval);
    const kinds = ir.calls.map((c) => c.kind);
    assert.ok(kinds.includes('optimizer_step'));
    assert.equal(ir.calls.filter((c) => c.kind === 'te_deprecated').length, 3);
  });

  it('classifies conversion, compile, cast, checks, logging and state-dict calls', () => {
    const ir = analyze(py`
      import torch
      import transformer_engine.pytorch as te
      from transformer_engine.pytorch.fp8 import check_fp8_support
      from torchao.float8 import convert_to_float8_training
      from accelerate import Accelerator
      import logging
      logger = logging.getLogger(__name__)
      def skip_head(mod, fqn):
          return fqn != "lm_head"
      model = build()
      convert_to_float8_training(model, module_filter_fn=skip_head)
      convert_to_float8_training(model)
      acc = Accelerator(mixed_precision="fp8")
      model = torch.compile(model)
      model = model.to(torch.bfloat16)
      model.half()
      emb = model.wte.weight.to(torch.float8_e4m3fn)
      ok, reason = check_fp8_support()
      if te.is_fp8_available():
          logger.info("Running in FP8 mode")
      model.load_state_dict(sd, strict=False)
      opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
      with te.fp8_model_init(enabled=True):
          pass
    `);
    assert.equal(ir.fp8Conversions.length, 3);
    assert.equal(ir.fp8Conversions[0].hasFilter, true);
    assert.equal(ir.fp8Conversions[0].filterExcludesHead, true);
    assert.equal(ir.fp8Conversions[1].hasFilter, false);
    assert.equal(ir.fp8Conversions[2].callee, 'Accelerator');
    const kinds = ir.calls.map((c) => c.kind);
    for (const k of ['compile', 'cast_low_precision', 'float8_cast', 'fp8_check', 'log_precision', 'load_state_dict', 'optimizer_ctor', 'te_deprecated']) {
      assert.ok(kinds.includes(k as never), k);
    }
    assert.equal(ir.calls.filter((c) => c.kind === 'cast_low_precision').length, 2);
    assert.equal(ir.calls.find((c) => c.kind === 'load_state_dict')?.args.strict, 'False');
    assert.ok(ir.calls.some((c) => c.kind === 'te_deprecated' && c.callee === 'transformer_engine.pytorch.fp8'));
  });
});

describe('analysis: code defined inside an FP8 block runs where it is called', () => {
  before(initParser);

  it('a backward in a closure or lambda defined in the block is not inside it', () => {
    const ir = analyze([
      'import torch',
      'import transformer_engine.pytorch as te',
      '',
      'def train(model, x, optimizer):',
      '    with te.autocast(enabled=True):',
      '        loss = model(x).sum()',
      '        def closure():',
      '            loss.backward()',
      '            return loss',
      '        again = lambda: loss.backward()',
      '    optimizer.step(closure)',
      '',
    ].join('\n'));
    assert.equal(ir.autocastRegions.length, 1);
    assert.equal(ir.autocastRegions[0].backwardInside.length, 0);
  });
});

describe('analysis: an FP8 autocast context built first and entered later', () => {
  before(initParser);

  it('fp8_ctx = te.fp8_autocast(...); with fp8_ctx: is a region (Megatron/NeMo style)', () => {
    const ir = analyze([
      'import torch',
      'import transformer_engine.pytorch as te',
      '',
      'def train_step(model, x, recipe):',
      '    fp8_ctx = te.fp8_autocast(enabled=True, fp8_recipe=recipe)',
      '    with fp8_ctx:',
      '        loss = model(x).sum()',
      '        loss.backward()',
      '',
    ].join('\n'));
    assert.equal(ir.autocastRegions.length, 1);
    assert.equal(ir.autocastRegions[0].api, 'fp8_autocast');
    assert.equal(ir.autocastRegions[0].args.fp8_recipe, 'recipe');
    assert.equal(ir.autocastRegions[0].backwardInside.length, 1);
  });

  it('a partial of te.autocast entered by calling it is a region; its own arguments count, not the function', () => {
    const ir = analyze(py`
      import functools, torch
      import transformer_engine.pytorch as te
      fp8_ctx = functools.partial(te.autocast, enabled=True)
      off = functools.partial(te.autocast, enabled=False)
      def step(model, x):
          with fp8_ctx():
              loss = model(x).sum()
              loss.backward()
          with off():
              y = model(x)
    `);
    assert.equal(ir.autocastRegions.length, 2);
    assert.equal(ir.autocastRegions[0].disabled, false);
    assert.equal(ir.autocastRegions[0].args.enabled, 'True');
    assert.equal(ir.autocastRegions[0].backwardInside.length, 1);
    assert.equal(ir.autocastRegions[1].disabled, true);
  });
});
