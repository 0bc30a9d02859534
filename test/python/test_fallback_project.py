"""The generated FP8 fallback, run: the golden project of test/unit/fixes-project.test.ts (model.py converted by
"Convert N layers in this file to FP8 (with fallback)", train.py wrapped by "Wrap the training step", both importing
the one fp8_fallback.py the conversion created) trains on the CPU without Transformer Engine (BF16 fallback) and with
a fake TE of each API (FP8 path), logs one mode line, and keeps minGPT's weight init and optimizer groups working for
the te.* layers. The module's recipe check, shape rule and row padding are exercised directly."""
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "..", "fixtures", "fixes", "expected")
FAKE_TE = os.path.join(HERE, "fake_te")
APIS = ["modern", "legacy"]

# Runs a script as if on an H100 with TE: CUDA queries answer for a Hopper GPU, the fake TE is importable.
FAKE_GPU = r"""
import runpy, sys, torch
sys.path.insert(0, %(fake)r)
sys.path.insert(0, %(project)r)
torch.cuda.is_available = lambda: True
torch.cuda.get_device_capability = lambda *a: (9, 0)
torch.cuda.get_device_name = lambda *a: "Fake H100"
torch.cuda.is_bf16_supported = lambda: True
# A CPU-only torch has no CUDA autocast: with is_available faked, torch.autocast("cuda") would switch on a dispatch
# flag that nothing here honours, so it is made what torch makes it on a machine without CUDA, a no-op. Where the
# fallback enters it (around TE autocast) is checked by test_fp8_context_nests_te_autocast_inside_bf16_autocast.
import contextlib
_pl_real_autocast = torch.autocast
torch.autocast = lambda device_type, *a, **k: contextlib.nullcontext() if device_type == "cuda" else _pl_real_autocast(device_type, *a, **k)
sys.argv = [%(script)r]
runpy.run_path(%(script)r, run_name="__main__")
import transformer_engine.pytorch as te
print("te calls:", sorted({c[0] if isinstance(c, tuple) else c for c in te.CALLS}))
"""


def project(tmp_path, api):
    dst = tmp_path / api
    shutil.copytree(os.path.join(EXPECTED, "project-%s" % api), str(dst))
    return str(dst)


def run(cwd, code=None, script="train.py", fake_te=False, env=None):
    full = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **(env or {}))
    full.pop("PYTHONPATH", None)
    if fake_te:
        source = FAKE_GPU % {"fake": FAKE_TE, "project": cwd, "script": script}
        if code:
            source = source.replace("runpy.run_path(%r, run_name=\"__main__\")" % script, code)
        args = [sys.executable, "-c", source]
    else:
        args = [sys.executable, "-c", code] if code else [sys.executable, script]
    r = subprocess.run(args, cwd=cwd, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=300)
    assert r.returncode == 0, r.stdout
    return r.stdout


def te_installed():
    return subprocess.run([sys.executable, "-c", "import transformer_engine"], stderr=subprocess.DEVNULL).returncode == 0


@pytest.mark.parametrize("api", APIS)
def test_trains_without_te_in_bf16(tmp_path, api):
    if te_installed():
        pytest.skip("Transformer Engine is installed here")
    out = run(project(tmp_path, api))
    assert out.count("Running in ") == 1, out
    assert "Running in BF16 fallback: Transformer Engine not installed" in out
    assert "param groups: 9 decay, 20 no_decay" in out
    assert len([l for l in out.splitlines() if l.startswith("step ")]) == 3, out


@pytest.mark.parametrize("api", APIS)
def test_trains_with_fake_te_in_fp8(tmp_path, api):
    out = run(project(tmp_path, api), fake_te=True, env={"FAKE_TE_API": api})
    assert out.count("Running in ") == 1, out
    assert "Running in FP8 mode on Fake H100 (sm_90), recipe Float8CurrentScaling/HYBRID" in out
    # The te.* layers are in the optimizer's decay group and initialised like the torch.nn ones (minGPT asserts it).
    assert "param groups: 9 decay, 20 no_decay" in out, out
    assert len([l for l in out.splitlines() if l.startswith("step ")]) == 3, out
    entered = "autocast" if api == "modern" else "fp8_autocast"
    # The first te.* call is the fused ln_1 -> c_attn (te.LayerNormLinear), then the plain te.Linear layers.
    assert "te calls: ['%s', 'layernorm_linear', 'linear']" % entered in out, out


