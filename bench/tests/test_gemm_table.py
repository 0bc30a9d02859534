"""bench/tools/gemm_table.py on the CPU (--device cpu --quick): the JSON table's schema (server/src/analysis/gain.ts
reads it; docs/gain.md). On the CPU it is not a benchmark: only the schema and the labels are checked."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(os.path.dirname(HERE), "tools", "gemm_table.py")
BACKENDS = ("bf16", "te-delayed", "te-current", "torchao-tensorwise", "torchao-rowwise", "torch-fp8")


def _shape(a):
    out = []
    while isinstance(a, list):
        out.append(len(a))
        a = a[0] if a else None
    return out


def test_cpu_quick_writes_the_table_schema(tmp_path):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONUNBUFFERED="1")
    p = subprocess.run([sys.executable, TOOL, "--device", "cpu", "--quick", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=240)
    assert p.returncode == 0, p.stderr
    assert "NOT A BENCHMARK" in p.stderr
    doc = json.loads((tmp_path / "gemm-table.json").read_text())
    log = (tmp_path / "gemm-table-log.txt").read_text()
    assert "not a benchmark" in log.lower()

    assert doc["schema"] == "precision-lens/gemm-table" and doc["schema_version"] == 2
    assert doc["not_a_benchmark"] is True and doc["device"] == "cpu" and doc["incomplete"] is False
    assert "not a benchmark" in doc["note"]
    for key in ("python", "torch", "transformer_engine", "torchao"):
        assert key in doc["versions"]
    assert doc["versions"]["torch"]
    assert set(doc["gpu"]) >= {"name", "capability"}
    assert doc["date"].endswith("Z")
    grid = doc["grid"]
    dims = [len(grid["m"]), len(grid["k"]), len(grid["n"])]
    assert all(d >= 2 for d in dims)
    for axis in ("m", "k", "n"):
        assert grid[axis] == sorted(grid[axis]) and all(isinstance(v, int) and v > 0 for v in grid[axis])

    assert set(doc["backends"]) == set(BACKENDS)
    for name, b in doc["backends"].items():
        assert isinstance(b["available"], bool)
        if not b["available"]:
            assert b["reason"], name  # every missing library is a sentence, and the others still ran
            assert "ratio" not in b
            continue
        for table in ("fwd_ms", "bwd_ms", "total_ms", "host_ms", "ratio", "ratio_fwd", "ratio_bwd", "repeats", "group"):
            assert _shape(b[table]) == dims, (name, table)
        flat = [v for plane in b["total_ms"] for row in plane for v in row]
        assert all(v is None or v > 0 for v in flat)
        assert isinstance(b["errors"], list)
    assert doc["backends"]["bf16"]["available"] and doc["backends"]["torch-fp8"]["available"]
    assert all(r == 1.0 for plane in doc["backends"]["bf16"]["ratio"] for row in plane for r in row)
    # TE needs a GPU: unavailable with the reason, never a crash.
    assert "GPU" in doc["backends"]["te-delayed"]["reason"] or "not importable" in doc["backends"]["te-delayed"]["reason"]

    block = doc["block"]
    assert block["m"] == grid["m"] and len(block["widths"]) >= 2 and block["vocab"] > 0
    for table in ("norm_ms", "attention_ms", "gelu_ms", "swiglu_ms", "residual_ms", "lm_head_ms", "non_gemm_ms"):
        assert _shape(block[table]) == [len(block["m"]), len(block["widths"])], table
        assert all(v is not None and v > 0 for row in block[table] for v in row), (table, block["errors"])
    assert len(block["loss_ms"]) == len(block["m"]) and all(v > 0 for v in block["loss_ms"])
    assert block["adamw"]["ns_per_param"] > 0 and block["adamw"]["host_ms"] > 0
    fit = doc["host_model"]["bf16"]
    assert fit["per_region_ms"] >= 0 and fit["per_layer_ms"] >= 0 and len(fit["points"]) >= 3
    # The host's own time per component (what a launch-bound model pays), beside the device time.
    assert _shape(block["host_ms"]["non_gemm_ms"]) == [len(block["m"]), len(block["widths"])]
    assert all(v is not None and v > 0 for row in block["host_ms"]["non_gemm_ms"] for v in row)
    flat_g = [v for plane in doc["backends"]["bf16"]["group"] for row in plane for v in row]
    assert all(isinstance(v, int) and v >= 1 for v in flat_g)


def test_unknown_backend_is_a_clear_message(tmp_path):
    p = subprocess.run([sys.executable, TOOL, "--device", "cpu", "--quick", "--backends", "bf16,nope",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "unknown backend(s): nope" in p.stderr


def test_te_and_torchao_paths_run_with_the_fake_packages(tmp_path):
    """The te-* and torchao-* code paths (build, TE autocast inside bf16 autocast, conversion) on the CPU through the
    fake packages of bench/tests: every backend measured, none failed."""
    fakes = os.pathsep.join([os.path.join(HERE, "fake_te"), os.path.join(HERE, "fake_torchao")])
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PL_GEMM_TABLE_TEST_FAKES="1",
               PYTHONPATH=fakes + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
    p = subprocess.run([sys.executable, TOOL, "--device", "cpu", "--quick", "--no-block", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=240)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "gemm-table.json").read_text())
    for name in BACKENDS:
        b = doc["backends"][name]
        assert b["available"], (name, b["reason"])
        assert b["errors"] == [], (name, b["errors"])
        assert all(v is not None for plane in b["ratio"] for row in plane for v in row), name
    assert doc["versions"]["te_api"] == "autocast"
    assert doc["block"] is None


def _torch_has_compile():
    import torch
    return hasattr(torch, "compile")


def test_compiled_mode_measures_torchao_against_compiled_bf16(tmp_path):
    """--compile (how torchao is run): bf16, torchao-tensorwise and torchao-rowwise, every layer in torch.compile
    (aot_eager here: dynamo + AOTAutograd, no C compiler needed), compiled before it is timed, written to
    gemm-table-compiled.json with the compile's own record. With dynamic shapes a backend compiles a handful of
    graphs for the whole grid, not one per cell. On a torch without torch.compile: a clear refusal, nothing measured."""
    fakes = os.pathsep.join([os.path.join(HERE, "fake_te"), os.path.join(HERE, "fake_torchao")])
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PL_GEMM_TABLE_TEST_FAKES="1",
               PYTHONPATH=fakes + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
    p = subprocess.run([sys.executable, TOOL, "--device", "cpu", "--quick", "--compile", "--compile-backend", "aot_eager",
                        "--out", str(tmp_path)], capture_output=True, text=True, env=env, timeout=300)
    if not _torch_has_compile():
        assert p.returncode == 3 and "torch.compile needs torch >= 2.0" in p.stderr, p.stderr
        assert not (tmp_path / "gemm-table-compiled.json").exists()
        return
    assert p.returncode == 0, p.stderr
    assert not (tmp_path / "gemm-table.json").exists()  # the eager table is another run's
    doc = json.loads((tmp_path / "gemm-table-compiled.json").read_text())
    assert (tmp_path / "gemm-table-compiled-log.txt").exists()
    assert doc["compiled"] is True and doc["incomplete"] is False and doc["not_a_benchmark"] is True
    c = doc["compile"]
    assert c["backend"] == "aot_eager" and c["shapes"] == "dynamic"
    assert c["limits"].get("recompile_limit", c["limits"].get("cache_size_limit")) >= 64
    assert "torch.compile" in doc["method"]["layer"]
    assert doc["block"] is None and "host_model" not in doc
    grid = doc["grid"]
    dims = [len(grid["m"]), len(grid["k"]), len(grid["n"])]
    cells = dims[0] * dims[1] * dims[2]
    measured = ("bf16", "torchao-tensorwise", "torchao-rowwise")
    for name in BACKENDS:
        b = doc["backends"][name]
        if name not in measured:
            assert not b["available"] and "not asked for" in b["reason"], name
            continue
        assert b["available"], (name, b["reason"])
        assert b["errors"] == [] and not b.get("static_fallback"), (name, b["errors"])
        assert all(v is not None for plane in b["ratio"] for row in plane for v in row), name
        assert _shape(b["compile_s"]) == dims and _shape(b["graphs"]) == dims
        graphs = sum(v for plane in b["graphs"] for row in plane for v in row)
        primed = b["compile_prime"]
        assert primed and primed[0]["graphs"] >= 1, (name, primed)  # compiled (a layer left eager makes no graph)
        # ... before the grid, at its middle cell, shape-generic: the grid's cells compile (almost) nothing more, not
        # once per cell nor per (K, N): parameters included (bf16's nn.Linear too: dynamo keeps torch.nn's own
        # parameters static).
        assert graphs <= 1 < dims[1] * dims[2], (name, b["graphs"])
        assert sum(p["graphs"] for p in primed) + graphs <= 2, (name, primed, b["graphs"])
    # The static check: a cell again compiled static, beside the grid's dynamic figure, for every backend.
    check = doc["static_check"]
    assert check and set(check[0]["static_ms"]) == set(measured), check
    assert set(check[0]["static_ratio"]) == {"torchao-tensorwise", "torchao-rowwise"}


def test_compiled_mode_refuses_the_te_backends(tmp_path):
    p = subprocess.run([sys.executable, TOOL, "--device", "cpu", "--quick", "--compile", "--backends", "bf16,te-delayed",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "te-delayed run eager" in p.stderr, p.stderr


def test_compiled_mode_falls_back_to_static_where_the_dynamic_compile_fails(tmp_path):
    """The fake torchao registers a compile backend that refuses dynamic shapes (as torchao's tensor subclasses have
    done): every backend is then compiled static per cell, each cell listed in static_fallback with the cause, and the
    grid is still measured in full."""
    if not _torch_has_compile():
        return
    fakes = os.pathsep.join([os.path.join(HERE, "fake_te"), os.path.join(HERE, "fake_torchao")])
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PL_GEMM_TABLE_TEST_FAKES="1",
               PYTHONPATH=fakes + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
    p = subprocess.run([sys.executable, TOOL, "--device", "cpu", "--quick", "--compile", "--compile-backend",
                        "pl_test_no_dynamic", "--static-check", "0", "--out", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads((tmp_path / "gemm-table-compiled.json").read_text())
    cells = 1
    for axis in ("m", "k", "n"):
        cells *= len(doc["grid"][axis])
    for name in ("bf16", "torchao-tensorwise", "torchao-rowwise"):
        b = doc["backends"][name]
        assert b["errors"] == [], (name, b["errors"])
        assert all(v is not None for plane in b["ratio"] for row in plane for v in row), name
        assert len(b["static_fallback"]) == cells, (name, b.get("static_fallback"))
        assert "a dynamic shape" in b["static_fallback"][0]["error"]
        # Static: one graph per cell.
        assert all(v == 1 for plane in b["graphs"] for row in plane for v in row), (name, b["graphs"])
    assert "compiled static from here on" in p.stderr
