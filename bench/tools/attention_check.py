"""fp8_attention (the generated fallback's drop-in for scaled_dot_product_attention) against torch's own function, on
the GPU: the same result (forward and the three gradients, BF16) and the time of a forward + backward of each, measured
in the same process, alternating, so the ratio stands on a shared machine.

    python3 bench/tools/attention_check.py FOLDER_WITH_FALLBACK [--shapes B:H:T:D ...] [--repeats N]

FOLDER_WITH_FALLBACK holds fp8_fallback.py (a converted copy, e.g. .realproj/nanogpt/conv). Prints one line per shape
and a JSON line at the end. Needs CUDA; on a machine without it, says so and exits 2.
"""
import argparse
import importlib
import json
import sys

import torch
import torch.nn.functional as F


def timed(fn, repeats):
    """Median ms of fn() over repeats, CUDA events around each call."""
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def check(fallback, b, h, t, d, repeats):
    torch.manual_seed(0)
    # The layout models pass: projected as [b, t, h, d], transposed to [b, h, t, d].
    q, k, v = (torch.randn(b, t, h, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2).requires_grad_()
               for _ in range(3))
    grad = torch.randn(b, h, t, d, device="cuda", dtype=torch.bfloat16)

    def run(fn):
        for x in (q, k, v):
            x.grad = None
        out = fn(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=True)
        out.backward(grad)
        return out.detach(), [x.grad.detach().clone() for x in (q, k, v)]

    ref, ref_grads = run(F.scaled_dot_product_attention)
    got, got_grads = run(fallback.fp8_attention)
    scale = ref.abs().max().item()
    diffs = {"out": (got.float() - ref.float()).abs().max().item() / max(scale, 1e-6)}
    for name, a, r in zip(("dq", "dk", "dv"), got_grads, ref_grads):
        diffs[name] = (a.float() - r.float()).abs().max().item() / max(r.abs().max().item(), 1e-6)
    for _ in range(3):  # warm both kernels
        run(F.scaled_dot_product_attention), run(fallback.fp8_attention)
    torch_ms, te_ms = [], []
    for _ in range(repeats):  # alternate: both see the same machine
        torch_ms.append(timed(lambda: run(F.scaled_dot_product_attention), 1))
        te_ms.append(timed(lambda: run(fallback.fp8_attention), 1))
    torch_ms.sort(), te_ms.sort()
    row = {"shape": [b, h, t, d], "max_rel_diff": diffs, "torch_ms": torch_ms[len(torch_ms) // 2],
           "fp8_attention_ms": te_ms[len(te_ms) // 2]}
    row["speedup"] = row["torch_ms"] / row["fp8_attention_ms"]
    print("%d x %d heads x %d x %d: torch SDPA %.2f ms, fp8_attention %.2f ms (%.2fx), max rel diff out %.1e dq %.1e "
          "dk %.1e dv %.1e" % (b, h, t, d, row["torch_ms"], row["fp8_attention_ms"], row["speedup"], diffs["out"],
                               diffs["dq"], diffs["dk"], diffs["dv"]), flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--shapes", nargs="+", default=["8:16:2048:128", "6:32:4096:128"])
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("attention_check: no CUDA device here; run it on the GPU machine", file=sys.stderr)
        return 2
    sys.path.insert(0, args.folder)
    fallback = importlib.import_module("fp8_fallback")
    rows = [check(fallback, *(int(x) for x in s.split(":")), args.repeats) for s in args.shapes]
    print(json.dumps({"attention_check": rows, "torch": torch.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
