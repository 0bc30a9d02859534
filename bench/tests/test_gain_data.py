"""bench/tools/gain_data.py: trimming a measured table and merging the compiled run (gemm_table.py --compile) into it
(docs/gain.md). Synthetic JSON in the tools' schema: only the merge's rules are checked, no figure means anything."""
import copy
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(os.path.dirname(HERE), "tools", "gain_data.py")
GRID = {"m": [16, 32], "k": [16, 32], "n": [16, 32]}


def _grid(v):
    return [[[v, v], [v, v]], [[v, v], [v, v]]]


def _backend(ms, ratio, host=0.2, **extra):
    return dict({"available": True, "reason": None, "recipe": None, "library": None, "total_ms": _grid(ms),
                 "fwd_ms": _grid(ms / 3), "ratio": _grid(ratio), "host_ms": _grid(host), "errors": []}, **extra)


def _off(reason):
    return {"available": False, "reason": reason, "recipe": None, "library": None}


def _doc(compiled):
    doc = {"schema": "precision-lens/gemm-table", "schema_version": 2, "not_a_benchmark": True, "date": "2026-12-05T00:00:00Z",
           "device": "cpu", "gpu": {"name": None, "capability": None}, "versions": {"torch": "2.13", "torchao": "0.18.0"},
           "grid": copy.deepcopy(GRID), "note": "synthetic", "method": {}, "incomplete": False, "compiled": compiled,
           "command": ["gemm_table.py"] + (["--compile"] if compiled else [])}
    if compiled:
        doc["backends"] = {"bf16": _backend(1.0, 1.0, host=0.05), "te-delayed": _off("not asked for (--backends)"),
                           "te-current": _off("not asked for (--backends)"),
                           "torchao-tensorwise": _backend(0.6, 1.6667, host=0.06),
                           "torchao-rowwise": _backend(0.8, 1.25, host=0.06), "torch-fp8": _off("not asked for (--backends)")}
        doc.update(block=None, compile={"backend": "inductor", "shapes": "dynamic", "graphs": 7},
                   static_check=[{"m": 32, "k": 32, "n": 32, "static_ratio": {"torchao-tensorwise": 1.7}, "errors": {}}])
    else:
        doc["backends"] = {"bf16": _backend(1.2, 1.0), "te-delayed": _backend(0.8, 1.5, host=0.9),
                           "te-current": _backend(0.9, 1.3333, host=1.0),
                           "torchao-tensorwise": _off("not asked for (--backends)"),
                           "torchao-rowwise": _off("not asked for (--backends)"), "torch-fp8": _backend(2.0, 0.6)}
        doc["block"] = {"m": [16, 32], "widths": [16, 32], "non_gemm_ms": [[1, 1], [1, 1]], "errors": []}
    return doc


def _run(tmp_path, eager, compiled=None, extra=()):
    e = tmp_path / "eager.json"
    e.write_text(json.dumps(eager))
    args = [sys.executable, TOOL, str(e), str(tmp_path / "out.json")]
    if compiled is not None:
        c = tmp_path / "compiled.json"
        c.write_text(json.dumps(compiled))
        args += ["--compiled", str(c)]
    p = subprocess.run(args + list(extra), capture_output=True, text=True, timeout=60)
    out = json.loads((tmp_path / "out.json").read_text()) if p.returncode == 0 else None
    return p, out


def test_without_a_compiled_run_torchao_stays_unmeasured(tmp_path):
    p, out = _run(tmp_path, _doc(False))
    assert p.returncode == 0, p.stderr
    assert out["backends"]["torchao-rowwise"] == _off("not asked for (--backends)")
    assert "bf16-compiled" not in out["backends"] and "compiled_run" not in out


def test_the_compiled_run_merges_with_its_own_baseline_and_provenance(tmp_path):
    p, out = _run(tmp_path, _doc(False), _doc(True))
    assert p.returncode == 0, p.stderr
    b = out["backends"]
    # The eager rows are untouched: bf16 stays the eager baseline of te-*.
    assert b["bf16"]["total_ms"] == _grid(1.2) and "baseline" not in b["te-delayed"] and "compiled" not in b["bf16"]
    assert b["te-delayed"]["ratio"] == _grid(1.5)
    # The compiled bf16 is its own backend, the baseline of the compiled FP8 rows, whose ratios are against it.
    assert b["bf16-compiled"]["total_ms"] == _grid(1.0) and b["bf16-compiled"]["compiled"] is True
    assert "torch.compile" in b["bf16-compiled"]["recipe"] and "baseline" not in b["bf16-compiled"]
    for name, ratio in (("torchao-tensorwise", 1.667), ("torchao-rowwise", 1.25)):
        assert b[name]["available"] and b[name]["compiled"] is True and b[name]["baseline"] == "bf16-compiled"
        assert b[name]["ratio"] == _grid(ratio) and "errors" not in b[name] and "fwd_ms" not in b[name]
    # A backend the compiled run did not measure keeps the eager entry (torch-fp8 eager; no torch-fp8-compiled).
    assert b["torch-fp8"]["ratio"] == _grid(0.6) and "torch-fp8-compiled" not in b
    run = out["compiled_run"]
    assert run["compiled"] is True and run["date"] == "2026-12-05T00:00:00Z" and run["versions"]["torchao"] == "0.18.0"
    assert run["compile"]["shapes"] == "dynamic" and "--compile" in run["command"]
    assert run["static_check"][0]["static_ratio"]["torchao-tensorwise"] == 1.7 and "errors" not in run["static_check"][0]
    assert run["static_fallback"] == {}


def test_a_compiled_run_that_does_not_fit_is_refused(tmp_path):
    other = _doc(True)
    other["grid"]["m"] = [16, 64]
    p, _ = _run(tmp_path, _doc(False), other)
    assert p.returncode == 2 and "grid m [16, 64]" in p.stderr
    p, _ = _run(tmp_path, _doc(False), _doc(False))
    assert p.returncode == 2 and "not a compiled run" in p.stderr
    short = _doc(True)
    short["incomplete"] = True
    p, _ = _run(tmp_path, _doc(False), short)
    assert p.returncode == 2 and "--allow-incomplete" in p.stderr
    p, out = _run(tmp_path, _doc(False), short, ["--allow-incomplete"])
    assert p.returncode == 0 and out["compiled_run"]["incomplete"] is True
    gpu = _doc(True)
    gpu["gpu"]["name"] = "NVIDIA H100"
    p, _ = _run(tmp_path, _doc(False), gpu)
    assert p.returncode == 2 and "NVIDIA H100" in p.stderr


def test_a_torchao_backend_the_compiled_run_could_not_run_says_why(tmp_path):
    c = _doc(True)
    c["backends"]["torchao-rowwise"] = _off("torchao not installed (No module named 'torchao')")
    p, out = _run(tmp_path, _doc(False), c)
    assert p.returncode == 0, p.stderr
    r = out["backends"]["torchao-rowwise"]
    assert r["available"] is False and "torchao not installed" in r["reason"] and r["compiled"] is True
