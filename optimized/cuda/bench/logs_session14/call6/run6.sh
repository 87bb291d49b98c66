#!/usr/bin/env bash
# Session 14 call 6 (the session's last device call, at 566c2a5): (1) planted bug 95 (the saving forward's
# rung 7 intra kernel launched without A) must fail test_cuda_saved's two bit tests, which pass without it;
# (2) forward rungs 7, 9, 10 and fla in 3 interleaved rounds, DeltaNet and GDN, both shapes; (3) forward +
# backward, DeltaNet and GDN, backward rung 18 (`best`), with fla (its GDN backward refuses on Triton 3.6.0).
# Carry .cudabin (test_cuda_saved, test_cuda_saved_mut from make_mutants.py, liblinattn_cuda_capi.so) and .fla.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
END=420
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
S1='CUDA saving forward gives the forward output bit for bit and the saved backward gives the recompute backward gradients bit for bit'
S2='CUDA saving forward with states gives the forward output bit for bit and the saved backward without its states kernel gives the recompute gradients bit for bit'
for m in 0 95; do
  LINATTN_MUTANT=$m timeout $(left 40) /tmp/b/test_cuda_saved_mut "$S1" > /tmp/l/mut${m}_s1.log 2>&1; r1=$?
  LINATTN_MUTANT=$m timeout $(left 40) /tmp/b/test_cuda_saved_mut "$S2" > /tmp/l/mut${m}_s2.log 2>&1; r2=$?
  echo "[$(el) s] mutant $m: without states rc $r1 ($(res /tmp/l/mut${m}_s1.log)); with states rc $r2 ($(res /tmp/l/mut${m}_s2.log))" | tee -a /tmp/l/summary.log
done
timeout $(left 150) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule,gated_delta_rule --versions 7,9,10 --rep 40 --rounds 3 > /tmp/l/fbench.log 2>&1; rc=$?
echo "[$(el) s] bench_forward --rounds 3 rc $rc" | tee -a /tmp/l/summary.log
grep -E '^  rounds' /tmp/l/fbench.log | tee -a /tmp/l/summary.log
timeout $(left 220) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule,gated_delta_rule --bwd-versions 18 --rep 100 > /tmp/l/bbench.log 2>&1; rc=$?
echo "[$(el) s] bench_backward rung 18 with fla rc $rc" | tee -a /tmp/l/summary.log
grep -E ' ms|kernels \(ms\)' /tmp/l/bbench.log | grep -v '^  ' | tee -a /tmp/l/summary.log
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log $OUT/
