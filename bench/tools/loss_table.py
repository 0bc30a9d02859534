"""Whether FP8's eval loss is within a bound of BF16's, over several runs: the 200-step loss runs of `h200_ab.sh
loss` (`benchmark.py --mode ab --eval-loss-batches N --repeat-original`), one JSON per run, grouped by project.

    python3 bench/tools/loss_table.py bench/results/h200/DIR/loss-*.json [--bound 0.01]

Per project: each run's FP8 eval loss (the converted arm) relative to its BF16 one (the original arm, and its repeat:
the same run twice differs only by the GPU's nondeterminism), their mean over the runs with two standard errors
(from the repeats' noise, or the runs' spread when larger), and the verdict: "within" when the whole interval lies inside
+-bound, "above" (FP8 worse) or "below" (FP8 better) when it lies beyond, "unresolved" otherwise (more runs narrow it).
One run per arm, as the runs before 2026-12-05 had, cannot resolve 1 % where BF16 alone spreads 2.6 %. Runs are
listed by seed; one seed run on two commits is two runs (the text read includes the repository's own prose, so its
batches differ).

Where runs measured the training's sensitivity to its start (--rounded-original: BF16 from its weights rounded once
to BF16), their distances from BF16 are listed, and from two such runs on, compared with FP8's (root mean squares):
a loss that moves as far from a 2^-8 change of the start as from FP8 cannot tell FP8 from BF16 at the bound.
"""
import argparse
import json
import math
import os
import sys


def runs_of(path):
    """(project, seed, {arm: eval loss}, what the workload said it was) of one loss run's JSON. Runs from a warm start
    are another comparison than cold ones (they begin past the first steps' spikes): their project reads "NAME, warm
    start N", so the two are never pooled."""
    with open(path) as f:
        doc = json.load(f)
    ab = (doc.get("summary") or {}).get("ab") or {}
    converted = ab.get("converted") or path
    project = os.path.basename(os.path.dirname(os.path.normpath(converted))) or converted
    warm = (ab.get("warm_start") or {}).get("steps")
    if warm:
        project = "%s, warm start %d" % (project, warm)
    arms, seed, described = {}, None, None
    for r in doc.get("results", []):
        if r.get("eval_loss") is not None and r.get("backend") in ("original", "original-repeat", "original-rounded", "converted"):
            arms[r["backend"]] = float(r["eval_loss"])
            seed = r.get("seed", seed)
            described = described or r.get("workload_description")
    return project, seed, arms, described


def mean_sd(xs):
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else float("nan")
    return m, sd


def bf16_ref(arms):
    """A run's BF16 eval loss: the mean of the original arm and its repeat where both ran."""
    bf16 = [arms[a] for a in ("original", "original-repeat") if a in arms]
    return sum(bf16) / len(bf16)


def rms(xs):
    return math.sqrt(sum(x * x for x in xs) / len(xs))


def sensitivity(rounded, fp8):
    """FP8's distance from BF16 against BF16's own from a start rounded once to BF16 (a change far smaller than FP8's),
    both as root mean squares over the runs: a description, not a test (a few runs each). FP8 counts as within the
    training's sensitivity when its rms is no larger than the rounded start's."""
    a, b = rms(fp8), rms(rounded)
    return {"fp8_rms": a, "rounded_rms": b, "within": a <= b}


def paired(runs, bound):
    """Each seed's FP8 loss relative to that seed's BF16 mean (seeds differ in weights and batches, so their losses
    differ in level: they are compared within a seed, never pooled), averaged over the seeds, with two standard errors:
    the run-to-run noise of one run (from the BF16 repeats: the same seed twice) or the spread of the seeds' ratios,
    whichever is larger. Returns (per-seed ratios - 1, their mean, two standard errors or nan, verdict, run noise or
    nan)."""
    rels, pairs, k = [], [], []
    for arms in runs:
        bf16 = [arms[a] for a in ("original", "original-repeat") if a in arms]
        ref = bf16_ref(arms)
        rels.append(arms["converted"] / ref - 1)
        k.append(len(bf16))
        if len(bf16) == 2:
            pairs.append((bf16[0] - bf16[1]) / ref)
    rel = sum(rels) / len(rels)
    # One run's relative noise: a difference of two runs has twice its variance.
    noise = math.sqrt(sum(d * d for d in pairs) / (2 * len(pairs))) if pairs else float("nan")
    var = [noise ** 2 * (1 + 1 / kk) for kk in k] if pairs else []
    se = math.sqrt(sum(var)) / len(rels) if var else float("nan")
    if len(rels) >= 2:
        se = max(se if se == se else 0.0, mean_sd(rels)[1] / math.sqrt(len(rels)))
    if se != se:
        return rels, rel, se, "unresolved", noise
    lo, hi = rel - 2 * se, rel + 2 * se
    if -bound <= lo and hi <= bound:
        return rels, rel, 2 * se, "within", noise
    if lo > bound:
        return rels, rel, 2 * se, "above", noise
    if hi < -bound:
        return rels, rel, 2 * se, "below", noise
    return rels, rel, 2 * se, "unresolved", noise


