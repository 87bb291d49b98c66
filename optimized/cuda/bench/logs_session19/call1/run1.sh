#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 18.
# Session 18 (bench/logs_session18/) ran every test case of test_cuda_forward (call 1), test_cuda_saved (calls 2, 5)
# and test_cuda_backward (call 3, on the tree where backward rung 19 also handed dw_aux over in bf16 by default; since
# call 4 that is LINATTN_BWD19_DWA_BF16=1 only, and only rung 19's own tests and test_cuda_saved ran after). Unrun:
#   1. every test case of test_cuda_backward on the merged tree (about 300 s in call 3);
#   2. racecheck to completion: of rung 10's forward bit test (3 cases ran past 150 s in call 3) and of rung 19's
#      backward bit test (past 90 s in call 2): here 1 case of rung 10's, and rung 19's in one of its four knob passes
#      (LINATTN_BWD3_BV=64, LINATTN_BWD19_DWA_BF16=0: the benchmark's kernels);
#   (1 includes rung 19's bit test as review19 extended it after the session's device time: review9's edge cases, a
#    K = V = 128 case, and LINATTN_BWD3_BV = 32 and 64, so that dstates<128, 64, kDsH>, the benchmark's, is checked
#    bit for bit; no test had run that kernel before.)
#   3. bench_forward at B=1 T=32768 for DeltaNet and GDN, `best` and fla: its rows end with "rung 10: 8 segments,
#      state clusters of N", the cluster size no session has logged yet (8 if 16 clusters of 8 fit, else 4).
# Needs .cudabin/bins.tar.xz (test_cuda_forward, test_cuda_backward, liblinattn_cuda_capi.so, stripped, built at HEAD;
# `xz -9e` keeps them near 15 MB) and .fla; carry `.cudabin .fla`. Usage on the device:
# bash optimized/cuda/bench/pending_device_run.sh (about 550 s).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-580}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 330) /tmp/b/test_cuda_backward --durations yes > /tmp/l/backward.log 2>&1
note "test_cuda_backward (every test case) rc $?: $(res /tmp/l/backward.log)"
T='CUDA v10 pipeline forward equals v7 bit for bit where it pipelines and in the segments it should'
LINATTN_V10_BIT_CASES=1 timeout $(left 60) compute-sanitizer --tool racecheck --error-exitcode 9 \
  /tmp/b/test_cuda_forward "$T" > /tmp/l/san10_racecheck.log 2>&1
note "racecheck rung 10 bit test (1 case) rc $?: $(res /tmp/l/san10_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san10_racecheck.log | tail -1)"
timeout $(left 100) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 1x32768x16x128x128 --ops delta_rule,gated_delta_rule --versions 0 --rep 40 --rounds 1 > /tmp/l/fbench.log 2>&1
note "bench_forward DeltaNet, GDN at B=1, best and fla rc $?"
grep -E "rung 10|fla" /tmp/l/fbench.log | head -8 >> /tmp/l/summary.log
LINATTN_BWD3_BV=64 LINATTN_BWD19_DWA_BF16=0 timeout $(left 150) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward \
  'CUDA v19 gradients equal v18 gradients bit for bit' > /tmp/l/san19_racecheck.log 2>&1
note "racecheck rung 19 bit test rc $?: $(res /tmp/l/san19_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san19_racecheck.log | tail -1)"
finish
