/**
 * "Wrap the training step in FP8 autocast" on training scripts that already have their own autocast (issue 21): the
 * FP8 context goes inside it, so that its dtype stays (nanoGPT's and llama2.c's `ctx`, an inline torch.autocast or
 * torch.cuda.amp.autocast, accelerate's accelerator.autocast()); backward() inside the script's block stays outside
 * the FP8 one; evaluation loops and blocks no loop differentiates are left alone. Every result compiles.
 */
import * as assert from 'node:assert/strict';
import { applyEdits, sourceFixes, type FallbackModule } from '../../server/src/fixes';
import { MECHANICS_SETTINGS } from './fixes-support';
import { analyse, pyCompileError } from './fixes-support';

const MODULE: FallbackModule = { importFrom: 'fp8_fallback', path: '/ws/fp8_fallback.py', exists: true };

async function wrapped(body: string): Promise<string | undefined> {
  const text = `import torch\nfrom contextlib import nullcontext\n\n${body}`;
  const { ir } = await analyse(text);
  const fix = sourceFixes(text, ir, MECHANICS_SETTINGS, { env: { fallbackModule: MODULE } }).find((f) => f.id === 'wrap-training-step');
  if (!fix) return undefined;
  const out = applyEdits(text, fix.edits);
  assert.equal(pyCompileError(out), undefined, out);
  return out;
}

describe('fixes: the FP8 context inside the training script\'s own autocast', () => {
  it('llama2.c: a ctx bound over several lines, with gradient accumulation and a scaler', async () => {
    const out = await wrapped([
      'ctx = (', '    nullcontext()', '    if device_type == "cpu"', '    else torch.amp.autocast(device_type=device_type, dtype=ptdtype)', ')',
      'while True:',
      '    for micro_step in range(gradient_accumulation_steps):',
      '        with ctx:',
      '            logits = model(X, Y)',
      '            loss = raw_model.last_loss',
      '            loss = loss / gradient_accumulation_steps',
      '        X, Y = next(train_batch_iter)',
      '        scaler.scale(loss).backward()',
      '    scaler.step(optimizer)',
      '    scaler.update()',
      '',
    ].join('\n'));
    assert.ok(out);
    assert.match(out, /^ {8}with ctx, fp8_autocast_context\(inside_autocast=True\):\n {12}logits = model\(X, Y\)$/m);
    assert.match(out, /^ {8}scaler\.scale\(loss\)\.backward\(\)$/m);
  });

  it('an inline torch.autocast, torch.cuda.amp.autocast and accelerator.autocast(); a with of several items', async () => {
    for (const header of ['torch.autocast("cuda", dtype=torch.bfloat16)', 'torch.cuda.amp.autocast()', 'accelerator.autocast()', 'model.no_sync(), ctx']) {
      const out = await wrapped([
        'ctx = torch.amp.autocast(device_type="cuda", dtype=torch.bfloat16)',
        'for x, y in loader:',
        `    with ${header}:`,
        '        loss = model(x, y)',
        '    loss.backward()',
        '    optimizer.step()',
        '    optimizer.zero_grad()',
        '',
      ].join('\n'));
      assert.ok(out, header);
      assert.ok(out.includes(`    with ${header}, fp8_autocast_context(inside_autocast=True):\n`), out);
      assert.match(out, /^ {4}loss\.backward\(\)$/m);
    }
  });

  it('backward() inside the script\'s autocast block: the FP8 context goes around the forward statements only', async () => {
    const out = await wrapped([
      'for x, y in loader:',
      '    with torch.autocast("cuda", dtype=torch.bfloat16):',
      '        logits = model(x)',
      '        loss = criterion(logits, y)',
      '        loss.backward()',
      '    optimizer.step()',
      '',
    ].join('\n'));
    assert.ok(out);
    assert.match(out, /^ {4}with torch\.autocast\("cuda", dtype=torch\.bfloat16\):\n {8}with fp8_autocast_context\(inside_autocast=True\):\n {12}logits = model\(x\)\n {12}loss = criterion\(logits, y\)\n {8}loss\.backward\(\)$/m);
  });

  it('leaves evaluation (no_grad) and loops that never differentiate alone', async () => {
    const out = await wrapped([
      'ctx = nullcontext() if device_type == "cpu" else torch.amp.autocast(device_type="cuda", dtype=torch.bfloat16)',
      '@torch.no_grad()',
      'def estimate():',
      '    for k in range(10):',
      '        with ctx:',
      '            logits, loss = model(X, Y)',
      'def evaluate():',
      '    with torch.no_grad():',
      '        for batch in val:',
      '            with ctx:',
      '                out = model(batch)',
      'for it in range(100):',
      '    with ctx:',
      '        logits, loss = model(X, Y)',
      '    loss.backward()',
      '    optimizer.step()',
      '',
    ].join('\n'));
    assert.ok(out);
    assert.equal(out.match(/fp8_autocast_context\(inside_autocast=True\)/g)?.length, 1, out);
    assert.match(out, /^for it in range\(100\):\n {4}with ctx, fp8_autocast_context\(inside_autocast=True\):$/m);
  });

  it('a step already in FP8 autocast is not wrapped again; a ctx bound to something else is not an autocast', async () => {
    assert.equal(await wrapped([
      'import transformer_engine.pytorch as te',
      'for x in loader:',
      '    with torch.autocast("cuda", dtype=torch.bfloat16), te.autocast(enabled=True):',
      '        loss = model(x)',
      '    loss.backward()',
      '    optimizer.step()',
      '',
    ].join('\n')), undefined);
    const out = await wrapped([
      'ctx = open("log.txt", "w")',
      'for x in loader:',
      '    with ctx:',
      '        loss = model(x)',
      '    loss.backward()',
      '    optimizer.step()',
      '',
    ].join('\n'));
    // Not the script's autocast: the usual wrap (FP8 context with its own BF16 autocast) around the forward.
    assert.ok(out);
    assert.doesNotMatch(out, /inside_autocast/);
  });
});