@pytest.mark.parametrize("api", APIS)
def test_te_layers_get_the_init_and_the_groups(tmp_path, api):
    code = (
        "import torch, model\n"
        "m = model.GPT(model.GPTConfig())\n"
        "_, decay, no_decay = m.configure_optimizers()\n"
        "kinds = sorted({type(x).__module__.split('.')[0] + '.' + type(x).__name__ for x in m.modules() if 'Linear' in type(x).__name__ or 'Norm' in type(x).__name__})\n"
        "print('kinds', kinds)\n"
        "print('decay', [n for n in decay if 'c_attn' in n])\n"
        "ln = m.transformer.h[0].ln_1\n"
        "print('std', round(float(m.transformer.h[0].attn.c_attn.weight.std()), 2), 'ln', float(ln.weight.mean()), float(ln.bias.abs().sum()))\n"
    )
    out = run(project(tmp_path, api), code=code, fake_te=True, env={"FAKE_TE_API": api})
    assert "'transformer_engine.Linear'" in out and "'transformer_engine.LayerNorm'" in out, out
    assert "'torch.Linear'" in out, "the lm-head stays torch.nn.Linear: " + out
    assert "decay ['transformer.h.0.attn.c_attn.weight', 'transformer.h.1.attn.c_attn.weight']" in out, out
    # _init_weights reached the te.Linear (std 0.02, not TE's 0.023) and the te.LayerNorm (ones, zeros).
    assert "std 0.02 ln 1.0 0.0" in out, out


@pytest.mark.parametrize("api", APIS)
def test_recipe_the_gpu_lacks_falls_back_with_the_reason(tmp_path, api):
    code = (
        "import fp8_fallback as f\n"
        "f.FP8_RECIPE = f.te_recipe.MXFP8BlockScaling()\n"
        "print(f.fp8_available())\n"
        "with f.fp8_autocast_context():\n"
        "    pass\n"
    )
    out = run(project(tmp_path, api), code=code, fake_te=True, env={"FAKE_TE_API": api, "FAKE_TE_MXFP8": "0"})
    # TE >= 2.9 answers itself (is_mxfp8_available); older TE: the documented requirement, checked on the capability.
    reason = "Device compute capability 10.0 or higher required for MXFP8 execution." if api == "modern" else "MXFP8 needs compute capability 10.x"
    assert "Running in BF16 fallback: MXFP8BlockScaling is not supported here: %s" % reason in out, out
    assert out.count("Running in ") == 1, out


def test_shape_rule_keeps_torch_nn_and_rows_are_padded(tmp_path):
    code = (
        "import torch, fp8_fallback as f\n"
        "import transformer_engine.pytorch as te\n"
        "odd = f.fp8_linear(100, 30)\n"
        "ok = f.fp8_linear(64, 64)\n"
        "print(type(odd).__module__, type(ok).__module__)\n"
        "x = torch.randn(3, 64)\n"
        "with f.fp8_autocast_context():\n"
        "    y = ok(x)\n"
        "    x3 = torch.randn(1, 3, 64)\n"
        "    y3 = ok(x3)\n"
        "print('rows', tuple(y.shape), tuple(y3.shape), bool(torch.allclose(y, torch.nn.functional.linear(x, ok.weight, ok.bias), atol=1e-6)))\n"
        "(y.sum() + y3.sum()).backward()\n"
        "expected = torch.ones(64, 1) @ (x.sum(0) + x3.reshape(3, 64).sum(0)).reshape(1, 64)\n"
        "print('grad', tuple(ok.weight.grad.shape), bool(torch.allclose(ok.weight.grad, expected, atol=1e-5)))\n"
    )
    out = run(project(tmp_path, "modern"), code=code, fake_te=True)
    assert "torch.nn.modules.linear transformer_engine.pytorch" in out, out
    # One line, naming where the layer is built (file:line) and why it stays.
    assert re.search(r"^FP8: 1 layer\(s\) kept in high precision by the FP8 shape rule: <string>:\d+ Linear\(100, 30\): "
                     r"in_features 100 is not a multiple of 16, out_features 30 is not a multiple of 16$", out, re.M), out
    # The fake te.Linear raises TE's error on rows % 8 != 0 under FP8, and on rows % 16 != 0 when a gradient will be
    # taken (the weight-gradient GEMM reduces over the rows): the factory's layer pads them to 16, and backward runs.
    assert "rows (3, 64) (1, 3, 64) True" in out, out
    assert "grad (64, 64) True" in out, out


