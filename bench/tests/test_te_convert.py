"""Layer selection and conversion to TE modules, tested with a fake `te` namespace (TE is absent here)."""
import importlib
import os
import sys
import types

import pytest
import torch
import torch.nn as nn

from plbench import te_convert, workloads
from conftest import FAKE_TE, run_bench


@pytest.fixture
def fake_te():
    sys.path.insert(0, FAKE_TE)
    try:
        te = importlib.import_module("transformer_engine.pytorch")
        recipe = importlib.import_module("transformer_engine.common.recipe")
        yield te, recipe
    finally:
        sys.path.remove(FAKE_TE)
        for k in list(sys.modules):
            if k.startswith("transformer_engine"):
                del sys.modules[k]


def _names(report, key):
    return [i["name"] for i in report[key]]


def test_tiny_gpt_conversion_copies_weights_and_keeps_head_and_embeddings(fake_te):
    te, _ = fake_te
    wl = workloads.build_preset("tiny", seed=3)
    model = wl.model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batch = wl.batch_fn(0)
    with torch.no_grad():
        loss_before = wl.loss(model, batch).item()
    rep = te_convert.convert_to_te(model, te, high_precision=te_convert.find_high_precision(model, wl.high_precision))
    conv = _names(rep, "converted")
    assert len([c for c in conv if c.endswith(("qkv", "proj", "fc"))]) == 8
    assert "blocks.0.norm1" in conv and "head.norm" in conv  # LayerNorms -> te.LayerNorm
    assert set(_names(rep, "kept_high_precision")) == {"tok_emb", "pos_emb", "head.lm_head"}
    assert rep["skipped"] == []
    assert isinstance(model.blocks[0].attn.qkv, te.Linear)
    assert isinstance(model.blocks[1].norm2, te.LayerNorm)
    assert type(model.head.lm_head) is nn.Linear and type(model.tok_emb) is nn.Embedding
    assert model.head.lm_head.weight is model.tok_emb.weight  # the tie survives
    after = model.state_dict()
    for k, v in before.items():
        assert torch.equal(after[k], v), k  # weights copied exactly
    with torch.no_grad():
        assert wl.loss(model, batch).item() == pytest.approx(loss_before, rel=1e-6)


def test_shape_rule_skips_and_reports(fake_te):
    te, _ = fake_te
    model = nn.Sequential()
    model.add_module("emb", nn.Embedding(1000, 64))
    model.add_module("ok", nn.Linear(64, 128))
    model.add_module("bad_in", nn.Linear(100, 64))       # in % 16 != 0
    model.add_module("bad_out", nn.Linear(64, 100))      # out % 8 != 0
    model.add_module("out72", nn.Linear(64, 72))         # TE ok (72 % 8 == 0); _scaled_mm rule (% 16) skips
    model.add_module("ln_noaffine", nn.LayerNorm(64, elementwise_affine=False))
    model.add_module("ln", nn.LayerNorm(64))
    model.add_module("head", nn.Linear(64, 1000, bias=False))
    hp = te_convert.find_high_precision(model)
    assert "lm-head" in hp["head"] and "vocabulary" in hp["head"]
    plan = {i["name"]: i for i in te_convert.plan_conversion(model, hp, rule="te")}
    assert plan["ok"]["action"] == "convert" and plan["out72"]["action"] == "convert"
    assert plan["bad_in"]["action"] == "skip" and "in_features % 16" in plan["bad_in"]["reason"]
    assert plan["bad_out"]["action"] == "skip" and "100x64" in plan["bad_out"]["reason"]
    assert plan["ln_noaffine"]["action"] == "skip" and "elementwise_affine" in plan["ln_noaffine"]["reason"]
    assert plan["ln"]["action"] == "convert"
    assert plan["head"]["action"] == "keep" and plan["emb"]["action"] == "keep"
    tplan = {i["name"]: i for i in te_convert.plan_conversion(model, hp, rule="torch", kinds=("linear",))}
    assert tplan["out72"]["action"] == "skip" and tplan["ln"]["action"] == "keep"
    rep = te_convert.convert_to_te(model, te, plan=list(plan.values()))
    assert sorted(_names(rep, "converted")) == ["ln", "ok", "out72"]
    assert sorted(_names(rep, "skipped")) == ["bad_in", "bad_out", "ln_noaffine"]
    assert type(model.bad_in) is nn.Linear and isinstance(model.ok, te.Linear)


@pytest.mark.skipif("bias" not in nn.LayerNorm.__init__.__code__.co_varnames, reason="torch < 2.1")
def test_layernorm_without_bias_is_skipped():
    model = nn.Sequential(nn.LayerNorm(64, bias=False))
    (item,) = te_convert.plan_conversion(model, {}, rule="te")
    assert item["action"] == "skip" and "bias=False" in item["reason"]


