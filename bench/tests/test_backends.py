"""The backend table, the torchao backends and the TE variants (fused blocks, recipes, FP8 lm-head), on the CPU with
fake `transformer_engine` / `torchao` packages (neither is installed on CI). The real libraries run on the H200
(bench/tools/h200_te.sh); with a real torchao installed, test_real_torchao_* check the same glue against it."""
import importlib
import math
import sys

import pytest
import torch
import torch.nn as nn

from plbench import backends, cli, fp8_torchao, runner, te_convert, workloads
from plbench.presets import Preset
from plbench.protocol import BenchError, EXIT_TORCHAO_MISSING
from conftest import FAKE_TE, HERE, run_bench

FAKE_TORCHAO = HERE + "/fake_torchao"


def _fresh_import(path, prefix, names):
    sys.path.insert(0, path)
    try:
        yield [importlib.import_module(n) for n in names]
    finally:
        sys.path.remove(path)
        for k in list(sys.modules):
            if k == prefix or k.startswith(prefix + "."):
                del sys.modules[k]


@pytest.fixture
def fake_te():
    yield from _fresh_import(FAKE_TE, "transformer_engine", ["transformer_engine.pytorch", "transformer_engine.common.recipe"])


@pytest.fixture
def fake_torchao():
    saved = dict(fp8_torchao._CACHE)
    fp8_torchao._CACHE.clear()
    try:
        for mods in _fresh_import(FAKE_TORCHAO, "torchao", ["torchao.float8"]):
            yield mods[0]
    finally:
        fp8_torchao._CACHE.clear()
        fp8_torchao._CACHE.update(saved)


def llama_tiny(layers=2):
    p = Preset("llama-tiny-test", "llama", 64, layers, 4, 2, 96, 2, 32, "test", vocab=512)
    torch.manual_seed(5)
    model = workloads.TransformerLM(p, seq=32)
    batch = workloads.synthetic_batches(512, 2, 32, 1, 6, "cpu")[0]
    return model, batch


def gpt_tiny():
    wl = workloads.build_preset("tiny", seed=3)
    return wl.model, wl.batch_fn(0)


# -- the table ----------------------------------------------------------------------------------------------------

def test_parse_names_aliases_all_and_errors():
    assert backends.parse("auto", te_installed=False) == ["bf16", "torch-fp8"]
    assert backends.parse("auto", te_installed=True) == ["bf16", "te"]
    assert backends.parse("bf16, torchao ,fp8,torchao-tensorwise", False) == ["bf16", "torchao-tensorwise", "torch-fp8"]
    assert backends.parse("all", False) == list(backends.BACKENDS)
    with pytest.raises(BenchError) as err:
        backends.parse("bf16,torchao-blockwise", False)
    assert err.value.code == "usage" and "torchao-blockwise" in err.value.message and "torchao-rowwise" in err.value.hint
    with pytest.raises(BenchError):
        backends.parse(" , ", False)
    assert cli.build_parser().parse_args(["--fp8-lm-head"]).fp8_lm_head is True


def test_every_backend_has_a_family_a_label_and_a_runner():
    for name, spec in backends.BACKENDS.items():
        assert spec["family"] in runner.PREPARE, name
        assert runner.LABELS[name] == spec["label"] and spec["label"]
    assert "fallback" in backends.label("torch-fp8") and "not Transformer Engine" in backends.label("torch-fp8")


@pytest.mark.parametrize("name,arg,compiling,want", [
    ("te", "auto", True, "current"), ("te", "auto", False, "delayed"), ("te", "delayed", True, "delayed"),
    ("te-delayed", "auto", True, "delayed"), ("te-current", "delayed", False, "current"),
    ("te-fused", "auto", True, "current"), ("te-fused", "delayed", True, "delayed"),
])
def test_te_recipe_per_variant(name, arg, compiling, want):
    assert backends.te_recipe_kind(name, arg, compiling) == want


# -- the gate -----------------------------------------------------------------------------------------------------

