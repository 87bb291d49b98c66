#!/usr/bin/env bash
# Session 15 call 2: every GPU test case after "rung 9 in best" (626404d: forward best runs rung 9 where
# v9_in_best; the saving forward and the levels backward rungs' recompute follow it), then compute-sanitizer
# memcheck and racecheck on the new saved test (LINATTN_LEAN_SAVED_QUICK=1: GDN, float32 gates, best) and
# memcheck on the new forward best test. Carry .cudabin (test_cuda_forward, test_cuda_backward,
# test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at 626404d). Bounded to about 560 s.
set -u
OUT=${OUT:-/tmp/out}; END=560
source optimized/cuda/bench/call_lib.sh
unpack
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
for t in saved:60 forward:150 backward:290; do
  n=${t%%:*}; lim=${t##*:}
  timeout $(left $lim) /tmp/b/test_cuda_$n --durations yes > /tmp/l/$n.log 2>&1; rc=$?
  note "test_cuda_$n (every test case) rc $rc: $(res /tmp/l/$n.log)"
done
L='CUDA saving forward and every saved backward rung follow forward rung 9 where best runs it bit for bit'
F='CUDA best version runs rung 9 where its state kernel takes 64 column tiles and rung 10 elsewhere bit for bit'
for tool in memcheck racecheck; do
  LINATTN_LEAN_SAVED_QUICK=1 timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 /tmp/b/test_cuda_saved "$L" \
    > /tmp/l/san_lean_$tool.log 2>&1; rc=$?
  note "$tool lean saved test (quick) rc $rc: $(res /tmp/l/san_lean_$tool.log) | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/l/san_lean_$tool.log | tail -1)"
done
timeout $(left 60) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_forward "$F" > /tmp/l/san_best_memcheck.log 2>&1; rc=$?
note "memcheck forward best test rc $rc: $(res /tmp/l/san_best_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san_best_memcheck.log | tail -1)"
finish
