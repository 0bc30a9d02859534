#!/usr/bin/env python3
"""Trim a measured gemm_table.py JSON to what the analysis reads (server/src/analysis/gain.ts, docs/gain.md):
the grid, per backend total_ms / ratio / host_ms, the block table and the host fit; 4 significant digits.

host_ms is the host's time issuing one layer, which does not depend on the rows M (the same kernels are launched):
a cell above HOST_OUTLIER x the median of its (K, N) over M is taken as a measurement that waited on the device (an
allocation that synchronised, a collection) and replaced by that median; the replaced cells and their measured values
are listed in the output's host_ms_capped. Measured on 2026-12-04: te-current at M 32768 for K, N <= 1024 read 5.9-9.1
ms against 0.8-1.3 ms at every other M.

    python3 bench/tools/gain_data.py bench/results/h200/2026-12-04-gemm/gemm-table.json \\
        server/src/analysis/data/gemm-table-h200.json [--compiled DIR/gemm-table-compiled.json] [--allow-incomplete]

--compiled merges the compiled run (gemm_table.py --compile: torchao, every layer in torch.compile) into the same
table: its bf16 becomes the backend "bf16-compiled", the baseline of its FP8 backends (each gets "baseline":
"bf16-compiled" and "compiled": true; a compiled torch-fp8 is "torch-fp8-compiled"), so a compiled ratio is always
against compiled BF16, and "compiled_run" keeps that run's provenance (date, versions, GPU, command, compile
settings, static check). Both runs must share the grid and the GPU. A compiled run that stopped early (incomplete:
its unfinished columns null) is refused unless --allow-incomplete.
"""
import json
import sys

KEEP_BACKEND = ("available", "reason", "recipe", "library", "total_ms", "ratio", "host_ms")
COMPILED_BASELINE = "bf16-compiled"
# The compiled run's backends, as the merged table names them.
COMPILED_NAMES = {"bf16": COMPILED_BASELINE, "torchao-tensorwise": "torchao-tensorwise",
                  "torchao-rowwise": "torchao-rowwise", "torch-fp8": "torch-fp8-compiled"}


class MergeError(Exception):
    pass


def merge_compiled(out, doc, source, allow_incomplete=False):
    """Adds the compiled run's backends to the trimmed eager table `out` (see the module comment)."""
    if doc.get("compiled") is not True:
        raise MergeError("%s is not a compiled run (gemm_table.py --compile writes \"compiled\": true)" % source)
    if doc.get("incomplete") and not allow_incomplete:
        raise MergeError("%s is incomplete (the run stopped early; its unfinished (K, N) columns are null): "
                         "measure again, or pass --allow-incomplete" % source)
    for key in ("m", "k", "n"):
        if list(doc["grid"][key]) != list(out["grid"][key]):
            raise MergeError("the compiled run's grid %s %s is not the table's %s" % (key, doc["grid"][key], out["grid"][key]))
    if (doc.get("gpu") or {}).get("name") != (out.get("gpu") or {}).get("name") or \
            bool(doc.get("not_a_benchmark")) != bool(out.get("not_a_benchmark")):
        raise MergeError("the compiled run was measured on %r (not_a_benchmark %s), the table on %r (%s)" % (
            (doc.get("gpu") or {}).get("name"), doc.get("not_a_benchmark"), (out.get("gpu") or {}).get("name"),
            out.get("not_a_benchmark")))
    base = doc["backends"].get("bf16") or {}
    if not base.get("available"):
        raise MergeError("the compiled run has no bf16 baseline: %s" % base.get("reason"))
    capped = out.setdefault("host_ms_capped", [])
    for name, b in doc["backends"].items():
        target = COMPILED_NAMES.get(name)
        if target is None:
            continue
        if not b.get("available"):
            if name == "bf16" or "not asked for" in str(b.get("reason")):
                continue  # a backend the compiled run did not measure leaves the eager table's entry alone
            kept = {k: b.get(k) for k in ("available", "reason", "recipe", "library")}
        else:
            kept = {k: b[k] for k in KEEP_BACKEND if k in b}
            if kept.get("host_ms"):
                kept["host_ms"] = cap_host(target, kept["host_ms"], capped)
            if name == "bf16":
                kept["recipe"] = "nn.Linear under bf16 autocast, in torch.compile"
        kept["compiled"] = True
        if name != "bf16":
            kept["baseline"] = COMPILED_BASELINE
        out["backends"][target] = sig(kept)
    out["compiled_run"] = sig({
        "source": source, "compiled": True, "date": doc.get("date"), "versions": doc.get("versions"),
        "gpu": doc.get("gpu"), "command": doc.get("command"), "compile": doc.get("compile"), "note": doc.get("note"),
        "incomplete": bool(doc.get("incomplete")), "elapsed_s": doc.get("elapsed_s"),
        # Cells compiled static because the backend's shape-generic compile failed (gemm_table.py's static_fallback).
        "static_fallback": {n: len(b["static_fallback"]) for n, b in doc["backends"].items() if b.get("static_fallback")},
        "static_check": [{k: v for k, v in row.items() if k != "errors" or v} for row in doc.get("static_check") or []],
    })
    return out
