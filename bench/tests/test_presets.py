"""Preset shapes and parameter counts (built on the meta device: no memory), and the tiny model on the CPU."""
import pytest
import torch
import torch.nn as nn

from plbench import workloads
from plbench.presets import PRESETS
from plbench.te_convert import find_high_precision, plan_conversion

REAL = ["gpt-125m", "gpt-1.3b", "llama-7b-slice", "llama-70b-slice"]


@pytest.mark.parametrize("name", REAL + ["tiny"])
def test_param_count_matches_the_analytic_formula(name):
    wl = workloads.build_preset(name, device="meta")
    built = sum(p.numel() for p in wl.model.parameters())  # tied weights are counted once
    assert built == PRESETS[name].param_count()
    assert wl.info["params"] == built


def test_published_sizes():
    # GPT-2 small: 124M with its 50257 vocabulary and 1024 positions; with 32000 tokens it is 110M.
    assert PRESETS["gpt-125m"].param_count() == pytest.approx(124.4e6 - (50257 - 32000) * 768, rel=1e-3)
    # GPT-3 XL "1.3B": 24 x 2048
    assert 1.2e9 < PRESETS["gpt-1.3b"].param_count() < 1.4e9
    # Llama-3-8B block: 218.1M parameters per layer (32 layers + 128256-token embeddings = 8.03B)
    p = PRESETS["llama-7b-slice"]
    per_layer = (p.param_count(layers=2) - p.param_count(layers=1))
    assert per_layer == 218112000
    assert 32 * per_layer + 2 * 128256 * 4096 + 4096 == pytest.approx(8.03e9, rel=1e-3)
    # Llama-70B block: 856.7M per layer (80 layers + 2 x 128256 x 8192 = 70.6B)
    q = PRESETS["llama-70b-slice"]
    per_layer = q.param_count(layers=2) - q.param_count(layers=1)
    assert 80 * per_layer + 2 * 128256 * 8192 == pytest.approx(70.55e9, rel=2e-3)


@pytest.mark.parametrize("name,hidden,ffn,layers", [
    ("gpt-125m", 768, 3072, 12), ("gpt-1.3b", 2048, 8192, 24),
    ("llama-7b-slice", 4096, 14336, 12), ("llama-70b-slice", 8192, 28672, 5)])
def test_shapes(name, hidden, ffn, layers):
    wl = workloads.build_preset(name, device="meta")
    m = wl.model
    assert len(m.blocks) == layers
    assert m.tok_emb.weight.shape == (32000, hidden)
    assert m.head.lm_head.weight.shape == (32000, hidden)
    blk = m.blocks[0]
    if PRESETS[name].arch == "llama":
        assert blk.mlp.w13.weight.shape == (2 * ffn, hidden) and blk.mlp.w2.weight.shape == (hidden, ffn)
        assert type(blk.norm1).__name__ == "RMSNorm" and blk.attn.qkv.bias is None
        assert blk.attn.qkv.weight.shape == (hidden + 2 * 8 * 128, hidden)  # GQA, 8 KV heads of 128
        assert m.head.lm_head.weight is not m.tok_emb.weight
    else:
        assert blk.mlp.fc.weight.shape == (ffn, hidden) and blk.mlp.proj.weight.shape == (hidden, ffn)
        assert isinstance(blk.norm1, nn.LayerNorm)
        assert m.head.lm_head.weight is m.tok_emb.weight  # tied, as GPT-2
    assert wl.tokens_per_step == PRESETS[name].batch * PRESETS[name].seq
    assert wl.regions == ["blocks.%d" % i for i in range(layers)] + ["head"]


@pytest.mark.parametrize("name", REAL)
def test_every_block_linear_passes_the_fp8_shape_rule(name):
    m = workloads.build_preset(name, device="meta").model
    for rule in ("te", "torch"):
        plan = plan_conversion(m, find_high_precision(m), rule=rule, kinds=("linear",))
        assert not [i for i in plan if i["action"] == "skip"]
        converted = [i["name"] for i in plan if i["action"] == "convert"]
        assert len(converted) == 4 * len(m.blocks)
        assert "head.lm_head" not in converted


def test_overrides():
    wl = workloads.build_preset("llama-7b-slice", batch=2, seq=128, layers=3, device="meta")
    assert len(wl.model.blocks) == 3 and wl.tokens_per_step == 256
    assert wl.info["batch"] == 2 and wl.info["seq"] == 128 and wl.info["layers"] == 3


def test_tiny_forward_backward_and_determinism():
    a = workloads.build_preset("tiny", seed=7)
    b = workloads.build_preset("tiny", seed=7)
    for pa, pb in zip(a.model.parameters(), b.model.parameters()):
        assert torch.equal(pa, pb)
    batch = a.batch_fn(0)
    assert torch.equal(batch[0], b.batch_fn(0)[0])
    loss = a.loss(a.model, batch)
    assert loss.dim() == 0 and 5.0 < loss.item() < 7.5  # ~ ln(512) = 6.24 at init
    loss.backward()
    assert a.model.blocks[0].attn.qkv.weight.grad is not None


def test_synthetic_task_is_shifted_and_learnable():
    batches = workloads.synthetic_batches(512, 2, 16, 3, seed=1, device="cpu")
    x, y = batches[0]
    assert torch.equal(x[:, 1:], y[:, :-1])
    d = (y - (x * 31 + 7)) % 512
    assert int(d.min()) >= 0 and int(d.max()) <= 3  # next token = 31 t + 7 + noise(0..3)


def test_llama_tiny_variant_runs_gqa_on_cpu():
    p = workloads.Preset("t-llama", "llama", 64, 1, 4, 2, 96, 2, 16, "test", vocab=256)
    m = workloads.TransformerLM(p)
    x = torch.randint(0, 256, (2, 16))
    loss = m(x, x)
    loss.backward()
    assert m.blocks[0].attn.qkv.weight.shape == (64 + 2 * 2 * 16, 64)


def test_batches_do_not_repeat_within_the_run():
    wl = workloads.build_preset("tiny", n_batches=12)
    seen = {tuple(wl.batch_fn(i)[0].flatten().tolist()) for i in range(12)}
    assert len(seen) == 12
