/**
 * One fallback module per project (issue 10): on a minGPT-style model.py + train.py, "Convert N layers in this file
 * to FP8 (with fallback)" converts the layers, extends the class tests (weight init, optimizer groups), imports the
 * project's module and creates it; "Wrap the training step" in train.py then imports the same module instead of
 * pasting a second copy. The three files are golden (test/fixtures/fixes/expected/project-<api>/), compiled here and
 * trained on the CPU by test/python/test_fallback_project.py (no TE, and a fake TE of each API).
 * UPDATE_GOLDEN=1 rewrites them.
 */
import * as assert from 'node:assert/strict';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { locateFallbackModule } from '../../server/src/engine/fallback-location';
import { applyEdits, sourceFixes, type FallbackModule, type Fix } from '../../server/src/fixes';
import { analyse, FIXTURES, pyCompileError, settingsWith } from './fixes-support';

const PROJECT = join(FIXTURES, 'project');
const ROOT = '/ws/project';

function golden(dir: string, name: string, actual: string): void {
  const file = join(dir, name);
  if (process.env.UPDATE_GOLDEN) {
    mkdirSync(dir, { recursive: true });
    writeFileSync(file, actual);
  }
  assert.ok(existsSync(file), `${file} missing (UPDATE_GOLDEN=1 writes it)`);
  assert.equal(actual, readFileSync(file, 'utf8'), `${name} differs from its golden file`);
}

async function sourceFix(text: string, api: 'modern' | 'legacy', fallbackModule: FallbackModule, id: string): Promise<Fix> {
  const settings = settingsWith({ apiVersion: api });
  const { ir } = await analyse(text, settings);
  const fix = sourceFixes(text, ir, settings, { env: { fallbackModule } }).find((f) => f.id === id);
  assert.ok(fix, `${id} offered`);
  return fix;
}

