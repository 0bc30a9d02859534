"""--mode ab: the user's project as it is (ORIG) against the copy Precision Lens converted (CONV), on the CPU.

The fixture pair (fixtures/ab/, see its README) was produced with
`cp -r orig conv && node out/cli.js check conv --fix --unsafe-fixes --isolated`: conv/fp8_fallback.py is the real
generated fallback module. Every test copies the pair into tmp_path and runs the benchmark's CLI in a subprocess.
"""
import os
import shutil
import sys

import pytest

from conftest import FAKE_TE, HERE, run_bench

FIXTURES = os.path.join(HERE, "fixtures", "ab")
FAKE_TORCHAO = os.path.join(HERE, "fake_torchao")
FAST = ["--device", "cpu", "--steps", "3", "--warmup", "1", "--no-compile", "--batch", "2", "--seq", "32"]


def te_or_torchao_installed():
    for name in ("transformer_engine", "torchao"):
        try:
            __import__(name)
            return True
        except Exception:
            pass
    return False


def copy_pair(tmp_path, fixtures):
    orig, conv = str(tmp_path / "orig"), str(tmp_path / "conv")
    shutil.copytree(os.path.join(fixtures, "orig"), orig)
    shutil.copytree(os.path.join(fixtures, "conv"), conv)
    return orig, conv


@pytest.fixture
def pair(tmp_path):
    return copy_pair(tmp_path, FIXTURES)


def ab(orig, conv, *extra, **kw):
    return run_bench(["--mode", "ab", "--workload", "wl:build", "--workspace", orig, "--converted", conv] + FAST
                     + list(extra), **kw)


def edit(path, old, new):
    with open(path) as f:
        text = f.read()
    assert old in text, (path, old)
    with open(path, "w") as f:
        f.write(text.replace(old, new))


def test_fixture_is_the_generated_conversion():
    conv = os.path.join(FIXTURES, "conv")
    with open(os.path.join(conv, "fp8_fallback.py")) as f:
        fallback = f.read()
    assert fallback.startswith("# precision-lens: fp8 fallback")
    assert "def fp8_autocast_context(" in fallback and "def fp8_available(" in fallback
    with open(os.path.join(conv, "model.py")) as f:
        model = f.read()
    assert "from fp8_fallback import fp8_linear" in model and "nn.Linear(dim, 3 * dim)" not in model


def test_ab_runs_both_arms_with_the_same_weights(pair, tmp_path):
    orig, conv = pair
    # The converted copy's own initialisation differs: only loading the original's weights makes the first losses equal.
    edit(os.path.join(conv, "wl.py"), "    model = TinyGPT(", "    torch.manual_seed(seed + 1)\n    model = TinyGPT(")
    out = str(tmp_path / "ab.json")
    r = ab(orig, conv, "--peer", "none", "--json-out", out)
    assert r.rc == 0, r.stderr
    assert [e["event"] for e in r.events if e["event"] != "progress"] == ["env", "result", "result", "summary"]
    env = r.of("env")[0]
    assert env["mode"] == "ab"
    assert {p["backend"] for p in r.of("progress")} == {"original", "converted"}
    assert {p["phase"] for p in r.of("progress")} >= {"build", "warmup", "measure"}
    o, c = r.of("result")
    assert (o["backend"], c["backend"]) == ("original", "converted")
    for res in (o, c):
        assert len(res["losses"]) == 4 and res["loss_measured_from"] == 1
        assert res["tokens_per_s"] > 0 and res["step_ms"]["median"] > 0 and res["emulated"] is True
        assert "not a benchmark" in res["label"]
    assert abs(o["losses"][0] - c["losses"][0]) < 1e-4, (o["losses"], c["losses"])
    assert c["batches_match_original"] is True
    # Without Transformer Engine the generated fallback builds torch.nn: no te.* modules, the BF16 fallback's reason
    assert c["fp8_gemms"]["modules"] == 0 and c["fp8_gemms"]["forwards_total"] == 0
    fb = c["fallback"]
    if not te_or_torchao_installed():
        assert fb["fp8_available"] is False and fb["mode"] == "bf16-fallback" and c["fallback_mode"] == "bf16-fallback"
        assert fb["mode_line"].startswith("Running in BF16 fallback: ")
    assert fb["module"] == "fp8_fallback" and fb["file"] == os.path.realpath(os.path.join(conv, "fp8_fallback.py"))
    assert fb["used_by_model"] is True
    s = r.of("summary")[0]
    assert s["mode"] == "ab" and s["baseline"] == "original" and s["backends"] == ["original", "converted"]
    ratios = s["ratios"]["converted"]
    for key in ("tokens_per_s", "step_time_median", "final_loss_rel_diff", "max_step_loss_rel_diff_measured"):
        assert ratios[key] is not None, key
    a = s["ab"]
    assert a["original"] == os.path.realpath(orig) and a["converted"] == os.path.realpath(conv)
    assert a["fallback_module"] == "fp8_fallback" and a["fp8_gemms"]["modules"] == 0
    assert a["loss_rel_final"] == pytest.approx(c["final_loss"] / o["final_loss"] - 1)
    assert "peak_memory_ratio" in a and a["peak_memory_ratio"] is None  # CPU: no CUDA memory statistics
    assert a["peer"]["ran"] is False and a["peer"]["requested"] == "none"
    assert s["exit_code"] == 0 and s["errors"] == []
    import json
    with open(out) as f:
        doc = json.load(f)
    assert doc["summary"]["ab"]["converted"] == a["converted"] and len(doc["results"]) == 2


