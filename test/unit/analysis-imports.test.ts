import { strict as assert } from 'node:assert';
import { analyze, initParser, layer, py } from './analysis-helpers';

describe('analysis: imports', () => {
  before(initParser);

  it('resolves every torch import form', () => {
    const ir = analyze(py`
      import torch
      import torch.nn as nn
      from torch import nn as tnn
      from torch.nn import Linear as L, LayerNorm
      import torch.nn.functional as F
      class M(nn.Module):
          def __init__(self):
              super().__init__()
              self.a = nn.Linear(16, 32)
              self.b = tnn.Linear(16, 32)
              self.c = L(16, 32)
              self.d = torch.nn.Linear(16, 32)
              self.e = LayerNorm(16)
              self.f = F.linear
    `);
    assert.equal(ir.importsTorch, true);
    for (const n of ['self.a', 'self.b', 'self.c', 'self.d']) {
      assert.equal(layer(ir, n).resolved, 'torch.nn.Linear', n);
      assert.equal(layer(ir, n).kind, 'linear');
    }
    assert.equal(layer(ir, 'self.e').kind, 'layernorm');
    assert.equal(ir.imports.find((b) => b.local === 'F')?.target, 'torch.nn.functional');
    assert.equal(ir.imports.find((b) => b.local === 'L')?.target, 'torch.nn.Linear');
    assert.ok(!ir.layers.some((l) => l.name === 'self.f'));
  });

  it('resolves Transformer Engine under any alias', () => {
    const ir = analyze(py`
      import torch
      import transformer_engine.pytorch as te
      from transformer_engine import pytorch as tep
      import transformer_engine as TE
      from transformer_engine.pytorch import Linear as TELinear, LayerNorm as TELN
      a = te.Linear(16, 32)
      b = tep.Linear(16, 32)
      c = TE.pytorch.Linear(16, 32)
      d = TELinear(16, 32)
      e = TELN(16)
    `);
    assert.equal(ir.importsTe, true);
    assert.equal(ir.teImportUnguarded, true);
    for (const n of ['a', 'b', 'c', 'd']) {
      const l = layer(ir, n);
      assert.equal(l.resolved, 'transformer_engine.pytorch.Linear', n);
      assert.equal(l.isTe, true);
      assert.equal(l.convertible, false);
      assert.match(l.reasons[0], /already a Transformer Engine layer/);
    }
    assert.equal(layer(ir, 'e').kind, 'layernorm');
  });

  it('marks imports inside try: as guarded', () => {
    const ir = analyze(py`
      import torch
      try:
          import transformer_engine.pytorch as te
          HAVE_TE = True
      except ImportError:
          te = None
          HAVE_TE = False
    `);
    const te = ir.imports.find((b) => b.local === 'te');
    assert.equal(te?.guarded, true);
    assert.equal(ir.imports.find((b) => b.local === 'torch')?.guarded, false);
    assert.equal(ir.importsTe, true);
    assert.equal(ir.teImportUnguarded, false);
  });

  it('recognises Megatron / fairscale parallel linears by any import path or by name', () => {
    const ir = analyze(py`
      from megatron.core import tensor_parallel
      from fairscale.nn.model_parallel.layers import ColumnParallelLinear, RowParallelLinear
      class MLP(torch.nn.Module):
          def __init__(self, hidden=4096):
              super().__init__()
              self.fc1 = tensor_parallel.ColumnParallelLinear(hidden, 4 * hidden, bias=False)
              self.fc2 = RowParallelLinear(4 * hidden, hidden, bias=False)
              self.fc3 = ColumnParallelLinear(hidden, hidden)
    `);
    const fc1 = layer(ir, 'self.fc1');
    assert.equal(fc1.kind, 'parallel-linear');
    assert.equal(fc1.teArgs?.parallel_mode, '"column"');
    assert.equal(fc1.inFeatures?.value, 4096);
    assert.equal(fc1.outFeatures?.value, 16384);
    assert.equal(fc1.convertible, true);
    assert.equal(layer(ir, 'self.fc2').teArgs?.parallel_mode, '"row"');
    assert.equal(layer(ir, 'self.fc3').kind, 'parallel-linear');
  });
});

describe('analysis: imports inside functions', () => {
  before(initParser);

  it('count as guarded: the module loads without the package', () => {
    const ir = analyze('import torch\n\ndef build():\n    import transformer_engine.pytorch as te\n    return te.Linear(768, 768)\n');
    const te = ir.imports.find((b) => b.target === 'transformer_engine.pytorch');
    assert.equal(te?.guarded, true);
    assert.equal(ir.teImportUnguarded, false);
  });

  it('under if TYPE_CHECKING: or an availability test count as guarded; under another if they do not', () => {
    const ir = analyze([
      'from typing import TYPE_CHECKING',
      'import torch',
      'if TYPE_CHECKING:',
      '    from transformer_engine.common.recipe import DelayedScaling',
      'if HAVE_TE:',
      '    import transformer_engine.pytorch as te',
      'if torch.cuda.is_available():',
      '    import transformer_engine as transformer_engine_top',
      '',
    ].join('\n'));
    const g = (t: string) => ir.imports.find((b) => b.target === t)?.guarded;
    assert.equal(g('transformer_engine.common.recipe.DelayedScaling'), true);
    assert.equal(g('transformer_engine.pytorch'), true);
    // is_available() tests CUDA, not the package: with a GPU and without TE the import fails.
    assert.equal(g('transformer_engine'), false);
    assert.equal(ir.teImportUnguarded, true);
  });
});
