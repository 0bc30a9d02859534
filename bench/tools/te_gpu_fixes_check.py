"""Checks on real Transformer Engine (H200) behind the fallback's dtype cast and row padding, the FP8 shape rule,
PL304's interval= and the te.* norms' output dtype, then the converted exec_semantics fixture (FP32 weights, BF16
activations) trained in FP8 against its own BF16 fallback. One line per check: `CHECK <name>: <result>`; a failure
prints the exception's first line and never stops the run.

    python3 bench/tools/te_gpu_fixes_check.py PROJECT CONVERTED [NOCAST]
    # PROJECT: a golden project (its fp8_fallback.py); CONVERTED: exec_semantics.py after the fixes
    # (npx tsx test/python/convert-example.ts test/fixtures/fixes/exec_semantics.py OUT.py); NOCAST: the same
    # converted with a fallback that does not cast (to show the failure)
"""
import importlib.util
import inspect
import sys
import warnings

import torch
import transformer_engine
import transformer_engine.pytorch as te
from transformer_engine.common import recipe as te_recipe


def check(name, fn):
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
        extra = "; warnings: " + " | ".join("%s: %s" % (w.category.__name__, str(w.message).splitlines()[0][:200])
                                             for w in caught) if caught else "; no warning"
        print("CHECK %s: %s%s" % (name, result, extra), flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is a finding here
        print("CHECK %s: %s: %s" % (name, type(e).__name__, " ".join(str(e).split())[:300]), flush=True)


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


print("TE", transformer_engine.__version__, "torch", torch.__version__, torch.cuda.get_device_name(0), flush=True)
D = te_recipe.DelayedScaling()

# 1. te.Linear with parameters of one dtype fed an input of another, under te.autocast alone / torch.autocast too.
def raw_dtype(pdtype, xdtype, torch_autocast=False, grad=True):
    layer = te.Linear(64, 32, params_dtype=pdtype).cuda()
    x = torch.randn(16, 64, device="cuda", dtype=xdtype, requires_grad=grad)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=torch_autocast), te.autocast(enabled=True, recipe=D):
        y = layer(x)
    if grad:
        y.float().sum().backward()
    return "ok, out %s" % y.dtype


for p, x in ((torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32)):
    check("te.Linear params %s, input %s, te.autocast" % (p, x), lambda: raw_dtype(p, x))
    check("te.Linear params %s, input %s, torch.autocast(bf16) + te.autocast" % (p, x), lambda: raw_dtype(p, x, True))
check("te.Linear params fp32, input bf16, no autocast at all (eval)", lambda: (
    te.Linear(64, 32).cuda()(torch.randn(16, 64, device="cuda", dtype=torch.bfloat16)).dtype))

# 2. Rows and out_features: forward alone vs forward + backward.
def linear_step(rows, in_f=64, out_f=64, grad=True):
    layer = te.Linear(in_f, out_f, params_dtype=torch.bfloat16).cuda()
    x = torch.randn(rows, in_f, device="cuda", dtype=torch.bfloat16, requires_grad=grad)
    with torch.set_grad_enabled(grad), te.autocast(enabled=True, recipe=D):
        y = layer(x)
    if grad:
        y.float().sum().backward()
        return "ok forward+backward"
    return "ok forward only"


for rows in (8, 16, 24, 1000, 1008):
    for grad in (False, True):
        check("te.Linear(64, 64) rows=%d %s" % (rows, "forward+backward" if grad else "forward, no grad"),
              lambda: linear_step(rows, grad=grad))
for out_f in (24, 40, 1000, 1008):
    for grad in (False, True):
        check("te.Linear(64, %d) rows=32 %s" % (out_f, "forward+backward" if grad else "forward, no grad"),
              lambda: linear_step(32, out_f=out_f, grad=grad))
for in_f in (24, 40):
    check("te.Linear(%d, 64) rows=32 forward, no grad" % in_f, lambda: linear_step(32, in_f=in_f, grad=False))

