#!/usr/bin/env bash
# optimized/cuda/bench/logs_session22/call2/run2.sh -- session 22 call 2: session 21's pending step 1 -- every
# test_cuda_backward and test_cuda_saved case with rung 22 as `best` -- then racecheck of rung 22's bit test at
# LINATTN_BWD3_BV=64 while time is left. Binaries of 9407d3f (.cudabin/bins.tar.xz, carried).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-560}
source optimized/cuda/bench/call_lib.sh
unpack
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 340) /tmp/b/test_cuda_backward --durations yes > /tmp/l/backward_all.log 2>&1
note "test_cuda_backward (all) rc $?: $(res /tmp/l/backward_all.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 150) /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v22 gradients equal v21 gradients bit for bit'
LINATTN_BWD3_BV=64 timeout $(left 200) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward \
  "$BIT" -w NoTests > /tmp/l/san22_racecheck.log 2>&1
note "racecheck rung 22 bit test (BV 64) rc $?: $(res /tmp/l/san22_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san22_racecheck.log | tail -1)"
finish
