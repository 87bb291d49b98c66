#!/usr/bin/env bash
# Session 6 device call 3: backward rungs 5 and 6 under the sanitizers (packed batch and T = 1,
# memcheck and racecheck, every rung in those tests), 20 determinism repeats, their planted bugs
# (mutants of efb0b1e: BMUT_ONLY=v5 and v6), and the v5-vs-v4 test with its per-channel bound.
set -u
mkdir -p /tmp/b /tmp/m && tar -xJf .cudabin/bins.tar.xz -C /tmp/b && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1
LINATTN_CUDA_BACKWARD_REPORT=1 timeout 60 /tmp/b/test_cuda_backward 'CUDA v5 grads kernel after rung 3 prepare gives rung 4 gradients bit for bit' > $OUT/btest_v5bit.log 2>&1
grep -E "^All tests|^test cases" $OUT/btest_v5bit.log
DET_REPEATS=20 BIN=/tmp/b OUT=/tmp/o_s bash optimized/cuda/bench/device_run.sh bsanitize 2>&1 | grep -E "===|SUMMARY|determinism|real"
tar -cJf $OUT/bsanitize_logs.tar.xz -C /tmp/o_s .
for g in v5 v6; do BMUT_ONLY=$g MBIN=/tmp/m BIN=/tmp/b OUT=/tmp/o_$g bash optimized/cuda/bench/device_run.sh bmutants > /dev/null 2>&1; cp /tmp/o_$g/bmutants.log $OUT/bmutants_$g.log; cat $OUT/bmutants_$g.log; done
