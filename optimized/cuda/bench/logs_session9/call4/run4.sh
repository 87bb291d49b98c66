#!/usr/bin/env bash
# Session 9, device call 4 (the last: 585 device seconds left; everything ends by 490 s):
# 1. mutants of rungs 11 and 12 (rung 13 = best runs their kernels; make_mutants.py tree of 9f2b4cd,
#    .cudabin/mutants.tar.xz), without the groups' sanitizer runs (MUT_SAN=0; done on real binaries);
# 2. GDN2 and SDPA beside fla in one process (call 3's benchmark ran out of time before them);
# 3. the saved forward's mutants (95-97, 110-112);
# 4. rung 14's mutants (150-160) with the time left.
# Carry: .cudabin .fla .tcache.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/m /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b; tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
left() { local t=$(( 490 - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
MBIN=/tmp/m BMUT_ONLY="v11 v12" MUT_SAN=0 OUT=/tmp/l/m1112 timeout $(left 200) bash optimized/cuda/bench/device_run.sh bmutants > /dev/null 2>&1
rc=$?; echo "[$(el) s] mutants v11 v12 (rc $rc)"; grep -E "^mutant" /tmp/l/m1112/bmutants.log
timeout $(left 130) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla --ops gdn2 --bwd-versions 13,14 --rep 30 --slow-rep 5 --json /tmp/l/bbench_gdn2.json > /tmp/l/bbench_gdn2.log 2>&1
rc=$?; echo "[$(el) s] bench gdn2 + sdpa with fla (rc $rc)"; grep -E " ms" /tmp/l/bbench_gdn2.log
MBIN=/tmp/m OUT=/tmp/l/sm timeout $(left 80) bash optimized/cuda/bench/device_run.sh smutants > /dev/null 2>&1
rc=$?; echo "[$(el) s] smutants (rc $rc)"; cat /tmp/l/sm/smutants.log
MBIN=/tmp/m BMUT_ONLY="v14" MUT_SAN=0 OUT=/tmp/l/m14 timeout $(left 200) bash optimized/cuda/bench/device_run.sh bmutants > /dev/null 2>&1
rc=$?; echo "[$(el) s] mutants v14 (rc $rc)"; grep -E "^mutant" /tmp/l/m14/bmutants.log
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
