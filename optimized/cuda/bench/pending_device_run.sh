#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 17.
# Session 17 (bench/logs_session17/) ran every test case of test_cuda_forward, test_cuda_saved and
# test_cuda_backward on c8b8ec7 (call 3), then added rung 10's cluster state kernel (v2_state_mc), whose own tests
# (rung 10's 6 test cases), memcheck and synccheck passed on the final tree (call 5). Its commit leaves the PTX of
# every other kernel unchanged (RESULTS.md, "Session 17"), so the other tests were not rerun. Unrun, in order here:
#   1. every test case of the three programs on HEAD (about 360 s in session 17 call 3);
#   2. memcheck / synccheck (5 cases) and racecheck (3 cases) of rung 10's bit test, past the cluster kernel's empty
#      barriers (session 17's 2-case runs did not reach them; its racecheck passed 40 s unfinished); review18's
#      fixes (clusters opt-in at KP = 64, the alignment trap, the forced size 8 in the test) are unrun;
#   3. bench_forward, every operator at both shapes, `best` and fla, 3 rounds (session 17's figures for DeltaNet and
#      GDN at B=1 come from call 6, for the rest from call 4, on the same kernels); its B=1 rows for DeltaNet and GDN
#      now end with "rung 10: 8 segments, state clusters of N" (the cluster size session 17 did not log).
# Needs .cudabin/bins.tar.xz (test_cuda_forward, test_cuda_saved, test_cuda_backward, liblinattn_cuda_capi.so,
# stripped, built at HEAD; `xz -6` keeps the four under 64 MiB with .fla) and .fla; carry `.cudabin .fla`.
# Usage on the device: bash optimized/cuda/bench/pending_device_run.sh (about 600-700 s: split it over two calls,
# e.g. END=590 for steps 1-2 and then step 3 alone).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-590}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 120) /tmp/b/test_cuda_forward --durations yes > /tmp/l/forward.log 2>&1
note "test_cuda_forward (every test case) rc $?: $(res /tmp/l/forward.log)"
timeout $(left 80) /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved.log 2>&1
note "test_cuda_saved (every test case) rc $?: $(res /tmp/l/saved.log)"
timeout $(left 260) /tmp/b/test_cuda_backward --durations yes > /tmp/l/backward.log 2>&1
note "test_cuda_backward (every test case) rc $?: $(res /tmp/l/backward.log)"
# Cases 2 (3 chunks a segment, K = V = 64: clusters forced to 2 and 4) and 4 (8 chunks, clusters of 8) reach the
# empty barriers (remote arrivals, rank 0's wait); session 17's 2-case runs did not (review18).
T='CUDA v10 pipeline forward equals v7 bit for bit where it pipelines and in the segments it should'
for tool in memcheck synccheck; do
  LINATTN_V10_BIT_CASES=5 timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 \
    /tmp/b/test_cuda_forward "$T" > /tmp/l/san_$tool.log 2>&1
  note "$tool rung 10 bit test (5 cases) rc $?: $(res /tmp/l/san_$tool.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san_$tool.log | tail -1)"
done
LINATTN_V10_BIT_CASES=3 timeout $(left 150) compute-sanitizer --tool racecheck --error-exitcode 9 \
  /tmp/b/test_cuda_forward "$T" > /tmp/l/san_racecheck.log 2>&1
note "racecheck rung 10 bit test (3 cases) rc $?: $(res /tmp/l/san_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san_racecheck.log | tail -1)"
timeout $(left 400) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 0 --rep 40 --rounds 3 > /tmp/l/fbench.log 2>&1
note "bench_forward every operator, both shapes, best and fla, 3 rounds rc $?"
grep -E '^ceilings|^  rounds' /tmp/l/fbench.log >> /tmp/l/summary.log
finish
