"""The fused forms the one command writes, checked on the GPU with the real Transformer Engine (issue 21, item 5).

    python3 bench/tools/fused_check.py .realproj/llama2c [--width 512] [--layers 2]

PROJECT holds orig/ and conv/ (bench/realproj/prepare.sh): the published model and the converted copy, each with the
workload pl_workload.py. Builds both at a small size, loads the original's weights into the converted model (strict: the
fusion must not change a checkpoint key), then on one batch:
  1. TE's modules in BF16 (torch.autocast, no FP8): the loss and every gradient against the original's. The fused
     modules compute the same function, so the differences are BF16 rounding (the order of operations differs);
  2. FP8 (the fallback's fp8_autocast_context inside BF16 autocast): the loss near BF16's, every parameter gets a
     finite gradient, and the fused modules ran (te.LayerNormMLP / te.LayerNormLinear forwards counted).
Prints one JSON line per check and a verdict; exits 1 when a check fails.
"""
import argparse
import importlib
import json
import os
import sys

import torch


def load(folder, name):
    """Imports folder's modules fresh (orig/ and conv/ both have model.py and pl_workload.py)."""
    for mod in ("model", "pl_workload", "textdata", "fp8_fallback"):
        sys.modules.pop(mod, None)
    sys.path.insert(0, folder)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(folder)


def step(model, batch, loss_fn, context):
    model.zero_grad(set_to_none=True)
    with context():
        loss = loss_fn(model, batch)
    loss.backward()
    return loss.detach().float().item(), {n: p.grad.detach().float().clone() for n, p in model.named_parameters() if p.grad is not None}


def rel(a, b):
    return (a - b).norm().item() / max(b.norm().item(), 1e-12)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("project")
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--device", default="cuda", help="cuda (the check); cpu runs it against test/python/fake_te")
    a = ap.parse_args()
    os.environ["PL_WIDTH"], os.environ["PL_LAYERS"] = str(a.width), str(a.layers)
    orig_dir, conv_dir = (os.path.abspath(os.path.join(a.project, d)) for d in ("orig", "conv"))

    torch.manual_seed(0)
    built = load(orig_dir, "pl_workload").build(batch=a.batch, seq=a.seq, device=a.device)
    orig, batch, loss_fn = built["model"].to(a.device), built["batch_factory"](0), built["loss_fn"]
    state = orig.state_dict()

    conv_built = load(conv_dir, "pl_workload").build(batch=a.batch, seq=a.seq, device=a.device)
    fallback = sys.modules["fp8_fallback"]
    conv = conv_built["model"].to(a.device)
    missing, unexpected = conv.load_state_dict(state, strict=False)
    # The fused modules: children, or held in a module's __dict__ (fp8_fuse_mlp's, outside the checkpoint): counted and
    # their forwards counted from here on.
    fused, counts = {}, {"LayerNormMLP": 0, "LayerNormLinear": 0}

    def counter(kind):
        def hook(*_):
            counts[kind] += 1
        return hook
    for m in conv.modules():
        for k in [m] + [v for v in m.__dict__.values() if isinstance(v, torch.nn.Module)]:
            name = type(k).__name__
            kind = "LayerNormMLP" if name.startswith("_PLNormMLP") else "LayerNormLinear" if name.startswith("_PLNormLinear") else None
            if kind:
                fused[name] = fused.get(name, 0) + 1
                k.register_forward_hook(counter(kind))

    checks = []

    def check(name, ok, **facts):
        checks.append(ok)
        print(json.dumps({"check": name, "ok": bool(ok), **facts}), flush=True)

    check("checkpoint keys unchanged (strict load)", not missing and not unexpected, missing=list(missing), unexpected=list(unexpected))
    check("fused modules built", bool(fused), fused=fused, fp8=fallback.fp8_available()[0])

    bf16 = lambda: torch.autocast(a.device, dtype=torch.bfloat16)  # noqa: E731
    ref_loss, ref_grads = step(orig, batch, loss_fn, bf16)
    loss, grads = step(conv, batch, loss_fn, bf16)
    worst = max(((rel(grads[n], g), n) for n, g in ref_grads.items() if n in grads), default=(float("inf"), None))
    check("BF16: same function", abs(loss - ref_loss) <= 2e-3 * abs(ref_loss) and worst[0] < 5e-2 and set(grads) == set(ref_grads),
          loss=loss, ref_loss=ref_loss, worst_grad_rel=worst[0], worst_grad=worst[1],
          grads_missing=sorted(set(ref_grads) - set(grads))[:5], layernormmlp_forwards=counts["LayerNormMLP"])

    def fp8():
        from contextlib import ExitStack
        stack = ExitStack()
        stack.enter_context(bf16())
        stack.enter_context(fallback.fp8_autocast_context(inside_autocast=True))
        return stack
    before = dict(counts)
    loss8, grads8 = step(conv, batch, loss_fn, fp8)
    finite = all(torch.isfinite(g).all().item() for g in grads8.values())
    check("FP8: runs, gradients finite and present", finite and set(grads8) == set(ref_grads) and abs(loss8 - ref_loss) <= 0.05 * abs(ref_loss),
          loss=loss8, ref_loss=ref_loss, fused_forwards={k: counts[k] - before[k] for k in counts})
    print(json.dumps({"verdict": "ok" if all(checks) else "FAILED", "checks": len(checks), "failed": checks.count(False)}))
    return 0 if all(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
