#!/usr/bin/env bash
# Session 11 call 4 (carry .cudabin .fla; the binaries of call 3): GDN2 forward + backward against fla in
# one process, rung 17, with the "(saving)" and "(saving states)" rows (call 3 was cut while fla's GDN2
# kernels compiled; the Triton cache in /tmp/triton_cache is kept if the machine is the same).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
[ -f /tmp/b/liblinattn_cuda_capi.so ] || tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
echo "triton cache entries at start: $(ls $TRITON_CACHE_DIR | wc -l)" | tee /tmp/l/summary4.log
timeout 450 python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla --ops gdn2 --bwd-versions 17 --rep 100 --json /tmp/l/bbench_gdn2.json > /tmp/l/bbench_gdn2.log 2>&1; rc=$?
echo "[$(el) s] backward bench (GDN2) rc $rc" | tee -a /tmp/l/summary4.log
cp /tmp/l/summary4.log /tmp/l/bbench_gdn2.log /tmp/l/bbench_gdn2.json $OUT/ 2>/dev/null