def test_lm_head_found_by_name_and_by_tying():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(50, 32)
            self.decoder = nn.Linear(32, 48)  # by name
            self.tied = nn.Linear(32, 50, bias=False)
            self.tied.weight = self.wte.weight  # by weight tying
            self.pos = nn.Embedding(32, 32)
            self.square = nn.Linear(32, 32)  # same size as the positional table: not an lm-head
    hp = te_convert.find_high_precision(M())
    assert set(hp) == {"wte", "pos", "decoder", "tied"}
    assert "tied" in hp["tied"] and "name" in hp["decoder"]


def test_rmsnorm_converted_when_te_has_it_else_reported(fake_te):
    te, _ = fake_te
    model = nn.Sequential(workloads.RMSNorm(64), nn.Linear(64, 64))
    with torch.no_grad():
        model[0].weight.uniform_()
    rep = te_convert.convert_to_te(model, te, high_precision={})
    assert _names(rep, "converted") == ["0", "1"]
    assert isinstance(model[0], te.RMSNorm) and not torch.equal(model[0].weight, torch.ones(64))
    no_rms = types.SimpleNamespace(Linear=te.Linear, LayerNorm=te.LayerNorm)
    model2 = nn.Sequential(workloads.RMSNorm(64))
    rep2 = te_convert.convert_to_te(model2, no_rms, high_precision={})
    assert rep2["skipped"][0]["reason"] == "this Transformer Engine has no te.RMSNorm"


def test_recipes_and_autocast_api(fake_te):
    te, recipe = fake_te
    d, text = te_convert.make_recipe(recipe, "delayed")
    assert type(d).__name__ == "DelayedScaling" and d.fp8_format == recipe.Format.HYBRID and "HYBRID" in text
    c, _ = te_convert.make_recipe(recipe, "current")
    assert type(c).__name__ == "Float8CurrentScaling"
    with pytest.raises(AttributeError):
        te_convert.make_recipe(types.SimpleNamespace(Format=recipe.Format, DelayedScaling=recipe.DelayedScaling),
                               "current")
    te.AUTOCAST_LOG.clear()
    with te_convert.te_autocast(te, "autocast", c):
        pass
    with pytest.warns(DeprecationWarning):
        with te_convert.te_autocast(te, "fp8_autocast", d):
            pass
    assert te.AUTOCAST_LOG == [("autocast", "Float8CurrentScaling"), ("fp8_autocast", "DelayedScaling")]


def test_te_backend_end_to_end_with_fake_te():
    r = run_bench(["--workload", "tiny", "--device", "cpu", "--backends", "bf16,te", "--steps", "3", "--warmup", "1"],
                  pythonpath=[FAKE_TE])
    assert r.rc == 0, r.stderr
    te = [e for e in r.of("result") if e["backend"] == "te"][0]
    assert te["recipe"].startswith("DelayedScaling") and te["te_api"] == "autocast" and te["te_version"] == "2.10.0"
    assert te["conversion"]["counts"] == {"converted": 8 + 5, "skipped": 0, "kept_high_precision": 3}
    bf16 = [e for e in r.of("result") if e["backend"] == "bf16"][0]
    assert te["losses"][0] == pytest.approx(bf16["losses"][0], rel=1e-4)  # fake TE = plain torch math


def test_te_backend_reports_fp8_unsupported_gpu_reason_from_te():
    from plbench.cli import gate_backends
    env = {"te": {"installed": True, "error": None}, "fp8": {"available": False, "reason": "Device compute "
           "capability 8.9 or higher required for FP8 execution."}, "torch_fp8": {"available": False,
           "reason": "Device compute capability 8.9 or higher required for FP8 execution."}, "gpu_name": "NVIDIA A100"}
    runnable, errors = gate_backends(["te", "torch-fp8"], env, "cuda")
    assert runnable == ["bf16"]
    (err,) = errors
    assert err.code == "fp8_unsupported" and err.exit_code == 5 and "NVIDIA A100" in err.message
    assert "8.9" in err.message and "BF16 only" in err.hint and err.extra["backends"] == ["te", "torch-fp8"]
    ok_env = dict(env, fp8={"available": True, "reason": ""}, torch_fp8={"available": True, "reason": ""})
    assert gate_backends(["bf16", "te", "torch-fp8"], ok_env, "cuda") == (["bf16", "te", "torch-fp8"], [])
    no_te = dict(ok_env, te={"installed": False, "error": "ModuleNotFoundError"})
    runnable, errors = gate_backends(["bf16", "te"], no_te, "cuda")
    assert runnable == ["bf16"] and errors[0].code == "te_missing" and "torch-fp8" in errors[0].hint
