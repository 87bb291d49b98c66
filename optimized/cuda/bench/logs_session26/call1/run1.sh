#!/usr/bin/env bash
# logs_session26/call1/run1.sh -- session 26 call 1 (a copy of pending_device_run.sh at 0620804; binaries of 0620804, best = rung 28).
# Session 25 made rung 28 (bwd_v28_sbf16.cu: DeltaNet's chunk states kept as bf16) `best` after calls 1-2 ran every rung
# 27 and 28 test, mutants 301-304, memcheck, racecheck, every test_cuda_saved case and the eight shared fixed-case tests
# (bench/logs_session25/README.md). Call 3 found the value-first dstates knob test failing with `best` = rung 28 (the
# knob does not apply to rungs 27-28); the test now names rung 26 and has not been rerun. What waits:
# STEP=1 (one call, bound 575 s; session 24's whole suite took 449 s for 109 cases, it has grown by about 15): every
#   test_cuda_backward case with `best` = rung 28 (the value-first knob test on rung 26 among them).
#   Session 25's review added, not yet run: an in-range case without an initial state to rung 28's bit test, rung 28 in
#   the saving-forward tile-width test (its bf16 saving kernels at 16, 32, 64 columns) and a refill of one object with
#   states_bf16 off, on, off (test_cuda_saved, step 2).
# STEP=2 (a second call; carry `.fla` too): every test_cuda_saved case, then every operator's forward + backward with fla in the same process at B=8 T=4096
#   H=16 K=V=128, backward `best` (DeltaNet's saving forward keeping bf16 states): issue 6's goal table, which session
#   25's call 3 could not finish.
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at HEAD:
# .cudabin/BUILT_AT says which commit); carry `.cudabin` (and `.fla` for STEP=2; the carry limit is 64 MiB in all).
# Usage on the device: OUT=$OUT bash optimized/cuda/bench/pending_device_run.sh (STEP=2 bash ... for step 2).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-585}; STEP=${STEP:-1}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
if [ "$STEP" = 1 ]; then
  timeout $(left 575) /tmp/b/test_cuda_backward -w NoTests --durations yes > /tmp/l/backward_all.log 2>&1
  note "test_cuda_backward (all) rc $?: $(res /tmp/l/backward_all.log)"
  grep -E "FAILED|with expansion" /tmp/l/backward_all.log | head -20 >> /tmp/l/summary.log
else
  timeout $(left 120) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
  note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
  grep -E "FAILED|with expansion" /tmp/l/saved_all.log | head -10 >> /tmp/l/summary.log
  timeout $(left 150) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 0,0 --rep 50 --json /tmp/l/bench_dn.json \
    > /tmp/l/bench_dn.log 2>&1
  note "bench_backward delta_rule best with fla rc $?"
  grep -E "backward|saving|kernels|fla" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-230 >> /tmp/l/summary.log
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 400) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops gated_delta_rule,kda,gdn2 --bwd-versions 0 --rep 20 --json /tmp/l/bench_ops.json \
    > /tmp/l/bench_ops.log 2>&1
  note "bench_backward gdn, kda, gdn2 best with fla rc $?"
  grep -E "backward|saving|fla" /tmp/l/bench_ops.log | grep -v "^summary\|kernels" | cut -c1-230 >> /tmp/l/summary.log
fi
finish