def _env(te=True, ao=True, fp8=True):
    return {"te": {"installed": te, "error": None}, "torchao": {"installed": ao, "float8_training": ao, "error": None},
            "fp8": {"available": fp8, "reason": "" if fp8 else "Device compute capability 8.9 or higher required"},
            "torch_fp8": {"available": fp8, "reason": "ok" if fp8 else "SM 8.0 < 8.9"}, "gpu_name": "GPU"}


def test_gate_one_error_per_missing_library_naming_its_backends():
    wanted = list(backends.BACKENDS)
    runnable, errors = cli.gate_backends(wanted, _env(te=False, ao=False), "cuda")
    assert runnable == ["bf16", "torch-fp8"]
    codes = {e.code: e for e in errors}
    assert set(codes) == {"te_missing", "torchao_missing"}
    assert codes["te_missing"].extra["backends"] == ["te", "te-delayed", "te-current", "te-fused", "te-fused-delayed",
                                                     "te-dpa", "te-fused-dpa", "te-fused-tedpa-bf16", "bf16-tedpa"]
    ao = codes["torchao_missing"]
    assert ao.extra["backends"] == ["torchao-tensorwise", "torchao-rowwise"] and ao.exit_code == EXIT_TORCHAO_MISSING
    assert ao.fatal is False and ao.message == "torchao not installed"


def test_gate_reports_a_broken_torchao_with_its_reason():
    env = _env()
    env["torchao"] = {"installed": True, "float8_training": False, "error": "torchao 0.5 has no usable float8 API"}
    _, (err,) = cli.gate_backends(["bf16", "torchao-rowwise"], env, "cuda")
    assert err.code == "torchao_missing" and "0.5" in err.message


def test_gate_without_fp8_runs_bf16_and_names_every_fp8_backend():
    runnable, (err,) = cli.gate_backends(["te-fused", "torchao-tensorwise", "torch-fp8"], _env(fp8=False), "cuda")
    assert runnable == ["bf16"] and err.code == "fp8_unsupported"
    assert err.extra["backends"] == ["te-fused", "torchao-tensorwise", "torch-fp8"]


# -- torchao ------------------------------------------------------------------------------------------------------

def test_module_filter_is_the_plan():
    model, _ = llama_tiny()
    model.add_module("odd", nn.Linear(100, 64))  # breaks the % 16 rule
    hp = te_convert.find_high_precision(model)
    plan = te_convert.plan_conversion(model, hp, rule="torch", kinds=("linear",))
    filt = fp8_torchao.module_filter(plan)
    mods = dict(model.named_modules())
    assert filt(mods["blocks.0.attn.qkv"], "blocks.0.attn.qkv") and filt(mods["blocks.1.mlp.w2"], "blocks.1.mlp.w2")
    assert not filt(mods["head.lm_head"], "head.lm_head")      # lm-head: BF16
    assert not filt(mods["odd"], "odd")                        # shape rule
    assert not filt(mods["tok_emb"], "tok_emb")                # embedding
    assert len(filt.allowed) == 2 * 4


def test_torchao_unavailable_reason_without_the_package(monkeypatch):
    monkeypatch.setattr(fp8_torchao, "_CACHE", {})
    monkeypatch.setitem(sys.modules, "torchao", None)  # import torchao raises ImportError
    info = fp8_torchao.load_torchao(force=True)
    assert info["installed"] is False and info["convert"] is None
    assert fp8_torchao.unavailable_reason(info).startswith("torchao not installed")
    assert fp8_torchao.env_info(info)["float8_training"] is False