@pytest.mark.parametrize("fake_te", [False, True])
def test_parallel_factory_builds_the_library_layer_where_fp8_does_not_run(tmp_path, fake_te):
    if not fake_te and te_installed():
        pytest.skip("Transformer Engine is installed here")
    code = (
        "import torch, fp8_fallback as f\n"
        "class ColumnParallelLinear(torch.nn.Linear):\n"
        "    pass\n"
        "layer = f.fp8_parallel_linear(lambda: ColumnParallelLinear(64, 32, bias=False), 64, 32, bias=False, parallel_mode='column', tp_group=None, tp_size=1)\n"
        "print('built', type(layer).__module__, type(layer).__name__)\n"
    )
    out = run(project(tmp_path, "modern"), code=code, fake_te=fake_te)
    expected = "built transformer_engine.pytorch Linear" if fake_te else "built __main__ ColumnParallelLinear"
    assert expected in out, out


def test_out_features_not_a_multiple_of_16_keeps_torch_nn(tmp_path):
    # te.Linear(64, 24) runs its forward GEMM in FP8 but not the backward's input-gradient GEMM, which reduces over
    # out_features (TE 2.20.2 on an H200: "Leading dimension requirement on A for FP8 GEMM. Caller must pad"): the
    # factory keeps torch.nn for it, and training it under the FP8 context runs.
    code = (
        "import torch, fp8_fallback as f\n"
        "mid = f.fp8_linear(64, 24)\n"
        "print('module', type(mid).__module__)\n"
        "x = torch.randn(16, 64)\n"
        "with f.fp8_autocast_context():\n"
        "    y = mid(x)\n"
        "y.float().sum().backward()\n"
        "print('grad', tuple(mid.weight.grad.shape))\n"
    )
    out = run(project(tmp_path, "modern"), code=code, fake_te=True)
    assert "module torch.nn.modules.linear" in out, out
    assert re.search(r"Linear\(64, 24\): out_features 24 is not a multiple of 16$", out, re.M), out
    assert "grad (24, 64)" in out, out


def test_te_linear_factories_cast_the_input_to_the_parameters_dtype_and_back(tmp_path):
    # te.Linear computes in its input's dtype outside torch.autocast and asserts that every parameter has it (TE
    # 2.20.2: "Data types for parameters must match when outside of autocasted region"): FP32 weights fed BF16
    # activations (a model that casts its activations, as torch.nn under autocast would not mind), or BF16 weights fed
    # FP32. The factories' layers cast the input to the weights' dtype and the output back, inside the FP8 context and
    # outside any (evaluation), for both factories; the fake te.Linear asserts as TE does.
    code = (
        "import torch, fp8_fallback as f\n"
        "class ColumnParallelLinear(torch.nn.Linear):\n"
        "    pass\n"
        "layers = {'linear fp32': f.fp8_linear(64, 32), 'linear bf16': f.fp8_linear(64, 32, params_dtype=torch.bfloat16),\n"
        "          'parallel fp32': f.fp8_parallel_linear(lambda: ColumnParallelLinear(64, 32), 64, 32, parallel_mode='column', tp_group=None, tp_size=1)}\n"
        "for name, layer in layers.items():\n"
        "    for dtype in (torch.bfloat16, torch.float32):\n"
        "        x = torch.randn(16, 64, dtype=dtype, requires_grad=True)\n"
        "        with f.fp8_autocast_context():\n"
        "            y = layer(x)\n"
        "        y.float().sum().backward()\n"
        "        with torch.no_grad():\n"
        "            e = layer(torch.randn(3, 64, dtype=dtype))\n"
        "        print(name, type(layer).__module__, str(dtype), 'out', str(y.dtype), 'grad', str(x.grad.dtype), 'eval', str(e.dtype), tuple(e.shape))\n"
    )
    out = run(project(tmp_path, "modern"), code=code, fake_te=True)
    for name in ("linear fp32", "linear bf16", "parallel fp32"):
        for dtype in ("torch.bfloat16", "torch.float32"):
            line = "%s transformer_engine.pytorch %s out %s grad %s eval %s (3, 32)" % (name, dtype, dtype, dtype, dtype)
            assert line in out, out