describe('fixes: one FP8 fallback module per project', () => {
  for (const api of ['modern', 'legacy'] as const) {
    it(`${api} TE API: convert model.py and wrap train.py; both import one module, created once`, async () => {
      const model = readFileSync(join(PROJECT, 'model.py'), 'utf8');
      const train = readFileSync(join(PROJECT, 'train.py'), 'utf8');
      const where = (exists: boolean, file: string) => locateFallbackModule(join(ROOT, file), [ROOT], 'fp8_fallback', () => exists)!;
      assert.deepEqual(where(false, 'model.py'), { importFrom: 'fp8_fallback', path: join(ROOT, 'fp8_fallback.py'), exists: false });

      const convert = await sourceFix(model, api, where(false, 'model.py'), 'convert-all:file');
      assert.equal(convert.title, 'Convert 7 layers in this file to FP8 (with fallback; fusing 1 norm into te.LayerNormLinear; extending 4 class tests; skipped 3: 2 embedding, lm-head)');
      assert.equal(convert.createFiles?.length, 1);
      assert.equal(convert.createFiles![0].path, join(ROOT, 'fp8_fallback.py'));
      const converted = applyEdits(model, convert.edits);
      assert.doesNotMatch(converted, /^\s*(import|from) transformer_engine/m, 'no TE import in the model file');
      assert.match(converted, /^from fp8_fallback import TE_LAYERNORM, TE_LAYERNORM_LINEAR, TE_LINEAR, fp8_fuse_norm, fp8_layernorm, fp8_linear$/m);

      // train.py finds the module model.py created: one import, no second copy, no second mode line.
      const wrap = await sourceFix(train, api, where(true, 'train.py'), 'wrap-training-step');
      assert.equal(wrap.createFiles, undefined);
      const wrapped = applyEdits(train, wrap.edits);
      assert.match(wrapped, /^from fp8_fallback import fp8_autocast_context$/m);
      assert.doesNotMatch(wrapped, /precision-lens: fp8 fallback/);

      const dir = join(FIXTURES, 'expected', `project-${api}`);
      golden(dir, 'model.py', converted);
      golden(dir, 'train.py', wrapped);
      golden(dir, 'fp8_fallback.py', convert.createFiles![0].text);
      for (const [name, text] of [['model.py', converted], ['train.py', wrapped], ['fp8_fallback.py', convert.createFiles![0].text]]) {
        assert.equal(pyCompileError(text, name), undefined, name);
      }

      // A second pass has nothing left to do: every layer and the training step go through the module.
      const settings = settingsWith({ apiVersion: api });
      const again = await analyse(converted, settings);
      const second = sourceFixes(converted, again.ir, settings, { env: { fallbackModule: where(true, 'model.py') } }).map((f) => f.id);
      assert.ok(!second.includes('convert-all:file') && !second.includes('insert-wrapper'), second.join());
      const trainAgain = await analyse(wrapped, settings);
      assert.equal(trainAgain.ir.autocastRegions.length, 1, 'the fallback context is an FP8 autocast region');
      assert.equal(trainAgain.ir.autocastRegions[0].api, 'fallback');
    });
  }

  it('PL301 sees backward() inside the fallback context, imported or inline', async () => {
    const body = 'model = fp8_linear(64, 64)\nfor _ in range(2):\n    with fp8_autocast_context():\n        loss = model(torch.randn(8, 64)).sum()\n        loss.backward()\n';
    const imported = await analyse(`import torch\nfrom fp8_fallback import fp8_autocast_context, fp8_linear\n\n${body}`);
    assert.deepEqual(imported.findings.map((f) => f.code), ['PL301']);
    assert.equal(imported.ir.layers[0].viaFallback, true, 'a factory-built layer is converted already (no PL101)');
    const inline = await analyse(`import torch\n\ndef fp8_autocast_context(enabled=True, recipe=None):\n    return torch.autocast("cpu")\n\n${body.replace('model = fp8_linear(64, 64)', 'model = torch.nn.Linear(64, 64)')}`);
    assert.ok(inline.findings.some((f) => f.code === 'PL301'), inline.findings.map((f) => f.code).join());
  });

  it('the e2e workspace (test/e2e/workspace/mingpt) converts the same files', () => {
    for (const name of ['model.py', 'train.py']) {
      assert.equal(readFileSync(join(__dirname, '..', 'e2e', 'workspace', 'mingpt', name), 'utf8'), readFileSync(join(PROJECT, name), 'utf8'), name);
    }
  });

  it('locates the module: beside the file, in a package above it, a configured path; none outside the workspace', () => {
    const has = (...paths: string[]) => (p: string) => paths.includes(p);
    assert.equal(locateFallbackModule('/ws/train.py', ['/ws'], 'fp8_fallback', has('/ws/fp8_fallback.py'))?.importFrom, 'fp8_fallback');
    // Up through packages only: from a plain folder's script, a module above would not import.
    assert.deepEqual(locateFallbackModule('/ws/pkg/sub/model.py', ['/ws'], 'fp8_fallback', has('/ws/pkg/sub/__init__.py', '/ws/pkg/fp8_fallback.py')),
      { importFrom: 'pkg.fp8_fallback', path: '/ws/pkg/fp8_fallback.py', exists: true });
    assert.deepEqual(locateFallbackModule('/ws/scripts/train.py', ['/ws'], 'fp8_fallback', has('/ws/fp8_fallback.py')),
      { importFrom: 'fp8_fallback', path: '/ws/scripts/fp8_fallback.py', exists: false });
    assert.equal(locateFallbackModule('/ws/pkg/model.py', ['/ws'], 'fp8_fallback', has(), 'from .layers import Block\n')?.importFrom, '.fp8_fallback');
    assert.deepEqual(locateFallbackModule('/ws/src/a/model.py', ['/ws'], 'src/utils/fp8.py', has()),
      { importFrom: 'src.utils.fp8', path: '/ws/src/utils/fp8.py', exists: false });
    assert.equal(locateFallbackModule('/tmp/scratch.py', ['/ws'], 'fp8_fallback', has()), undefined);
  });
});
