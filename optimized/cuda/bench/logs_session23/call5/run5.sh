#!/usr/bin/env bash
# Session 23 call 5: call 4 (run4.sh) was refused twice (no machine), leaving about 245 s of device time: the part of it
# that checks rung 24's wave-count pick (e9e4ae8) runs here, the bench and memcheck do not fit.
#   1. every rung 24 test (its properties, bit test with each call's width checked, outside range, sanitizer case);
#   2. mutants 293 (the pick's SM count 4 too high) and 294 (rung 22's width everywhere) at the default width alone:
#      each must fail.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-95}
source optimized/cuda/bench/call_lib.sh
unpack
mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 70) /tmp/b/test_cuda_backward "CUDA v24*" -w NoTests --durations yes > /tmp/l/v24_tests.log 2>&1
note "test_cuda_backward 'CUDA v24*' rc $?: $(res /tmp/l/v24_tests.log)"
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v24 gradients equal v22 gradients bit for bit'
for m in 293 294; do
  LINATTN_MUTANT=$m LINATTN_BWD3_BV= timeout $(left 20) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_$m.log 2>&1
  note "mutant $m (default width) rc $? (must fail): $(res /tmp/l/mut_$m.log)"
done
finish
