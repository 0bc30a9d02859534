"""The JSON-lines protocol, exercised by running the real script as a subprocess (CPU, tiny preset)."""
import json
import os

import pytest

from conftest import run_bench

CPU_RUN = ["--workload", "tiny", "--device", "cpu", "--steps", "4", "--warmup", "2"]


def test_every_stdout_line_is_json_and_stderr_has_the_human_text(tmp_path):
    out = tmp_path / "run.json"
    r = run_bench(CPU_RUN + ["--backends", "bf16,torch-fp8", "--json-out", str(out)])
    assert r.rc == 0, r.stderr
    lines = [l for l in r.stdout.splitlines() if l.strip()]
    assert lines and all(json.loads(l)["event"] for l in lines)
    assert "tokens/s" in r.stderr and "backend" in r.stderr
    assert not any(l.startswith("{") for l in r.stderr.splitlines())


def test_event_sequence_and_result_fields(tmp_path):
    out = tmp_path / "run.json"
    r = run_bench(CPU_RUN + ["--backends", "bf16,torch-fp8", "--json-out", str(out)])
    assert r.rc == 0, r.stderr
    kinds = [e["event"] for e in r.events]
    assert kinds[0] == "env" and kinds[-1] == "summary"
    assert kinds.count("result") == 2 and not r.of("error")
    # results come after their own progress events
    first_result = kinds.index("result")
    assert "progress" in kinds[1:first_result]
    for p in r.of("progress"):
        assert set(["phase", "step", "total", "backend"]) <= set(p)
        assert 1 <= p["step"] <= p["total"]
    phases = {p["phase"] for p in r.of("progress")}
    assert {"build", "warmup", "measure"} <= phases
    bf16, fp8 = r.of("result")
    assert bf16["backend"] == "bf16" and fp8["backend"] == "torch-fp8"
    for res in (bf16, fp8):
        assert res["tokens_per_s"] > 0
        assert res["step_ms"]["median"] > 0 and res["step_ms"]["p90"] >= res["step_ms"]["median"]
        assert len(res["losses"]) == 2 + 4  # warm-up + measured: the loss at every step
        assert res["loss_measured_from"] == 2
        assert res["final_loss"] == res["losses"][-1]
        assert res["tokens_per_step"] == 2 * 32
        assert res["peak_memory_bytes"] is None  # CPU: no CUDA allocator
        assert res["compile"] is False
    assert fp8["emulated"] is True and "EMULATED" in fp8["label"] and "not Transformer Engine" in fp8["label"]
    assert fp8["conversion"]["counts"]["converted"] == 8  # 4 linears per block x 2 blocks
    kept = {k["name"] for k in fp8["conversion"]["kept_high_precision"]}
    assert {"tok_emb", "pos_emb", "head.lm_head"} <= kept
    # same model, data and seed: the first losses agree closely (FP8 emulation only perturbs slightly)
    assert abs(bf16["losses"][0] - fp8["losses"][0]) / bf16["losses"][0] < 0.02
    s = r.of("summary")[0]
    assert s["baseline"] == "bf16" and s["backends"] == ["bf16", "torch-fp8"] and s["exit_code"] == 0
    ratio = s["ratios"]["torch-fp8"]
    assert ratio["tokens_per_s"] == pytest.approx(fp8["tokens_per_s"] / bf16["tokens_per_s"])
    assert ratio["final_loss_diff"] == pytest.approx(fp8["final_loss"] - bf16["final_loss"])
    assert ratio["loss_within_2pct"] is True
    doc = json.loads(out.read_text())
    assert doc["summary"]["exit_code"] == 0 and len(doc["results"]) == 2 and doc["env"]["event"] == "env"
    assert any("--json-out" in a for a in doc["command"])


