#!/usr/bin/env bash
# optimized/cuda/bench/device_run.sh -- everything one call on the GPU machine does, in order:
# the CUDA property tests, compute-sanitizer (memcheck, racecheck) on a representative test, and
# the benchmark against fla and SDPA. Built here, run there: the binaries and fla's source are
# carried (build/cuda/..., .fla); logs go to $OUT. Stages are bounded with timeout so a slow stage
# cannot eat the whole call. Usage: bash optimized/cuda/bench/device_run.sh [stages...]
#   stages: tests sanitize bench (default: all). BENCH_ARGS adds arguments to bench_forward.py.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
B=build/cuda
TEST=$B/proofs_tests/test_cuda_forward
LIB=$B/optimized/cuda/liblinattn_cuda_capi.so
stages=${*:-tests sanitize bench}
export PYTHONUNBUFFERED=1
export TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
if [ -f .tcache/triton_cache.tgz ]; then mkdir -p /tmp/triton_cache && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache; fi
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv; } | tee "$OUT/env.log"
for s in $stages; do
  case $s in
    tests)
      echo "=== tests: $TEST"
      ( time timeout 240 "$TEST" --durations yes ) 2>&1 | tee "$OUT/tests.log" | grep -v "^  [0-9.]* s: " | tail -40 ;;
    sanitize)
      F='CUDA chunked forward of a packed batch of many short sequences equals the reference'
      for tool in memcheck racecheck; do
        echo "=== compute-sanitizer --tool $tool: $F"
        ( time timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 "$TEST" "$F" ) 2>&1 | tee "$OUT/sanitize_$tool.log" | tail -8
      done ;;
    bench)
      echo "=== bench"
      timeout 420 python3 optimized/cuda/bench/bench_forward.py --lib $LIB --fla .fla --json "$OUT/bench.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log" | grep -v "^\s*$"
      tar -czf "$OUT/triton_cache.tgz" -C /tmp/triton_cache . 2>/dev/null ;;
  esac
done
