"""bench/tools/loss_table.py: the verdict on "FP8's eval loss within 1 % of BF16's" over several seeds. Synthetic loss
runs in benchmark.py's JSON shape (results with backend, seed and eval_loss; summary.ab.converted names the project);
only the arithmetic of the verdict is checked, no figure means anything."""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
import loss_table  # noqa: E402

TOOL = os.path.join(os.path.dirname(HERE), "tools", "loss_table.py")


def _run(tmp_path, project, seed, original, converted, repeat=None, rounded=None, warm=None):
    results = [{"backend": "original", "seed": seed, "eval_loss": original},
               {"backend": "converted", "seed": seed, "eval_loss": converted}]
    if repeat is not None:
        results.append({"backend": "original-repeat", "seed": seed, "eval_loss": repeat})
    if rounded is not None:
        results.append({"backend": "original-rounded", "seed": seed, "eval_loss": rounded})
    doc = {"results": results, "summary": {"ab": {"converted": "/x/.realproj/%s/conv" % project,
                                                  "warm_start": {"steps": warm} if warm else None}}}
    path = tmp_path / ("loss-%s-seed%d%s.json" % (project, seed, "-warm%d" % warm if warm else ""))
    path.write_text(json.dumps(doc))
    return str(path)


def test_seeds_at_different_levels_are_compared_within_each_seed(tmp_path):
    # Each seed's losses sit at another level (2.0, 2.5, 3.0); FP8 is 0.2 % above its own seed's BF16 every time.
    files = [_run(tmp_path, "p", s, lvl, lvl * 1.002, lvl * 1.001) for s, lvl in ((1, 2.0), (2, 2.5), (3, 3.0))]
    _, out = loss_table.table(files, 0.01)
    p = out["p"]
    assert abs(p["rel"] - (1.002 / 1.0005 - 1)) < 1e-9
    assert p["verdict"] == "within", p
    assert p["two_se"] < 0.005


def test_a_consistent_gap_beyond_the_bound_is_above_or_below(tmp_path):
    worse = [_run(tmp_path, "worse", s, 2.0 + s / 10, (2.0 + s / 10) * 1.03, 2.0 + s / 10 + 0.001) for s in (1, 2, 3)]
    better = [_run(tmp_path, "better", s, 2.0 + s / 10, (2.0 + s / 10) * 0.97, 2.0 + s / 10 + 0.001) for s in (1, 2, 3)]
    _, out = loss_table.table(worse + better, 0.01)
    assert out["worse"]["verdict"] == "above"
    assert out["better"]["verdict"] == "below"


def test_noise_as_large_as_the_bound_leaves_it_unresolved(tmp_path):
    # The BF16 repeat of each seed moves 3 %: one run per arm cannot say 1 %.
    files = [_run(tmp_path, "noisy", s, 2.0, 2.0 * (1.005 if s % 2 else 0.995), 2.06) for s in (1, 2)]
    _, out = loss_table.table(files, 0.01)
    assert out["noisy"]["verdict"] == "unresolved"
    assert out["noisy"]["noise"] > 0.02


def test_one_seed_without_a_repeat_is_unresolved_and_says_why(tmp_path):
    files = [_run(tmp_path, "lone", 1, 2.0, 2.001)]
    text, out = loss_table.table(files, 0.01)
    assert out["lone"]["verdict"] == "unresolved"
    assert "no repeat: noise unknown" in text