def test_same_module_names_resolve_in_each_copy(pair):
    """ORIG and CONV both have model.py and wl.py: each arm must build its own copy's model."""
    orig, conv = pair
    line = ("    import sys, os\n    print('BUILT-FROM', os.path.realpath(sys.modules[TinyGPT.__module__].__file__), "
            "os.path.realpath(__file__))\n    return model, batch_factory")
    for folder in (orig, conv):
        edit(os.path.join(folder, "wl.py"), "    return model, batch_factory", line)
    r = ab(orig, conv, "--peer", "none")
    assert r.rc == 0, r.stderr
    built = [l.split()[1:] for l in r.stderr.splitlines() if l.startswith("BUILT-FROM")]
    real = [os.path.realpath(os.path.join(d, f)) for d in (orig, conv) for f in ("model.py", "wl.py")]
    assert built == [real[:2], real[2:]], built
    assert "BUILT-FROM" not in r.stdout  # user prints go to stderr, stdout is the protocol


def _fake_te_with_state(tmp_path):
    """The repository's fake TE plus TE 2.x's FP8GlobalStateManager (transformer_engine.pytorch.quantization), set
    inside te.autocast, and an _extra_state on te.Linear as real TE has."""
    root = str(tmp_path / "fake_te")
    shutil.copytree(FAKE_TE, root)
    pkg = os.path.join(root, "transformer_engine", "pytorch")
    with open(os.path.join(pkg, "quantization.py"), "w") as f:
        f.write("class FP8GlobalStateManager(object):\n    FP8_ENABLED = False\n\n"
                "    @classmethod\n    def is_fp8_enabled(cls):\n        return cls.FP8_ENABLED\n")
    with open(os.path.join(pkg, "__init__.py"), "a") as f:
        f.write('''

from .quantization import FP8GlobalStateManager as _State

_plain_autocast = autocast


@contextlib.contextmanager
def autocast(enabled=True, calibrating=False, recipe=None, amax_reduction_group=None):
    before = _State.FP8_ENABLED
    _State.FP8_ENABLED = enabled
    try:
        with _plain_autocast(enabled=enabled, recipe=recipe):
            yield
    finally:
        _State.FP8_ENABLED = before


def _get_extra_state(self):
    return torch.zeros(1)


def _set_extra_state(self, state):
    pass


Linear.get_extra_state = _get_extra_state
Linear.set_extra_state = _set_extra_state
''')
    return root


FP8_FALLBACK_FAKE = '''"""A fallback where FP8 runs (fake TE on the CPU): te.* layers and TE autocast inside BF16 autocast."""
import contextlib

import torch
import transformer_engine.pytorch as te


def fp8_available():
    return True, ""


def fp8_linear(in_features, out_features, bias=True, **kwargs):
    return te.Linear(in_features, out_features, bias=bias, device="cpu")


def fp8_layernorm(normalized_shape, eps=1e-5, **kwargs):
    return te.LayerNorm(normalized_shape, eps=eps, device="cpu")


@contextlib.contextmanager
def fp8_autocast_context(enabled=True, recipe=None):
    with torch.autocast("cpu", dtype=torch.bfloat16), te.autocast(enabled=enabled, recipe=recipe):
        yield
'''