def test_torchao_convert_swaps_the_planned_linears_with_the_recipe(fake_torchao):
    info = fp8_torchao.load_torchao(force=True)
    assert info["version"] == "0.18.0+fake" and fp8_torchao.unavailable_reason(info) is None
    model, batch = llama_tiny()
    plan = te_convert.plan_conversion(model, te_convert.find_high_precision(model), rule="torch", kinds=("linear",))
    with torch.no_grad():
        before = model(*batch).item()
    names, text = fp8_torchao.convert(model, info, "rowwise", plan)
    assert "rowwise" in text and len(names) == 8
    assert type(model.head.lm_head) is nn.Linear
    assert type(model.blocks[0].mlp.w13).__name__ == "Float8Linear"
    assert model.blocks[0].mlp.w13.config.recipe == "rowwise"
    with torch.no_grad():
        assert model(*batch).item() == pytest.approx(before, rel=1e-6)  # the fake computes exactly; weights kept
    with pytest.raises(ValueError):
        fp8_torchao.recipe_text("blockwise")


def test_torchao_backend_through_the_cli(tmp_path):
    r = run_bench(["--device", "cpu", "--workload", "tiny", "--backends", "bf16,torchao-tensorwise,torchao-rowwise",
                   "--steps", "2", "--warmup", "1", "--no-compile"], pythonpath=[FAKE_TORCHAO])
    assert r.rc == 0, r.stderr
    env = r.of("env")[0]
    assert env["torchao"] == {"installed": True, "version": "0.18.0+fake", "error": None, "float8_training": True}
    results = {e["backend"]: e for e in r.of("result")}
    assert set(results) == {"bf16", "torchao-tensorwise", "torchao-rowwise"}
    ao = results["torchao-rowwise"]
    assert ao["recipe"] == "torchao Float8LinearConfig.from_recipe_name('rowwise')" and ao["torchao_version"] == "0.18.0+fake"
    assert ao["conversion"]["counts"]["converted"] == 8
    assert {k["name"] for k in ao["conversion"]["kept_high_precision"]} >= {"head.lm_head", "tok_emb"}


def test_torchao_missing_is_reported_and_the_rest_runs():
    r = run_bench(["--device", "cpu", "--workload", "tiny", "--backends", "bf16,torchao,torch-fp8", "--steps", "1",
                   "--warmup", "1", "--no-compile"])
    if r.of("env")[0]["torchao"]["float8_training"]:
        pytest.skip("torchao is installed here")
    assert r.rc == EXIT_TORCHAO_MISSING
    (err,) = r.errors("torchao_missing")
    assert err["backends"] == ["torchao-tensorwise"] and err["fatal"] is False
    assert [e["backend"] for e in r.of("result")] == ["bf16", "torch-fp8"]
    assert r.of("summary")[0]["errors"] == ["torchao_missing"]


# -- TE: fused blocks ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("build,norm,act", [(gpt_tiny, "LayerNorm", "gelu"), (llama_tiny, "RMSNorm", "swiglu")])
def test_fused_blocks_compute_the_same_function(fake_te, build, norm, act):
    te, _ = fake_te
    model, batch = build()
    with torch.no_grad():
        before = model(*batch).item()
    rep = te_convert.convert_to_te_fused(model, te, te_convert.find_high_precision(model))
    assert [f["action"] for f in rep["fusion"]] == ["fuse", "fuse"]
    blk = model.blocks[1]
    assert isinstance(blk.attn.qkv, te.LayerNormLinear) and blk.attn.qkv.normalization == norm
    assert isinstance(blk.mlp, te.LayerNormMLP) and blk.mlp.activation == act
    assert isinstance(blk.norm1, nn.Identity) and isinstance(blk.norm2, nn.Identity)
    assert isinstance(blk.attn.proj, te.Linear)                   # the rest as convert_to_te does it
    kinds = [c["kind"] for c in rep["converted"]]
    assert kinds.count("layernorm_linear") == 2 and kinds.count("layernorm_mlp") == 2
    assert rep["counts"]["converted"] == len(rep["converted"])
    assert type(model.head.lm_head) is nn.Linear
    with torch.no_grad():
        assert model(*batch).item() == pytest.approx(before, rel=1e-5)  # weights (gate before up) mapped right


