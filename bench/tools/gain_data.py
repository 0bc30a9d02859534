#!/usr/bin/env python3
"""Trim a measured gemm_table.py JSON to what the analysis reads (server/src/analysis/gain.ts, docs/gain.md):
the grid, per backend total_ms / ratio / host_ms, the block table and the host fit; 4 significant digits.

    python3 bench/tools/gain_data.py bench/results/h200/2026-12-04-gemm/gemm-table.json \\
        server/src/analysis/data/gemm-table-h200.json
"""
import json
import sys

KEEP_BACKEND = ("available", "reason", "recipe", "library", "total_ms", "ratio", "host_ms")


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
    for name, b in doc["backends"].items():
        kept = {k: b[k] for k in KEEP_BACKEND if k in b}
        if not b.get("available"):
            kept = {k: b.get(k) for k in ("available", "reason", "recipe", "library")}
        out["backends"][name] = sig(kept)
    block = dict(doc["block"])
    block.pop("errors", None)
    out["block"] = sig(block)
    if doc.get("host_model"):
        out["host_model"] = sig({k: {kk: vv for kk, vv in v.items() if kk != "points"} for k, v in doc["host_model"].items()})
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