# 3. PL304: DelayedScaling(interval=...).
check("DelayedScaling signature has interval", lambda: "interval" in inspect.signature(te_recipe.DelayedScaling).parameters)
check("DelayedScaling(interval=4)", lambda: "constructed, .interval=%r: %r" % (
    getattr(te_recipe.DelayedScaling(interval=4), "interval", "<none>"), te_recipe.DelayedScaling(interval=4)))


def interval_step():
    layer = te.Linear(64, 64).cuda()
    r = te_recipe.DelayedScaling(interval=4, amax_history_len=8)
    scales = []
    for _ in range(3):
        with te.autocast(enabled=True, recipe=r):
            y = layer(torch.randn(32, 64, device="cuda") * 10)
        y.sum().backward()
        try:
            scales.append(round(float(layer.fp8_meta["scaling_fwd"].scale[0]), 3))
        except Exception as e:  # noqa: BLE001
            scales.append(type(e).__name__)
    return "trained 3 steps, forward input scale per step %s" % scales


check("DelayedScaling(interval=4) in a training step", interval_step)

# 4. te.LayerNorm / te.RMSNorm output dtype for a BF16 input.
def norm_dtype(cls, pdtype, ctx):
    n = cls(64, params_dtype=pdtype).cuda()
    x = torch.randn(16, 64, device="cuda", dtype=torch.bfloat16)
    if ctx == "te.autocast":
        with te.autocast(enabled=True, recipe=D):
            return "output %s" % n(x).dtype
    if ctx == "torch.autocast(bf16)":
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return "output %s" % n(x).dtype
    return "output %s" % n(x).dtype


for cls in (te.LayerNorm, te.RMSNorm):
    for pdtype in (torch.float32, torch.bfloat16):
        for ctx in ("no autocast", "te.autocast", "torch.autocast(bf16)"):
            check("%s(params_dtype=%s), bf16 input, %s" % (cls.__name__, pdtype, ctx), lambda: norm_dtype(cls, pdtype, ctx))

# 5. The fallback module's factories on real TE.
sys.path.insert(0, sys.argv[1])
import fp8_fallback as f  # noqa: E402

print("fallback available:", f.fp8_available(), flush=True)


class ColumnParallelLinear(torch.nn.Linear):
    pass


def fallback_dtype(kind, pdtype, xdtype):
    if kind == "fp8_linear":
        layer = f.fp8_linear(64, 32, params_dtype=pdtype, device="cuda")
    else:
        layer = f.fp8_parallel_linear(lambda: ColumnParallelLinear(64, 32), 64, 32, params_dtype=pdtype, device="cuda")
    x = torch.randn(16, 64, device="cuda", dtype=xdtype, requires_grad=True)
    with f.fp8_autocast_context():
        y = layer(x)
    y.float().sum().backward()
    with torch.no_grad():
        e = layer(torch.randn(3, 64, device="cuda", dtype=xdtype))
    return "ok %s, out %s, x.grad %s, eval (no autocast, 3 rows) %s %s" % (
        type(layer).__module__, y.dtype, x.grad.dtype, e.dtype, tuple(e.shape))


for kind in ("fp8_linear", "fp8_parallel_linear"):
    for p, x in ((torch.float32, torch.bfloat16), (torch.bfloat16, torch.float32), (torch.bfloat16, torch.bfloat16)):
        check("fallback %s params %s, input %s" % (kind, p, x), lambda: fallback_dtype(kind, p, x))