def test_fusion_refused_with_its_reason(fake_te):
    te, _ = fake_te
    model, _ = llama_tiny()
    model.blocks[0].norm2 = nn.LayerNorm(64)                     # norms of two kinds
    hp = te_convert.find_high_precision(model, extra=["blocks.1.mlp.w2"])
    plan = {i["name"]: i for i in te_convert.fusion_plan(model, hp)}
    assert plan["blocks.0"]["action"] == "skip" and "differ" in plan["blocks.0"]["reason"]
    assert plan["blocks.1"]["action"] == "skip" and "high precision" in plan["blocks.1"]["reason"]

    class Plain(nn.Module):  # no fusion_pattern: its forward is unknown, never fused
        def __init__(self):
            super().__init__()
            self.norm1, self.attn, self.norm2 = nn.LayerNorm(64), nn.Module(), nn.LayerNorm(64)
    assert te_convert.fusion_plan(nn.Sequential(Plain()), {}) == []
    del te.LayerNormMLP
    rep = te_convert.convert_to_te_fused(llama_tiny()[0], te, {})
    assert {f["reason"] for f in rep["fusion"]} == {"this Transformer Engine has no LayerNormLinear / LayerNormMLP"}


def test_te_variants_through_the_cli():
    r = run_bench(["--device", "cpu", "--workload", "tiny", "--backends", "bf16,te-fused,te-current,te-delayed",
                   "--steps", "2", "--warmup", "1", "--no-compile"], pythonpath=[FAKE_TE])
    assert r.rc == 0, r.stderr
    res = {e["backend"]: e for e in r.of("result")}
    assert res["te-current"]["recipe"].startswith("Float8CurrentScaling")
    assert res["te-delayed"]["recipe"].startswith("DelayedScaling")
    assert res["te-fused"]["conversion"]["fusion"][0]["action"] == "fuse"
    base = res["bf16"]["final_loss"]
    for name in ("te-fused", "te-current"):
        assert res[name]["final_loss"] == pytest.approx(base, rel=1e-4)


# -- the lm-head question -----------------------------------------------------------------------------------------

def test_release_lm_head_keeps_a_tied_head():
    model, _ = llama_tiny()
    hp, notes = runner.release_lm_head(te_convert.find_high_precision(model))
    assert "head.lm_head" not in hp and "tok_emb" in hp and notes == [{"name": "head.lm_head", "fp8": True, "reason": "--fp8-lm-head"}]
    gmodel, _ = gpt_tiny()
    hp, notes = runner.release_lm_head(te_convert.find_high_precision(gmodel))
    assert "head.lm_head" in hp and notes[0]["fp8"] is False and "tied" in notes[0]["reason"]


def test_summarize_logits_z_loss():
    logits = torch.tensor([[[0.0, math.log(3.0)], [2.0, -2.0]]])
    s = runner.summarize_logits(logits)
    lse = [math.log(1 + 3), math.log(math.exp(2) + math.exp(-2))]
    assert s["z_loss"] == pytest.approx((lse[0] ** 2 + lse[1] ** 2) / 2, rel=1e-6)
    assert s["abs_max"] == 2.0 and s["rows"] == 2 and s["mean_logsumexp"] == pytest.approx(sum(lse) / 2, rel=1e-6)


def test_fp8_lm_head_through_the_cli():
    r = run_bench(["--device", "cpu", "--workload", "tiny", "--layers", "1", "--backends", "bf16,torch-fp8",
                   "--fp8-lm-head", "--steps", "1", "--warmup", "1", "--no-compile"])
    assert r.rc == 0, r.stderr
    bf16, fp8 = r.of("result")
    assert bf16.get("lm_head_fp8") is None and fp8["lm_head_fp8"][0]["fp8"] is False  # tiny ties its head
    for res in (bf16, fp8):
        st = res["logit_stats"]
        assert st["layer"] == "head.lm_head" and st["z_loss"] > 0 and st["rows"] == 2 * 32