def test_fp8_gemms_counted_under_fake_te(pair, tmp_path):
    orig, conv = pair
    fake = _fake_te_with_state(tmp_path)
    with open(os.path.join(conv, "fp8_fallback.py"), "w") as f:
        f.write(FP8_FALLBACK_FAKE)
    # one te.Linear forward outside FP8 per step: counted in forwards_total, not in forwards_fp8
    edit(os.path.join(conv, "model.py"), "        x = x + self.proj(y)",
         "        with fp8_autocast_context(enabled=False):\n            x = x + self.proj(y)")
    edit(os.path.join(conv, "model.py"), "from fp8_fallback import fp8_linear",
         "from fp8_fallback import fp8_linear, fp8_autocast_context")
    r = ab(orig, conv, "--peer", "none", pythonpath=[fake])
    assert r.rc == 0, r.stderr
    c = r.of("result")[1]
    g = c["fp8_gemms"]
    layers, steps = 2, 4  # 2 blocks x (qkv, proj, fc1, fc2); 1 warm-up + 3 measured steps
    assert g["modules"] == 4 * layers and g["module_types"] == {"Linear": 4 * layers}
    assert g["norm_modules"] == 2 * layers + 1
    assert g["forwards_total"] == 4 * layers * steps
    assert g["forwards_fp8"] == 3 * layers * steps
    assert g["state_check"] == "transformer_engine.pytorch.quantization.FP8GlobalStateManager.is_fp8_enabled"
    assert c["fallback"]["fp8_available"] is True and c["fallback_mode"] == "fp8"
    assert r.of("summary")[0]["ab"]["fp8_gemms"]["forwards_fp8"] == g["forwards_fp8"]
    # te.Linear's _extra_state is the only difference and is allowed; the weights are the original's
    o = r.of("result")[0]
    assert abs(o["losses"][0] - c["losses"][0]) < 1e-4


def test_attention_reported_from_the_fallbacks_state(pair, tmp_path):
    # fp8_attention (PL107) keeps what it built and why it left calls to torch in the module: the A/B reads it after
    # the converted arm. Here a fallback whose attention ran in TE's kernel for one shape and kept torch's for a mask.
    orig, conv = pair
    fake = _fake_te_with_state(tmp_path)
    with open(os.path.join(conv, "fp8_fallback.py"), "w") as f:
        f.write(FP8_FALLBACK_FAKE + '\n_PL_ATTENTION = {(4, 4, 8, True, None, "cpu"): None}\n'
                '_PL_ATTENTION_LOGGED = {"an attention mask"}\n')
    r = ab(orig, conv, "--peer", "none", pythonpath=[fake])
    assert r.rc == 0, r.stderr
    att = r.of("result")[1]["attention"]
    assert att["te_modules"] == 1 and att["torch_reasons"] == ["an attention mask"]
    assert att["summary"] == "te.DotProductAttention (fused, BF16), 1 shape; torch's for: an attention mask"
    assert r.of("summary")[0]["ab"]["attention"] == att
    assert "[converted] attention: te.DotProductAttention (fused, BF16), 1 shape" in r.stderr


def test_no_attention_report_without_fp8_attention(pair):
    orig, conv = pair  # the fixture's module was generated before fp8_attention existed
    r = ab(orig, conv, "--peer", "none")
    assert r.rc == 0, r.stderr
    assert "attention" not in r.of("result")[1]
    assert r.of("summary")[0]["ab"]["attention"] is None


