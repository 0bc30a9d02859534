/**
 * Verdicts in three facets (structure / role / shape), dimensions with their provenance (construction sites, presets
 * and __post_init__ arithmetic, argparse defaults, the user's declarations, config files beside the code), on
 * fixtures in the styles of real model code (test/fixtures/facets).
 */
import * as assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_SETTINGS, resolveSettings } from '../../common/settings';
import { configFileDims, declaredDims, dimsForFile, dimsOfConfigText } from '../../server/src/workspace/dims';
import { overlaySettings, projectConfigFromToml } from '../../server/src/engine/config';
import { analyze, initParser, layer, py } from './analysis-helpers';
import { tempDir } from '../temp-dirs';

const facet = (name: string): string => readFileSync(join(__dirname, '..', 'fixtures', 'facets', name), 'utf8');

describe('analysis: verdict facets', () => {
  before(initParser);

  it('Llama/Qwen-style config-driven sizes: structure ok, role free, shape guarded, so convertible', () => {
    const ir = analyze(facet('llama_config.py'));
    for (const n of ['self.q_proj', 'self.k_proj', 'self.v_proj', 'self.o_proj', 'self.gate_proj', 'self.up_proj', 'self.down_proj']) {
      const l = layer(ir, n);
      assert.deepEqual([l.facets?.structure.state, l.facets?.role.state, l.facets?.shape.state], ['ok', 'ok', 'guarded'], n);
      assert.equal(l.convertible, true, n);
      assert.match(l.facets!.shape.reason, /converts through fp8_linear/, n);
    }
    const head = layer(ir, 'self.lm_head');
    assert.equal(head.facets?.role.state, 'fails');
    assert.equal(head.facets?.role.check, 'lm-head');
    assert.equal(head.facets?.role.role, 'lm_head');
    assert.equal(head.convertible, false);
    assert.equal(layer(ir, 'self.embed_tokens').facets?.role.check, 'embedding');
    assert.equal(layer(ir, 'self.norm').facets?.shape.state, 'ok');
  });

  it('each facet is decided by a named check; uncertain only when the structure depends on run time', () => {
    const ir = analyze(py`
      import torch.nn as nn

      class M(nn.Module):
          def __init__(self, d, cfg):
              super().__init__()
              self.wte = nn.Embedding(50304, 768)
              self.head = nn.Linear(768, 50304, bias=False)
              self.head.weight = self.wte.weight
              self.ln = nn.LayerNorm(d, elementwise_affine=cfg.flag("affine"))
              self.ln_checked = nn.LayerNorm(d, elementwise_affine=cfg.affine)
              self.rms = nn.RMSNorm(d)
              self.odd = nn.Linear(100, 30)
              self.conv = nn.Conv2d(3, 8, 3)
    `);
    const ln = layer(ir, 'self.ln');
    assert.equal(ln.facets?.structure.state, 'guarded');
    assert.equal(ln.facets?.structure.check, 'layernorm-args');
    assert.equal(ln.convertible, 'uncertain');
    assert.match(ln.reasons.join(' '), /exact replacement only for some values, and cfg\.flag\("affine"\) cannot be checked again where the layer is built/);
    // A flag the converted code can read again where the layer is built: checked there (when=), so the structure is ok.
    const checked = layer(ir, 'self.ln_checked');
    assert.deepEqual([checked.facets?.structure.state, checked.convertible, checked.convertsWhen], ['ok', true, 'cfg.affine']);
    assert.equal(layer(ir, 'self.rms').facets?.structure.check, 'rmsnorm-args');
    // Without eps torch computes with float32's epsilon for BF16/FP16/FP32 inputs: the conversion passes it, exactly.
    assert.equal(layer(ir, 'self.rms').convertible, true);
    assert.equal(layer(ir, 'self.rms').teArgs?.eps, '1.1920928955078125e-07');
    const odd = layer(ir, 'self.odd');
    assert.deepEqual([odd.facets?.structure.state, odd.facets?.shape.state, odd.convertible], ['ok', 'fails', false]);
    assert.equal(layer(ir, 'self.conv').facets?.structure.check, 'no-te-twin');
    assert.equal(layer(ir, 'self.head').facets?.role.state, 'fails');
  });
});

