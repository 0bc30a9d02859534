"""Where an eager training step leaves the GPU idle: one project folder (pl_workload:build), a few steps under
torch.profiler, each kernel attributed to the phase whose host range launched it (batch, forward, backward,
optimizer), and per phase: host time, GPU busy time, GPU idle time inside the phase's GPU span, the largest gaps and
the kernel each gap precedes. A step whose forward is paced by the host shows a forward with idle close to
(host - busy); a host sync shows as a gap after the kernel that the host waited for.

  PL_WIDTH=4096 PL_LAYERS=6 python3 bench/tools/gap_trace.py FOLDER [--fp8] [--batch 6 --seq 4096] [--steps 2]
  (--fp8: the forward under FOLDER's fp8_fallback.fp8_autocast_context(), else under torch.autocast(bfloat16))
Prints a table and writes --json-out. Diagnostic only: the A/B's figures come from bench/benchmark.py --mode ab.
"""
import argparse
import contextlib
import importlib
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
from plbench import trace  # noqa: E402

PHASES = ("batch", "forward", "backward", "optimizer")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--fp8", action="store_true")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args()
    sys.path.insert(0, os.path.realpath(a.folder))
    wl = importlib.import_module("pl_workload").build(batch=a.batch, seq=a.seq, device="cuda")
    model, batches, loss_fn = wl["model"].cuda(), wl["batch_factory"], wl["loss_fn"]
    if a.fp8:
        ctx = importlib.import_module("fp8_fallback").fp8_autocast_context
    else:
        ctx = lambda: torch.autocast("cuda", dtype=torch.bfloat16)  # noqa: E731
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0, fused=True)
    rf = torch.profiler.record_function

    def step(i, mark=False):
        with (rf("pl.batch") if mark else contextlib.nullcontext()):
            b = batches(i)
        with (rf("pl.forward") if mark else contextlib.nullcontext()):
            with ctx():
                loss = loss_fn(model, b)
        with (rf("pl.backward") if mark else contextlib.nullcontext()):
            loss.backward()
        with (rf("pl.optimizer") if mark else contextlib.nullcontext()):
            opt.step()
            opt.zero_grad(set_to_none=True)
        return loss

    for i in range(a.warmup):
        step(i)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for i in range(a.warmup, a.warmup + 5):
        step(i)
    torch.cuda.synchronize()
    wall_ms = (time.perf_counter() - t) * 200.0
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for i in range(a.steps):
            step(100 + i, mark=True)
        torch.cuda.synchronize()
    ev = trace.trace_events(prof)
    ranges = sorted((e["ts"], e["ts"] + e["dur"], e["name"][3:]) for e in ev
                    if e.get("ph") == "X" and str(e.get("name", "")).startswith("pl.") and e.get("cat") != "gpu_user_annotation")
    kernels = trace.device_activity(ev)

    def phase_of(ts):
        if ts is None:
            return "?"
        for lo, hi, name in ranges:
            if lo <= ts <= hi:
                return name
        return "between"
    stats = {p: {"host_ms": 0.0, "busy_ms": 0.0, "idle_ms": 0.0, "kernels": 0, "gaps": []} for p in PHASES + ("between", "?")}
    for lo, hi, name in ranges:
        stats[name]["host_ms"] += (hi - lo) / 1000.0
    prev_end = None
    for ts, dur, name, launch in kernels:
        p = phase_of(launch)
        s = stats[p]
        s["busy_ms"] += dur / 1000.0
        s["kernels"] += 1
        if prev_end is not None and ts > prev_end:
            gap = (ts - prev_end) / 1000.0
            s["idle_ms"] += gap
            s["gaps"].append((gap, name[:90]))
        prev_end = max(prev_end or 0, ts + dur)
    n = float(a.steps)
    out = {"folder": a.folder, "fp8": a.fp8, "wall_ms_per_step": wall_ms, "phases": {}}
    print("%s %s: wall %.1f ms/step (5 steps, no profiler)" % (a.folder, "fp8" if a.fp8 else "bf16", wall_ms))
    print("%-10s %9s %9s %9s %8s" % ("phase", "host ms", "GPU busy", "GPU idle", "kernels"))
    for p, s in stats.items():
        if not s["kernels"] and not s["host_ms"]:
            continue
        top = sorted(s["gaps"], reverse=True)[:4]
        out["phases"][p] = {"host_ms": s["host_ms"] / n, "busy_ms": s["busy_ms"] / n, "idle_ms": s["idle_ms"] / n,
                            "kernels": s["kernels"] / n, "largest_gaps": [{"ms": g, "before": k} for g, k in top]}
        print("%-10s %9.1f %9.1f %9.1f %8.0f" % (p, s["host_ms"] / n, s["busy_ms"] / n, s["idle_ms"] / n, s["kernels"] / n))
        for g, k in top:
            print("           gap %6.2f ms before %s" % (g, k))
    if a.json_out:
        json.dump(out, open(a.json_out, "w"), indent=1)


if __name__ == "__main__":
    main()