def fallback_rows(rows, shape3=False):
    layer = f.fp8_linear(64, 64, params_dtype=torch.bfloat16, device="cuda")
    ref = torch.nn.Linear(64, 64, device="cuda", dtype=torch.bfloat16)
    ref.load_state_dict({k: v for k, v in layer.state_dict().items() if k in ("weight", "bias")})
    shape = (rows // 8, 8, 64) if shape3 else (rows, 64)
    x = torch.randn(*shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with f.fp8_autocast_context():
        y = layer(x)
    y.float().sum().backward()
    rel = float((y.float() - ref(x).float()).norm() / ref(x).float().norm())
    return "ok %s, out %s, x.grad %s, wgrad %s, rel. diff to BF16 %.4f" % (
        type(layer).__module__, tuple(y.shape), tuple(x.grad.shape), tuple(layer.weight.grad.shape), rel)


for rows in (3, 8, 24, 1000):
    check("fallback fp8_linear rows=%d forward+backward" % rows, lambda: fallback_rows(rows))
check("fallback fp8_linear input (125, 8, 64) = 1000 rows forward+backward", lambda: fallback_rows(1000, True))
check("fallback fp8_linear(64, 24) kept", lambda: "%s (%s)" % (type(f.fp8_linear(64, 24)).__module__, "; ".join(f._PL_KEPT)))


# 6. The converted exec_semantics fixture: FP8 vs its own BF16 fallback, same weights, same batches.
def batches(n, batch, seq, seed, vocab=256):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        start = torch.randint(0, vocab, (batch, 1), generator=g)
        step = torch.randint(1, 4, (batch, 1), generator=g)
        idx = (start + step * torch.arange(seq + 1)) % vocab  # learnable: each sequence an arithmetic progression
        out.append((idx[:, :-1].cuda(), idx[:, 1:].cuda()))
    return out


def train_converted(path, steps, batch, seq, dim, n_layer, label):
    mod = load(path, "converted_%s" % label)
    data = batches(steps, batch, seq, 7)
    losses = {}
    state = None
    for run in ("bf16_fallback", "fp8"):
        mod._PL_FP8_STATE = (False, "reference run of the same file with FP8 off") if run == "bf16_fallback" else None
        if run == "fp8":
            print("mode:", mod.fp8_available(), flush=True)
        torch.manual_seed(0)
        model = mod.TinyLM(vocab_size=256, dim=dim, n_layer=n_layer).cuda()
        if state is None:
            state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            res = model.load_state_dict(state, strict=False)
            print("load BF16 weights into the FP8 model: missing %d (all _extra_state: %s), unexpected %d" % (
                len(res.missing_keys), all(k.endswith("_extra_state") for k in res.missing_keys), len(res.unexpected_keys)))
            print("te modules:", sorted({type(m).__name__ for m in model.modules() if type(m).__module__.startswith("transformer_engine")}))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        ls = []
        for idx, tgt in data:
            with mod.fp8_autocast_context():
                _, loss = model(idx, tgt)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            ls.append(float(loss))
        with torch.no_grad():
            logits, _ = model(data[0][0])
        losses[run] = ls
        print("%s %s: loss step 0 %.4f, 10 %.4f, last %.4f; eval outside autocast %s %s" % (
            label, run, ls[0], ls[min(10, len(ls) - 1)], ls[-1], tuple(logits.shape), logits.dtype), flush=True)
    b, e = losses["bf16_fallback"], losses["fp8"]
    m_b, m_e = sum(b[-10:]) / 10, sum(e[-10:]) / 10
    return "final bf16 %.4f fp8 %.4f (%+.3f %%); mean of last 10 bf16 %.4f fp8 %.4f (%+.3f %%); max per-step |rel diff| %.2f %%" % (
        b[-1], e[-1], 100 * (e[-1] - b[-1]) / b[-1], m_b, m_e, 100 * (m_e - m_b) / m_b,
        100 * max(abs(x - y) / y for x, y in zip(e, b)))


for label, batch, seq in (("rows512", 8, 64), ("rows120-padded", 8, 15)):
    check("converted exec_semantics %s (8 x %d tokens, dim 256, 4 layers, 200 steps)" % (label, seq),
          lambda: train_converted(sys.argv[2], 200, batch, seq, 256, 4, label))
check("converted exec_semantics as generated (dim 64, 2 layers, 2 x 16 tokens, 200 steps)",
      lambda: train_converted(sys.argv[2], 200, 2, 16, 64, 2, "default"))
if len(sys.argv) > 3:
    check("converted exec_semantics WITHOUT the dtype cast (dim 256, 8 x 64)",
          lambda: train_converted(sys.argv[3], 5, 8, 64, 256, 4, "nocast"))