describe('analysis: dimensions from the workspace, with provenance', () => {
  before(initParser);

  it('ViT: sizes passed where the model is built, through three constructors', () => {
    const ir = analyze(facet('vit_site.py'));
    const qkv = layer(ir, 'self.to_qkv');
    assert.equal(qkv.inFeatures?.value, 256);
    assert.equal(qkv.outFeatures?.value, 768);
    assert.equal(qkv.inFeatures?.source?.kind, 'construction-site');
    assert.match(qkv.inFeatures!.source!.detail, /^ViT\(\.\.\.\) in the module$/);
    assert.equal(qkv.facets?.shape.state, 'ok');
    const mlp = ir.layers.filter((l) => l.name === 'net[*]' && l.kind === 'linear');
    assert.deepEqual(mlp.map((l) => [l.inFeatures?.value, l.outFeatures?.value]), [[256, 512], [512, 256]]);
    assert.equal(layer(ir, 'self.mlp_head').role, 'classifier');
  });

  it('litgpt presets: every preset is a possible size, __post_init__ arithmetic per preset; the failing one is named', () => {
    const ir = analyze(facet('litgpt_presets.py'));
    const fc = layer(ir, 'self.fc');
    assert.deepEqual(fc.inFeatures?.values?.map((v) => v.value), [128, 768, 3200, 40]);
    // intermediate_size = 4 * n_embd in __post_init__ unless the preset sets it (open_llama_3b, tiny-test).
    assert.deepEqual(fc.outFeatures?.values?.map((v) => v.value), [512, 3072, 8640, 136]);
    assert.equal(fc.inFeatures?.values?.[3].source.kind, 'config-preset');
    assert.match(fc.inFeatures!.values![3].source.detail, /^preset "tiny-test"$/);
    assert.equal(fc.facets?.shape.state, 'guarded');
    assert.match(fc.facets!.shape.reason, /in_features 40 \(preset "tiny-test"\) is not a multiple of 16/);
    assert.equal(fc.convertible, true);
    // Without the odd preset every size meets the rule.
    const ok = analyze(facet('litgpt_presets.py').replace(/^ {4}dict\(name="tiny-test".*\n/m, ''));
    assert.equal(layer(ok, 'self.fc').facets?.shape.state, 'ok');
    assert.match(layer(ok, 'self.fc').reasons[0], /^Every size it can have \(128 -> 512, /);
  });

  it('a plain __post_init__ assignment is evaluated from the defaults; a conditional one stays unknown', () => {
    const ir = analyze(py`
      from dataclasses import dataclass
      import torch.nn as nn

      @dataclass
      class Args:
          dim: int = 1024
          hidden: int = 1024
          n_local_heads: int = -1
          def __post_init__(self):
              self.hidden = int(self.hidden * 8 / 3) // 256 * 256
              if self.n_local_heads == -1:
                  self.n_local_heads = 8

      class MLP(nn.Module):
          def __init__(self, args: Args):
              super().__init__()
              self.up = nn.Linear(args.dim, args.hidden)
              self.kv = nn.Linear(args.dim, args.n_local_heads * 64)
    `);
    assert.equal(layer(ir, 'self.up').outFeatures?.value, 2560);
    assert.match(layer(ir, 'self.up').outFeatures?.note ?? '', /Args\.__post_init__ sets hidden/);
    assert.equal(layer(ir, 'self.kv').outFeatures?.value, undefined);
    assert.equal(layer(ir, 'self.kv').facets?.shape.state, 'guarded');
  });

  it('argparse defaults (--flag-name and dest=) stand in for args.<name>', () => {
    const ir = analyze(facet('argparse_mlp.py'));
    const fc1 = layer(ir, 'self.fc1');
    assert.deepEqual([fc1.inFeatures?.value, fc1.outFeatures?.value], [1024, 4096]);
    assert.equal(fc1.inFeatures?.source?.kind, 'argparse');
    assert.match(fc1.inFeatures!.source!.detail, /^--hidden-size default$/);
    assert.equal(fc1.facets?.shape.state, 'ok');
  });

  it('declared sizes (settings / pyproject dims) come first and decide the shape, with their source', () => {
    const src = facet('llama_config.py');
    const dims = declaredDims(resolveSettings({ dims: { hidden_size: 4096, intermediate_size: 11008, num_attention_heads: 32, num_key_value_heads: 8 } }));
    const ir = analyze(src, { dims });
    const gate = layer(ir, 'self.gate_proj');
    assert.deepEqual([gate.inFeatures?.value, gate.outFeatures?.value], [4096, 11008]);
    assert.equal(gate.inFeatures?.source?.kind, 'declared');
    assert.equal(gate.facets?.shape.state, 'ok');
    assert.equal(layer(ir, 'self.k_proj').outFeatures?.value, 1024);
    // Several declared sizes: the verdict names the one that breaks the rule.
    const two = analyze(src, { dims: declaredDims(resolveSettings({ dims: { hidden_size: [4096, 4100], intermediate_size: 11008 } })) });
    assert.equal(layer(two, 'self.up_proj').facets?.shape.state, 'guarded');
    assert.match(layer(two, 'self.up_proj').facets!.shape.reason, /in_features 4100 \(declared: hidden_size = 4100/);
    const bad = analyze(src, { dims: declaredDims(resolveSettings({ dims: { hidden_size: 4100, intermediate_size: 11008 } })) });
    assert.equal(layer(bad, 'self.up_proj').facets?.shape.state, 'fails');
    assert.equal(layer(bad, 'self.up_proj').shapeOk, false);
  });

  it('a pyproject [tool.precision-lens.dims] table reaches the analysis through the one settings field', () => {
    const toml = '[project]\nname = "m"\n\n[tool.precision-lens.dims]\nhidden_size = 2048\nintermediate_size = [5632, 5640]\n';
    const project = projectConfigFromToml(toml, 'pyproject.toml');
    assert.deepEqual(project?.problems, []);
    const settings = resolveSettings(overlaySettings({}, project?.settings));
    assert.deepEqual(settings.dims, { hidden_size: 2048, intermediate_size: [5632, 5640] });
    const ir = analyze(facet('llama_config.py'), { dims: declaredDims(settings) });
    const down = layer(ir, 'self.down_proj');
    assert.deepEqual(down.inFeatures?.values?.map((v) => v.value), [5632, 5640]);
    assert.equal(down.inFeatures?.values?.[0].source.kind, 'declared');
    // 5640 % 16 != 0: the verdict holds for 5632 and names 5640.
    assert.equal(down.facets?.shape.state, 'guarded');
    assert.match(down.facets!.shape.reason, /in_features 5640 \(declared: intermediate_size = 5640/);
  });

  it('config files beside the code (config.json, YAML, TOML) give sizes; declarations win over them', () => {
    assert.deepEqual(dimsOfConfigText('config.json', '{"hidden_size": 4096, "text_config": {"intermediate_size": 11008}, "name": "x"}').intermediate_size?.[0].value, 11008);
    assert.equal(dimsOfConfigText('model.yaml', 'model:\n  hidden_size: 2048  # width\n  lr: 3\n').hidden_size?.[0].value, 2048);
    assert.equal(dimsOfConfigText('model.yaml', 'lr: 3\n').lr, undefined);
    assert.deepEqual(dimsOfConfigText('config.json', '{not json'), {});
    const dir = tempDir('pl-dims-');
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ hidden_size: 2048, intermediate_size: 5632, num_attention_heads: 16, num_key_value_heads: 4 }));
    writeFileSync(join(dir, 'model.py'), facet('llama_config.py'));
    assert.equal(configFileDims(dir).hidden_size?.[0].source.kind, 'config-file');
    const ir = analyze(facet('llama_config.py'), { dims: dimsForFile(DEFAULT_SETTINGS, join(dir, 'model.py')) });
    const up = layer(ir, 'self.up_proj');
    assert.deepEqual([up.inFeatures?.value, up.outFeatures?.value], [2048, 5632]);
    assert.equal(up.inFeatures?.source?.detail, 'hidden_size: 2048 in config.json');
    const declared = analyze(facet('llama_config.py'), { dims: dimsForFile(resolveSettings({ dims: { hidden_size: 1024 } }), join(dir, 'model.py')) });
    assert.equal(layer(declared, 'self.up_proj').inFeatures?.value, 1024);
    assert.equal(layer(declared, 'self.up_proj').outFeatures?.source?.kind, 'config-file');
  });
});
