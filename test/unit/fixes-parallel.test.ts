/**
 * Tensor-parallel conversions (PL106): te.Linear(parallel_mode=...) gets the source layer's process group (tp_group /
 * tp_size from fairscale's or Megatron's model-parallel getters, sequence_parallel from a Megatron config) and the
 * same communication, or the conversion is refused with the reason; through the fallback module the library's own
 * layer is what runs where FP8 does not.
 */
import * as assert from 'node:assert/strict';
import { MECHANICS_SETTINGS } from './fixes-support';
import { applyEdits, fixOutcome } from '../../server/src/fixes';
import { analyse, pyCompileError } from './fixes-support';

const FAIRSCALE = `import torch
import torch.nn as nn
import fairscale.nn.model_parallel.initialize as fs_init
import transformer_engine.pytorch as te
from fairscale.nn.model_parallel.layers import ColumnParallelLinear, RowParallelLinear


class Attention(nn.Module):
    def __init__(self, dim=4096):
        super().__init__()
        self.wq = ColumnParallelLinear(dim, dim, bias=False, gather_output=False, init_method=lambda x: x)
        self.wo = RowParallelLinear(dim, dim, bias=False, input_is_parallel=True, init_method=lambda x: x)
        self.gathered = ColumnParallelLinear(dim, dim, bias=False)
        self.split = RowParallelLinear(dim, dim, bias=False)
`;

const MEGATRON = `import torch
from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear


def build(config, init_method):
    qkv = ColumnParallelLinear(4096, 3 * 4096, config=config, init_method=init_method, bias=False, gather_output=False)
    proj = RowParallelLinear(4096, 4096, config=config, init_method=init_method, bias=False, input_is_parallel=True, skip_bias_add=False)
    expert = RowParallelLinear(4096, 4096, config=config, init_method=init_method, bias=False, input_is_parallel=True, is_expert=True)
    return qkv, proj, expert
`;

async function convert(text: string, needle: string): Promise<{ text?: string; title?: string; refusal?: string }> {
  const { ir, findings } = await analyse(text);
  const line = text.split('\n').findIndex((l) => l.includes(needle));
  const finding = findings.find((x) => x.code === 'PL106' && x.span.startLine === line);
  assert.ok(finding, `PL106 on ${needle}: ${findings.map((x) => `${x.code}@${x.span.startLine + 1}`).join(', ')}`);
  const out = fixOutcome(text, ir, finding, MECHANICS_SETTINGS);
  const fix = out.fixes[0];
  return fix ? { text: applyEdits(text, fix.edits), title: fix.title } : { refusal: out.refusals[0] };
}

describe('fixes: tensor-parallel conversions keep the process group', () => {
  it('fairscale: tp_group / tp_size from the model-parallel getters, gather_output=False and input_is_parallel=True kept', async () => {
    const col = await convert(FAIRSCALE, 'self.wq =');
    assert.match(col.text!, /self\.wq = te\.Linear\(dim, dim, bias=False, init_method=lambda x: x, parallel_mode="column", tp_group=fs_init\.get_model_parallel_group\(\), tp_size=fs_init\.get_model_parallel_world_size\(\)\)/);
    const row = await convert(FAIRSCALE, 'self.wo =');
    assert.match(row.text!, /self\.wo = te\.Linear\(dim, dim, bias=False, init_method=lambda x: x, parallel_mode="row", tp_group=fs_init\.get_model_parallel_group\(\), tp_size=fs_init\.get_model_parallel_world_size\(\)\)/);
    assert.equal(pyCompileError(row.text!), undefined);
  });

  it('refuses what te.Linear would communicate differently: gather_output=True, input_is_parallel=False (fairscale defaults)', async () => {
    assert.match((await convert(FAIRSCALE, 'self.gathered =')).refusal!, /gather_output=True all-gathers the output .* returns the rank's shard/);
    assert.match((await convert(FAIRSCALE, 'self.split =')).refusal!, /input_is_parallel=False splits the input itself/);
  });

  it('Megatron: the parallel_state getters (imported), sequence_parallel and params_dtype from the config; is_expert refused', async () => {
    const qkv = await convert(MEGATRON, 'qkv =');
    assert.match(qkv.text!, /^from megatron\.core import parallel_state$/m);
    assert.match(qkv.text!, /qkv = fp8_parallel_linear\(lambda: ColumnParallelLinear\(4096, 3 \* 4096, config=config, init_method=init_method, bias=False, gather_output=False\), 4096, 3 \* 4096, init_method=init_method, bias=False, parallel_mode="column", sequence_parallel=config\.sequence_parallel, params_dtype=config\.params_dtype, tp_group=parallel_state\.get_tensor_model_parallel_group\(\), tp_size=parallel_state\.get_tensor_model_parallel_world_size\(\)\)/);
    assert.doesNotMatch(qkv.text!, /^import transformer_engine/m, 'through the fallback: the library layer runs where FP8 does not');
    assert.equal(pyCompileError(qkv.text!), undefined);
    const proj = await convert(MEGATRON, 'proj =');
    assert.match(proj.text!, /return_bias=False/);
    assert.match((await convert(MEGATRON, 'expert =')).refusal!, /is_expert=True changes how the weight is sharded/);
  });

  it('refuses a parallel layer of an unknown library without tp_group / tp_size', async () => {
    const text = 'import torch\nfrom mylib.parallel import ColumnParallelLinear\n\nclass M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = ColumnParallelLinear(4096, 4096, gather_output=False)\n';
    const r = await convert(text, 'self.fc =');
    assert.match(r.refusal ?? '', /tensor-parallel group is unknown/, JSON.stringify(r));
  });
});
