#!/usr/bin/env bash
# Issue 21 on the H200: the A/B of real public training codebases (nanoGPT, llama2.c) as published (orig/) against
# the copy converted by `precision-lens check conv --fix --unsafe-fixes` (conv/), through bench/benchmark.py --mode ab.
# Each phase is one device call; the machine stays warm between calls issued promptly, /tmp/site survives.
#
#   bench/tools/h200_ab.sh setup CARRY          # TE 2.20.2 + torchao 0.18.0 (h200_te.sh setup); CARRY is the folder
#                                               # `bench/tools/te_install.sh fetch .gpurun/dl` wrote (.gpurun/dl/carry,
#                                               # the wheels flat) or one with whl/ (and tewheel/) as h200_te.sh takes
#   bench/tools/h200_ab.sh wait  CARRY [SECS]   # wait for the transformer_engine_torch build, install (h200_te.sh wait)
#   bench/tools/h200_ab.sh ab    PROJECT...     # per project (a folder with orig/ and conv/, each with pl_workload.py):
#                                               # --mode ab at every CONFIGS entry, for every pass in PASSES
#   bench/tools/h200_ab.sh loss  PROJECT...     # the 200-step loss run (--peer none) at LOSS_CONFIG
#
# Environment (defaults in brackets):
#   CONFIGS   "WIDTH:LAYERS:BATCH:SEQ ..." ["2048:12:8:2048 4096:6:6:4096"] (issue 21: 12 x 2048 with 8 x 2048 tokens,
#             6 x 4096 with 6 x 4096 tokens; the same shapes for llama2.c so the two families compare)
#   PASSES    "eager compiled" [both]; STEPS [20]; WARMUP [5]; PEER [torchao]
#   LOSS_CONFIG [2048:12:8:2048]; LOSS_STEPS [200]; LOSS_PASS [eager]
#   LOSS_SEEDS "1234 7 11 ..." []: one loss run per seed (other weights and batches each; files -seedN), then
#             bench/tools/loss_table.py's verdict over them: per-seed ratios averaged, +- 2 standard errors from the
#             BF16 repeats and the seeds' spread (one run per arm cannot resolve 1 % where BF16 alone spreads 2.6 %)
#   LOSS_ARGS the loss run's training recipe [--lr 2.5e-4 --lr-warmup 20 --lr-schedule cosine --clip-grad 1.0
#             --eval-loss-batches 8 --repeat-original]: nanoGPT's and llama2.c's schedule (warm-up, cosine to lr/10,
#             clip 1.0) at the learning rate of the slices' size (about 0.7 B parameters: GPT-3's 760 M used 2.5e-4;
#             at GPT-2 small's 6e-4 BF16 disagreed with itself by up to 4 %, 2026-12-05-loss-lr), the eval loss on
#             batches never trained on, and the original run twice (the noise floor)
#             add --warm-start-steps N to start every arm from the original's weights after N BF16 steps: past the
#             first steps' loss spikes, where FP8 and BF16 from one random init part most (llama2.c, 2026-12-05)
#   EXTRA_ARGS more bench/benchmark.py arguments for every run []
#   STEP_S    timeout of one benchmark process, seconds [300]: one hang cannot eat a device call (600 s at most)
#   OUT       where the JSON and the logs go [bench/results/h200/raw]
# One device call holds 600 s at most: give one project and one pass per call, e.g.
#   PASSES=eager bench/tools/h200_ab.sh ab .realproj/nanogpt
#   carry: [".gpurun/dl/carry", ".realproj"] (.realproj is git-ignored: it travels only when carried)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/results/h200/raw}; mkdir -p "$OUT"
SITE_DIR=/tmp/site
export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE_DIR${PYTHONPATH:+:$PYTHONPATH}
T=bench/tools
STEPS=${STEPS:-20}; WARMUP=${WARMUP:-5}; STEP_S=${STEP_S:-300}; PEER=${PEER:-torchao}
CONFIGS=${CONFIGS:-2048:12:8:2048 4096:6:6:4096}
PASSES=${PASSES:-eager compiled}
LOSS_CONFIG=${LOSS_CONFIG:-2048:12:8:2048}; LOSS_STEPS=${LOSS_STEPS:-200}; LOSS_PASS=${LOSS_PASS:-eager}; LOSS_SEEDS=${LOSS_SEEDS:-}
LOSS_ARGS=${LOSS_ARGS:---lr 2.5e-4 --lr-warmup 20 --lr-schedule cosine --clip-grad 1.0 --eval-loss-batches 8 --repeat-original}
EXTRA_ARGS=${EXTRA_ARGS:-}

