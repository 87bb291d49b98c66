#!/usr/bin/env bash
# Session 13 call 2 (carry .cudabin .fla; bins.tar.xz: v9/ = the working tree with forward rung 9
# (v9_lean_overlap.cu) built here, lean/ = 38a448b + bench/pending/lean_saved_states.patch's C API):
# rung 9's tests; rungs 6, 7, 9 against fla (DeltaNet, GDN, both shapes, each kernel alone too) in one
# process; the backward's saved rows with and without the lean saved-states patch (one process each, no fla).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
END=560
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
timeout $(left 120) /tmp/b/v9/test_cuda_forward "CUDA v9*" --durations yes > /tmp/l/v9_tests.log 2>&1; rc=$?
echo "[$(el) s] rung 9's tests rc $rc: $(res /tmp/l/v9_tests.log)" | tee -a /tmp/l/summary.log
timeout $(left 240) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/v9/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule,gated_delta_rule --versions 6,7,9 --sweep-versions 6,7,9 --split --rep 40 \
  --json /tmp/l/fbench.json > /tmp/l/fbench.log 2>&1; rc=$?
echo "[$(el) s] bench_forward rungs 6, 7, 9 with fla rc $rc" | tee -a /tmp/l/summary.log
for lib in v9 lean; do
  timeout $(left 90) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/$lib/liblinattn_cuda_capi.so \
    --bwd-versions 18 --rep 40 --json /tmp/l/bbench_$lib.json > /tmp/l/bbench_$lib.log 2>&1; rc=$?
  echo "[$(el) s] bench_backward (all operators, rung 18, no fla) with the $lib C API rc $rc" | tee -a /tmp/l/summary.log
done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log /tmp/l/fbench.log /tmp/l/bbench_*.log $OUT/
