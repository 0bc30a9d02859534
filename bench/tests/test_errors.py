"""Every error path: an error event with a code, a message, a hint, and a distinct exit code."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import BENCH, FAKE_TORCH, SCRIPT, run_bench, te_really_installed

CPU = ["--device", "cpu", "--steps", "3", "--warmup", "1"]


def test_no_cuda_device():
    r = run_bench(["--workload", "tiny", "--backends", "bf16"])  # the harness hides GPUs from subprocesses
    assert r.rc == 4
    (err,) = r.errors()
    assert err["code"] == "no_cuda" and err["fatal"] is True and err["exit_code"] == 4
    assert err["message"] == ("no CUDA device: the benchmark needs an NVIDIA GPU; you can still use diagnostics "
                              "and fixes")
    assert err["hint"]
    assert r.events[0]["event"] == "env"  # the probe still reports what is there
    assert not r.of("result")


def test_no_torch():
    r = run_bench(["--workload", "tiny"], pythonpath=[FAKE_TORCH])
    assert r.rc == 3
    assert r.events[0]["event"] == "env" and r.events[0]["torch"] is None
    (err,) = r.errors()
    assert err["code"] == "no_torch" and "PyTorch is not installed" in err["message"] and "torch" in err["hint"]


def test_list_workloads_needs_no_torch():
    r = run_bench(["--list-workloads"], pythonpath=[FAKE_TORCH])
    assert r.rc == 0 and r.events[0]["event"] == "workloads"


@pytest.mark.skipif(te_really_installed(), reason="Transformer Engine is installed here")
def test_te_missing_other_backends_still_run():
    r = run_bench(["--workload", "tiny", "--backends", "bf16,te,torch-fp8"] + CPU)
    assert r.rc == 6
    (err,) = r.errors()
    assert err["code"] == "te_missing" and err["message"] == "Transformer Engine not installed"
    assert err["backend"] == "te" and err["fatal"] is False
    assert [e["backend"] for e in r.of("result")] == ["bf16", "torch-fp8"]
    s = r.of("summary")[0]
    assert s["errors"] == ["te_missing"] and s["exit_code"] == 6


@pytest.mark.skipif(te_really_installed(), reason="Transformer Engine is installed here")
def test_auto_backends_without_te_pick_torch_fp8():
    r = run_bench(["--workload", "tiny"] + CPU)
    assert r.rc == 0, r.stderr
    assert [e["backend"] for e in r.of("result")] == ["bf16", "torch-fp8"]


@pytest.mark.parametrize("spec,needle", [
    ("nosuchmodule:build", "cannot import module 'nosuchmodule'"),
    ("goodmod:missing", "has no function 'missing'"),
    ("goodmod:raises", "raised: ValueError: boom"),
    ("goodmod:wrong_return", "expected (model, batch_factory)"),
    ("goodmod:not_a_model", "not a torch.nn.Module"),
    ("goodmod:NOT_CALLABLE", "is not callable"),
    ("brokenmod:build", "raised while importing"),
    ("gpt-9000", "unknown workload 'gpt-9000'"),
    ("mod:", "expected NAME or module:function"),
])
def test_bad_workload(tmp_path, spec, needle):
    (tmp_path / "goodmod.py").write_text(
        "import torch\n"
        "NOT_CALLABLE = 3\n"
        "def raises(**kw):\n    raise ValueError('boom')\n"
        "def wrong_return(**kw):\n    return 42\n"
        "def not_a_model(**kw):\n    return (object(), lambda i: None)\n")
    (tmp_path / "brokenmod.py").write_text("raise RuntimeError('import-time failure')\n")
    r = run_bench(["--workload", spec, "--workspace", str(tmp_path)] + CPU)
    assert r.rc == 8, r.stderr
    (err,) = r.errors()
    assert err["code"] == "bad_workload" and needle in err["message"], err
    assert err["hint"] and err["fatal"] is True
    assert not r.of("result")


def test_out_of_memory_reports_half_the_batch(tmp_path):
    (tmp_path / "oom.py").write_text(
        "import torch, torch.nn as nn\n"
        "class M(nn.Module):\n"
        "    def __init__(s):\n        super().__init__(); s.l = nn.Linear(16, 16)\n"
        "    def forward(s, x):\n"
        "        raise RuntimeError('CUDA out of memory. Tried to allocate 20.00 GiB')\n"
        "def build(batch, seq=8, device='cpu'):\n"
        "    x = torch.randn(batch, seq, 16)\n"
        "    return M(), lambda i: (x, x)\n")
    r = run_bench(["--workload", "oom:build", "--workspace", str(tmp_path), "--batch", "8", "--backends", "bf16"]
                  + CPU)
    assert r.rc == 7, r.stderr
    (err,) = r.errors()
    assert err["code"] == "oom" and err["backend"] == "bf16" and err["fatal"] is False
    assert "--batch 4" in err["hint"] and err["suggested_batch"] == 4
    assert r.of("summary")[0]["exit_code"] == 7


def test_backend_failure_is_reported_and_does_not_stop_the_run(tmp_path):
    (tmp_path / "flaky.py").write_text(
        "import torch, torch.nn as nn\n"
        "from plbench import fp8_torch\n"
        "class M(nn.Module):\n"
        "    def __init__(s):\n        super().__init__(); s.l = nn.Linear(16, 16)\n"
        "    def forward(s, x):\n"
        "        if isinstance(s.l, fp8_torch.Fp8Linear):\n            raise KeyError('fp8 path broke')\n"
        "        return s.l(x).float().pow(2).mean()\n"
        "def build(batch=2, device='cpu'):\n"
        "    x = torch.randn(batch, 16)\n"
        "    return {'model': M(), 'batch_factory': lambda i: (x, None), 'tokens_per_step': batch,\n"
        "            'loss_fn': lambda m, b: m(b[0])}\n")
    r = run_bench(["--workload", "flaky:build", "--workspace", str(tmp_path), "--backends", "torch-fp8,bf16"] + CPU)
    assert r.rc == 9, r.stderr
    (err,) = r.errors()
    assert err["code"] == "backend_failed" and err["backend"] == "torch-fp8" and "KeyError" in err["message"]
    assert [e["backend"] for e in r.of("result")] == ["bf16"]


def _start(args):
    env = dict(os.environ, PYTHONUNBUFFERED="1", CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen([sys.executable, SCRIPT] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=BENCH)


@pytest.mark.parametrize("sig,name", [(signal.SIGTERM, "SIGTERM"), (signal.SIGINT, "SIGINT")])
def test_cancel_by_signal_exits_promptly(sig, name):
    p = _start(["--workload", "tiny", "--device", "cpu", "--backends", "bf16", "--steps", "100000", "--warmup", "1"])
    try:
        events = []
        deadline = time.time() + 120
        while time.time() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            ev = json.loads(line)
            events.append(ev)
            if ev["event"] == "progress" and ev["phase"] == "measure":
                break
        assert events and events[-1].get("phase") == "measure", p.stderr.read()
        t0 = time.time()
        p.send_signal(sig)
        rest, err = p.communicate(timeout=30)
        elapsed = time.time() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130
    tail = [json.loads(l) for l in rest.splitlines() if l.strip()]
    cancelled = [e for e in tail if e["event"] == "cancelled"]
    assert len(cancelled) == 1 and cancelled[0]["signal"] == name and cancelled[0]["exit_code"] == 130
    assert cancelled[0]["backend"] == "bf16" and cancelled[0]["phase"] == "measure"
    assert tail[-1]["event"] == "cancelled"
    assert elapsed < 10
