#!/usr/bin/env bash
# Session 24 call 3: rung 25 after call 2 -- the test file's fix (rung3_family and kRungs now list rung 25: its two
# property tests failed in call 2 only because the bounds fell back to the strict non-tensor-core ones for an unlisted
# rung, for every operator, KDA and GDN2 included, which run rung 24's kernels), and rung 25 as `best`:
#   1. every rung 25 test ("CUDA v25*");
#   2. the shared fixed-case tests, which run every rung of kRungs (rung 25 now, and `best` = rung 25) against the
#      float64 reference: head sizes up to 256, T = 1, ragged chunks, extreme gates, packed batches, 66 sequences, K =
#      V = 128 with both value tiles and V up to 256, determinism;
#   3. every test_cuda_saved case (`best` = rung 25 there too).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-380}
source optimized/cuda/bench/call_lib.sh
unpack
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 90) /tmp/b/test_cuda_backward "CUDA v25*" -w NoTests --durations yes > /tmp/l/v25_tests.log 2>&1
note "test_cuda_backward 'CUDA v25*' rc $?: $(res /tmp/l/v25_tests.log)"
cp /tmp/l/summary.log "$OUT/"
FIXED='CUDA chunked backward is exact at the tuned*,CUDA chunked backward at T = 1*,CUDA chunked backward with ragged*,CUDA chunked backward stays finite*,CUDA chunked backward of a packed*,CUDA chunked backward of 66*,CUDA chunked backward at K = V = 128*,CUDA chunked backward is deterministic*'
timeout $(left 200) /tmp/b/test_cuda_backward "$FIXED" -w NoTests --durations yes > /tmp/l/fixed_tests.log 2>&1
note "test_cuda_backward shared fixed cases (every rung) rc $?: $(res /tmp/l/fixed_tests.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 120) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
finish
