"""Real Transformer Engine (H200) behind the FP8 fallback's fp8_linear_from: Linears whose class is chosen at run time
(timm's `linear_layer = partial(nn.Conv2d, kernel_size=1) if use_conv else nn.Linear`), as the fixes convert them.
Each check prints one line `CHECK <name>: <result>`; a failure prints the exception's first line, never stops the run.

    python3 bench/tools/te_class_choice_check.py PROJECT_DIR
    # PROJECT_DIR: test/fixtures/fixes/linear_layer_choice.py converted by `precision-lens check DIR --fix
    # --unsafe-fixes` (model.py + its fp8_fallback.py)
"""
import sys
import traceback
import warnings
from functools import partial

import torch

sys.path.insert(0, sys.argv[1])
import fp8_fallback as f  # noqa: E402
import model as m  # noqa: E402

DD = {"device": "cuda", "dtype": torch.bfloat16}


def check(name, fn):
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
        extra = "; warnings: " + " | ".join(str(w.message).splitlines()[0][:160] for w in caught) if caught else ""
        print("CHECK %s: %s%s" % (name, result, extra), flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is a finding here
        print("CHECK %s: %s: %s" % (name, type(e).__name__, str(e).splitlines()[0][:240] if str(e) else ""), flush=True)
        traceback.print_exc(limit=3)


def kind(layer):
    mod = type(layer).__module__.split(".")[0]
    w = getattr(layer, "weight", None)
    return "%s.%s(%s, bias=%s)" % (mod, type(layer).__name__, w.dtype if w is not None else "-",
                                   getattr(layer, "bias", None) is not None and getattr(layer, "bias").numel() > 0)


def ran_in_fp8(model):
    """te.* modules that ran their last forward in FP8, with the largest amax seen (DelayedScaling)."""
    out = []
    for name, mod in model.named_modules():
        if not type(mod).__module__.startswith("transformer_engine"):
            continue
        fwd = (getattr(mod, "fp8_meta", None) or {}).get("scaling_fwd")
        amax = float(fwd.amax_history.abs().max()) if fwd is not None and hasattr(fwd, "amax_history") else None
        out.append("%s fp8=%s amax=%s" % (name, bool(getattr(mod, "fp8", False)), "-" if amax is None else "%.3g" % amax))
    return "; ".join(out) or "no te.* module"


def train(build, x_shape, steps=30, fp8=True, seed=0):
    torch.manual_seed(seed)
    model = build()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator(device="cuda").manual_seed(seed)
    target_w = torch.randn(x_shape[-1] if len(x_shape) == 3 else x_shape[1], x_shape[-1] if len(x_shape) == 3 else x_shape[1],
                           device="cuda", generator=g) / 32
    losses = []
    for _ in range(steps):
        x = torch.randn(*x_shape, device="cuda", dtype=torch.bfloat16, generator=g)
        y = (x.float().movedim(1, -1) @ target_w).movedim(-1, 1) if len(x_shape) == 4 else x.float() @ target_w
        with f.fp8_autocast_context(enabled=fp8):
            out = model(x)
        loss = torch.nn.functional.mse_loss(out.float(), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return model, losses


print("TE", __import__("transformer_engine").__version__, "torch", torch.__version__, torch.cuda.get_device_name(0), flush=True)
print("fallback:", f.fp8_available(), flush=True)

check("Mlp(1024, 4096) (linear_layer = nn.Linear)", lambda: " | ".join(kind(x) for x in (lambda o: (o.fc1, o.fc2))(m.Mlp(1024, 4096, **DD))))
check("Mlp(1024, 4096, use_conv=True)", lambda: " | ".join(kind(x) for x in (lambda o: (o.fc1, o.fc2))(m.Mlp(1024, 4096, use_conv=True, **DD))))
check("Mlp(1000, 4096) (shape rule fails)", lambda: " | ".join(kind(x) for x in (lambda o: (o.fc1, o.fc2))(m.Mlp(1000, 4096, **DD))))
check("GluMlp(1024, 4096)", lambda: " | ".join(kind(x) for x in (lambda o: (o.fc1, o.fc2))(m.GluMlp(1024, 4096, **DD))))
check("Head(1024, head_layer=partial(nn.Linear, bias=False, device='cuda'))",
      lambda: kind(m.Head(1024, 10, head_layer=partial(torch.nn.Linear, bias=False, device="cuda")).proj))


def compare(build, x_shape, label):
    fp8_model, fp8_losses = train(build, x_shape, fp8=True)
    _, bf16_losses = train(build, x_shape, fp8=False)
    return "%s; loss FP8 %.5f -> %.5f, BF16 %.5f -> %.5f (final FP8/BF16 %+.2f %%); %s" % (
        label, fp8_losses[0], fp8_losses[-1], bf16_losses[0], bf16_losses[-1],
        100 * (fp8_losses[-1] / bf16_losses[-1] - 1), ran_in_fp8(fp8_model))


check("train Mlp(1024, 4096), 30 steps, tokens (8, 256, 1024)",
      lambda: compare(lambda: m.Mlp(1024, 4096, **DD), (8, 256, 1024), "Mlp"))
check("train GluMlp(1024, 4096), 30 steps, rows 8*250",
      lambda: compare(lambda: m.GluMlp(1024, 4096, **DD), (8, 250, 1024), "GluMlp"))
check("train Mlp(1024, 4096, use_conv=True), 30 steps, NCHW (8, 1024, 16, 16)",
      lambda: compare(lambda: m.Mlp(1024, 4096, use_conv=True, **DD), (8, 1024, 16, 16), "Mlp conv"))
