#!/usr/bin/env python3
"""Trim a measured gemm_table.py JSON to what the analysis reads (server/src/analysis/gain.ts, docs/gain.md):
the grid, per backend total_ms / ratio / host_ms, the block table and the host fit; 4 significant digits.

host_ms is the host's time issuing one layer, which does not depend on the rows M (the same kernels are launched):
a cell above HOST_OUTLIER x the median of its (K, N) over M is taken as a measurement that waited on the device (an
allocation that synchronised, a collection) and replaced by that median; the replaced cells and their measured values
are listed in the output's host_ms_capped. Measured on 2026-12-04: te-current at M 32768 for K, N <= 1024 read 5.9-9.1
ms against 0.8-1.3 ms at every other M.

    python3 bench/tools/gain_data.py bench/results/h200/2026-12-04-gemm/gemm-table.json \\
        server/src/analysis/data/gemm-table-h200.json
"""
import json
import sys

KEEP_BACKEND = ("available", "reason", "recipe", "library", "total_ms", "ratio", "host_ms")
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
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        doc = json.load(f)
    with open(argv[2], "w") as f:
        json.dump(trim(doc, argv[1]), f, separators=(",", ":"))
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