def test_torchao_peer_runs_on_the_original_model(pair):
    orig, conv = pair
    r = ab(orig, conv, "--peer", "torchao", pythonpath=[FAKE_TORCHAO])
    assert r.rc == 0, r.stderr
    names = [e["backend"] for e in r.of("result")]
    assert names == ["original", "converted", "torchao-original"]
    peer = r.of("result")[2]
    assert peer["conversion"]["counts"]["converted"] == 8  # the block linears; lm-head and embeddings stay
    assert "lm_head" not in [c["name"] for c in peer["conversion"]["converted"]]
    s = r.of("summary")[0]
    assert s["ab"]["peer"]["ran"] is True and "torchao-original" in s["ratios"]
    vp = s["ab"]["converted_vs_peer"]
    assert vp["peer_compiled"] is False and vp["tokens_per_s_ratio"] == pytest.approx(
        r.of("result")[1]["tokens_per_s"] / peer["tokens_per_s"])


def test_torchao_peer_compiled_beside_eager_arms(pair):
    """--peer-compile on: torchao's best configuration (compiled) in the same process as the eager arms."""
    orig, conv = pair
    r = ab(orig, conv, "--peer", "torchao", "--peer-compile", "on", pythonpath=[FAKE_TORCHAO])
    assert r.rc == 0, r.stderr
    o, c, peer = r.of("result")
    assert o["compile_requested"] is False and c["compile_requested"] is False
    import torch
    if hasattr(torch, "compile"):
        assert peer["compile"] is True and peer["compile_requested"] is True and "torch.compile" in peer["label"]
    else:  # torch 1.13: said, and run eager
        assert peer["compile"] is False and "no torch.compile" in r.stderr
    assert r.of("summary")[0]["ab"]["converted_vs_peer"]["peer_compiled"] is peer["compile"]


@pytest.mark.skipif(te_or_torchao_installed(), reason="torchao importable here")
def test_torchao_peer_missing_is_one_error_and_the_arms_still_run(pair):
    orig, conv = pair
    r = ab(orig, conv, "--peer", "torchao")
    assert r.rc == 10, r.stderr
    (err,) = r.errors("torchao_missing")
    assert err["backend"] == "torchao-original" and err["fatal"] is False
    assert [e["backend"] for e in r.of("result")] == ["original", "converted"]
    assert r.of("summary")[0]["exit_code"] == 10
    # auto: no torchao, no peer, no error
    r = ab(orig, conv)
    assert r.rc == 0 and not r.errors() and r.of("summary")[0]["ab"]["peer"]["ran"] is False


def test_converted_missing_or_not_a_folder(pair, tmp_path):
    orig, conv = pair
    r = run_bench(["--mode", "ab", "--workload", "wl:build", "--workspace", orig] + FAST)
    assert r.rc == 2 and r.errors("usage") and "--converted" in r.errors()[0]["message"]
    r = ab(orig, str(tmp_path / "nope"))
    assert r.rc == 2 and "is not a folder" in r.errors("usage")[0]["message"]
    r = ab(orig, orig)
    assert r.rc == 2 and "same folder" in r.errors("usage")[0]["message"]
    r = run_bench(["--mode", "ab", "--workload", "tiny", "--workspace", orig, "--converted", conv] + FAST)
    assert r.rc == 2 and "module:function" in r.errors("usage")[0]["message"]


def test_no_fallback_module(pair, tmp_path):
    orig, _ = pair
    plain = str(tmp_path / "plain")
    shutil.copytree(orig, plain)
    r = ab(orig, plain)
    assert r.rc == 11, r.stderr
    (err,) = r.errors("no_fallback")
    assert err["message"] == "%s has no fp8_fallback.py: run `precision-lens check %s --fix --unsafe-fixes` first" % (
        os.path.realpath(plain), os.path.realpath(plain))
    assert err["fatal"] is True and not r.of("result")
    # a fallback module under another name, in a subfolder
    _, conv = pair
    os.makedirs(os.path.join(conv, "utils"))
    shutil.move(os.path.join(conv, "fp8_fallback.py"), os.path.join(conv, "utils", "precision.py"))
    edit(os.path.join(conv, "model.py"), "from fp8_fallback import", "from utils.precision import")
    r = ab(orig, conv, "--fallback-module", "precision", "--peer", "none")
    assert r.rc == 0, r.stderr
    fb = r.of("result")[1]["fallback"]
    assert fb["module"] == "utils.precision" and fb["used_by_model"] is True
    # the setting's path form, as `precision-lens measure` may pass it
    r = ab(orig, conv, "--fallback-module", "utils/precision.py", "--peer", "none")
    assert r.rc == 0, r.stderr
    assert r.of("summary")[0]["ab"]["fallback_module"] == "utils.precision"


