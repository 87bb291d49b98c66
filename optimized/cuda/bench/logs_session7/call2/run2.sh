#!/usr/bin/env bash
# Session 7 device call 2: backward rung 7 (whose four own tests passed in call 1) through every
# backward test case (rung 7 is in kRungs), its planted bugs 69-72 (BMUT_ONLY=v7, mutants of b9193f1),
# per-kernel times of linattn and fla (torch.profiler, bench/profile_kernels.py), then the sanitizers
# and determinism repeats with rung 7 in. Binaries of 4bbf9ee (.cudabin/BUILT_AT).
set -u
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
mkdir -p /tmp/b /tmp/m /tmp/l && tar -xJf .cudabin/bins.tar.xz -C /tmp/b && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
( time LINATTN_CUDA_BACKWARD_REPORT=1 timeout 220 /tmp/b/test_cuda_backward --durations yes ) > /tmp/l/btests.log 2>&1
echo "[$(el) s] backward tests: $(grep -E '^All tests|^test cases|^real' /tmp/l/btests.log | tr '\n' ' ')"
grep -B3 -A25 "FAILED" /tmp/l/btests.log | head -60
BMUT_ONLY=v7 MBIN=/tmp/m BIN=/tmp/b OUT=/tmp/o_v7 bash optimized/cuda/bench/device_run.sh bmutants > /dev/null 2>&1; cp /tmp/o_v7/bmutants.log /tmp/l/bmutants_v7.log; cat /tmp/l/bmutants_v7.log
echo "[$(el) s] mutants done"
timeout 150 python3 optimized/cuda/bench/profile_kernels.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla --backward delta_rule,kda > /tmp/l/profile.log 2>&1
echo "[$(el) s] profile rc $?"; grep -E "^==" /tmp/l/profile.log
left=$(( 540 - $(el) )); echo "[$(el) s] sanitizers with ${left} s left"
if [ $left -gt 60 ]; then
  DET_REPEATS=10 BIN=/tmp/b OUT=/tmp/o_s timeout $left bash optimized/cuda/bench/device_run.sh bsanitize 2>&1 | grep -E "===|SUMMARY|determinism|real"
  cp -r /tmp/o_s /tmp/l/bsanitize
fi
echo "[$(el) s] end"
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
