#!/usr/bin/env bash
# Session 10, device call 6 (the last ~240 device seconds): KDA forward + backward beside fla in one process
# with backward best = rung 17 (call 3's fla run was cut before KDA). The log is written straight to $OUT,
# so a run cut by the budget still returns what it printed. Carry: .cudabin .fla .tcache.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/triton_cache
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
timeout 170 python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla --ops kda --bwd-versions 17 --rep 100 --slow-rep 20 > $OUT/bbench_kda.log 2>&1
rc=$?; echo "bench rc $rc"; grep -E " ms" $OUT/bbench_kda.log
