"""Real Transformer Engine (H200) behind the FP8 fallback's weight_name: a norm whose class calls its weight `scale`
(torchtune's RMSNorm), converted by the fixes. Each check prints one line `CHECK <name>: <result>`.

    python3 bench/tools/te_weight_name_check.py PROJECT_DIR
    # PROJECT_DIR: test/fixtures/fixes/norm_weight_name.py as original.py, and as model.py after
    # `precision-lens check PROJECT_DIR/model.py --fix --unsafe-fixes --isolated` (with its fp8_fallback.py)
"""
import sys
import traceback

import torch

sys.path.insert(0, sys.argv[1])
import fp8_fallback  # noqa: E402
import model as converted  # noqa: E402
import original  # noqa: E402


def check(name, fn):
    try:
        print("CHECK %s: %s" % (name, fn()), flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is a finding here
        print("CHECK %s: %s: %s" % (name, type(e).__name__, str(e).splitlines()[0][:240] if str(e) else ""), flush=True)
        traceback.print_exc(limit=3)


print("TE", __import__("transformer_engine").__version__, "torch", torch.__version__, torch.cuda.get_device_name(0), flush=True)
torch.set_default_device("cuda")
ref = original.Layer(embed_dim=1024)
with torch.no_grad():
    ref.sa_norm.scale.mul_(2.0)
new = converted.Layer(embed_dim=1024)
check("types", lambda: "%s.%s, %s.%s" % (type(new.sa_norm).__module__, type(new.sa_norm).__name__,
                                         type(new.proj).__module__, type(new.proj).__name__))
check("state_dict keys", lambda: sorted(new.state_dict().keys()))
# strict=False: te.* modules add _extra_state keys (FP8 metadata) that a plain module has not (PL501); what else differs?
check("load of the original's state_dict (strict=False)", lambda: new.load_state_dict(ref.state_dict(), strict=False))
check("alias", lambda: "scale is weight: %s, mean %.3f" % (new.sa_norm.scale is new.sa_norm.weight, float(new.sa_norm.scale.mean())))
check("round trip into the original class (strict=False)", lambda: (lambda b: (b.load_state_dict(new.state_dict(), strict=False), float(b.sa_norm.scale.mean())))(original.Layer(embed_dim=1024)))


def fp8_step():
    x = torch.randn(8, 128, 1024, dtype=torch.bfloat16)
    with fp8_fallback.fp8_autocast_context():
        out = new.to(torch.bfloat16)(x)
    out.float().sum().backward()
    want = ref.to(torch.bfloat16)(x)
    return "out %s %s, scale.grad %s, max |FP8 - original| %.3f" % (tuple(out.shape), out.dtype, new.sa_norm.scale.grad is not None,
                                                                    float((out.float() - want.float()).abs().max()))


check("forward + backward under FP8 autocast", fp8_step)
check("state_dict after training keeps .scale", lambda: [k for k in new.state_dict() if "norm" in k])
