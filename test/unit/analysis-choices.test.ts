/**
 * Classes chosen through a variable, a class attribute or a config (Megatron's output-layer class variable, litgpt's
 * `config.norm_class`), norms whose (1 + weight) offset is a constructor flag, and containers whose elements keep
 * their own verdicts when one of them is converted.
 */
import { strict as assert } from 'node:assert';
import { analyze, fixture, initParser, layer, py } from './analysis-helpers';
import { analyse } from './fixes-support';
import { applyEdits, fixOutcome } from '../../server/src/fixes';
import { DEFAULT_SETTINGS } from '../../common/settings';

describe('analysis: classes chosen at run time', () => {
  before(initParser);

  it('Megatron style: output layers and MLP projections built through class variables', () => {
    const ir = analyze(fixture('megatron_style.py'));
    const owned = (owner: string, name: string) => ir.layers.find((l) => l.ownerClass === owner && l.name === name)!;
    // `output_layer_cls = TELinear if ... else ColumnParallelLinear`: the lm-head either way, kept in BF16.
    const out = owned('GPTModel', 'self.output_layer');
    assert.equal(out.role, 'lm_head');
    assert.equal(out.convertible, false);
    // `output_layer_cls = tensor_parallel.ColumnParallelLinear` in the class body, called as self.output_layer_cls(...).
    const head = owned('Head', 'self.output_layer');
    assert.equal(head.kind, 'parallel-linear');
    assert.equal(head.role, 'lm_head');
    const fc1 = owned('MLP', 'self.linear_fc1');
    assert.equal(fc1.kind, 'parallel-linear');
    assert.equal(fc1.teArgs?.parallel_mode, '"column"');
    assert.equal(owned('MLP', 'self.linear_fc2').teArgs?.parallel_mode, '"row"');
    assert.equal(owned('GPTModel', 'self.embedding').role, 'embedding');
    // Nothing but the two output layers is an lm-head.
    assert.deepEqual(ir.layers.filter((l) => l.role === 'lm_head').map((l) => `${l.ownerClass}.${l.name}`), ['GPTModel.self.output_layer', 'Head.self.output_layer']);
  });

  it('commits when every candidate converts the same way, and names the ones that differ otherwise', () => {
    const ir = analyze(py`
      import torch.nn as nn
      from apex.normalization import FusedLayerNorm
      import transformer_engine.pytorch as te

      class Block(nn.Module):
          def __init__(self, d: int = 1024, fused: bool = False, use_te: bool = False):
              super().__init__()
              norm_cls = FusedLayerNorm if fused else nn.LayerNorm
              self.norm = norm_cls(d, eps=1e-5)
              lin_cls = te.Linear if use_te else nn.Linear
              self.fc = lin_cls(d, 4 * d)
    `);
    const norm = layer(ir, 'self.norm');
    assert.equal(norm.convertible, true, norm.reasons.join(' '));
    assert.deepEqual(norm.classCandidates, ['FusedLayerNorm -> te.LayerNorm', 'nn.LayerNorm -> te.LayerNorm']);
    assert.match(norm.reasons.join(' '), /either way|every candidate|same way/);
    // Called by the name it is bound to: the conversion checks at run time that nn.Linear was chosen (te.Linear stays as written).
    const fc = layer(ir, 'self.fc');
    assert.equal(fc.convertible, true, fc.reasons.join(' '));
    assert.deepEqual(fc.classParam, { name: 'lin_cls', defaultClass: 'nn.Linear' });
    assert.match(fc.reasons.join(' '), /convert differently \(te\.Linear -> already TE; nn\.Linear -> te\.Linear\): the conversion checks at run time that the class is nn\.Linear/);
  });

  it('litgpt style: config.norm_class is read from the config class, a flag-switched offset maps to zero_centered_gamma', () => {
    const ir = analyze(fixture('litgpt_style.py'));
    const ln = layer(ir, 'transformer.ln_f');
    assert.equal(ln.kind, 'rmsnorm');
    // The property returns partial(RMSNorm, ...) or getattr(torch.nn, name): decided at run time.
    assert.equal(ln.convertible, 'uncertain');
    assert.match(ln.reasons.join(' '), /config\.norm_class/);
    const n2 = layer(ir, 'self.norm_2');
    assert.equal(n2.convertible, true);
    assert.equal(n2.zeroCenteredGamma, true);
    const n3 = layer(ir, 'self.norm_3');
    assert.equal(n3.convertible, true);
    assert.equal(n3.teArgs?.zero_centered_gamma, 'config.name.startswith("gemma")');
    assert.doesNotMatch(n3.reasons.join(' '), /by hand/);
    for (const name of ['self.fc_1', 'self.fc_2', 'self.proj', 'self.attn']) assert.equal(layer(ir, name).convertible, true, name);
    assert.equal(layer(ir, 'self.lm_head').role, 'lm_head');
  });
});

