#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 16.
# Session 16 (bench/logs_session16/) changed rung 7's intra kernel and the state kernels' load loops (same values)
# and ran, on that tree (1507cda), every test case of test_cuda_saved and test_cuda_forward and the first 79 of
# test_cuda_backward's 82 before its call's bound. Unrun there, in order here:
#   1. the last three backward test cases (the 64- and 32-column value tiles at K = V = 128 and V up to 256,
#      determinism, bad arguments; about 105 s);
#   2. memcheck and racecheck of the rung 7 and rung 9 bit tests, 3 cases each (the changed intra kernel's
#      shared-memory stores; the test names joined by a comma, as Catch2 v2 wants them);
#   3. every operator's forward at B=1 T=32768 and GDN2's at B=8, `best` and fla, 3 rounds (the figures the
#      issue's goal needs on this tree);
#   4. if old/liblinattn_cuda_capi.so is in the carried archive (built at c94be6d, before session 16), a two-build
#      bit check: `best`'s o and final state from this tree against c94be6d's, every operator, at K = 64 and 100,
#      odd V, ragged lengths, 16- / 32- / 64-column state tiles (knob_rounds.py prints "against new: o 0.000e+00
#      state 0.000e+00" when the bits agree). The bit tests between rungs cannot show this for the state kernels'
#      load loops, which both sides of those tests run (review17).
# If kernel code has changed since 1507cda (its successors up to session 16's end changed only comments, docs and
# bench scripts), run every test case of the three programs instead of step 1 (about 460 s
# on the H200; the backward alone took 308 s in session 15). Needs .cudabin/bins.tar.xz (test_cuda_backward,
# test_cuda_forward, liblinattn_cuda_capi.so, stripped, built at HEAD, and for step 4 old/liblinattn_cuda_capi.so
# built at c94be6d, e.g. in `git worktree add /tmp/old c94be6d`; pack with `xz -9e`, or the carry exceeds
# 64 MiB) and .fla; carry `.cudabin .fla`. Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; END=560
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
R='CUDA chunked backward at K = V = 128 with 64 and 32 column value tiles and at V up to 256 equals the reference'
R="$R,CUDA chunked backward is deterministic: two runs give bitwise equal gradients"
R="$R,CUDA chunked backward rejects bad arguments with a linattn Error naming the argument"
timeout $(left 160) /tmp/b/test_cuda_backward --durations yes "$R" > /tmp/l/backward_rest.log 2>&1
note "test_cuda_backward, its last 3 test cases, rc $?: $(res /tmp/l/backward_rest.log)"
B='CUDA v7 overlap forward equals v4 bit for bit for DeltaNet and GDN,CUDA v9 lean overlap forward equals v6 bit for bit for DeltaNet and GDN'
for tool in memcheck racecheck; do
  LINATTN_V7_BIT_CASES=3 LINATTN_V9_BIT_CASES=3 timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 \
    /tmp/b/test_cuda_forward "$B" > /tmp/l/san_$tool.log 2>&1; rc=$?
  note "$tool rung 7 and 9 bit tests (3 cases each) rc $rc: $(res /tmp/l/san_$tool.log) | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/l/san_$tool.log | tail -1)"
done
timeout $(left 200) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 0 --shapes 1x32768x16x128x128 --rep 40 --rounds 3 > /tmp/l/fbench_b1.log 2>&1
note "bench_forward every operator at B=1 T=32768, best and fla, 3 rounds rc $?"
grep -E '^ceilings|^  rounds' /tmp/l/fbench_b1.log >> /tmp/l/summary.log
timeout $(left 100) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 0 --ops gdn2 --shapes 8x4096x16x128x128 --rep 40 --rounds 3 > /tmp/l/fbench_gdn2.log 2>&1
note "bench_forward GDN2 at B=8, 3 rounds rc $?"
grep -E '^  rounds' /tmp/l/fbench_gdn2.log >> /tmp/l/summary.log
if [ -f /tmp/b/old/liblinattn_cuda_capi.so ]; then
  timeout $(left 120) python3 optimized/cuda/bench/knob_rounds.py --lib /tmp/b/liblinattn_cuda_capi.so \
    --lib2 /tmp/b/old/liblinattn_cuda_capi.so --ops delta_rule,gated_delta_rule,kda,gdn2 --rounds 1 --rep 10 \
    --shapes 2x200x3x64x72,1x130x2x100x200,3x4100x8x128x128,9x1000x16x128x128,17x300x8x64x64 \
    --runs "new:;old@2:" > /tmp/l/bits_two_builds.log 2>&1
  note "two-build bit check (this tree against c94be6d) rc $?: $(grep -c 'against new: o 0.000e+00 state 0.000e+00' /tmp/l/bits_two_builds.log) of 20 equal"
  grep 'against new' /tmp/l/bits_two_builds.log >> /tmp/l/summary.log
fi
finish
