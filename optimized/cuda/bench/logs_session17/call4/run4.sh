#!/usr/bin/env bash
# Session 17 call 4: rung 10's cluster state kernel (v2_state_mc: the value tiles of one head in a cluster, each
# chunk's W, Qg, Kd, P loaded once by multicast tensor copies), built here on next/mc, and the final forward
# benchmark of every operator at both shapes. (1) rung 10's tests (bit for bit against rung 7, cluster sizes 1 /
# 2 / 4 / 8); (2) memcheck, racecheck and synccheck of its bit test (2 cases, clusters of 8); (3) two-build bit
# check against main's library (c8b8ec7, as old/) at pipelined B=1 shapes; (4) A/B in one process at B=1
# T=32768: clusters against LINATTN_V10_CLUSTER=1 (v2_state_pdl), whole forward and state kernels alone;
# (5) bench_forward, every operator at both shapes, `best` and fla, 3 rounds. If step 1 fails, steps 2-4 are
# skipped and step 5 runs with LINATTN_V10_CLUSTER=1. Carry .cudabin (this call's bins.tar.xz) and .fla.
set -u
OUT=${OUT:-/tmp/out}; END=548
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 60) /tmp/b/test_cuda_forward --durations yes "CUDA v10*" > /tmp/l/v10_tests.log 2>&1; rc=$?
note "rung 10 tests (CUDA v10*) rc $rc: $(res /tmp/l/v10_tests.log)"
if [ $rc -eq 0 ]; then
  T='CUDA v10 pipeline forward equals v7 bit for bit where it pipelines and in the segments it should'
  for tool in memcheck racecheck synccheck; do
    LINATTN_V10_BIT_CASES=2 timeout $(left 40) compute-sanitizer --tool $tool --error-exitcode 9 \
      /tmp/b/test_cuda_forward "$T" > /tmp/l/san_$tool.log 2>&1; r=$?
    note "$tool rung 10 bit test (2 cases) rc $r: $(res /tmp/l/san_$tool.log) | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/l/san_$tool.log | tail -1)"
  done
  KR="python3 optimized/cuda/bench/knob_rounds.py --lib /tmp/b/liblinattn_cuda_capi.so --lib2 /tmp/b/old/liblinattn_cuda_capi.so"
  timeout $(left 40) $KR --ops delta_rule,gated_delta_rule --rounds 1 --rep 5 \
    --shapes 1x9000x16x128x128,1x5000x16x64x64,1x4200x3x128x96,1x32768x16x128x128 \
    --runs "new:;main@2:" > /tmp/l/bits_two_builds.log 2>&1
  note "two-build bit check (cluster kernel against main) rc $?: $(grep -c 'against new: o 0.000e+00 state 0.000e+00' /tmp/l/bits_two_builds.log) of 8 equal"
  timeout $(left 100) python3 optimized/cuda/bench/knob_rounds.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --ops gated_delta_rule,delta_rule --shapes 1x32768x16x128x128 --rounds 3 --rep 40 \
    --runs "cl:;nocl:LINATTN_V10_CLUSTER=1;cl-state:LINATTN_TC_ONLY=state;nocl-state:LINATTN_TC_ONLY=state,LINATTN_V10_CLUSTER=1" \
    > /tmp/l/ab_cluster.log 2>&1
  note "A/B clusters against none at B=1 rc $?"
  grep -E 'against new|ms$' /tmp/l/ab_cluster.log >> /tmp/l/summary.log
else
  export LINATTN_V10_CLUSTER=1
fi
timeout $(left 400) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 0 --rep 40 --rounds 3 > /tmp/l/fbench.log 2>&1
note "bench_forward every operator, both shapes, best and fla, 3 rounds rc $? (LINATTN_V10_CLUSTER=${LINATTN_V10_CLUSTER:-unset})"
grep -E '^ceilings|^  rounds' /tmp/l/fbench.log >> /tmp/l/summary.log
finish
