#!/usr/bin/env bash
# Session 11 call 6 (carry .cudabin .fla; binaries: 7fc4775 with backward best = rung 18, .cudabin/BUILT_AT):
# every backward test case and every saved test case with best = rung 18, then DeltaNet and GDN forward +
# backward against fla in one process (fla's GDN backward refuses on Triton 3.6.0: the error is printed).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
timeout 210 /tmp/b/test_cuda_backward > /tmp/l/bwd_all.log 2>&1; rc=$?
echo "[$(el) s] every backward test case (best = 18) rc $rc: $(res /tmp/l/bwd_all.log)" | tee -a /tmp/l/summary.log
timeout 60 /tmp/b/test_cuda_saved > /tmp/l/saved_all.log 2>&1; rc=$?
echo "[$(el) s] every saved test case (best = 18) rc $rc: $(res /tmp/l/saved_all.log)" | tee -a /tmp/l/summary.log
timeout $(( 400 - $(el) )) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla --ops delta_rule,gated_delta_rule --bwd-versions 18 --rep 50 --json /tmp/l/bbench_dn18.json > /tmp/l/bbench_dn18.log 2>&1; rc=$?
echo "[$(el) s] DeltaNet, GDN against fla rc $rc" | tee -a /tmp/l/summary.log
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log /tmp/l/bbench_dn18.log $OUT/
