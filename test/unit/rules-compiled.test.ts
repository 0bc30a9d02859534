/**
 * PL306 (rules/compiled.ts) and its fix (fixes/compiled.ts): a training script that compiles a model training in BF16
 * gets torchao's FP8 through the fallback's fp8_for_compile; quiet where FP8 is there already, another stack owns the
 * layers, the compiled thing is a function, the file does not train, or every layer of the known model would lose.
 */
import * as assert from 'node:assert/strict';
import { DEFAULT_SETTINGS, type PrecisionLensSettings } from '../../common/settings';
import { analyzeTree } from '../../server/src/analysis';
import { applyEdits, fixOutcome } from '../../server/src/fixes';
import { fallbackLacks } from '../../server/src/fixes/fallback';
import { bareStackDirs, stackFor } from '../../server/src/engine/engine';
import { runRules } from '../../server/src/rules';
import type { WorkspaceFacts } from '../../server/src/rules/types';
import { parser, pyCompileError } from './fixes-support';

const SCRIPT = [
  'import torch',
  'from model import GPT',
  '',
  'model = GPT()',
  'optimizer = torch.optim.AdamW(model.parameters(), lr=6e-4)',
  'if compile:',
  '    model = torch.compile(model)  # requires PyTorch 2.0',
  'for it in range(10):',
  '    loss = model(x, y)',
  '    loss.backward()',
  '    optimizer.step()',
  '',
].join('\n');

async function check(text: string, workspace: WorkspaceFacts = {}, settings: PrecisionLensSettings = DEFAULT_SETTINGS) {
  const tree = (await parser()).parse(text)!;
  try {
    const ir = analyzeTree(tree, text);
    return { ir, findings: runRules({ ir, text, settings, workspace }).filter((f) => f.code === 'PL306') };
  } finally {
    tree.delete();
  }
}

