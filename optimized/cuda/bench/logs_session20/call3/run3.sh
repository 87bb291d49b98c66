#!/usr/bin/env bash
# Session 20 call 3: rung 21 as `best` (bwd_v21_duvsmem.cu). Call 2's planted bugs and sanitizer runs ran no test (its
# filter held a comma, which Catch2 reads as two names): here planted bugs 285-288 and the unmutated tree (0) through a
# filter without one (the wildcard matches the mutant tree's older name of the test, "... but dbeta, within ..."),
# memcheck of rung 21's bit test, every test_cuda_backward case and every test_cuda_saved case on the new default, then
# racecheck of the bit test while time is left.
# Carry .cudabin (bins.tar.xz of this tree; mutants.tar.xz: call 2's, test_cuda_backward of bench/make_mutants.py's tree).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-540}
source optimized/cuda/bench/call_lib.sh
unpack
mkdir -p /tmp/m && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
BIT='CUDA v21 gradients equal v20 gradients bit for bit but dbeta*'
for n in 285 286 287 288 0; do
  LINATTN_BWD3_BV=64 LINATTN_MUTANT=$n timeout $(left 40) /tmp/m/test_cuda_backward "$BIT" > /tmp/l/mut_$n.log 2>&1
  note "mutant $n (v21 bit test, BV 64): rc $? $(res /tmp/l/mut_$n.log)"
done
cp /tmp/l/summary.log "$OUT/"
LINATTN_BWD3_BV=64 timeout $(left 120) compute-sanitizer --tool memcheck --error-exitcode 9 \
  /tmp/b/test_cuda_backward "$BIT" > /tmp/l/san21_memcheck.log 2>&1
note "memcheck rung 21 bit test (BV 64) rc $?: $(res /tmp/l/san21_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san21_memcheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 320) /tmp/b/test_cuda_backward --durations yes > /tmp/l/backward.log 2>&1
note "test_cuda_backward (every test case) rc $?: $(res /tmp/l/backward.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 90) /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved.log 2>&1
note "test_cuda_saved (every test case) rc $?: $(res /tmp/l/saved.log)"
cp /tmp/l/summary.log "$OUT/"
LINATTN_BWD3_BV=64 timeout $(left 200) compute-sanitizer --tool racecheck --error-exitcode 9 \
  /tmp/b/test_cuda_backward "$BIT" > /tmp/l/san21_racecheck.log 2>&1
note "racecheck rung 21 bit test (BV 64) rc $?: $(res /tmp/l/san21_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san21_racecheck.log | tail -1)"
finish