@pytest.mark.parametrize("change", ["shape", "name"])
def test_weights_that_do_not_match(pair, change):
    orig, conv = pair
    if change == "shape":
        edit(os.path.join(conv, "model.py"), "self.fc1 = fp8_linear(dim, 4 * dim)", "self.fc1 = fp8_linear(dim, 2 * dim)")
        edit(os.path.join(conv, "model.py"), "self.fc2 = fp8_linear(4 * dim, dim)", "self.fc2 = fp8_linear(2 * dim, dim)")
    else:
        edit(os.path.join(conv, "model.py"), "self.fc1 = fp8_linear(", "self.fc_in = fp8_linear(")
        edit(os.path.join(conv, "model.py"), "self.fc1(", "self.fc_in(")
    r = ab(orig, conv, "--peer", "none")
    assert r.rc == 12, r.stderr
    (err,) = r.errors("weights_mismatch")
    assert err["backend"] == "converted"
    if change == "name":
        assert "blocks.0.fc_in.weight" in err["missing_keys"] and "blocks.0.fc1.weight" in err["unexpected_keys"]
    else:
        assert "size mismatch" in err["message"]
    assert [e["backend"] for e in r.of("result")] == ["original"]
    s = r.of("summary")[0]
    assert s["exit_code"] == 12 and s["errors"] == ["weights_mismatch"] and s["ab"]["loss_rel_final"] is None
    assert "Traceback" not in r.stderr


def test_no_cuda_with_device_auto(pair):
    orig, conv = pair
    args = ["--mode", "ab", "--workload", "wl:build", "--workspace", orig, "--converted", conv, "--steps", "1"]
    r = run_bench(args)
    if r.of("env") and r.of("env")[0]["cuda_available"]:
        pytest.skip("a CUDA device is visible")
    assert r.rc == 4 and r.errors("no_cuda")
    assert r.of("env")[0]["mode"] == "ab"


def test_bad_workload_names_the_copy(pair):
    orig, conv = pair
    r = run_bench(["--mode", "ab", "--workload", "wl:nope", "--workspace", orig, "--converted", conv] + FAST)
    assert r.rc == 8
    assert r.errors("bad_workload")[0]["message"].startswith("original copy (")


def test_the_roofline_step_runs_on_cuda_paths(monkeypatch):
    """cli.measure_roofline (shared by the A/B and the training modes) only runs on CUDA: call it with the GPU path
    forced and the runner's GPU work replaced, so a broken name in it fails here and not first on the H200 (it did:
    a NameError after both arms of every A/B had been measured)."""
    from types import SimpleNamespace
    from plbench import cli, runner
    calls = []
    monkeypatch.setattr(runner, "free_memory", lambda device: calls.append(("free", device)))
    monkeypatch.setattr(runner, "roofline", lambda rc, fp8: calls.append(("roofline", fp8)) or {"bf16_tflops": 1.0})
    rc = SimpleNamespace(gemm_shapes=[(16, 32, 64)])
    session = SimpleNamespace(state={})
    args = SimpleNamespace(roofline=True)
    out = cli.measure_roofline(rc, args, "cuda", session, {"torch_fp8": {"available": True}})
    assert out == {"bf16_tflops": 1.0} and calls == [("free", "cuda"), ("roofline", True)]
    assert session.state["phase"] == "roofline"
    assert cli.measure_roofline(rc, args, "cpu", session, {}) is None

    def boom(rc, fp8):
        raise RuntimeError("CUDA out of memory")
    monkeypatch.setattr(runner, "roofline", boom)
    assert cli.measure_roofline(rc, args, "cuda", session, {"torch_fp8": {"available": False}}) == {
        "error": "RuntimeError: CUDA out of memory"}


