"""torch-fp8 scaling math: scales, the FP8 grids (fp32 emulation on torch 1.13), and the autograd Function."""
import math

import pytest
import torch
import torch.nn as nn

from plbench import fp8_torch
from plbench.fp8_torch import E4M3_MAX, E5M2_MAX, round_to_fp8_grid


def test_scale_maps_amax_to_the_format_maximum():
    amax = torch.tensor(3.5)
    assert fp8_torch.compute_scale(amax, "e4m3").item() == pytest.approx(448.0 / 3.5)
    assert fp8_torch.compute_scale(amax, "e5m2").item() == pytest.approx(57344.0 / 3.5)
    assert math.isfinite(fp8_torch.compute_scale(torch.tensor(0.0), "e4m3").item())  # all-zero tensors


@pytest.mark.parametrize("fmt,values", [
    ("e4m3", [0.0, 1.0, 1.125, 1.25, 448.0, -448.0, 240.0, 2.0 ** -6, 2.0 ** -9, 7 * 2.0 ** -9, 0.875]),
    ("e5m2", [0.0, 1.0, 1.25, 1.5, 1.75, 57344.0, 2.0 ** -14, 2.0 ** -16, 3 * 2.0 ** -16, 49152.0])])
def test_representable_values_are_unchanged(fmt, values):
    x = torch.tensor(values)
    assert torch.equal(round_to_fp8_grid(x, fmt), x)


def test_rounding_saturation_and_ties_to_even():
    e4 = lambda v: round_to_fp8_grid(torch.tensor([v]), "e4m3").item()
    assert e4(1000.0) == 448.0 and e4(-1e9) == -448.0
    assert e4(1.0 + 1 / 16) == 1.0          # tie between 1.0 and 1.125 -> even mantissa (1.0)
    assert e4(1.125 + 1 / 16) == 1.25       # tie between 1.125 and 1.25 -> 1.25 (even)
    assert e4(1.07) == 1.125
    assert e4(2.0 ** -10) == 0.0            # half the smallest subnormal: ties to zero
    assert round_to_fp8_grid(torch.tensor([1.0 + 1 / 8]), "e5m2").item() == 1.0   # e5m2 step at 1 is 0.25


@pytest.mark.skipif(not fp8_torch.has_native_fp8(), reason="this torch has no float8 dtypes")
@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_emulation_matches_the_native_cast(fmt):
    fmax = fp8_torch.FORMATS[fmt][2]
    x = torch.randn(10000) * fmax / 6
    native = x.clamp(-fmax, fmax).to(fp8_torch.FP8_DTYPES[fmt]).float()
    assert torch.equal(round_to_fp8_grid(x, fmt), native)


@pytest.mark.parametrize("fmt,rel", [("e4m3", 2.0 ** -4), ("e5m2", 2.0 ** -3)])
def test_quantize_relative_error_bound(fmt, rel):
    torch.manual_seed(0)
    x = torch.randn(4096) * 3
    q, inv = fp8_torch.quantize(x, fmt, emulate=True)
    assert q.abs().max().item() == pytest.approx(fp8_torch.FORMATS[fmt][2])  # amax lands on the format max
    deq = q * inv
    big = x.abs() > x.abs().max() * 2.0 ** -5   # normal range after scaling
    err = ((deq - x).abs() / x.abs())[big]
    assert err.max().item() <= rel * (1 + 1e-6)  # half an ulp: 2^-(mbits+1)


def test_fp8_linear_emulated_forward_and_backward_close_to_fp32():
    torch.manual_seed(0)
    lin = nn.Linear(64, 32)
    x = torch.randn(4, 8, 64, requires_grad=True)
    f = fp8_torch.Fp8Linear(lin, out_dtype=torch.float32, emulate=True)
    assert f.weight is lin.weight and f.bias is lin.bias  # parameters shared, not copied
    y = f(x)
    ref = lin(x)
    assert y.shape == ref.shape
    assert ((y - ref).norm() / ref.norm()).item() < 0.05
    g = torch.randn_like(ref)
    gx, gw, gb = torch.autograd.grad(y, (x, lin.weight, lin.bias), g)
    rx, rw, rb = torch.autograd.grad(ref, (x, lin.weight, lin.bias), g)
    assert ((gx - rx).norm() / rx.norm()).item() < 0.1
    assert ((gw - rw).norm() / rw.norm()).item() < 0.1
    assert torch.allclose(gb, rb, rtol=1e-5, atol=1e-5)  # bias gradient stays exact (high precision)
    assert gx.dtype == x.dtype and gw.dtype == lin.weight.dtype


def test_convert_to_torch_fp8_follows_the_plan():
    from plbench import te_convert, workloads
    wl = workloads.build_preset("tiny")
    plan = te_convert.plan_conversion(wl.model, te_convert.find_high_precision(wl.model), rule="torch",
                                      kinds=("linear",))
    names = fp8_torch.convert_to_torch_fp8(wl.model, plan, emulate=True)
    assert len(names) == 8
    assert isinstance(wl.model.blocks[0].mlp.fc, fp8_torch.Fp8Linear)
    assert type(wl.model.head.lm_head) is nn.Linear
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        loss = wl.loss(wl.model, wl.batch_fn(0))
    loss.backward()
    assert wl.model.blocks[0].mlp.fc.weight.grad is not None and torch.isfinite(loss)


def test_shape_rule_helper():
    assert fp8_torch.fp8_shape_ok(4096, 14336) and not fp8_torch.fp8_shape_ok(4096, 100)
    assert not fp8_torch.fp8_shape_ok(100, 4096)