# h200_te.sh wants CARRY/whl/*.whl; te_install.sh fetch writes the wheels flat: give it that layout without copying.
carry_dir() {
  local c=${1:?carry folder}
  if [ -d "$c/whl" ]; then echo "$c"; return; fi
  ls "$c"/*.whl >/dev/null 2>&1 || { echo "no wheels in $c (run bench/tools/te_install.sh fetch .gpurun/dl here)" >&2; return 1; }
  rm -rf /tmp/plcarry; mkdir -p /tmp/plcarry; ln -s "$(cd "$c" && pwd)" /tmp/plcarry/whl; echo /tmp/plcarry
}

# run_ab NAME PROJECT WIDTH LAYERS BATCH SEQ PASS STEPS PEER [MORE ARGS]
run_ab() {
  local name=$1 p=$2 w=$3 l=$4 b=$5 s=$6 pass=$7 steps=$8 peer=$9 more=${10:-} flag json
  [ -f "$p/orig/pl_workload.py" ] && [ -f "$p/conv/pl_workload.py" ] || { echo "skip $p: needs orig/ and conv/ with pl_workload.py"; return 0; }
  if [ "$pass" = compiled ]; then flag=--compile; else flag=--no-compile; fi
  json="$OUT/$name.json"
  echo "== $name: $p ${l} x ${w}, ${b} x ${s} tokens, $pass, $steps steps, peer $peer $(date +%T)"
  PL_WIDTH=$w PL_LAYERS=$l timeout "$STEP_S" python3 bench/benchmark.py --mode ab --workload pl_workload:build \
    --workspace "$p/orig" --converted "$p/conv" --fallback-module fp8_fallback --peer "$peer" \
    --steps "$steps" --warmup "$WARMUP" $flag --batch "$b" --seq "$s" --json-out "$json" $more $EXTRA_ARGS \
    >"$OUT/$name-out.txt" 2>"$OUT/$name-log.txt"
  local rc=$?
  [ $rc = 124 ] && echo "TIMEOUT after ${STEP_S}s"
  echo "rc $rc"
  tail -15 "$OUT/$name-out.txt"
  grep -E "Running in|FP8|recompile|Error|error|eval loss|A/B:|\] workload:" "$OUT/$name-log.txt" | sort | uniq -c | head -16
}

case "${1:-}" in
  setup)
    c=$(carry_dir "${2:?carry folder}") || exit 2
    bash $T/h200_te.sh setup "$c"
    ;;
  wait)
    c=$(carry_dir "${2:?carry folder}") || exit 2
    bash $T/h200_te.sh wait "$c" "${3:-500}"
    ;;
  ab)
    shift
    [ $# -gt 0 ] || { echo "usage: h200_ab.sh ab PROJECT_DIR..."; exit 2; }
    python3 -c "import transformer_engine.pytorch as te, torchao; print('TE', te.is_fp8_available(return_reason=True), 'torchao', torchao.__version__)" 2>&1 | tail -1
    for p in "$@"; do
      proj=$(basename "$p")
      for cfg in $CONFIGS; do IFS=: read -r w l b s <<<"$cfg"
        for pass in $PASSES; do
          run_ab "ab-$proj-${l}x${w}-${b}x${s}-$pass" "$p" "$w" "$l" "$b" "$s" "$pass" "$STEPS" "$PEER"
        done
      done
    done
    ls -l "$OUT"
    ;;
  loss)
    shift
    [ $# -gt 0 ] || { echo "usage: h200_ab.sh loss PROJECT_DIR..."; exit 2; }
    IFS=: read -r w l b s <<<"$LOSS_CONFIG"
    for p in "$@"; do
      if [ -z "$LOSS_SEEDS" ]; then
        run_ab "loss-$(basename "$p")-${l}x${w}-${b}x${s}-$LOSS_PASS-${LOSS_STEPS}" "$p" "$w" "$l" "$b" "$s" "$LOSS_PASS" "$LOSS_STEPS" none "$LOSS_ARGS"
      else
        for seed in $LOSS_SEEDS; do
          run_ab "loss-$(basename "$p")-${l}x${w}-${b}x${s}-$LOSS_PASS-${LOSS_STEPS}-seed$seed" "$p" "$w" "$l" "$b" "$s" "$LOSS_PASS" "$LOSS_STEPS" none "$LOSS_ARGS --seed $seed"
        done
      fi
    done
    ls -l "$OUT"
    python3 $T/loss_table.py "$OUT"/loss-*.json
    ;;
  *)
    sed -n 2,24p "$0"; exit 2
    ;;
esac