def test_loss_recipe_eval_loss_and_noise_floor(pair):
    """The loss comparison: warm-up + cosine schedule and clipping change the training (the losses differ from a
    constant-lr run), every arm reports an eval loss on batches it never trained on, and --repeat-original adds the
    BF16 arm again; the summary compares FP8's eval loss and the noise floor against the original's."""
    orig, conv = pair
    plain = ab(orig, conv, "--peer", "none")
    r = ab(orig, conv, "--peer", "none", "--lr", "1e-3", "--lr-warmup", "2", "--lr-schedule", "cosine",
           "--clip-grad", "0.5", "--eval-loss-batches", "2", "--repeat-original")
    assert r.rc == 0, r.stderr
    res = {e["backend"]: e for e in r.of("result")}
    assert set(res) == {"original", "converted", "original-repeat"}
    for arm in res.values():
        assert arm["eval_batches"] == 2 and arm["eval_loss"] > 0
        assert arm["lr_schedule"] == {"lr": 1e-3, "warmup": 2, "schedule": "cosine", "clip_grad": 0.5}
    # The same weights and batches: the repeated BF16 arm starts where the original did.
    assert abs(res["original"]["losses"][0] - res["original-repeat"]["losses"][0]) < 1e-4
    # The recipe is applied: after the first step the losses are not those of the constant-lr run.
    assert res["original"]["losses"][1:] != plain.of("result")[0]["losses"][1:]
    a = r.of("summary")[0]["ab"]
    assert a["eval_loss_rel"] == pytest.approx(res["converted"]["eval_loss"] / res["original"]["eval_loss"] - 1)
    assert a["noise_floor_eval_rel"] == pytest.approx(res["original-repeat"]["eval_loss"] / res["original"]["eval_loss"] - 1)
    assert "A/B: converted eval loss" in r.stderr and "noise floor" in r.stderr


def test_rounded_original_starts_from_the_weights_rounded_to_bf16(pair):
    """--rounded-original: the original arm once more from its initial weights each rounded once to BF16 (the run's
    sensitivity to a change far smaller than FP8's); its eval loss is compared with the original's in the summary."""
    orig, conv = pair
    r = ab(orig, conv, "--peer", "none", "--eval-loss-batches", "2", "--repeat-original", "--rounded-original")
    assert r.rc == 0, r.stderr
    res = {e["backend"]: e for e in r.of("result")}
    assert set(res) == {"original", "converted", "original-repeat", "original-rounded"}
    p = res["original-rounded"]["perturbation"]
    # Random FP32 weights: nearly every value changes, none by more than BF16's unit roundoff (2^-8 relative).
    assert p["values"] > 0 and p["changed"] > 0.9 * p["values"]
    assert 0 < p["max_rel"] <= 2 ** -8
    assert "rounded once to BF16" in res["original-rounded"]["weights"]
    # A different start: the first loss moves (a little), unlike the repeat's.
    first = [res[a]["losses"][0] for a in ("original", "original-repeat", "original-rounded")]
    assert abs(first[0] - first[1]) < 1e-6 and first[2] != first[0]
    assert abs(first[2] / first[0] - 1) < 0.01
    a = r.of("summary")[0]["ab"]
    assert a["sensitivity_eval_rel"] == pytest.approx(res["original-rounded"]["eval_loss"] / res["original"]["eval_loss"] - 1)
    assert "rounded once to BF16: eval loss" in r.stderr
    plain = ab(orig, conv, "--peer", "none", "--eval-loss-batches", "2")
    assert plain.of("summary")[0]["ab"]["sensitivity_eval_rel"] is None


def test_round_to_bf16_counts_changed_values_and_leaves_bf16_parameters():
    import torch
    from plbench.ab import round_to_bf16
    m = torch.nn.Linear(4, 4)
    with torch.no_grad():
        m.weight.copy_(torch.tensor([1.0, 1.0 + 2 ** -12, 3.0, 0.0]).repeat(4, 1))
    m.bias.data = m.bias.data.to(torch.bfloat16)
    before = m.bias.detach().clone()
    out = round_to_bf16(m)
    assert out["values"] == 16 and out["changed"] == 4
    assert out["max_rel"] == pytest.approx(2 ** -12 / (1 + 2 ** -12))
    assert torch.equal(m.weight[:, 1], torch.ones(4)) and torch.equal(m.bias, before)