def table(paths, bound):
    projects, described = {}, {}
    for p in paths:
        project, seed, arms, what = runs_of(p)
        if "original" in arms and "converted" in arms:
            projects.setdefault(project, []).append((seed, arms))
            if what:
                described.setdefault(project, set()).add(what)
    lines = ["| project | runs | FP8 vs BF16 per run (by seed) | one BF16 run's noise | FP8 vs BF16, mean (+- 2 SE) | within %.0f %%? |" % (bound * 100),
             "|---|---|---|---|---|---|"]
    out = {}
    for project, runs in sorted(projects.items(), key=lambda kv: kv[0]):
        runs.sort(key=lambda r: str(r[0]))
        rels, rel, two_se, v, noise = paired([a for _, a in runs], bound)
        per_seed = ", ".join("%s: %+.2f %%" % (s, r * 100) for (s, _), r in zip(runs, rels))
        lines.append("| %s | %d | %s | %s | %+.2f %% %s | %s |" % (
            project, len(runs), per_seed, "%.2f %%" % (noise * 100) if noise == noise else "-", rel * 100,
            "+- %.2f" % (two_se * 100) if two_se == two_se else "(no repeat: noise unknown)", v))
        out[project] = {"seeds": [s for s, _ in runs], "runs": [a for _, a in runs], "rels": rels, "rel": rel, "two_se": two_se,
                        "noise": noise, "verdict": v, "workload": sorted(described.get(project, ()))}
    # The training's own sensitivity, where measured (--rounded-original): BF16 from its weights rounded once to BF16,
    # against the same BF16 reference as FP8 (the mean of the original and its repeat). Where that tiny perturbation
    # moves the loss as far as FP8 does, the loss after these steps cannot tell FP8 from BF16 at the bound: the
    # difference is the training's (a chaotic start amplifies any change), not FP8's.
    for project, runs in sorted(projects.items(), key=lambda kv: kv[0]):
        sens = [(seed, arms["original-rounded"] / bf16_ref(arms) - 1) for seed, arms in runs if "original-rounded" in arms]
        if not sens:
            continue
        lines.append("")
        lines.append("%s, BF16 from its weights rounded once to BF16, vs BF16: %s" % (
            project, ", ".join("%s: %+.2f %%" % (seed, r * 100) for seed, r in sens)))
        out[project]["rounded_start"] = dict((str(seed), r) for seed, r in sens)
        if len(sens) >= 2:
            cmp_ = sensitivity([r for _, r in sens], out[project]["rels"])
            out[project]["sensitivity"] = cmp_
            lines.append("%s: FP8 lies %.2f %% from BF16 (rms, %d runs); BF16 from a rounded start %.2f %% (rms, %d runs): %s" % (
                project, cmp_["fp8_rms"] * 100, len(runs), cmp_["rounded_rms"] * 100, len(sens),
                "FP8's difference is within this training's own sensitivity to its start" if cmp_["within"]
                else "FP8 moves the loss farther than this training's own sensitivity to its start"))
    # What each project's runs trained and evaluated on, as their workload said (runs before 2026-12-05 said nothing).
    for project in sorted(out):
        for what in out[project]["workload"]:
            lines.append("")
            lines.append("%s: %s" % (project, what))
    return "\n".join(lines), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--bound", type=float, default=0.01)
    ap.add_argument("--json", action="store_true", help="print the per-project figures as JSON after the table")
    args = ap.parse_args(argv)
    text, out = table(args.files, args.bound)
    print(text)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
