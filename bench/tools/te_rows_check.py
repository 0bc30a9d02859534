"""Checks on real Transformer Engine (H200) behind the FP8 fallback's row padding, PL304 and the norm dtype text:
each check prints one line `CHECK <name>: <result>`; a failure prints the exception's first line, never stops the run.

    python3 bench/tools/te_rows_check.py [PROJECT_DIR]   # PROJECT_DIR: a golden project (its fp8_fallback.py)
"""
import os
import sys
import traceback
import warnings

import torch
import transformer_engine.pytorch as te
from transformer_engine.common import recipe as te_recipe


def check(name, fn):
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
        extra = "; warnings: " + " | ".join(str(w.message).splitlines()[0][:160] for w in caught) if caught else ""
        print("CHECK %s: %s%s" % (name, result, extra), flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is a finding here
        print("CHECK %s: %s: %s" % (name, type(e).__name__, str(e).splitlines()[0][:240] if str(e) else ""), flush=True)


def linear_step(rows, in_f=64, out_f=64, grad=True):
    layer = te.Linear(in_f, out_f, params_dtype=torch.bfloat16).cuda()
    x = torch.randn(rows, in_f, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
    with te.autocast(enabled=True, recipe=te_recipe.DelayedScaling()):
        y = layer(x)
    if grad:
        y.float().sum().backward()
        return "ok forward+backward, out %s, wgrad %s" % (tuple(y.shape), tuple(layer.weight.grad.shape))
    return "ok forward only, out %s" % (tuple(y.shape),)


print("TE", __import__("transformer_engine").__version__, "torch", torch.__version__, torch.cuda.get_device_name(0))
for rows in (8, 16, 24, 1000, 1008):
    check("te.Linear(64, 64) rows=%d forward+backward" % rows, lambda: linear_step(rows))
    with torch.no_grad():
        check("te.Linear(64, 64) rows=%d forward, no grad" % rows, lambda: linear_step(rows, grad=False))
for out_f in (24, 40, 1000):
    check("te.Linear(64, %d) rows=32 forward+backward" % out_f, lambda: linear_step(32, out_f=out_f))
check("DelayedScaling(interval=1)", lambda: "constructed: %r" % (te_recipe.DelayedScaling(interval=1),))


def norm_dtype(cls, pdtype):
    n = cls(64, params_dtype=pdtype).cuda()
    x = torch.randn(8, 64, device="cuda", dtype=torch.bfloat16)
    return "output %s" % n(x).dtype


for cls in (te.LayerNorm, te.RMSNorm):
    for pdtype in (torch.float32, torch.bfloat16):
        check("%s(params_dtype=%s), bf16 input" % (cls.__name__, pdtype), lambda: norm_dtype(cls, pdtype))

if len(sys.argv) > 1:
    sys.path.insert(0, sys.argv[1])
    import fp8_fallback as f

    print("fallback available:", f.fp8_available())

    def fallback_step(rows):
        layer = f.fp8_linear(64, 64, params_dtype=torch.bfloat16, device="cuda")
        x = torch.randn(rows, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        with f.fp8_autocast_context():
            y = layer(x)
        y.float().sum().backward()
        return "ok %s, %s, out %s, x.grad %s" % (type(layer).__module__, "padded" if rows % 16 else "unpadded",
                                               tuple(y.shape), tuple(x.grad.shape))

    for rows in (3, 8, 1000):
        check("fallback fp8_linear rows=%d forward+backward" % rows, lambda: fallback_step(rows))
