#!/usr/bin/env bash
# The real-TE / torchao session on the H200 device machine (bench/results/h200/README.md). Each phase is one device
# call; the machine stays warm between calls issued promptly, /tmp/site survives between them.
#
#   bench/tools/h200_te.sh setup  CARRY     # install CARRY/whl/*.whl; CARRY/tewheel/*.whl if built before, else start
#                                           # the transformer_engine_torch build in the background (setsid)
#   bench/tools/h200_te.sh wait   CARRY [SECS] # wait for the build (at most SECS), install it with CARRY/whl, copy it to $OUT
#   bench/tools/h200_te.sh path   CARRY     # te_fp8_path.py facts + the converted example per recipe
#   bench/tools/h200_te.sh bench  PRESET... # every backend, one process per preset, JSON in $OUT
#   bench/tools/h200_te.sh lmhead PRESET    # the lm-head in FP8 vs BF16 (te-current, torchao-tensorwise, torch-fp8)
# 2026-12-02 session (bench/results/h200/README.md, "2026-12-02"):
#   bench/tools/h200_te.sh infer PRESET...  # --mode inference, PASSES="eager compiled": eager (every backend), compiled
#                                           # (bf16/torchao/torch-fp8)
#   bench/tools/h200_te.sh fixtures CARRY   # CARRY/gen2/*.py (Llama / ViT fixtures converted by the fixes) on real TE,
#                                           # and the PL305 facts with torch.compile(fullgraph=True)
#   TAG=levers BACKENDS=... bench/tools/h200_te.sh bench PRESET...   # the training levers (te-fused-delayed, te-dpa...)
# 2026-12-04 (issue 22, the FP8 gain table; docs/gain.md):
#   bench/tools/h200_te.sh gemm             # bench/tools/gemm_table.py: FP8/BF16 ratio of a Linear's training step per
#                                           # backend over the (M, K, N) grid + the block's non-GEMM time; $OUT/gemm/
#                                           # GEMM_BUDGET_S [240] (the grid's target), GEMM_S [480] (hard timeout),
#                                           # GEMM_ARGS (more flags, e.g. --quick)
#   bench/tools/h200_te.sh gemmc            # the compiled table (gemm_table.py --compile: bf16, torchao-tensorwise,
#                                           # torchao-rowwise, every layer in torch.compile) in GEMM_DIR
#                                           # [$OUT/gemm-compiled]; GEMM_BUDGET_S [140], GEMM_S [290] (hard timeout),
#                                           # GEMM_ARGS (more flags); merge: bench/tools/gain_data.py --compiled
# Every benchmark process runs under `timeout $STEP_S` (default 300 s) so that one hang cannot eat a device call.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/results/h200/raw}; mkdir -p "$OUT"
SITE_DIR=/tmp/site
export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE_DIR${PYTHONPATH:+:$PYTHONPATH}
T=bench/tools
STEPS=${STEPS:-20}; WARMUP=${WARMUP:-5}; STEP_S=${STEP_S:-300}; TAG=${TAG:+-$TAG}
INFER_ARGS=${INFER_ARGS:---batch 8 --prompt-len 1024 --new-tokens 32 --repeats 3 --eval-batches 4 --calib-batches 4}
BACKENDS=${BACKENDS:-bf16,te-delayed,te-current,te-fused,torchao-tensorwise,torchao-rowwise,torch-fp8}
case "${1:-}" in
  setup)
    c=${2:?carry folder}
    if ls "$c"/tewheel/transformer_engine_torch-*.whl >/dev/null 2>&1; then
      # One pip call for all: a second --target install of the extension would skip (or, with --upgrade, replace)
      # the transformer_engine folder the core wheel made.
      # CARRY/mo: nvidia-modelopt and the runtime dependencies the machine lacks (omegaconf, pulp without its
      # non-Linux CBC binaries), for --mode inference's accuracy reference.
      rm -rf "$SITE_DIR"; python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE_DIR" \
        "$c"/whl/*.whl "$c"/tewheel/*.whl $(ls "$c"/mo/*.whl 2>/dev/null) || exit
    else
      bash $T/te_install.sh install "$c/whl" || exit
      cp "$c"/whl/transformer_engine_torch-*.tar.gz /tmp/ 2>/dev/null || cp "$c"/sdist/*.tar.gz /tmp/ || exit
      rm -f /tmp/tebuild.done
      setsid bash -c "bash $PWD/$T/te_install.sh build /tmp/transformer_engine_torch-*.tar.gz /tmp/tewhl > /tmp/tebuild.log 2>&1; echo \$? > /tmp/tebuild.done" < /dev/null > /dev/null 2>&1 &
      echo "build started in the background (log /tmp/tebuild.log)"
    fi
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv
    ;;
  wait)
    c=${2:?carry folder}; limit=${3:-500}; t0=$(date +%s)
    # setup installed a prebuilt transformer_engine_torch (CARRY/tewheel) and started no build: nothing to wait for
    # (waiting for a build that never started burned the whole limit of device time, 2026-12-04).
    if ls "$c"/tewheel/transformer_engine_torch-*.whl >/dev/null 2>&1 && [ ! -f /tmp/tebuild.log ]; then
      python3 -c "import transformer_engine.pytorch as te, transformer_engine; print('TE', transformer_engine.__version__, te.is_fp8_available(return_reason=True))"
      exit
    fi
    while [ ! -f /tmp/tebuild.done ] && [ $(( $(date +%s) - t0 )) -lt "$limit" ]; do sleep 5; done
    tail -5 /tmp/tebuild.log; grep "^TIME" /tmp/tebuild.log
    [ -f /tmp/tebuild.done ] || { echo "build still running after ${limit}s"; exit 3; }
    [ "$(cat /tmp/tebuild.done)" = 0 ] || { grep -iE "error|fatal" /tmp/tebuild.log | head -40; cp /tmp/tebuild.log "$OUT/"; exit 4; }
    cp /tmp/tebuild.log "$OUT/te-build-log.txt"
    w=$(ls /tmp/tewhl/transformer_engine_torch-*.whl | head -1)
    rm -rf "$SITE_DIR"; python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE_DIR" "$c"/whl/*.whl "$w" || exit
    split -b 15m -d "$w" "$OUT/$(basename "$w").part"; ls -l "$OUT"
    python3 -c "import transformer_engine.pytorch as te, transformer_engine; print('TE', transformer_engine.__version__, te.is_fp8_available(return_reason=True))"
    ;;
  path)
    c=${2:?carry folder}
    python3 $T/te_fp8_path.py facts --json-out "$OUT/te-facts.json" 2>&1 | grep -v "^W1\|UserWarning" | tee "$OUT/te-facts-log.txt"
    for r in "$c"/gen/*/; do n=$(basename "$r")
      echo "== converted example, recipe $n"
      python3 $T/te_fp8_path.py path "$r" --json-out "$OUT/generated-$n.json" 2>&1 | tee "$OUT/generated-$n-log.txt" | grep -v Warning
    done
    (cd "$c/gen/DelayedScaling" && timeout 120 python3 train.py 2>&1 | tail -8) | tee "$OUT/generated-train-py-log.txt"
    ;;
  bench)
    shift
    for w in "$@"; do
      echo "== $w $(date +%T)"
      timeout "$STEP_S" python3 bench/benchmark.py --workload "$w" --backends "$BACKENDS" --compile --steps "$STEPS" \
        --warmup "$WARMUP" ${BENCH_ARGS:-} --json-out "$OUT/$w$TAG.json" 2>>"$OUT/$w$TAG-log.txt" \
        | grep -E '"(error|summary)"' | cut -c1-400
      grep -E "^(bf16|te-|torchao|torch-fp8|GEMM|error)" "$OUT/$w$TAG-log.txt"
    done
    ls -l "$OUT"
    ;;
  infer)
    shift
    for w in "$@"; do for pass in ${PASSES:-eager compiled}; do
      echo "== inference $w $pass $(date +%T)"
      if [ "$pass" = eager ]; then flags="--no-compile --backends bf16,torchao,te,torch-fp8,modelopt"
      else flags="--compile --backends bf16,torchao,torch-fp8"; fi
      timeout "$STEP_S" python3 bench/benchmark.py --mode inference --workload "$w" $flags $INFER_ARGS \
        --json-out "$OUT/infer-$w-$pass.json" 2>>"$OUT/infer-$w-$pass-log.txt" | grep -E '"(error|summary)"' | cut -c1-600
      grep -E "^(bf16|te |torchao|torch-fp8|modelopt|error)" "$OUT/infer-$w-$pass-log.txt"
    done; done
    ;;
  fixtures)
    c=${2:?carry folder}
    for f in "$c"/gen2/*.py; do n=$(basename "$f" .py)
      echo "== converted fixture $n $(date +%T)"
      timeout "$STEP_S" python3 $T/te_fp8_path.py path "$f" --json-out "$OUT/generated-$n.json" 2>&1 \
        | tee "$OUT/generated-$n-log.txt" | grep -E "^(RESULT|FP8|step|load|Running|te module)" | cut -c1-300
    done
    timeout "$STEP_S" python3 $T/te_fp8_path.py facts --only PL305 --json-out "$OUT/te-facts-pl305.json" 2>&1 \
      | grep -v "^W1\|UserWarning" | tee "$OUT/te-facts-pl305-log.txt" | grep FACT | cut -c1-400
    ;;
  lmhead)
    w=${2:?preset}
    python3 bench/benchmark.py --workload "$w" --backends te-current,torchao-tensorwise,torch-fp8 --fp8-lm-head --compile \
      --steps "$STEPS" --warmup "$WARMUP" --no-roofline --json-out "$OUT/$w-fp8-lm-head.json" 2>>"$OUT/$w-fp8-lm-head-log.txt" \
      | grep -E '"(error|summary)"' | cut -c1-400
    grep -E "^(bf16|te-|torchao|torch-fp8|error)" "$OUT/$w-fp8-lm-head-log.txt"
    (cd "$OUT" && tar czf "lmhead-$(date +%H%M%S).tgz" --remove-files *.json *-log.txt 2>/dev/null); ls -l "$OUT"
    ;;
  gemm)
    python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))" 2>&1 | tail -1
    python3 -c "import transformer_engine.pytorch as te, transformer_engine as t; print('TE', t.__version__, te.is_fp8_available(return_reason=True))" 2>&1 | tail -1
    python3 -c "import torchao; print('torchao', torchao.__version__)" 2>&1 | tail -1
    mkdir -p "$OUT/gemm"
    timeout "${GEMM_S:-480}" python3 $T/gemm_table.py --out "$OUT/gemm" --budget-s "${GEMM_BUDGET_S:-240}" ${GEMM_ARGS:-} \
      > "$OUT/gemm/gemm-table-stdout.txt" 2>&1
    rc=$?; [ $rc = 124 ] && echo "TIMEOUT after ${GEMM_S:-480}s (the JSON holds every finished (K, N) column, incomplete: true)"
    echo "rc $rc"
    grep -E "UNAVAILABLE|calibration|cost model|failed|host ms|not running ahead|^\[ *[0-9.]+s\] (==|   )|wrote" "$OUT/gemm/gemm-table-log.txt" | cut -c1-220
    ls -l "$OUT/gemm"
    ;;
  gemmc)
    python3 -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))" 2>&1 | tail -1
    python3 -c "import torchao; print('torchao', torchao.__version__)" 2>&1 | tail -1
    d=${GEMM_DIR:-$OUT/gemm-compiled}; mkdir -p "$d"
    timeout "${GEMM_S:-290}" python3 $T/gemm_table.py --compile --out "$d" --budget-s "${GEMM_BUDGET_S:-140}" ${GEMM_ARGS:-} \
      > "$d/gemm-table-compiled-stdout.txt" 2>&1
    rc=$?; [ $rc = 124 ] && echo "TIMEOUT after ${GEMM_S:-290}s (the JSON holds every finished (K, N) column, incomplete: true)"
    echo "rc $rc"
    grep -E "UNAVAILABLE|calibration|cost model|failed|compiled|static|host ms|not running ahead|^\[ *[0-9.]+s\] (==|   )|wrote" \
      "$d/gemm-table-compiled-log.txt" | cut -c1-220
    ls -l "$d"
    ;;
  *) sed -n 2,26p "$0"; exit 2 ;;
esac
