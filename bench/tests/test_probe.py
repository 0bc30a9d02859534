"""Environment probe: capability rules, recipe support, TE detection (with a fake TE), torch-fp8 support."""
import sys
import types

import pytest
import torch

from plbench import envprobe
from conftest import FAKE_TE, run_bench


@pytest.mark.parametrize("cap,cuda,ok", [
    ((8, 0), "12.4", False), ((8, 6), "12.4", False), ((8, 9), "12.4", True), ((8, 9), "12.0", False),
    ((9, 0), "12.4", True), ((10, 0), "12.8", True), ((12, 0), "12.8", True), (None, None, False)])
def test_fp8_capability_rule(cap, cuda, ok):
    got, reason = envprobe.fp8_capability_rule(cap, cuda)
    assert got is ok and reason
    if cap == (8, 0):
        assert "Device compute capability 8.9 or higher required for FP8 execution." in reason


def test_recipe_support_matrix():
    a100 = envprobe.recipe_support((8, 0), "12.4")
    assert not any(v["supported"] for v in a100.values())
    ada = envprobe.recipe_support((8, 9), "12.4")
    assert ada["DelayedScaling"]["supported"] and ada["Float8CurrentScaling"]["supported"]
    assert not ada["Float8BlockScaling"]["supported"] and not ada["MXFP8BlockScaling"]["supported"]
    h100_old = envprobe.recipe_support((9, 0), "12.8")
    assert h100_old["DelayedScaling"]["supported"] and not h100_old["Float8BlockScaling"]["supported"]
    assert "12.9" in h100_old["Float8BlockScaling"]["reason"]
    h200 = envprobe.recipe_support((9, 0), "13.0")
    assert h200["Float8BlockScaling"]["supported"]
    assert not h200["MXFP8BlockScaling"]["supported"] and not h200["NVFP4BlockScaling"]["supported"]
    b200 = envprobe.recipe_support((10, 0), "12.9")
    assert b200["MXFP8BlockScaling"]["supported"] and b200["NVFP4BlockScaling"]["supported"]
    rtx50 = envprobe.recipe_support((12, 0), "12.9")
    assert not rtx50["MXFP8BlockScaling"]["supported"] and rtx50["NVFP4BlockScaling"]["supported"]


def test_parse_version():
    assert envprobe.parse_version("2.10.0.dev0+abc") == (2, 10, 0)
    assert envprobe.parse_version("13.0") == (13, 0)
    assert envprobe.parse_version("1.13.0a0") == (1, 13, 0)
    assert envprobe.parse_version(None) is None


def test_te_api_by_version():
    new = types.SimpleNamespace(autocast=object(), fp8_autocast=object())
    old = types.SimpleNamespace(fp8_autocast=object())
    assert envprobe.te_api(new, "2.10.0") == "autocast"
    assert envprobe.te_api(new, "2.8.0") == "fp8_autocast"
    assert envprobe.te_api(old, "1.13") == "fp8_autocast"
    assert envprobe.te_api(new, None) == "autocast"


def test_te_fp8_check_new_api():
    te = types.SimpleNamespace(is_fp8_available=lambda return_reason=False: (False, "Device compute capability 8.9 "
                               "or higher required for FP8 execution.") if return_reason else False)
    ok, reason, how = envprobe.te_fp8_check(te, "2.10.0")
    assert ok is False and "8.9" in reason and how == "te.is_fp8_available(return_reason=True)"


def test_te_fp8_check_old_api(monkeypatch):
    fp8 = types.ModuleType("transformer_engine.pytorch.fp8")
    fp8.check_fp8_support = lambda: (True, "")
    monkeypatch.setitem(sys.modules, "transformer_engine.pytorch.fp8", fp8)
    te = types.SimpleNamespace()
    ok, reason, how = envprobe.te_fp8_check(te, "1.12.0")
    assert ok is True and how == "transformer_engine.pytorch.fp8.check_fp8_support()"


def test_torch_fp8_support_rules():
    fake = types.SimpleNamespace(__version__="2.11.0", float8_e4m3fn=1, float8_e5m2=2, _scaled_mm=3,
                                 version=types.SimpleNamespace(cuda="13.0"))
    assert envprobe.torch_fp8_support(fake, (9, 0))[0] is True
    assert envprobe.torch_fp8_support(fake, (8, 0))[0] is False
    old = types.SimpleNamespace(__version__="1.13.0", version=types.SimpleNamespace(cuda=None))
    ok, why = envprobe.torch_fp8_support(old, (9, 0))
    assert ok is False and "torch._scaled_mm" in why
    if not hasattr(torch, "float8_e4m3fn"):
        assert envprobe.torch_fp8_support(torch, None)[0] is False


def test_probe_without_gpu_in_process():
    env = envprobe.probe(torch, with_te=False)
    assert env["torch"] == torch.__version__ and env["hostname"]
    if not torch.cuda.is_available():
        assert env["gpus"] == [] and env["fp8"]["available"] is False and env["fp8"]["reason"] == "no CUDA device"


def test_probe_reports_an_installed_te_with_version_and_api():
    r = run_bench(["--probe"], pythonpath=[FAKE_TE])
    assert r.rc == 0, r.stderr
    te = r.events[0]["te"]
    assert te == {"installed": True, "version": "2.10.0", "api": "autocast", "error": None}


def _gpu_env(te_installed=True, fp8=True, torch_fp8=True):
    return {
        "torch": "2.11.0", "cuda_available": True, "gpus": [{"name": "NVIDIA H200", "capability": "9.0"}],
        "gpu_name": "NVIDIA H200",
        "te": {"installed": te_installed, "version": "2.16.0" if te_installed else None, "api": "autocast", "error": None},
        "fp8": {"available": fp8, "reason": "SM >= 8.9" if fp8 else "Device compute capability 8.9 or higher required for FP8 execution."},
        "torch_fp8": {"available": torch_fp8, "reason": "ok" if torch_fp8 else "needs sm_89"},
        "torchao": {"installed": True, "version": "0.14.0", "error": None, "float8_training": True},
    }


def test_backend_report_says_what_can_run_and_why_not():
    from plbench.cli import BACKENDS, backend_report
    h200 = backend_report(_gpu_env())
    assert [b["id"] for b in h200] == list(BACKENDS)
    assert all(b["available"] and b["reason"] is None and b["label"] for b in h200)
    no_te = {b["id"]: b for b in backend_report(_gpu_env(te_installed=False))}
    assert no_te["te"]["available"] is False and no_te["te"]["reason"] == "Transformer Engine not installed"
    assert no_te["bf16"]["available"] and no_te["torch-fp8"]["available"]
    a100 = {b["id"]: b for b in backend_report(_gpu_env(fp8=False, torch_fp8=False))}
    assert a100["bf16"]["available"] and not a100["te"]["available"] and not a100["torch-fp8"]["available"]
    assert "8.9" in a100["te"]["reason"]
    cpu = backend_report(dict(_gpu_env(), cuda_available=False, gpus=[]))
    assert [b["reason"] for b in cpu] == ["no CUDA device"] * len(BACKENDS)
    no_torch = backend_report({"torch": None})
    assert all(not b["available"] and "PyTorch is not installed" in b["reason"] for b in no_torch)


def test_probe_event_lists_the_backends():
    r = run_bench(["--probe"], pythonpath=[FAKE_TE])
    assert r.rc == 0, r.stderr
    backends = r.events[0]["backends"]
    from plbench.cli import BACKENDS
    assert [b["id"] for b in backends] == list(BACKENDS)
    if not torch.cuda.is_available():
        assert all(b["available"] is False and b["reason"] == "no CUDA device" for b in backends)