def test_env_event_fields():
    r = run_bench(["--probe"])
    assert r.rc == 0, r.stderr
    assert [e["event"] for e in r.events] == ["env"]
    env = r.events[0]
    for key in ("torch", "cuda", "gpus", "gpu_name", "capability", "memory_total_bytes", "te", "fp8", "recipes",
                "hostname", "python", "torch_fp8", "protocol"):
        assert key in env
    assert set(env["te"]) >= {"installed", "version", "api", "error"}
    assert set(env["fp8"]) >= {"available", "reason", "source"}
    assert set(env["recipes"]) == {"DelayedScaling", "Float8CurrentScaling", "Float8BlockScaling",
                                   "MXFP8BlockScaling", "NVFP4BlockScaling"}


def test_list_workloads():
    r = run_bench(["--list-workloads"])
    assert r.rc == 0
    (ev,) = r.events
    names = [w["name"] for w in ev["workloads"]]
    assert {"gpt-125m", "gpt-1.3b", "llama-7b-slice", "llama-70b-slice"} <= set(names)


def test_measure_overhead_reports_both_loops():
    r = run_bench(CPU_RUN + ["--backends", "bf16", "--measure-overhead"])
    assert r.rc == 0, r.stderr
    ov = r.of("summary")[0]["overhead"]
    assert ov["backend"] == "bf16" and ov["bare_loop_ms"] > 0 and ov["harness_loop_ms"] > 0
    assert "overhead_pct" in ov and len(ov["rounds"]) == 3 and ov["steps_per_loop"] == 4
    assert "overhead" in {p["phase"] for p in r.of("progress")}


def test_prints_in_user_code_do_not_reach_the_protocol_stream(tmp_path):
    (tmp_path / "noisy.py").write_text(
        "import torch\n"
        "print('hello from user code')\n"
        "def build(batch=2, seq=16, device='cpu'):\n"
        "    print('building')\n"
        "    m = torch.nn.Sequential(torch.nn.Embedding(64, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 64))\n"
        "    x = torch.randint(0, 64, (batch, seq))\n"
        "    return m, lambda step: (x, x)\n")
    r = run_bench(["--workload", "noisy:build", "--workspace", str(tmp_path), "--device", "cpu", "--backends",
                   "bf16", "--steps", "2", "--warmup", "1"])
    assert r.rc == 0, r.stderr
    assert "hello from user code" in r.stderr and "hello" not in r.stdout
    (res,) = r.of("result")
    assert res["workload"] == "noisy:build" and res["tokens_per_step"] == 32


def test_user_workload_dict_form_and_lm_head_kept(tmp_path):
    (tmp_path / "mymodel.py").write_text(
        "import torch, torch.nn as nn\n"
        "class M(nn.Module):\n"
        "    def __init__(s):\n"
        "        super().__init__(); s.emb = nn.Embedding(128, 32); s.up = nn.Linear(32, 64); s.down = nn.Linear(64, 32)\n"
        "        s.output = nn.Linear(32, 128, bias=False)\n"
        "    def forward(s, x):\n"
        "        return s.output(s.down(torch.relu(s.up(s.emb(x)))))\n"
        "def make(batch=4, seq=8, device='cpu', seed=0):\n"
        "    x = torch.randint(0, 128, (batch, seq + 1))\n"
        "    return {'model': M(), 'batch_factory': lambda i: (x[:, :-1], x[:, 1:])}\n")
    r = run_bench(["--workload", "mymodel:make", "--workspace", str(tmp_path), "--device", "cpu", "--backends",
                   "bf16,torch-fp8", "--steps", "2", "--warmup", "1"])
    assert r.rc == 0, r.stderr
    fp8 = [e for e in r.of("result") if e["backend"] == "torch-fp8"][0]
    conv = fp8["conversion"]
    assert [c["name"] for c in conv["converted"]] == ["up", "down"]
    assert {k["name"] for k in conv["kept_high_precision"]} == {"emb", "output"}


def test_usage_error_is_an_error_event():
    r = run_bench(["--steps", "many"])
    assert r.rc == 2
    (err,) = r.errors()
    assert err["code"] == "usage" and err["exit_code"] == 2


def test_unknown_backend_is_a_usage_error():
    r = run_bench(CPU_RUN + ["--backends", "bf16,fp4"])
    assert r.rc == 2 and r.errors("usage")
