#!/usr/bin/env bash
# optimized/cuda/bench/logs_session8/saved_run.sh -- the device call for the saved forward (issue 6;
# chunk_cuda.hpp SavedForward; RESULTS.md "Saved forward"): every test case of test_cuda_saved (the
# whole binary, with each case's time), then compute-sanitizer memcheck on the bit-for-bit test, whose
# fixed cases include K = 100 V = 36, K = 36 V = 20 and odd K and V (review8 c3: call 4's memcheck ran
# on the 'twice' test only). About 60 s at most by default (timeouts 20 + 35 s).
# Optional, each adding time: SAVED_BENCH=1 bench_backward.py --bwd-versions 8 with the saving rows
# (~130 s; needs liblinattn_cuda_capi.so and .tcache), SAVED_MUTANTS=1 the planted bugs 95-97 and
# 110-112 (device_run.sh smutants; needs .cudabin/mutants.tar.xz with test_cuda_saved of the mutant tree).
# Needs .cudabin/bins.tar.xz holding (stripped) test_cuda_saved (and liblinattn_cuda_capi.so for the
# bench) built at or after 414f11f (build as RESULTS.md "How to build and carry" says, with
# test_cuda_saved among the targets); carry `.cudabin` (and `.tcache` for the bench).
# Writes one file to $OUT: saved_logs.tar.xz (a summary in summary.log inside, also printed).
# Usage on the device: bash optimized/cuda/bench/logs_session8/saved_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > /tmp/l/env.log
L=/tmp/b/liblinattn_cuda_capi.so S=/tmp/b/test_cuda_saved
BIT='CUDA saving forward gives the forward output bit for bit and the saved backward gives the recompute backward gradients bit for bit'
{
# 1. Every test case of test_cuda_saved (bit for bit, twice, the reference property, the refusals, the
#    two stream-order tests), with each case's time.
timeout 20 $S --durations yes > /tmp/l/saved_all.log 2>&1
echo "[$(el) s] test_cuda_saved (rc $?): $(grep -E '^All tests|^test cases' /tmp/l/saved_all.log | tail -1)"
grep -E "^[0-9.]+ s: " /tmp/l/saved_all.log | cut -c1-160
grep -B3 -A12 "FAILED" /tmp/l/saved_all.log | head -40
# 2. memcheck on the bit-for-bit test (every fixed case, every operator, both gate dtypes, every saved rung).
timeout 35 compute-sanitizer --tool memcheck --error-exitcode 9 --print-limit 6 $S "$BIT" > /tmp/l/memcheck_bit.log 2>&1
echo "[$(el) s] memcheck on the bit-for-bit test (rc $?): $(grep -E 'ERROR SUMMARY|^All tests|^test cases' /tmp/l/memcheck_bit.log | tr '\n' ' ')"
grep -m1 -A14 "Invalid\|Error:" /tmp/l/memcheck_bit.log | cut -c1-200
# 3. Optional: speed at B=8 T=4096 H=16 K=V=128 with the saving rows (max |diff| against the recompute path must be 0).
if [ "${SAVED_BENCH:-0}" = 1 ]; then
  export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
  mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
  timeout 130 python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 8 --rep 30 --slow-rep 5 --json /tmp/l/bbench_saved.json > /tmp/l/bbench_saved.log 2>&1
  echo "[$(el) s] backward speed (rc $?)"
  grep -E "linattn|kernels|max \|diff\||failed" /tmp/l/bbench_saved.log | grep -v "^\s*$" | cut -c1-400
fi
# 4. Optional: the planted bugs (each must fail the tests device_run.sh smutants names).
if [ "${SAVED_MUTANTS:-0}" = 1 ] && [ -f .cudabin/mutants.tar.xz ]; then
  mkdir -p /tmp/m && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
  [ -f /tmp/m/test_cuda_saved ] && OUT=/tmp/l MBIN=/tmp/m timeout 240 bash optimized/cuda/bench/device_run.sh smutants > /dev/null 2>&1
  [ -f /tmp/l/smutants.log ] && cat /tmp/l/smutants.log
fi
echo "[$(el) s] done"
} 2>&1 | tee /tmp/l/summary.log
tar -cJf $OUT/saved_logs.tar.xz -C /tmp/l .
