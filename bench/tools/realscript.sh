#!/usr/bin/env bash
# The real training script, not the harness: runs nanoGPT's train.py as published (PROJECT/orig) and as the one
# command converted it (PROJECT/conv), each for ITERS iterations on synthetic tokens, and prints the median time per
# iteration nanoGPT's own log reports (`iter N: loss L, time T ms, mfu M%`) from iteration 5 on, and the ratio.
#
#   bench/tools/realscript.sh PROJECT [ITERS] [-- TRAIN.PY ARGS...]     e.g. bench/tools/realscript.sh .realproj/nanogpt-ao 30
#
# train.py reads its overrides through nanoGPT's configurator.py, which the published files we keep do not include:
# a minimal stand-in (--key=value, the value read as a Python literal when it is one) is written beside the copies.
# OUT (default bench/results/h200/raw) gets each run's log. Needs torch (and torchao for the converted run's FP8).
set -uo pipefail
cd "$(dirname "$0")/../.."
p=${1:?PROJECT}; shift; iters=${1:-30}; [ $# -gt 0 ] && shift; [ "${1:-}" = "--" ] && shift
OUT=${OUT:-bench/results/h200/raw}; mkdir -p "$OUT"
args=(--dataset=synthetic --max_iters="$iters" --eval_interval=100000 --eval_iters=1 --log_interval=1 --batch_size=8
      --block_size=2048 --gradient_accumulation_steps=2 --n_layer=12 --n_head=16 --n_embd=2048 --compile=True
      --always_save_checkpoint=False "$@")
work=$(mktemp -d)
for arm in orig conv; do
  mkdir -p "$work/$arm/data/synthetic"; cp "$p/$arm"/*.py "$work/$arm/"
  cat > "$work/$arm/configurator.py" <<'PY'
# Stand-in for nanoGPT's configurator.py (not kept with the published files): --key=value overrides of train.py's globals.
import ast, sys
for arg in sys.argv[1:]:
    key, _, value = arg[2:].partition("=")
    assert key in globals(), "unknown config key %s" % key
    try:
        value = ast.literal_eval(value)
    except (SyntaxError, ValueError):
        pass
    globals()[key] = value
PY
  python3 -c "import numpy as np; r = np.random.default_rng(0); [r.integers(0, 50257, 4_000_000, dtype=np.uint16).tofile('$work/$arm/data/synthetic/%s.bin' % s) for s in ('train', 'val')]"
  echo "== $arm: python train.py ${args[*]} --out_dir=$work/$arm/out"
  (cd "$work/$arm" && timeout "${STEP_S:-150}" python3 train.py "${args[@]}" --out_dir="$work/$arm/out") >"$OUT/realscript-$arm.txt" 2>&1
  echo "exit $?"; grep -E "Running in|FP8:|compiling" "$OUT/realscript-$arm.txt" | head -4
done
python3 - "$OUT" <<'PY'
import re, statistics, sys
ms = {}
for arm in ("orig", "conv"):
    text = open("%s/realscript-%s.txt" % (sys.argv[1], arm)).read()
    its = [(int(i), float(t)) for i, t in re.findall(r"^iter (\d+): loss [\d.]+, time ([\d.]+)ms", text, re.M)]
    ms[arm] = statistics.median([t for i, t in its if i >= 5]) if len(its) > 6 else None
    print("%s: %d iterations logged, median %s ms per iteration (from iteration 5)" % (arm, len(its), ms[arm]))
if ms["orig"] and ms["conv"]:
    print("converted train.py: %.3fx the iterations per second of the original (same machine, one after the other)" % (ms["orig"] / ms["conv"]))
PY
rm -rf "$work"
