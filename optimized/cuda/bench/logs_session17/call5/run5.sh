#!/usr/bin/env bash
# Session 17 call 5: rung 10's cluster state kernel with its tiles as 64-column boxes in the 128-byte swizzle
# (call 4's 8-column slabs, 16-byte box rows, were 1.78x slower): (1) rung 10's tests; (2) memcheck and synccheck
# of its bit test (2 cases); (3) two-build bit check against main's library (c8b8ec7, as old/); (4) A/B in one
# process at B=1 T=32768, clusters against LINATTN_V10_CLUSTER=1, whole forward and state kernels alone, no fla.
# Carry .cudabin (this call's bins.tar.xz). Bounded to 170 s (the session's last device seconds).
set -u
OUT=${OUT:-/tmp/out}; END=170
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 40) /tmp/b/test_cuda_forward --durations yes "CUDA v10*" > /tmp/l/v10_tests.log 2>&1; rc=$?
note "rung 10 tests (CUDA v10*) rc $rc: $(res /tmp/l/v10_tests.log)"
T='CUDA v10 pipeline forward equals v7 bit for bit where it pipelines and in the segments it should'
for tool in memcheck synccheck; do
  LINATTN_V10_BIT_CASES=2 timeout $(left 20) compute-sanitizer --tool $tool --error-exitcode 9 \
    /tmp/b/test_cuda_forward "$T" > /tmp/l/san_$tool.log 2>&1; r=$?
  note "$tool rung 10 bit test (2 cases) rc $r: $(res /tmp/l/san_$tool.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san_$tool.log | tail -1)"
done
timeout $(left 30) python3 optimized/cuda/bench/knob_rounds.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --lib2 /tmp/b/old/liblinattn_cuda_capi.so --ops delta_rule,gated_delta_rule --rounds 1 --rep 5 \
  --shapes 1x9000x16x128x128,1x5000x16x64x64 --runs "new:;main@2:" > /tmp/l/bits_two_builds.log 2>&1
note "two-build bit check (cluster kernel against main) rc $?: $(grep -c 'against new: o 0.000e+00 state 0.000e+00' /tmp/l/bits_two_builds.log) of 4 equal"
timeout $(left 90) python3 optimized/cuda/bench/knob_rounds.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --ops gated_delta_rule,delta_rule --shapes 1x32768x16x128x128 --rounds 2 --rep 40 \
  --runs "cl:;nocl:LINATTN_V10_CLUSTER=1;cl-state:LINATTN_TC_ONLY=state;nocl-state:LINATTN_TC_ONLY=state,LINATTN_V10_CLUSTER=1" \
  > /tmp/l/ab_cluster.log 2>&1
note "A/B clusters against none at B=1 rc $?"
grep -E 'against new|ms$' /tmp/l/ab_cluster.log >> /tmp/l/summary.log
finish
