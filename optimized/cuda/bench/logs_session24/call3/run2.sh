#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the next device call (session 24 call 3): rung 25 as `best` after the test
# file's fix (rung3_family, kRungs), and rung 26 (bwd_v26_wyasync.cu: DeltaNet's G2' by cp.async, dw_aux in bf16), never
# yet run on a GPU:
#   1. every rung 25 and rung 26 test ("CUDA v25*", "CUDA v26*");
#   2. forward + backward with saved states, rungs 25 and 26 side by side (twice each), DeltaNet at 8 x 4096 and 4 x 4096,
#      H = 16, K = V = 128;
#   3. mutants 298 (dE slabs swapped), 299 (key slab 1 read from slab 0's tile), 300 (dv_new's lo tile not written): each
#      must fail rung 26's bit test; the mutant build without one must pass;
#   4. memcheck and racecheck of rung 26's sanitizer test;
#   5. every test_cuda_saved case (rungs 25 and 26 in saved_bwd_versions; `best` = rung 25);
#   6. the shared fixed-case tests, which run every rung of kRungs (25 and 26 among them) against the float64 reference.
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at HEAD)
# and .cudabin/mut.tar.xz (the test_cuda_backward of `make_mutants.py`'s build at HEAD); carry `.cudabin`.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-420}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
timeout $(left 90) /tmp/b/test_cuda_backward "CUDA v25*,CUDA v26*" -w NoTests --durations yes > /tmp/l/v2526_tests.log 2>&1
note "test_cuda_backward 'CUDA v25*,CUDA v26*' rc $?: $(res /tmp/l/v2526_tests.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 80) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --shapes 8x4096x16x128x128,4x4096x16x128x128 --ops delta_rule --bwd-versions 25,26,25,26 --rep 100 \
  --json /tmp/l/bench_v26.json > /tmp/l/bench_v26.log 2>&1
note "bench rungs 25, 26 rc $?"
grep -E "saved states\) v2[56].* ms|kernels \(ms\)" /tmp/l/bench_v26.log | cut -c1-200 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v26 gradients equal v25 gradients bit for bit'
timeout $(left 40) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_none.log 2>&1
note "mutant build, no mutant rc $?: $(res /tmp/l/mut_none.log)"
for m in 298 299 300; do
  LINATTN_MUTANT=$m timeout $(left 40) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_$m.log 2>&1
  note "mutant $m rc $? (must fail): $(res /tmp/l/mut_$m.log)"
done
cp /tmp/l/summary.log "$OUT/"
SAN='CUDA v26 on small cases for the sanitizers'
timeout $(left 40) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SAN" -w NoTests \
  > /tmp/l/v26_memcheck.log 2>&1
note "memcheck rung 26 sanitizer test rc $?: $(res /tmp/l/v26_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/v26_memcheck.log | tail -1)"
timeout $(left 60) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SAN" -w NoTests \
  > /tmp/l/v26_racecheck.log 2>&1
note "racecheck rung 26 sanitizer test rc $?: $(res /tmp/l/v26_racecheck.log) | $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' /tmp/l/v26_racecheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 100) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
cp /tmp/l/summary.log "$OUT/"
FIXED='CUDA chunked backward is exact at the tuned*,CUDA chunked backward at T = 1*,CUDA chunked backward with ragged*,CUDA chunked backward stays finite*,CUDA chunked backward of a packed*,CUDA chunked backward of 66*,CUDA chunked backward at K = V = 128*,CUDA chunked backward is deterministic*'
timeout $(left 200) /tmp/b/test_cuda_backward "$FIXED" -w NoTests --durations yes > /tmp/l/fixed_tests.log 2>&1
note "test_cuda_backward shared fixed cases (every rung) rc $?: $(res /tmp/l/fixed_tests.log)"
finish