# The context's shape where FP8 runs (issue 21): TE autocast INSIDE BF16 torch.autocast, so that what TE does not run
# (attention, norms, the lm-head, the loss) runs in BF16 rather than in the parameters' FP32; inside an autocast the
# script already opened, TE autocast only, and that autocast keeps its dtype. The BF16 autocast is replaced by a
# recorder here (a CPU-only torch has no CUDA autocast to observe).
CONTEXT_SHAPE = r"""
import contextlib, torch, fp8_fallback as f
import transformer_engine.pytorch as te
events = []
@contextlib.contextmanager
def bf16():
    events.append("bf16")
    yield
f._pl_bf16_autocast = bf16
def probe(label, **kw):
    del events[:]
    with f.fp8_autocast_context(**kw):
        events.append("fp8" if te._FP8 and te._FP8[-1] else "no-fp8")
    print(label, events)
probe("plain")
probe("disabled", enabled=False)
probe("inside", inside_autocast=True)
with torch.autocast("cpu", dtype=torch.bfloat16):
    probe("in-script-autocast")
"""


@pytest.mark.parametrize("api", APIS)
def test_fp8_context_nests_te_autocast_inside_bf16_autocast(tmp_path, api):
    out = run(project(tmp_path, api), code=CONTEXT_SHAPE, fake_te=True, env={"FAKE_TE_API": api})
    assert "plain ['bf16', 'fp8']" in out, out
    assert "disabled ['no-fp8']" in out, out
    assert "inside ['fp8']" in out, out
    assert "in-script-autocast ['fp8']" in out, out


def test_fallback_context_inside_the_scripts_autocast_adds_nothing(tmp_path):
    if te_installed():
        pytest.skip("Transformer Engine is installed here")
    code = (
        "import torch, fp8_fallback as f\n"
        "with f.fp8_autocast_context(inside_autocast=True):\n"
        "    print('inside', torch.is_autocast_cpu_enabled())\n"
        "with f.fp8_autocast_context():\n"
        "    print('plain', torch.is_autocast_cpu_enabled(), torch.get_autocast_cpu_dtype())\n"
    )
    out = run(project(tmp_path, "modern"), code=code)
    # The script's own context decides (nanoGPT's nullcontext on the CPU trains in FP32); alone, BF16 as before.
    assert "inside False" in out, out
    assert "plain True torch.bfloat16" in out, out


def ctx_project(tmp_path):
    dst = tmp_path / "ctx"
    shutil.copytree(os.path.join(EXPECTED, "project-ctx"), str(dst))
    return str(dst)


def test_nanogpt_style_project_converted_by_one_command_trains_without_te(tmp_path):
    if te_installed():
        pytest.skip("Transformer Engine is installed here")
    out = run(ctx_project(tmp_path))
    assert out.count("Running in BF16 fallback: Transformer Engine not installed") == 1, out
    assert len([l for l in out.splitlines() if l.startswith("iter ")]) == 4, out
    assert "val loss" in out, out


def test_nanogpt_style_project_converted_by_one_command_runs_fp8_in_its_step(tmp_path):
    # On a (fake) Hopper with TE the step enters TE autocast inside the script's ctx; evaluation stays out of FP8.
    out = run(ctx_project(tmp_path), fake_te=True, env={"FAKE_TE_API": "modern"})
    assert "Running in FP8 mode on Fake H100 (sm_90), recipe Float8CurrentScaling/HYBRID" in out, out
    assert len([l for l in out.splitlines() if l.startswith("iter ")]) == 4, out
    assert "te calls: ['autocast', 'layernorm_linear', 'linear']" in out, out