def test_lr_factor_warmup_then_cosine_to_a_tenth():
    from types import SimpleNamespace
    from plbench.runner import lr_factor
    f = lr_factor(SimpleNamespace(lr_warmup=4, lr_schedule="cosine"), 14)
    assert [round(f(i), 3) for i in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert f(4) == pytest.approx(1.0) and f(13) == pytest.approx(0.1) and 0.1 < f(8) < 1.0
    assert lr_factor(SimpleNamespace(lr_warmup=0, lr_schedule="constant"), 10) is None
    g = lr_factor(SimpleNamespace(lr_warmup=2, lr_schedule="constant"), 10)
    assert [g(i) for i in (0, 1, 2, 9)] == [0.5, 1.0, 1.0, 1.0]


# --------------------------------------------------------------------------------------------------------------
# The compile path: the converted script hands its model to torch.compile through fp8_for_compile (PL306)

COMPILE_FIXTURES = os.path.join(HERE, "fixtures", "ab-compile")


@pytest.fixture
def compile_pair(tmp_path):
    return copy_pair(tmp_path, COMPILE_FIXTURES)


def test_compile_fixture_is_the_generated_fix():
    conv = os.path.join(COMPILE_FIXTURES, "conv")
    with open(os.path.join(conv, "train.py")) as f:
        train = f.read()
    assert "torch.compile(fp8_for_compile(model), " in train and "from fp8_fallback import fp8_for_compile" in train
    for name in ("model.py", "wl.py"):  # torchao owns the Linears: no te.* conversion
        with open(os.path.join(conv, name)) as a, open(os.path.join(COMPILE_FIXTURES, "orig", name)) as b:
            assert a.read() == b.read(), name
    with open(os.path.join(conv, "fp8_fallback.py")) as f:
        assert "def fp8_for_compile(" in f.read()


def test_compile_path_eager_runs_the_model_as_the_script_does(compile_pair):
    """Eager, the converted script never calls fp8_for_compile: the converted arm is the model as it is, BF16."""
    orig, conv = compile_pair
    r = ab(orig, conv, "--peer", "none")
    assert r.rc == 0, r.stderr
    o, c = r.of("result")
    assert "fp8_for_compile(model) under torch.compile as train.py does" in c["label"]
    assert c["fp8_gemms"]["modules"] == 0 and c["fp8_gemms"]["module_types"] == {}
    assert c["fallback_mode"] == "bf16-fallback" and "eager" in c["recipe"]
    assert c["fallback"]["called_in"] == os.path.realpath(os.path.join(conv, "train.py"))
    # Same weights, same batches, same BF16 autocast: the same losses
    assert c["losses"] == pytest.approx(o["losses"], rel=1e-5)
    assert "torch.autocast(bfloat16) with fp8_fallback.fp8_for_compile(model)" in c["precision"]


def test_compile_path_compiled_calls_fp8_for_compile(compile_pair):
    """Compiled, the arm calls the fallback's fp8_for_compile before torch.compile, as the script does: on the CPU it
    says why it stays BF16 (no CUDA device), and the losses match the original's."""
    import torch
    if not hasattr(torch, "compile"):
        pytest.skip("torch %s has no torch.compile" % torch.__version__)
    orig, conv = compile_pair
    r = ab(orig, conv, "--peer", "none", "--compile")
    assert r.rc == 0, r.stderr
    o, c = r.of("result")
    assert c["compile"] is True and c["compile_requested"] is True
    assert c["fallback"]["mode_line"] == "Running in BF16 fallback (torch.compile): no CUDA device"
    assert c["losses"] == pytest.approx(o["losses"], rel=1e-3)


def test_compile_path_without_fp8_for_compile_in_the_module(compile_pair):
    """A fallback module written before fp8_for_compile existed: one clear error, not a traceback."""
    orig, conv = compile_pair
    path = os.path.join(conv, "fp8_fallback.py")
    edit(path, "def fp8_for_compile(", "def _gone_fp8_for_compile(")
    r = ab(orig, conv, "--peer", "none")
    (err,) = r.errors("no_fallback")
    assert "defines no fp8_for_compile, which" in err["message"] and "train.py calls" in err["message"]


def test_lr_auto_is_the_model_sizes_and_the_same_for_every_arm(pair):
    from plbench.runner import lr_for_params
    # GPT-3's table at its sizes, interpolated between them, held at its ends.
    assert [lr_for_params(n) for n in (10e6, 125e6, 760e6, 13e9, 1e12)] == [6e-4, 6e-4, 2.5e-4, 1e-4, 6e-5]
    assert 2.5e-4 > lr_for_params(1e9) > 2e-4
    orig, conv = pair
    r = ab(orig, conv, "--peer", "none", "--lr", "auto", "--lr-warmup", "1", "--lr-schedule", "cosine")
    assert r.rc == 0, r.stderr
    o, c = r.of("result")
    assert o["lr"] == c["lr"] == lr_for_params(o["params"]) == 6e-4  # a tiny model: the table's smallest size's
    assert o["lr_schedule"]["lr"] == o["lr"]
    bad = ab(orig, conv, "--peer", "none", "--lr", "fast")
    assert bad.rc != 0 and "--lr takes a number or auto" in bad.stderr


def test_fp8_counter_sees_te_modules_held_outside_the_children():
    # The fallback's fused te.LayerNormMLP is kept in its MLP's __dict__ (no new checkpoint key), not as a child: the
    # counter finds and hooks it beside the registered te.* modules, once each.
    import types

    torch = pytest.importorskip("torch")
    from plbench.ab import Fp8Counter

    class Linear(torch.nn.Linear):
        pass

    class LayerNormMLP(torch.nn.Module):
        def forward(self, x):
            return x

    te = types.SimpleNamespace(Linear=Linear, LayerNormMLP=LayerNormMLP)

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w1 = Linear(4, 4)
            self.__dict__["_pl_mlp"] = LayerNormMLP()

        def forward(self, x):
            return self.__dict__["_pl_mlp"](x)

    model = torch.nn.Sequential(MLP(), Linear(4, 4))
    counter = Fp8Counter(model, te, compiling=False)
    model(torch.zeros(2, 4))
    report = counter.report()
    assert report["modules"] == 3
    assert report["module_types"] == {"Linear": 2, "LayerNormMLP": 1}
    assert report["forwards_total"] == 2  # the held LayerNormMLP, then the registered Linear; w1 is not called


def test_warm_start_every_arm_from_the_originals_trained_weights(pair):
    """--warm-start-steps N: the original trains N BF16 steps first; every arm (the converted copy, the repeat) starts
    from the weights it leaves, so their first measured losses agree with each other and differ from a cold start."""
    orig, conv = pair
    cold = ab(orig, conv, "--peer", "none", "--repeat-original")
    warm = ab(orig, conv, "--peer", "none", "--repeat-original", "--warm-start-steps", "3", "--lr", "1e-3")
    assert warm.rc == 0, warm.stderr
    res = {e["backend"]: e for e in warm.of("result")}
    first = [res[a]["losses"][0] for a in ("original", "converted", "original-repeat")]
    assert max(first) - min(first) < 1e-3
    assert abs(first[0] - cold.of("result")[0]["losses"][0]) > 1e-3
    for arm in res.values():
        assert arm["warm_start"]["steps"] == 3 and arm["warm_start"]["batches_from"] == 500000
    ws = warm.of("summary")[0]["ab"]["warm_start"]
    assert ws["steps"] == 3 and ws["lr"] == 1e-3
    assert "[warm start] step 3/3" in warm.stderr
    assert cold.of("summary")[0]["ab"]["warm_start"] is None


def test_the_workloads_description_is_kept_with_every_result(pair):
    """What the workload says it is (the real projects: how much text, what is held out) is evidence for a loss
    comparison: it is logged once and kept in every arm's result and in the A/B summary."""
    orig, conv = pair
    for folder in (orig, conv):
        edit(os.path.join(folder, "wl.py"), "    return model, batch_factory",
             "    return {'model': model, 'batch_factory': batch_factory, 'description': 'tiny model, 3 KB held out'}")
    r = ab(orig, conv, "--peer", "none")
    assert r.rc == 0, r.stderr
    assert [e["workload_description"] for e in r.of("result")] == ["tiny model, 3 KB held out"] * 2
    assert r.of("summary")[0]["ab"]["workload_description"] == "tiny model, 3 KB held out"
    assert r.stderr.count("[original] workload: tiny model, 3 KB held out") == 1
