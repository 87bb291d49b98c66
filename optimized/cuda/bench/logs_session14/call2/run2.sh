#!/usr/bin/env bash
# Session 14 call 2: rung 10's tests (with the new invalid-LINATTN_V10_SEG case and the per-device cache of
# pipelines()' attribute queries), then rungs 7, 9, 10 and fla timed in 5 interleaved rounds in one process
# (bench_forward.py --rounds), then per-kernel times of `best` and fla (profile_kernels.py).
# Carry .cudabin (test_cuda_forward, liblinattn_cuda_capi.so, stripped, built at HEAD) and .fla.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm --format=csv > /tmp/l/env.log
timeout 120 /tmp/b/test_cuda_forward "CUDA v10*" --durations yes > /tmp/l/v10.log 2>&1; rc=$?
echo "[$(el) s] rung 10's tests rc $rc: $(grep -E '^All tests|^test cases' /tmp/l/v10.log | tail -1)" | tee -a /tmp/l/summary.log
timeout 330 python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule,gated_delta_rule --versions 7,9,10 --rep 40 --rounds 5 > /tmp/l/fbench.log 2>&1; rc=$?
echo "[$(el) s] bench_forward --rounds 5 rc $rc" | tee -a /tmp/l/summary.log
grep -E '^  rounds' /tmp/l/fbench.log | tee -a /tmp/l/summary.log
timeout 120 python3 optimized/cuda/bench/profile_kernels.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule,gated_delta_rule > /tmp/l/profile.log 2>&1; rc=$?
echo "[$(el) s] profile_kernels rc $rc" | tee -a /tmp/l/summary.log
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv >> /tmp/l/env.log
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log $OUT/
