#!/usr/bin/env bash
# Session 5 device call 4: backward speed. A: rungs 3 and 4 (and linattn's fwd + bwd) for all four
# operators without fla; B: the same beside fla's forward + backward (fla compiles, so it may not finish).
set -u
mkdir -p /tmp/b && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
timeout 170 python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --bwd-versions 3,4 --rep 50 --slow-rep 10 --json $OUT/bbenchA.json 2>&1 | tee $OUT/bbenchA.log | grep -v "^\s*$" | tail -40
timeout 370 python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla --ops delta_rule,kda,gdn2 --bwd-versions 3,4 --rep 50 --slow-rep 10 --json $OUT/bbenchB.json 2>&1 | tee $OUT/bbenchB.log | grep -v "^\s*$" | tail -40
tar -czf $OUT/triton_cache.tgz -C /tmp/triton_cache .