def test_real_torchao_convert_keeps_the_head_in_bf16():
    info = fp8_torchao.load_torchao(force=True)
    try:
        if fp8_torchao.unavailable_reason(info):
            pytest.skip(fp8_torchao.unavailable_reason(info))
        model, _ = llama_tiny()
        plan = te_convert.plan_conversion(model, te_convert.find_high_precision(model), rule="torch", kinds=("linear",))
        names, _ = fp8_torchao.convert(model, info, "tensorwise", plan)
        swapped = sorted(n for n, m in model.named_modules() if type(m).__name__ == "Float8Linear")
        assert swapped == names and type(model.head.lm_head) is nn.Linear
    finally:
        fp8_torchao._CACHE.clear()


@pytest.mark.parametrize("name,family", [
    ("sm90_xmma_gemm_e4m3e4m3_bf16_f32_tn_n_tilesize128x128x128", "gemm"),
    ("nvjet_tst_256x128_64x4_1x2_h_bz_coopA_NTN", "gemm"),
    ("void transformer_engine::detail::cast_transpose_fused_kernel<...>", "fp8 cast / amax / transpose"),
    ("triton_red_fused_abs_amax_0", "fp8 cast / amax / transpose"),
    ("flash_fwd_kernel", "attention"),
    ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<cutlass::bfloat16_t>>",
     "attention"),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>", "optimizer"),
    ("rmsnorm_fwd_tuned_kernel", "norm"),
    ("triton_poi_fused_add_mul_silu_3", "elementwise / fused"),
    ("cudaLaunchKernel", "other"),
])
def test_kernel_families(name, family):
    assert runner.kernel_family(name) == family


def _trace():
    """A Chrome trace as torch.profiler writes it: two launches (runtime and driver API), their kernels, a copy, the
    GPU-side annotation of a record_function range (not device work) and a CPU op."""
    return [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 50},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10, "dur": 5, "args": {"correlation": 1}},
        {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernelEx", "ts": 20, "dur": 5, "args": {"correlation": 2}},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "pl.forward", "ts": 100, "dur": 400, "args": {}},
        {"ph": "X", "cat": "kernel", "name": "nvjet_sm90_gemm", "ts": 300, "dur": 200, "args": {"correlation": 2}},
        {"ph": "X", "cat": "kernel", "name": "amax_kernel", "ts": 100, "dur": 100, "args": {"correlation": 1}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "ts": 150, "dur": 20,
         "args": {"correlation": 9}},
        {"ph": "i", "cat": "kernel", "name": "not a duration event", "ts": 0},
    ]


def test_trace_device_activity_and_idle():
    from plbench import trace
    act = trace.device_activity(_trace())
    assert [a[2] for a in act] == ["amax_kernel", "Memcpy HtoD (Pinned -> Device)", "nvjet_sm90_gemm"]
    assert [a[3] for a in act] == [10, None, 20]  # launched by the runtime and by the driver API; the copy's unknown
    busy, idle = trace.busy_and_idle_us(act)
    assert busy == 300 and idle == 100  # the copy overlaps the first kernel; 200..300 is idle
    rows = trace.per_name_ms(act + [(600.0, 200.0, "nvjet_sm90_gemm", None)], steps=2)
    assert rows["nvjet_sm90_gemm"] == (pytest.approx(0.2), 2) and rows["amax_kernel"] == (pytest.approx(0.05), 1)


def test_profile_steps_through_the_cli():
    r = run_bench(["--device", "cpu", "--workload", "tiny", "--layers", "1", "--backends", "bf16", "--steps", "1",
                   "--warmup", "1", "--no-compile", "--profile-steps", "1"])
    assert r.rc == 0, r.stderr
    prof = r.of("result")[0]["profile"]
    assert prof["steps"] == 1 and prof["clock"] == "cpu" and prof["total_ms_per_step"] > 0
    assert prof["total_ms_per_step"] == pytest.approx(sum(prof["families_ms_per_step"].values()))
    assert prof["top_kernels"] and "gemm" in prof["families_ms_per_step"]  # aten::mm / addmm on the CPU
    bad = run_bench(["--device", "cpu", "--workload", "tiny", "--profile-steps", "-1"])
    assert bad.rc == 2 and bad.errors("usage")


