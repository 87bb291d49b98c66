#!/usr/bin/env bash
# (session 24 call 1, second run: STEP=2 of the same script, on the warm machine)
# optimized/cuda/bench/pending_device_run.sh -- the first device calls of the session after session 23.
# (Session 22's pending script ran as session 23's call 1: bench/logs_session23/.)
# Rung 24 (bwd_v24_dswide.cu, `best`) picks the dstates kernel's value columns per block by a wave-count model
# (cuda::dstates_wide_pick, since e9e4ae8). Session 23 tested rung 24 with its first rule on the GPU (calls 2-3) and
# timed every width at five shapes, but the model's pick itself never ran there: three calls were refused.
# STEP=1 (one call, ~330 s on a machine as slow as session 23's):
#   1. every rung 24 test (properties, the bit test with each call's width checked, its 128- and 64-column picks
#      against the float64 reference, outside range, sanitizer case; the bit and reference tests' cases changed after
#      calls 2-3: e1613a7);
#   2. mutants 293 (the pick's SM count 4 too high) and 294 (rung 22's width everywhere), 291 (the single-stage
#      kernel's w_aux, Qg from the wrong chunk) at the default width alone (LINATTN_BWD3_BV set to ""; a forced width
#      sets both rungs' kernel): each must fail; the mutant build without one must pass;
#   3. memcheck of rung 24's sanitizer test;
#   4. forward + backward with saved states, rungs 22 and 24 side by side, at 4 x 4096 (N H = 64: 32 -> 64 columns) and
#      8 x 4096, H = 16, K = V = 128, DeltaNet and GDN.
# STEP=2 (a second call): every test_cuda_backward case with the model's pick as `best` (bound 560 s: session 23's
#   machine needed about 430 s for all of them) and every test_cuda_saved case.
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at HEAD)
# and .cudabin/mut.tar.xz (the test_cuda_backward of `make_mutants.py`'s build at HEAD); carry `.cudabin`.
# Usage on the device: bash optimized/cuda/bench/pending_device_run.sh (STEP=2 bash ... for step 2).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-575}; STEP=${STEP:-1}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
if [ "$STEP" = 1 ]; then
  mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
  timeout $(left 220) /tmp/b/test_cuda_backward "CUDA v24*" -w NoTests --durations yes > /tmp/l/v24_tests.log 2>&1
  note "test_cuda_backward 'CUDA v24*' rc $?: $(res /tmp/l/v24_tests.log)"
  cp /tmp/l/summary.log "$OUT/"
  BIT='CUDA v24 gradients equal v22 gradients bit for bit'
  LINATTN_BWD3_BV= timeout $(left 60) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_none.log 2>&1
  note "mutant build, no mutant, default width rc $?: $(res /tmp/l/mut_none.log)"
  for m in 293 294 291; do
    LINATTN_MUTANT=$m LINATTN_BWD3_BV= timeout $(left 60) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_$m.log 2>&1
    note "mutant $m (default width) rc $? (must fail): $(res /tmp/l/mut_$m.log)"
  done
  cp /tmp/l/summary.log "$OUT/"
  SAN='CUDA v24 on small cases per scalar operator for the sanitizers'
  timeout $(left 60) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SAN" -w NoTests \
    > /tmp/l/v24_memcheck.log 2>&1
  note "memcheck rung 24 sanitizer test rc $?: $(res /tmp/l/v24_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/v24_memcheck.log | tail -1)"
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 150) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
    --shapes 4x4096x16x128x128,8x4096x16x128x128 --ops delta_rule,gated_delta_rule --bwd-versions 22,24 --rep 100 \
    --json /tmp/l/bench_pick.json > /tmp/l/bench_pick.log 2>&1
  note "bench rungs 22, 24 rc $?"
  grep -E "saved states\) v2[24].* ms|kernels \(ms\)" /tmp/l/bench_pick.log | cut -c1-200 >> /tmp/l/summary.log
else
  timeout $(left 560) /tmp/b/test_cuda_backward -w NoTests --durations yes > /tmp/l/backward_all.log 2>&1
  note "test_cuda_backward (all) rc $?: $(res /tmp/l/backward_all.log)"
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 90) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
  note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
fi
finish
