"""FP8 paths on a real GPU (skipped on CPU-only machines and on torch without float8): run on the H200."""
import pytest
import torch
import torch.nn as nn

from plbench import fp8_torch

cuda_fp8 = pytest.mark.skipif(
    not (torch.cuda.is_available() and fp8_torch.has_native_fp8()
         and torch.cuda.get_device_capability() >= (8, 9)), reason="needs a CUDA GPU with FP8 and torch >= 2.1")


@cuda_fp8
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_native_quantize_matches_the_emulation(fmt):
    x = torch.randn(1024, 512, device="cuda") * 5
    q, inv = fp8_torch.quantize(x, fmt, emulate=False)
    qe, inve = fp8_torch.quantize(x, fmt, emulate=True)
    assert q.dtype == fp8_torch.FP8_DTYPES[fmt]
    assert torch.equal(inv, inve)
    assert torch.equal(q.float(), qe)


@cuda_fp8
@pytest.mark.parametrize("compiled", [False, True])
def test_fp8_linear_on_scaled_mm_matches_bf16(compiled):
    torch.manual_seed(0)
    lin = nn.Linear(1024, 2048, device="cuda")
    f = fp8_torch.Fp8Linear(lin, out_dtype=torch.bfloat16, emulate=False)
    run = torch.compile(f) if compiled else f
    x = torch.randn(4, 256, 1024, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = run(x)
        ref = lin(x)
    assert y.dtype == torch.bfloat16 and y.shape == ref.shape
    rel = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
    assert rel < 0.05, rel
    g = torch.randn_like(ref)
    gx, gw, gb = torch.autograd.grad(y, (x, lin.weight, lin.bias), g)
    rx, rw, rb = torch.autograd.grad(ref, (x, lin.weight, lin.bias), g)
    for a, b in ((gx, rx), (gw, rw)):
        assert ((a.float() - b.float()).norm() / b.float().norm()).item() < 0.1
    assert gx.dtype == torch.float32 and gw.dtype == torch.float32
    emu = fp8_torch.Fp8Linear(lin, out_dtype=torch.bfloat16, emulate=True)
    ye = emu(x)
    assert ((y.float() - ye.float()).norm() / ye.float().norm()).item() < 0.02  # same math, real vs emulated
