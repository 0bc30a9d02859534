"""The table of bench/results/h200 for `benchmark.py --mode ab` runs: one row per run (the `-out.txt` JSON lines a run
printed, or its `--json-out` file), tokens/s of each arm and its ratio to the original measured in the same process,
peak memory, the share of te.* GEMM forwards that ran with FP8 on, and the loss (mean of the last N steps).

    python3 bench/tools/ab_table.py bench/results/h200/2026-12-03-ab/*-out.txt [--last 20]
"""
import argparse
import json
import os
import sys


def events(path):
    with open(path) as f:
        text = f.read()
    try:  # a --json-out file: one object holding the events
        doc = json.loads(text)
        return doc.get("events") or doc.get("results", []) + ([doc["summary"]] if doc.get("summary") else [])
    except ValueError:
        out = []
        for line in text.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out


def row(path, last):
    evs = events(path)
    results = {e["backend"]: e for e in evs if e.get("event") == "result"}
    summary = next((e for e in evs if e.get("event") == "summary"), None)
    if "original" not in results or "converted" not in results:
        return None
    base = results["original"]

    def tok(arm):
        r = results.get(arm)
        return r and r.get("tokens_per_s")

    def mem(arm):
        r = results.get(arm)
        b = r and r.get("peak_memory_bytes")
        return b / 2 ** 30 if b else None

    def loss(arm):
        r = results.get(arm)
        if not r or not r.get("losses"):
            return None
        tail = r["losses"][-last:]
        return sum(tail) / len(tail)

    gemms = (results["converted"].get("fp8_gemms") or {})
    mode = (summary or {}).get("ab", {}).get("fallback_mode") or results["converted"].get("fallback_mode")
    name = os.path.basename(path).replace("-out.txt", "").replace(".json", "")
    cells = [name, mode or "?", "%d" % len(base.get("losses") or [])]
    for arm in ("original", "converted", "torchao-original"):
        t = tok(arm)
        cells.append("-" if t is None else "%.0f (%.3fx)" % (t, t / tok("original")))
    for arm in ("original", "converted", "torchao-original"):
        m = mem(arm)
        cells.append("-" if m is None else "%.1f" % m)
    if gemms.get("forwards_total") is None and (gemms.get("module_types") or {}).get("Float8Linear"):
        # The compile path (fp8_for_compile): torchao modules, whose forwards are not hooked (that would break the graph)
        cells.append("%d Float8Linear" % gemms["module_types"]["Float8Linear"])
    else:
        cells.append("%s/%s" % (gemms.get("forwards_fp8"), gemms.get("forwards_total")))
    lo, lc = loss("original"), loss("converted")
    cells.append("-" if lo is None or lc is None else "%.3f / %.3f (%+.1f %%)" % (lo, lc, 100 * (lc / lo - 1)))
    return cells


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+")
    p.add_argument("--last", type=int, default=20, help="steps the loss is averaged over (default 20)")
    a = p.parse_args(argv)
    head = ["run", "mode", "steps", "original tok/s", "converted tok/s (ratio)", "torchao tok/s (ratio)",
            "peak GiB orig", "conv", "torchao", "FP8 forwards (or modules)", "loss orig / conv (last %d)" % a.last]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for f in a.files:
        r = row(f, a.last)
        if r:
            print("| " + " | ".join(r) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
