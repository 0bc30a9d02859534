"""Device activity read from a torch.profiler Chrome trace: every kernel, copy and memset with its start, duration
and the host call that launched it.

The trace is the ground truth for "how long was the GPU busy": `key_averages()`'s per-op device times summed 14-20 %
less than the kernels' own durations on the H200 (bench/results/h200/README.md, 2026-12-04 session 5), which read as
idle time that was not there. Pure functions over the trace's event list; no torch needed.
"""
import json
import os
import tempfile

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


def device_activity(events):
    """[(start_us, dur_us, name, launch_start_us or None)] of the trace's device events, by start time."""
    launches = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in LAUNCH_CATS:
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launches[corr] = e.get("ts")
    out = []
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
            corr = (e.get("args") or {}).get("correlation")
            out.append((float(e["ts"]), float(e.get("dur", 0.0)), str(e.get("name", "?")), launches.get(corr)))
    out.sort(key=lambda k: k[0])
    return out


def busy_and_idle_us(activity):
    """(busy, idle) in microseconds: busy = the union of the device intervals, idle = the gaps between them."""
    busy = idle = 0.0
    end = None
    for ts, dur, _, _ in activity:
        if end is None:
            busy += dur
            end = ts + dur
            continue
        if ts > end:
            idle += ts - end
            busy += dur
            end = ts + dur
        elif ts + dur > end:
            busy += ts + dur - end
            end = ts + dur
    return busy, idle


def per_name_ms(activity, steps):
    """{name: (ms per step, calls)} summed over the device events."""
    rows = {}
    for _, dur, name, _ in activity:
        ms, calls = rows.get(name, (0.0, 0))
        rows[name] = (ms + dur / 1000.0 / steps, calls + 1)
    return rows


def trace_events(prof):
    """The Chrome trace events of a finished torch.profiler.profile."""
    fd, path = tempfile.mkstemp(suffix=".json", prefix="plbench-trace-")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f).get("traceEvents", [])
    finally:
        os.unlink(path)