describe('analysis: library config attributes', () => {
  before(initParser);

  it("litgpt's own Config.norm_class (imported): the norms are found, uncertain between the classes it can be", () => {
    const ir = analyze(py`
      import torch.nn as nn
      from litgpt.config import Config

      class Block(nn.Module):
          def __init__(self, config: Config) -> None:
              super().__init__()
              self.norm_1 = config.norm_class(config.n_embd, eps=config.norm_eps)
              self.proj = nn.Linear(config.n_embd, config.n_embd, bias=False)
    `);
    const n = layer(ir, 'self.norm_1');
    assert.equal(n.kind, 'layernorm');
    assert.equal(n.role, 'norm');
    assert.equal(n.convertible, 'uncertain');
    assert.match(n.reasons.join(' '), /config\.norm_class \(chosen by config\.norm_class_name\), chosen at run time among classes that convert differently \(nn\.LayerNorm -> te\.LayerNorm; litgpt\.model\.RMSNorm -> te\.RMSNorm\)/);
  });
});

describe('analysis: containers', () => {
  it('converting one element of an nn.Sequential leaves the verdicts and diagnostics of its siblings', async () => {
    const text = [
      'import torch.nn as nn',
      'import transformer_engine.pytorch as te',
      '',
      'class MLP(nn.Module):',
      '    def __init__(self, d: int = 1024):',
      '        super().__init__()',
      '        self.net = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))',
      '',
    ].join('\n');
    const before = await analyse(text);
    const norm = before.findings.find((f) => f.code === 'PL102')!;
    const fix = fixOutcome(text, before.ir, norm, DEFAULT_SETTINGS).fixes[0];
    const after = applyEdits(text, fix.edits);
    assert.match(after, /nn\.Sequential\(te\.LayerNorm\(d\), nn\.Linear\(d, 4 \* d\)/);
    const again = await analyse(after);
    const linears = again.ir.layers.filter((l) => l.kind === 'linear');
    assert.equal(linears.length, 2);
    for (const l of linears) {
      assert.equal(l.convertible, true, l.reasons.join(' '));
      assert.equal(l.fallbackFor, undefined);
    }
    assert.equal(again.findings.filter((f) => f.code === 'PL101').length, 2);
  });

  it('a torch.nn layer in the other branch of a te.* choice is still its fallback', async () => {
    const { ir } = await analyse([
      'import torch.nn as nn',
      'import transformer_engine.pytorch as te',
      '',
      'class Block(nn.Module):',
      '    def __init__(self, d: int = 1024, use_te: bool = True):',
      '        super().__init__()',
      '        self.norm = te.LayerNorm(d) if use_te else nn.LayerNorm(d)',
      '',
    ].join('\n'));
    const torchNorm = ir.layers.find((l) => l.constructor === 'nn.LayerNorm')!;
    assert.ok(torchNorm.fallbackFor, torchNorm.reasons.join(' '));
  });
});
