#!/usr/bin/env bash
# Session 10, device call 2: (1) fla beside rungs 13 and 15 in one process for GDN2 and KDA (fla's GDN2
# Triton kernels compile here: the carried cache lacked them in session 9; the cache comes back as
# $OUT/triton_cache.tgz for .tcache/); (2) racecheck of backward best (rung 13) over its whole bit test
# (session 9 call 5 was cut at 200 s after 1,478 of 2,560 assertions). Carry: .cudabin .fla .tcache.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/triton_cache
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
timeout 230 python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla --ops gdn2,kda --bwd-versions 13,15 --rep 100 --slow-rep 20 --json $OUT/bbench.json > $OUT/bbench.log 2>&1
rc=$?; echo "[$(el) s] bbench rc $rc"
tar -czf $OUT/triton_cache.tgz -C /tmp/triton_cache .
t=$(( 540 - $(el) ))
timeout $t compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward 'CUDA v13 gradients equal v10 gradients bit for bit' > $OUT/racecheck_v13bit.log 2>&1
rc=$?; echo "[$(el) s] racecheck rc $rc (limit $t s)"
grep -cE "Race reported" $OUT/racecheck_v13bit.log; grep -E "SUMMARY|^All tests|^test cases|assertions" $OUT/racecheck_v13bit.log | tail -3
grep -E "ms|refuse|error|Error" $OUT/bbench.log | tail -40
