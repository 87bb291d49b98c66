#!/usr/bin/env bash
# Session 23 call 2: rung 24 (bwd_v24_dswide.cu, `best` since 6d19e90) verified. Binaries built here at 6d19e90
# (.cudabin/bins.tar.xz) and the mutant build of make_mutants.py at that commit (.cudabin/mut.tar.xz: its
# test_cuda_backward). Carry `.cudabin`.
#   1. every test_cuda_backward case (`best` is now rung 24; rung 24's own tests included);
#   2. every test_cuda_saved case (the saving forward feeds `best`);
#   3. mutants 293 and 294 (rung 24's width rule) against rung 24's bit test at its default width alone
#      (LINATTN_BWD3_BV set to ""), mutant 291 (kOne, the 128-column kernel's single stage) at LINATTN_BWD3_BV=128:
#      each must fail; the mutant build without LINATTN_MUTANT must pass;
#   4. memcheck of rung 24's sanitizer test.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-575}
source optimized/cuda/bench/call_lib.sh
unpack
mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 330) /tmp/b/test_cuda_backward -w NoTests --durations yes > /tmp/l/backward_all.log 2>&1
note "test_cuda_backward (all) rc $?: $(res /tmp/l/backward_all.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 90) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v24 gradients equal v22 gradients bit for bit'
LINATTN_BWD3_BV= timeout $(left 60) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_none.log 2>&1
note "mutant build, no mutant, default width rc $?: $(res /tmp/l/mut_none.log)"
for m in 293 294; do
  LINATTN_MUTANT=$m LINATTN_BWD3_BV= timeout $(left 60) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_$m.log 2>&1
  note "mutant $m (default width) rc $? (must fail): $(res /tmp/l/mut_$m.log)"
done
LINATTN_MUTANT=291 LINATTN_BWD3_BV=128 timeout $(left 60) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_291.log 2>&1
note "mutant 291 (LINATTN_BWD3_BV=128) rc $? (must fail): $(res /tmp/l/mut_291.log)"
cp /tmp/l/summary.log "$OUT/"
SAN='CUDA v24 on small cases per scalar operator for the sanitizers'
timeout $(left 200) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SAN" -w NoTests \
  > /tmp/l/v24_memcheck.log 2>&1
note "memcheck rung 24 sanitizer test rc $?: $(res /tmp/l/v24_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/v24_memcheck.log | tail -1)"
finish
