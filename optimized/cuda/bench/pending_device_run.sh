#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 21.
# (Session 20's pending script ran as session 21's call 1, without its planted bugs: bench/logs_session21/call1/run1.sh.)
# Session 21 (bench/logs_session21/) made rung 22 (bwd_v22_kq8.cu) `best`. Its own tests, planted bugs and the small
# sanitizer test ran there, but not yet on it as the default:
#   1. every test_cuda_backward and test_cuda_saved case (`best` now routes through rung 22's kernels);
#   2. memcheck of rung 22's bit test at LINATTN_BWD3_BV=64, then racecheck of it while time is left (rung 21's bit
#      test never finished under racecheck; the small test did, for rungs 21-23).
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at HEAD);
# carry `.cudabin`. Usage on the device: bash optimized/cuda/bench/pending_device_run.sh.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-560}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 330) /tmp/b/test_cuda_backward --durations yes > /tmp/l/backward_all.log 2>&1
note "test_cuda_backward (all) rc $?: $(res /tmp/l/backward_all.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 120) /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v22 gradients equal v21 gradients bit for bit'
LINATTN_BWD3_BV=64 timeout $(left 60) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward \
  "$BIT" -w NoTests > /tmp/l/san22_memcheck.log 2>&1
note "memcheck rung 22 bit test (BV 64) rc $?: $(res /tmp/l/san22_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san22_memcheck.log | tail -1)"
LINATTN_BWD3_BV=64 timeout $(left 200) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward \
  "$BIT" -w NoTests > /tmp/l/san22_racecheck.log 2>&1
note "racecheck rung 22 bit test (BV 64) rc $?: $(res /tmp/l/san22_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san22_racecheck.log | tail -1)"
finish