# -- TE: te.DotProductAttention (FP8 attention) ----------------------------------------------------------------------

@pytest.mark.parametrize("build", [gpt_tiny, llama_tiny])
def test_te_attention_computes_the_same_function(fake_te, build):
    te, _ = fake_te
    model, batch = build()
    with torch.no_grad():
        before = model(*batch).item()
    names = te_convert.use_te_attention(model, te)
    assert names == ["blocks.0.attn", "blocks.1.attn"]
    assert all(isinstance(model.get_submodule(n).core, te.DotProductAttention) for n in names)
    assert model.blocks[0].attn.core.groups == model.blocks[0].attn.kv_heads  # GQA handed to TE, not expanded
    with torch.no_grad():
        assert model(*batch).item() == pytest.approx(before, rel=1e-5)


def test_fp8_attention_recipe_and_backends(fake_te):
    _, recipe = fake_te
    r, text = te_convert.make_recipe(recipe, "delayed", fp8_dpa=True)
    assert r.fp8_dpa is True and r.fp8_mha is False and text.endswith("fp8_dpa=True)")
    assert te_convert.make_recipe(recipe, "delayed")[0].fp8_dpa is False
    assert te_convert.make_recipe(recipe, "current", fp8_dpa=True)[0].fp8_dpa is True
    spec = backends.BACKENDS
    assert (spec["te-dpa"]["attention"], spec["te-dpa"]["fused"]) == ("te-fp8", False)
    assert (spec["te-fused-dpa"]["attention"], spec["te-fused-dpa"]["fused"]) == ("te-fp8", True)
    assert spec["te-fused-tedpa-bf16"]["attention"] == "te-bf16"
    for name in ("te-fused-delayed", "te-dpa", "te-fused-dpa", "te-fused-tedpa-bf16"):
        assert backends.te_recipe_kind(name, "auto", True) == "delayed"  # never the compile-time auto switch


def test_te_dpa_backend_end_to_end_with_fake_te():
    r = run_bench(["--workload", "tiny", "--device", "cpu", "--backends", "bf16,te-fused-dpa", "--steps", "2",
                   "--warmup", "1", "--no-compile"], pythonpath=[FAKE_TE])
    assert r.rc == 0, r.stderr
    bf16, dpa = r.of("result")
    assert dpa["attention"] == {"kernel": "te.DotProductAttention", "fp8": True, "layers": ["blocks.0.attn", "blocks.1.attn"]}
    assert dpa["recipe"].startswith("DelayedScaling") and "fp8_dpa=True" in dpa["recipe"]
    assert dpa["losses"][0] == pytest.approx(bf16["losses"][0], rel=1e-4)  # fake TE = plain torch math


def test_bf16_with_te_attention_is_a_bf16_run_that_needs_te():
    r = run_bench(["--workload", "tiny", "--device", "cpu", "--backends", "bf16,bf16-tedpa", "--steps", "2",
                   "--warmup", "1", "--no-compile"], pythonpath=[FAKE_TE])
    assert r.rc == 0, r.stderr
    bf16, tedpa = r.of("result")
    assert tedpa["attention"] == {"kernel": "te.DotProductAttention", "fp8": False, "layers": ["blocks.0.attn", "blocks.1.attn"]}
    assert tedpa["recipe"] is None and tedpa["conversion"] is None  # no FP8 anywhere
    assert tedpa["losses"] == pytest.approx(bf16["losses"], rel=1e-4)
    runnable, (err,) = cli.gate_backends(["bf16", "bf16-tedpa"], _env(te=False, fp8=False), "cuda")
    assert runnable == ["bf16"] and err.code == "te_missing" and err.extra["backends"] == ["bf16-tedpa"]
    assert cli.gate_backends(["bf16-tedpa"], _env(te=True, fp8=False), "cuda") == (["bf16-tedpa"], [])  # no FP8 needed