HOST_OUTLIER = 2.0


def cap_host(name, host, capped):
    """host[i_m][i_k][i_n] with each cell above HOST_OUTLIER x the median over M of its (K, N) replaced by that median."""
    out = [[list(row) for row in plane] for plane in host]
    for k in range(len(host[0])):
        for n in range(len(host[0][k])):
            col = sorted(host[m][k][n] for m in range(len(host)) if host[m][k][n] is not None)
            if not col:
                continue
            med = col[len(col) // 2] if len(col) % 2 else 0.5 * (col[len(col) // 2 - 1] + col[len(col) // 2])
            for m in range(len(host)):
                v = host[m][k][n]
                if v is not None and v > HOST_OUTLIER * med:
                    out[m][k][n] = med
                    capped.append({"backend": name, "i_m": m, "i_k": k, "i_n": n, "measured_ms": v, "capped_ms": med})
    return out


def sig(v):
    if isinstance(v, float):
        return float("%.4g" % v)
    if isinstance(v, list):
        return [sig(x) for x in v]
    if isinstance(v, dict):
        return {k: sig(x) for k, x in v.items()}
    return v


def trim(doc, source):
    out = {k: doc[k] for k in ("schema", "schema_version", "not_a_benchmark", "date", "device", "gpu", "versions", "grid")}
    out["note"] = doc.get("note")
    out["source"] = source
    out["method"] = doc.get("method")
    out["backends"] = {}
    capped = []
    for name, b in doc["backends"].items():
        kept = {k: b[k] for k in KEEP_BACKEND if k in b}
        if kept.get("host_ms"):
            kept["host_ms"] = cap_host(name, kept["host_ms"], capped)
        if not b.get("available"):
            kept = {k: b.get(k) for k in ("available", "reason", "recipe", "library")}
        out["backends"][name] = sig(kept)
    block = dict(doc["block"])
    block.pop("errors", None)
    out["block"] = sig(block)
    if doc.get("host_model"):
        out["host_model"] = sig({k: {kk: vv for kk, vv in v.items() if kk != "points"} for k, v in doc["host_model"].items()})
    out["host_ms_capped"] = sig(capped)
    out["incomplete"] = False
    return out


def main(argv):
    args = list(argv[1:])
    allow_incomplete = "--allow-incomplete" in args
    args = [a for a in args if a != "--allow-incomplete"]
    compiled = None
    if "--compiled" in args:
        i = args.index("--compiled")
        if i + 1 >= len(args):
            print("--compiled needs the compiled run's JSON", file=sys.stderr)
            return 2
        compiled = args[i + 1]
        del args[i:i + 2]
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with open(args[0]) as f:
        doc = json.load(f)
    out = trim(doc, args[0])
    if compiled:
        with open(compiled) as f:
            cdoc = json.load(f)
        try:
            merge_compiled(out, cdoc, compiled, allow_incomplete)
        except MergeError as exc:
            print("gain_data.py: %s" % exc, file=sys.stderr)
            return 2
    with open(args[1], "w") as f:
        json.dump(out, f, separators=(",", ":"))
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
