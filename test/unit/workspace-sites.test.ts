import { strict as assert } from 'node:assert';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { classNamesOf, sitesForFile, sitesInText } from '../../server/src/workspace/sites';
import { analyze, initParser, layer, py } from './analysis-helpers';
import { ensureBuilt, parseJson, runCli } from './cli-harness';

const MODEL = py`
  import torch
  from torch import nn


  class FeedForward(nn.Module):
      def __init__(self, dim, hidden_dim):
          super().__init__()
          self.up = nn.Linear(dim, hidden_dim)
          self.down = nn.Linear(hidden_dim, dim)

      def forward(self, x):
          return self.down(self.up(x))


  class ViT(nn.Module):
      def __init__(self, dim, mlp_dim, depth=2):
          super().__init__()
          self.norm = nn.LayerNorm(dim)
          self.ff = FeedForward(dim, mlp_dim)
          self.proj = nn.Linear(dim, dim)

      def forward(self, x):
          return self.proj(self.ff(self.norm(x)))
`;

const train = (dim: number): string => py`
  import torch
  from model import ViT


  def main():
      model = ViT(
          dim=${dim},  # the width
          mlp_dim=4096,
      )
      return model
`;

describe('sizes from construction sites in other files', () => {
  before(initParser);

  it('reads literal keyword and positional arguments of calls of the given classes, with file:line', () => {
    const sites = sitesInText('train.py', [
      'class ViT(Base):  # a definition, not a call',
      '    pass',
      'a = ViT(1024, 4096)',
      'b = models.ViT(',
      '    dim=512, mlp_dim=width * 4, name="x,y)")',
      '# ViT(dim=3)',
      'c = ViT(*sizes, depth=4)',
      'd = Other(dim=8)',
    ].join('\n'), new Set(['ViT']));
    assert.deepEqual(sites, {
      ViT: [
        { at: 'train.py:3', keywords: {}, positional: [1024, 4096] },
        { at: 'train.py:4', keywords: { dim: 512, mlp_dim: null, name: null }, positional: [] },
        { at: 'train.py:7', keywords: { depth: 4 }, positional: [], splat: true },
      ],
    });
    assert.deepEqual([...classNamesOf(MODEL)], ['FeedForward', 'ViT']);
  });

  it("gives the class's layers the sizes another file builds it with, the source naming that file and line", () => {
    const ir = analyze(MODEL, { sites: sitesInText('train.py', train(1024), classNamesOf(MODEL)) });
    const up = layer(ir, 'self.up');
    assert.equal(up.inFeatures?.value, 1024);
    assert.equal(up.outFeatures?.value, 4096);
    assert.deepEqual(up.inFeatures?.source, { kind: 'construction-site', detail: 'ViT(dim=1024) at train.py:6' });
    assert.deepEqual(up.outFeatures?.source, { kind: 'construction-site', detail: 'ViT(mlp_dim=4096) at train.py:6' });
    assert.equal(layer(ir, 'self.norm').normalizedShape?.value, 1024);
    assert.equal(layer(ir, 'self.proj').convertible, true);
    assert.equal(layer(ir, 'self.proj').facets?.shape.state, 'ok');
    // Without the other file, the same layers are built with sizes not known here.
    const alone = analyze(MODEL);
    assert.equal(layer(alone, 'self.up').inFeatures?.value, undefined);
    assert.equal(layer(alone, 'self.proj').facets?.shape.state, 'guarded');
  });

  it('a size that breaks the FP8 rule in one of the other files is named with its file and line', () => {
    const sites = sitesInText('train.py', train(1024), classNamesOf(MODEL));
    sitesInText('eval.py', train(1000), classNamesOf(MODEL), sites);
    const proj = layer(analyze(MODEL, { sites }), 'self.proj');
    assert.deepEqual(proj.inFeatures?.values?.map((v) => [v.value, v.source.detail]), [[1024, 'ViT(dim=1024) at train.py:6'], [1000, 'ViT(dim=1000) at eval.py:6']]);
    // The 1024 build meets the rule: a guarded conversion keeps nn.Linear for the eval.py build, named in the reason.
    assert.equal(proj.facets?.shape.state, 'guarded');
    assert.match(proj.facets?.shape.reason ?? '', /in_features 1000 \(ViT\(dim=1000\) at eval\.py:6\) is not a multiple of 16/);
    const alone = layer(analyze(MODEL, { sites: sitesInText('eval.py', train(1000), classNamesOf(MODEL)) }), 'self.proj');
    assert.equal(alone.facets?.shape.state, 'fails');
    assert.equal(alone.inFeatures?.source?.detail, 'ViT(dim=1000) at eval.py:6');
    assert.equal(alone.convertible, false);
  });

  it('a call passing something not literal, or a file defining its own class of that name, says nothing', () => {
    const dynamic = analyze(MODEL, { sites: sitesInText('train.py', 'm = ViT(dim=args.dim, mlp_dim=4096)\n', classNamesOf(MODEL)) });
    assert.equal(layer(dynamic, 'self.proj').inFeatures?.value, undefined);
    assert.match(layer(dynamic, 'self.proj').inFeatures?.note ?? '', /set by the caller of ViT at train\.py:1 \(not a literal\)/);
    assert.equal(layer(dynamic, 'self.up').outFeatures?.value, 4096);
    const dir = mkdtempSync(join(tmpdir(), 'pl-sites-'));
    try {
      writeFileSync(join(dir, 'model.py'), MODEL);
      writeFileSync(join(dir, 'other.py'), 'class ViT:\n    pass\nm = ViT(dim=8, mlp_dim=8)\n');
      writeFileSync(join(dir, 'train.py'), train(1024));
      const files = ['model.py', 'other.py', 'train.py'].map((n) => ({ path: join(dir, n), shown: n }));
      assert.deepEqual(Object.keys(sitesForFile(join(dir, 'model.py'), MODEL, files)), ['ViT']);
      assert.deepEqual(sitesForFile(join(dir, 'model.py'), MODEL, files).ViT.map((s) => s.at), ['train.py:6']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe('through the CLI', function () {
    this.timeout(120_000);
    let dir = '';
    before(() => {
      ensureBuilt();
      dir = mkdtempSync(join(tmpdir(), 'pl-sites-cli-'));
      writeFileSync(join(dir, 'model.py'), MODEL);
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    interface InspectJson { files: { file: string; layers: { name: string; convertible: unknown; dims?: { in?: { value?: number; source?: { detail: string } } } }[] }[] }
    const proj = (out: InspectJson) => out.files.find((f) => f.file === 'model.py')!.layers.find((l) => l.name === 'self.proj')!;

    it('inspect over both files shows the size and its source train.py:N; alone it does not', () => {
      writeFileSync(join(dir, 'train.py'), train(1024));
      const both = proj(parseJson<InspectJson>(runCli(['inspect', '--format', 'json', 'model.py', 'train.py'], dir)));
      assert.equal(both.dims?.in?.value, 1024);
      assert.equal(both.dims?.in?.source?.detail, 'ViT(dim=1024) at train.py:6');
      assert.equal(both.convertible, true);
      const alone = proj(parseJson<InspectJson>(runCli(['inspect', '--format', 'json', 'model.py'], dir)));
      assert.equal(alone.dims?.in?.value ?? undefined, undefined);
    });

    it('check names the failing size built in train.py', () => {
      writeFileSync(join(dir, 'train.py'), train(1000));
      const out = parseJson<InspectJson>(runCli(['inspect', '--format', 'json', 'model.py', 'train.py'], dir));
      assert.equal(proj(out).dims?.in?.source?.detail, 'ViT(dim=1000) at train.py:6');
      assert.equal(proj(out).convertible, false);
      const run = runCli(['check', 'model.py', 'train.py'], dir);
      assert.match(run.stdout, /self\.proj: nn\.Linear 1000->1000 breaks the FP8 shape rule/);
    });
  });
});
