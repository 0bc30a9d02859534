#!/usr/bin/env python3
"""Markdown tables from benchmark --json-out files (bench/results/h200/README.md is made from these).

    python3 bench/tools/h200_table.py FILE.json...            # throughput table, one row per backend
    python3 bench/tools/h200_table.py --logits FILE.json...   # lm-head logit magnitude / z-loss per backend
    python3 bench/tools/h200_table.py --profile FILE.json     # GPU ms per step by kernel family
    python3 bench/tools/h200_table.py --inference FILE.json...  # --mode inference: prefill/decode, memory, accuracy

Ratios are against the bf16 result of the same file (the same process), when it has one.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def versions(doc):
    env = doc.get("env", {})
    te = (env.get("te") or {}).get("version")
    ao = (env.get("torchao") or {}).get("version")
    return "torch %s, TE %s, torchao %s" % (env.get("torch"), te or "-", ao or "-")


def throughput(paths):
    print("| preset | backend | tokens/s | vs BF16 | step median / p90 ms | peak GiB | final loss (vs BF16) | file |")
    print("|---|---|---|---|---|---|---|---|")
    for p in paths:
        doc = load(p)
        res = doc["results"]
        base = next((r for r in res if r["backend"] == "bf16"), None)
        for r in res:
            ratio = r["tokens_per_s"] / base["tokens_per_s"] if base else None
            rel = (r["final_loss"] - base["final_loss"]) / base["final_loss"] if base and r is not base else None
            print("| %s | %s | %s | %s | %.1f / %.1f | %.1f | %.4f%s | %s |" % (
                r["workload"], r["backend"], "{:,}".format(int(round(r["tokens_per_s"]))).replace(",", " "),
                ("**%.3f**" % ratio) if ratio and r is not base else ("1.000" if r is base else "-"),
                r["step_ms"]["median"], r["step_ms"]["p90"], r.get("peak_memory_gib") or 0, r["final_loss"],
                (" (%+.2f %%)" % (100 * rel)) if rel is not None else "", p.rsplit("/", 1)[-1]))
        print("|  | *%s* |  |  |  |  |  |  |" % versions(doc))


def logits(paths):
    print("| file | backend | lm-head | final loss | logit abs max | logit RMS | z-loss (mean lse^2) |")
    print("|---|---|---|---|---|---|---|")
    for p in paths:
        for r in load(p)["results"]:
            st = r.get("logit_stats") or {}
            head = "FP8" if any(n.get("fp8") for n in (r.get("lm_head_fp8") or [])) else "BF16"
            print("| %s | %s | %s (%s) | %.4f | %.2f | %.3f | %.2f |" % (
                p.rsplit("/", 1)[-1], r["backend"], head, st.get("layer_type", "?"), r["final_loss"],
                st.get("abs_max", float("nan")), st.get("rms", float("nan")), st.get("z_loss", float("nan"))))


def profile(paths):
    for p in paths:
        res = load(p)["results"]
        fams = []
        for r in res:
            for k in (r.get("profile") or {}).get("families_ms_per_step", {}):
                if k not in fams:
                    fams.append(k)
        print("| backend | step median ms | " + " | ".join(fams) + " |")
        print("|---|---|" + "---|" * len(fams))
        for r in res:
            f = (r.get("profile") or {}).get("families_ms_per_step", {})
            print("| %s | %.1f | %s |" % (r["backend"], r["step_ms"]["median"],
                                           " | ".join("%.1f" % f.get(k, 0.0) for k in fams)))


def _tps(v):
    return "{:,}".format(int(round(v))).replace(",", " ") if v else "-"


def inference(paths):
    print("| preset | backend | compiled | prefill tok/s (vs BF16) | decode tok/s (vs BF16) | peak GiB | "
          "max / mean abs logit diff | next-token agree | file |")
    print("|---|---|---|---|---|---|---|---|---|")
    for p in paths:
        doc = load(p)
        res = [r for r in doc["results"] if r.get("mode") == "inference"]
        base = next((r for r in res if r["backend"] == "bf16"), None)
        for r in res:
            def vs(key):
                if r is base or not base or not r.get(key) or not base.get(key):
                    return ""
                return " (**%.2fx**)" % (r[key] / base[key])
            acc = r.get("accuracy") or {}
            ref = r.get("reference_only")
            print("| %s | %s%s | %s | %s%s | %s%s | %.1f | %s | %s | %s |" % (
                r["workload"], r["backend"], " (fake-quant: accuracy reference only)" if ref else "",
                "yes" if r.get("compile") else "no",
                _tps(r.get("prefill_tokens_per_s")), "" if ref else vs("prefill_tokens_per_s"),
                _tps(r.get("decode_tokens_per_s")), "" if ref else vs("decode_tokens_per_s"),
                (r.get("peak_memory_bytes") or 0) / 2 ** 30,
                ("%.3g / %.3g" % (acc["max_abs_logit_diff"], acc["mean_abs_logit_diff"])) if acc else "baseline",
                ("%.1f %%" % (100 * acc["next_token_agreement"])) if acc else "-", p.rsplit("/", 1)[-1]))
        errs = [e for e in doc.get("errors", [])]
        for e in errs:
            print("| %s | %s | - | failed: %s |  |  |  |  | %s |" % (
                doc["results"][0]["workload"] if doc["results"] else "?", e.get("backend", "?"),
                e.get("message", "")[:160].replace("|", "/"), p.rsplit("/", 1)[-1]))


def main(argv):
    if not argv:
        print(__doc__)
        return 2
    mode = {"--logits": logits, "--profile": profile, "--inference": inference}.get(argv[0])
    (mode or throughput)(argv[1:] if mode else argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
