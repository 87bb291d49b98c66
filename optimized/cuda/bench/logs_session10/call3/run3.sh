#!/usr/bin/env bash
# Session 10, device call 3: rung 17 (bwd_v17_hybrid.cu) on the H200 for the first time:
# logs_session10/rung17_run.sh with PART2=1 (tests, bench 13 / 15 / 17 with the profile, memcheck and racecheck on one
# property), then fla beside rungs 13 and 17 in one process for DeltaNet and KDA (fla's kernels for these
# are in the carried Triton cache). Binaries of 9532748. Carry: .cudabin .fla .tcache.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/o17 /tmp/triton_cache
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
PART2=1 OUT=/tmp/o17 timeout 345 bash optimized/cuda/bench/logs_session10/rung17_run.sh > /tmp/l17_stdout.log 2>&1
rc=$?; echo "[$(el) s] rung17_run.sh rc $rc"; cat /tmp/l/summary.log
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
t=$(( 500 - $(el) )); [ $t -gt 150 ] && t=150
timeout $t python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla --ops delta_rule,kda --bwd-versions 13,17 --rep 100 --slow-rep 20 --json /tmp/l/bbench_fla.json > /tmp/l/bbench_fla.log 2>&1
rc=$?; echo "[$(el) s] bench with fla rc $rc (limit $t s)"; grep -E " ms" /tmp/l/bbench_fla.log
cp /tmp/l17_stdout.log /tmp/l/; tar -cJf $OUT/logs.tar.xz -C /tmp/l .; cp /tmp/o17/env.log $OUT/ 2>/dev/null
