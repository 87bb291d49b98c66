#!/usr/bin/env bash
# Session 11 call 2 (carry .cudabin .fla; binaries built at 57141bc: .cudabin/BUILT_AT; fla at bc3b101 as
# source in .fla). (1) the forward test that call 1 cut at 15 s (value tiles 32 / 64, every rung including
# v7), 90 s; (2) the forward against fla and SDPA, rungs 4 and 7, both shapes, every operator (the Triton
# cache is kept in /tmp/triton_cache for (3)); (3) DeltaNet forward + backward against fla, rung 17, with
# the saving-forward rows ("(saving)", "(saving states)").
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > /tmp/l/env.log
L=/tmp/b/liblinattn_cuda_capi.so
timeout 90 /tmp/b/test_cuda_forward 'CUDA chunked forward with 32 and 64 column value tiles at K = 64 and 128 equals the reference' > /tmp/l/fwd_bv.log 2>&1; rc=$?
echo "[$(el) s] value-tile test rc $rc: $(grep -E '^All tests|^test cases' /tmp/l/fwd_bv.log | tail -1)" | tee -a /tmp/l/summary.log
timeout 240 python3 optimized/cuda/bench/bench_forward.py --lib $L --fla .fla --versions 4,7 --json /tmp/l/fbench.json > /tmp/l/fbench.log 2>&1; rc=$?
echo "[$(el) s] forward bench rc $rc" | tee -a /tmp/l/summary.log
timeout $(( 540 - $(el) )) python3 optimized/cuda/bench/bench_backward.py --lib $L --fla .fla --ops delta_rule --bwd-versions 17 --json /tmp/l/bbench_dn.json > /tmp/l/bbench_dn.log 2>&1; rc=$?
echo "[$(el) s] backward bench (DeltaNet) rc $rc" | tee -a /tmp/l/summary.log
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
