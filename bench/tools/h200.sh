#!/usr/bin/env bash
# GPU runs for the H200 device machine (see bench/results/h200/README.md). Usage: bench/tools/h200.sh smoke|full
# Writes JSON results and a log under $OUT (default bench/results/h200/raw).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-bench/results/h200/raw}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
B="python3 bench/benchmark.py"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee -a "$OUT/log.txt"
case "${1:-}" in
  smoke)
    python3 -m pytest -q bench/tests/test_gpu.py bench/tests/test_fp8_math.py bench/tests/test_presets.py \
      bench/tests/test_te_convert.py bench/tests/test_probe.py 2>&1 | tee -a "$OUT/log.txt"
    $B --workload gpt-125m --backends bf16,te,torch-fp8 --compile --steps 20 --warmup 5 --measure-overhead \
      --json-out "$OUT/smoke-gpt-125m.json" 2>>"$OUT/log.txt" | cut -c1-300
    $B --workload llama-7b-slice --backends bf16,torch-fp8 --compile --steps 8 --warmup 4 \
      --json-out "$OUT/smoke-llama-7b-slice.json" 2>>"$OUT/log.txt" | grep -v '"progress"' | cut -c1-300
    ;;
  full)
    shift
    for w in ${PRESETS:-llama-7b-slice llama-70b-slice gpt-1.3b gpt-125m}; do
      extra=""
      case $w in gpt-125m|gpt-1.3b) extra="--measure-overhead" ;; esac
      echo "== $w $(date +%T)" | tee -a "$OUT/log.txt"
      $B --workload $w --backends bf16,te,torch-fp8 --compile --steps ${STEPS:-50} --warmup ${WARMUP:-10} $extra \
        --json-out "$OUT/$w.json" 2>>"$OUT/log.txt" | grep -v '"progress"' | cut -c1-200
    done
    ;;
  *) echo "usage: $0 smoke|full" >&2; exit 2 ;;
esac
grep -E "^(backend|bf16|te |torch-fp8|GEMM|harness|==|error)" "$OUT/log.txt" || true