def test_command_line_prints_the_table(tmp_path):
    files = [_run(tmp_path, "q", s, 2.0, 2.004, 2.0) for s in (1, 2)]
    r = subprocess.run([sys.executable, TOOL, *files, "--json"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("| project | runs |")
    assert "| q | 2 | 1: +0.20 %, 2: +0.20 % | 0.00 % | +0.20 % +- 0.00 | within |" in r.stdout
    assert json.loads(r.stdout.strip().splitlines()[-1])["q"]["verdict"] == "within"


def test_the_workloads_description_is_printed_under_the_table(tmp_path):
    # The evidence of what was held out travels with the verdict; runs that said nothing (before 2026-12-05) add nothing.
    said = _run(tmp_path, "told", 1, 2.0, 2.001, 2.0)
    doc = json.loads(open(said).read())
    for r in doc["results"]:
        r["workload_description"] = "10.5 MB of text to train on, 1.2 MB held out"
    open(said, "w").write(json.dumps(doc))
    silent = _run(tmp_path, "silent", 1, 2.0, 2.001, 2.0)
    text, out = loss_table.table([said, silent], 0.01)
    assert out["told"]["workload"] == ["10.5 MB of text to train on, 1.2 MB held out"]
    assert out["silent"]["workload"] == []
    assert text.splitlines()[-1] == "told: 10.5 MB of text to train on, 1.2 MB held out"


def test_the_rounded_start_is_listed_per_seed_and_left_out_of_the_verdict(tmp_path):
    # Seed 1 measured how far BF16 moves from its weights rounded once to BF16 (-2 %); seed 2 did not.
    files = [_run(tmp_path, "p", 1, 2.0, 2.05, 2.0, rounded=1.96), _run(tmp_path, "p", 2, 2.0, 1.95, 2.0)]
    text, out = loss_table.table(files, 0.01)
    assert "p, BF16 from its weights rounded once to BF16, vs BF16: 1: -2.00 %" in text
    assert "sensitivity" not in out["p"]  # one rounded run says nothing about a spread
    assert list(out["p"]["rounded_start"]) == ["1"] and abs(out["p"]["rounded_start"]["1"] + 0.02) < 1e-12
    # The verdict is FP8 against BF16 and its repeat only: the same as without the rounded arm.
    plain = [_run(tmp_path, "q", 1, 2.0, 2.05, 2.0), _run(tmp_path, "q", 2, 2.0, 1.95, 2.0)]
    _, out_q = loss_table.table(plain, 0.01)
    assert (out["p"]["rel"], out["p"]["two_se"], out["p"]["verdict"]) == (out_q["q"]["rel"], out_q["q"]["two_se"], out_q["q"]["verdict"])
    assert "rounded_start" not in out_q["q"]


def test_warm_started_runs_are_their_own_comparison_never_pooled_with_cold_ones(tmp_path):
    # Cold seeds part +-2.5 % at the first spikes; the same project's warm-started seeds agree within 0.2 %.
    cold = [_run(tmp_path, "p", 1, 2.0, 2.05, 2.0), _run(tmp_path, "p", 2, 2.0, 1.95, 2.0)]
    warm = [_run(tmp_path, "p", 1, 1.3, 1.302, 1.3, warm=100), _run(tmp_path, "p", 2, 1.3, 1.299, 1.3, warm=100)]
    text, out = loss_table.table(cold + warm, 0.01)
    assert sorted(out) == ["p", "p, warm start 100"]
    assert out["p"]["verdict"] == "unresolved" and out["p, warm start 100"]["verdict"] == "within"
    assert [r["converted"] for r in out["p, warm start 100"]["runs"]] == [1.302, 1.299]
    assert "| p, warm start 100 | 2 |" in text


def test_fp8_within_the_rounded_starts_spread_is_the_trainings_own_sensitivity(tmp_path):
    # Cold llama2.c-like runs: FP8 parts +-2 % both ways, BF16 from its rounded start +-3 %: the loss after these steps
    # cannot tell them apart. Another project where FP8 parts 4 % while the rounded start moves 0.5 % is FP8's doing.
    chaotic = [_run(tmp_path, "c", s, 2.0, 2.0 * (1 + d), 2.0, rounded=2.0 * (1 + r))
               for s, d, r in ((1, 0.02, -0.03), (2, -0.02, 0.03), (3, 0.01, -0.02))]
    stable = [_run(tmp_path, "s", s, 2.0, 2.0 * 1.04, 2.0, rounded=2.0 * (1 + r)) for s, r in ((1, 0.005), (2, -0.005))]
    text, out = loss_table.table(chaotic + stable, 0.01)
    c, s = out["c"]["sensitivity"], out["s"]["sensitivity"]
    assert abs(c["rounded_rms"] - (((0.03 ** 2 * 2 + 0.02 ** 2) / 3) ** 0.5)) < 1e-9 and c["within"]
    assert abs(s["fp8_rms"] - 0.04) < 1e-9 and not s["within"]
    assert "c: FP8 lies 1.73 % from BF16 (rms, 3 runs); BF16 from a rounded start 2.71 % (rms, 3 runs): FP8's difference is within" in text
    assert "s: FP8 lies 4.00 % from BF16 (rms, 2 runs); BF16 from a rounded start 0.50 % (rms, 2 runs): FP8 moves the loss farther" in text
    # The rounded start is measured against the same BF16 reference as FP8: the mean of the original and its repeat.
    two = [_run(tmp_path, "m", 1, 2.0, 2.0, 2.02, rounded=2.01), _run(tmp_path, "m", 2, 2.0, 2.0, 2.02, rounded=2.01)]
    _, out_m = loss_table.table(two, 0.01)
    assert out_m["m"]["rounded_start"]["1"] == 0.0
