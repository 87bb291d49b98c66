#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 19.
# (Session 18's pending script, run as session 19's call 1, is kept as bench/logs_session19/call1/run1.sh.)
# Session 19 (bench/logs_session19/) left unrun:
#   1. the committed default of backward rung 20 (`best`): DeltaNet on rung 19 unless LINATTN_BWD20_DN=1, GDN on rung
#      20's kernels. Call 3 ran binaries whose default put DeltaNet on rung 20's kernels; the flip is host code and the
#      test's route expectation only. Here every test_cuda_backward case (about 330 s) and test_cuda_saved case (45 s)
#      on the committed tree;
#   2. a completed sanitizer run of the committed dstates kernel (the copy of bf16 dv_new after B3's products):
#      memcheck of rung 20's bit test at 64 value columns (call 2's memcheck was of the copy before B3), and racecheck
#      while time is left (killed at its bound in calls 1 and 3);
#   3. bench_forward's GDN row at B=1 T=32768 (call 1 ran out of time after DeltaNet's).
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at HEAD;
# `xz -9e`) and .fla; carry `.cudabin .fla`. Usage on the device: bash optimized/cuda/bench/pending_device_run.sh.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-580}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 340) /tmp/b/test_cuda_backward --durations yes > /tmp/l/backward.log 2>&1
note "test_cuda_backward (every test case) rc $?: $(res /tmp/l/backward.log)"
timeout $(left 60) /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved.log 2>&1
note "test_cuda_saved (every test case) rc $?: $(res /tmp/l/saved.log)"
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v20 gradients equal v19 gradients bit for bit'
LINATTN_BWD3_BV=64 LINATTN_BWD20_DN=0 timeout $(left 90) compute-sanitizer --tool memcheck --error-exitcode 9 \
  /tmp/b/test_cuda_backward "$BIT" > /tmp/l/san20_memcheck.log 2>&1
note "memcheck rung 20 bit test rc $?: $(res /tmp/l/san20_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san20_memcheck.log | tail -1)"
timeout $(left 60) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 1x32768x16x128x128 --ops gated_delta_rule --versions 0 --rep 40 --rounds 1 > /tmp/l/fbench.log 2>&1
note "bench_forward GDN at B=1, best and fla rc $?"
grep -E "rung 10|fla" /tmp/l/fbench.log | head -4 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
LINATTN_BWD3_BV=64 LINATTN_BWD20_DN=0 timeout $(left 200) compute-sanitizer --tool racecheck --error-exitcode 9 \
  /tmp/b/test_cuda_backward "$BIT" > /tmp/l/san20_racecheck.log 2>&1
note "racecheck rung 20 bit test rc $?: $(res /tmp/l/san20_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san20_racecheck.log | tail -1)"
finish
