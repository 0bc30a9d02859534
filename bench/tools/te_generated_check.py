"""The generated code of three conversions on real Transformer Engine (GPU): scale-named norms (fp8_rmsnorm_or with
weight_name), GPT-2 Conv1D (fp8_conv1d_or), norms fused into te.LayerNormLinear (fp8_fuse_norm). DIR holds what
`npx tsx scripts/gen-te-check.ts DIR` wrote. Per case: module types, the original state_dict loaded (only TE _extra_state
may be missing), FP32 output difference, the round trip back into the original, an FP8 forward (finite, its relative
difference) and gradients.
    python3 bench/tools/te_generated_check.py DIR
"""
import importlib, sys, traceback
import torch
if len(sys.argv) != 2:
    sys.exit(__doc__)
DIR = sys.argv[1]
sys.path[:0] = [DIR, DIR + "/transformers_stub"]

def check(name, build, inp, grad_of):
    print("==", name)
    try:
        o = importlib.import_module("original_" + name); c = importlib.import_module("converted_" + name)
        torch.manual_seed(0)
        ref = build(o).cuda(); new = build(c).cuda()
        kinds = sorted({type(m).__name__ for m in new.modules() if "Linear" in type(m).__name__ or "Norm" in type(m).__name__ or "Conv1D" in type(m).__name__})
        print("module types:", kinds)
        sd = ref.state_dict()
        print("strict load:", new.load_state_dict(sd, strict=False))
        x = inp().cuda()
        with torch.no_grad():
            y, z = ref(x), new(x)
        print("fp32 max diff: %.2e" % (y - z).abs().max().item())
        back = build(o).cuda()
        print("round trip:", back.load_state_dict({k: v for k, v in new.state_dict().items() if not k.endswith("_extra_state")}, strict=True))
        with c.fp8_autocast_context():
            out = new(x)
        print("fp8 out finite:", bool(torch.isfinite(out).all()), "rel diff vs fp32: %.3f" % ((out.float() - y).norm() / y.norm()).item())
        out.float().square().mean().backward()
        g = grad_of(new)
        print("grad:", g is not None and bool(torch.isfinite(g).all()) and bool(g.abs().sum() > 0))
    except Exception:
        traceback.print_exc()

print("torch", torch.__version__)
check("norm", lambda m: m.Layer(), lambda: torch.randn(2, 16, 64), lambda n: n.sa_norm.weight.grad)
check("conv1d", lambda m: m.Block(), lambda: torch.randn(2, 16, 64), lambda n: n.attn.c_proj.linear.weight.grad)
check("fuse", lambda m: m.Net(), lambda: torch.randn(2, 16, 64), lambda n: n.blocks[0].ln_1.weight.grad)