describe('PL306: a compiled model that trains in BF16', () => {
  it('fires on the compile call of a training script, with the measured comparison in the explanation', async () => {
    const { findings } = await check(SCRIPT);
    assert.equal(findings.length, 1);
    const [f] = findings;
    assert.equal(f.severity, 'information');
    assert.equal(f.span.startLine, 6);
    assert.equal(f.message, 'model is compiled but trains in BF16; torch.compile(fp8_for_compile(model)) adds torchao FP8, which compiles');
    assert.match(f.explanation!.facts[0], /te\.\* modules run eager between compiled graphs/);
    assert.match(f.explanation!.facts[0], /Measured against compiled BF16 on the NVIDIA H200: nanoGPT 12 x 2048: TE 0\.97-1\.06x, torchao 1\.07-1\.08x; llama2\.c 6 x 4096: TE 1\.27x, torchao 1\.33x/);
    assert.match(f.explanation!.fix!, /turn PL306 off and convert the layers to te\.\* instead/);
  });

  const quiet: [string, string, WorkspaceFacts?, PrecisionLensSettings?][] = [
    ['a function is compiled', SCRIPT.replace('torch.compile(model)', 'torch.compile(train_step)').replace('model = GPT()', 'model = GPT()\ndef train_step(x):\n    return x')],
    ['the decorator form', SCRIPT.replace('    model = torch.compile(model)  # requires PyTorch 2.0', '    pass\n@torch.compile\ndef step(x):\n    return x')],
    ['the file does not train', SCRIPT.replace('    loss.backward()\n    optimizer.step()\n', '    pass\n')],
    ['the file imports Transformer Engine', `import transformer_engine.pytorch as te\n${SCRIPT}`],
    ['te.* layers elsewhere in the workspace', SCRIPT, { anyTeLayers: true }],
    ['another stack converts the model', SCRIPT, { otherStack: 'convert_to_float8_training' }],
    ['the file converts with torchao itself', SCRIPT.replace('if compile:', 'convert_to_float8_training(model)\nif compile:')],
    ['the model is known and FP8 loses on every layer', SCRIPT, { anyFp8Gains: false }],
    ['the target GPU has no FP8', SCRIPT, {}, { ...DEFAULT_SETTINGS, targetGpu: 'ampere' }],
    ['already wrapped', SCRIPT.replace('torch.compile(model)', 'torch.compile(fp8_for_compile(model))')],
  ];
  for (const [what, text, ws, settings] of quiet) {
    it(`quiet when ${what}`, async () => {
      assert.deepEqual((await check(text, ws, settings)).findings.map((f) => f.message), []);
    });
  }

  it('model.compile() (nn.Module.compile, in place): the fix writes fp8_for_compile(model).compile()', async () => {
    const text = SCRIPT.replace('    model = torch.compile(model)  # requires PyTorch 2.0', '    model.compile(mode="max-autotune")');
    const { ir, findings } = await check(text);
    assert.equal(findings.length, 1);
    assert.equal(findings[0].message, 'model is compiled but trains in BF16; fp8_for_compile(model).compile() adds torchao FP8, which compiles');
    const env = { fallbackModule: { importFrom: 'fp8_fallback', path: '/p/fp8_fallback.py', exists: false } };
    const [fix] = fixOutcome(text, ir, findings[0], DEFAULT_SETTINGS, env).fixes;
    const out = applyEdits(text, fix.edits);
    assert.match(out, /^ {4}fp8_for_compile\(model\)\.compile\(mode="max-autotune"\)$/m);
    assert.equal(pyCompileError(out), undefined);
    assert.deepEqual((await check(out)).findings, []);
  });

  it('te.* layers count where they are the script\'s: in its folder or imported by it, not a te.* example elsewhere', async () => {
    const at = (teFiles: string[]) => check(SCRIPT, { anyTeLayers: true, teFiles, path: '/repo/proj/train.py' });
    assert.equal((await at(['/repo/examples/gpt/te_model.py'])).findings.length, 1, 'elsewhere in the monorepo: speaks');
    assert.equal((await at(['/repo/proj/te_model.py'])).findings.length, 0, 'in the script\'s folder: quiet');
    assert.equal((await at(['/repo/proj/nets/te_model.py'])).findings.length, 0, 'below it: quiet');
    assert.equal((await at(['/repo/lib/model.py'])).findings.length, 1, 'a model.py that `from model import` does not reach (another folder)');
    const pkg = SCRIPT.replace('from model import GPT', 'from mylib.nets import GPT');
    assert.equal((await check(pkg, { anyTeLayers: true, teFiles: ['/repo/src/mylib/nets/__init__.py'], path: '/repo/proj/train.py' })).findings.length, 0, 'a package it imports: quiet');
    assert.equal((await check(SCRIPT, { anyTeLayers: true })).findings.length, 0, 'paths unknown: any te.* layer counts');
  });

  it('the predicted loss counts for the model in reach: a small example elsewhere does not silence it', async () => {
    const at = (ws: WorkspaceFacts) => check(SCRIPT, { ...ws, path: '/repo/proj/train.py' });
    assert.equal((await at({ fp8LoseFiles: ['/repo/examples/small/model.py'] })).findings.length, 1, 'a losing model elsewhere');
    assert.equal((await at({ fp8LoseFiles: ['/repo/proj/model.py'] })).findings.length, 0, 'the script\'s own model loses');
    assert.equal((await at({ fp8LoseFiles: ['/repo/proj/model.py'], fp8GainFiles: ['/repo/proj/big.py'] })).findings.length, 1, 'one of its models gains');
  });

  it('the stack fp8_for_compile makes reaches the model the script imports, not a model.py of another folder', () => {
    const ws = { stackImports: { model: 'fp8_for_compile' }, stackDirs: { model: ['/repo/proj'] } };
    assert.equal(stackFor(ws, '/repo/proj/model.py'), 'fp8_for_compile');
    assert.equal(stackFor(ws, '/repo/examples/gpt/model.py'), undefined);
    assert.equal(stackFor({ stackImports: { model: 'fp8_for_compile' } }, '/anywhere/model.py'), 'fp8_for_compile', 'folders unknown: by name');
    const pkg = { stackImports: { pkg: 's', 'pkg.model': 's' }, stackDirs: { pkg: ['/repo/proj'] } };
    assert.equal(stackFor(pkg, '/repo/proj/pkg/__init__.py'), 's', 'the package beside the script');
    assert.equal(stackFor(pkg, '/elsewhere/pkg/model.py'), 's', 'a dotted import names the path itself');
    assert.deepEqual(bareStackDirs([['/repo/proj/train.py', ['model', 'torch', 'torch.nn']], ['/repo/other/train.py', ['model']]]), { model: ['/repo/proj', '/repo/other'], torch: ['/repo/proj'] });
  });

  it('PL305 counts a compile call whose folder holds the recipe\'s file, not one of another project', async () => {
    const recipe = 'from transformer_engine.common.recipe import DelayedScaling, Format\n\nrecipe = DelayedScaling(fp8_format=Format.HYBRID)\n';
    const tree = (await parser()).parse(recipe)!;
    const ir = analyzeTree(tree, recipe);
    tree.delete();
    const pl305 = (workspace: WorkspaceFacts) => runRules({ ir, text: recipe, settings: DEFAULT_SETTINGS, workspace }).filter((f) => f.code === 'PL305').length;
    assert.equal(pl305({ anyCompile: true, compileFiles: ['/repo/proj/train.py'], path: '/repo/proj/nets/model.py' }), 1);
    assert.equal(pl305({ anyCompile: true, compileFiles: ['/repo/other/train.py'], path: '/repo/proj/model.py' }), 0);
    assert.equal(pl305({ anyCompile: true }), 1, 'paths unknown: any compile call counts');
  });

  it('speaks where FP8 is predicted to lose only with convertLosingLayers', async () => {
    const { findings } = await check(SCRIPT, { anyFp8Gains: false }, { ...DEFAULT_SETTINGS, convertLosingLayers: true });
    assert.equal(findings.length, 1);
  });

  it('the fix wraps the argument in place and imports fp8_for_compile from the project module (created once)', async () => {
    const { ir, findings } = await check(SCRIPT);
    const env = { fallbackModule: { importFrom: 'fp8_fallback', path: '/p/fp8_fallback.py', exists: false } };
    const { fixes } = fixOutcome(SCRIPT, ir, findings[0], DEFAULT_SETTINGS, env);
    assert.equal(fixes.length, 1);
    const [fix] = fixes;
    assert.equal(fix.title, 'Compile model with torchao FP8: torch.compile(fp8_for_compile(model)) via fp8_fallback.py, created once for the project');
    assert.equal(fix.safe, false);
    const out = applyEdits(SCRIPT, fix.edits);
    assert.match(out, /^from fp8_fallback import fp8_for_compile$/m);
    assert.match(out, /^ {4}model = torch\.compile\(fp8_for_compile\(model\)\) {2}# requires PyTorch 2\.0$/m);
    assert.equal(out.split('\n').length, SCRIPT.split('\n').length + 1, 'one line added: the import');
    assert.equal(pyCompileError(out), undefined);
    assert.equal(fix.createFiles?.length, 1);
    assert.match(fix.createFiles![0].text, /^def fp8_for_compile\(model, keep=\(\)\):$/m);
    // Applied, the call is a conversion of the file's own: PL306 is gone, and te.* conversions see another stack.
    const after = await check(out);
    assert.deepEqual(after.findings, []);
    assert.equal(after.ir.fp8Conversions[0]?.callee, 'fp8_for_compile');
    assert.equal(after.ir.fp8Conversions[0]?.fallback, true);
    assert.deepEqual(runRules({ ir: after.ir, text: out, settings: DEFAULT_SETTINGS, workspace: {} }).filter((f) => f.code === 'PL401' || f.code === 'PL201'), []);
  });

  it('a project module written before fp8_for_compile existed: refused with what to do, not an import that fails at start', async () => {
    const { ir, findings } = await check(SCRIPT);
    const old = 'def fp8_linear(in_features, out_features, bias=True, **kwargs):\n    pass\n';
    const env = { fallbackModule: { importFrom: 'fp8_fallback', path: '/p/fp8_fallback.py', exists: true, lacks: fallbackLacks(old) } };
    assert.ok(env.fallbackModule.lacks.includes('fp8_for_compile') && !env.fallbackModule.lacks.includes('fp8_linear'));
    const { fixes, refusals } = fixOutcome(SCRIPT, ir, findings[0], DEFAULT_SETTINGS, env);
    assert.deepEqual(fixes, []);
    assert.equal(refusals[0], "No automatic fix: the project's fp8_fallback.py was written before fp8_for_compile existed; delete it and apply the fix again to have it written anew.");
    // The module as this version writes it lacks nothing.
    assert.deepEqual(fallbackLacks(fixOutcome(SCRIPT, ir, findings[0], DEFAULT_SETTINGS, { fallbackModule: { ...env.fallbackModule, exists: false } }).fixes[0].createFiles![0].text), []);
  });

  it('a model sharded before it is compiled: refused, with where the conversion goes instead', async () => {
    const text = SCRIPT.replace('if compile:', 'model = FSDP(model)\nif compile:');
    const { ir, findings } = await check(text);
    const env = { fallbackModule: { importFrom: 'fp8_fallback', path: '/p/fp8_fallback.py', exists: false } };
    const { fixes, refusals } = fixOutcome(text, ir, findings[0], DEFAULT_SETTINGS, env);
    assert.deepEqual(fixes, []);
    assert.equal(refusals[0], 'No automatic fix: the model is sharded (FSDP, line 6) before it is compiled; call fp8_for_compile(model) before sharding it, then compile.');
  });

  it('no fix outside a project (no fallback module to hold fp8_for_compile): the reason is said', async () => {
    const { ir, findings } = await check(SCRIPT);
    const { fixes, refusals } = fixOutcome(SCRIPT, ir, findings[0], DEFAULT_SETTINGS, {});
    assert.deepEqual(fixes, []);
    assert.match(refusals[0], /fp8_for_compile lives in the project's FP8 fallback module/);
  });
});
