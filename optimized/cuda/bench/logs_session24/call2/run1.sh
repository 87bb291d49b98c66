#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the next device call (session 24 call 2): rung 25 (bwd_v25_g1async.cu,
# DeltaNet's G1' by cp.async a value slab ahead of its products), written in session 24 and never yet run on a GPU.
#   1. every rung 25 test ("CUDA v25*": the two property tests, the bit test against rung 24 with each call's route and
#      dstates width checked, outside range, the sanitizer case);
#   2. mutants 295 (dP without v_new's lo), 296 (B9 reads k, q from the wrong tile set), 297 (every slab after the
#      first reloads the previous slab's columns): each must fail the bit test; the mutant build without one must pass;
#   3. memcheck, then racecheck, of rung 25's sanitizer test (the cp.async pipeline's barriers);
#   4. forward + backward with saved states, rungs 24 and 25 side by side, DeltaNet at 4 x 4096 and 8 x 4096, H = 16,
#      K = V = 128 (the profile lines give G1' alone: "grads");
#   5. every test_cuda_saved case (saved_bwd_versions now lists rung 25).
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at HEAD)
# and .cudabin/mut.tar.xz (the test_cuda_backward of `make_mutants.py`'s build at HEAD); carry `.cudabin`.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-440}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
timeout $(left 200) /tmp/b/test_cuda_backward "CUDA v25*" -w NoTests --durations yes > /tmp/l/v25_tests.log 2>&1
note "test_cuda_backward 'CUDA v25*' rc $?: $(res /tmp/l/v25_tests.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 150) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --shapes 8x4096x16x128x128,4x4096x16x128x128 --ops delta_rule --bwd-versions 24,25,24,25 --rep 100 \
  --json /tmp/l/bench_v25.json > /tmp/l/bench_v25.log 2>&1
note "bench rungs 24, 25 rc $?"
grep -E "saved states\) v2[45].* ms|kernels \(ms\)" /tmp/l/bench_v25.log | cut -c1-200 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v25 gradients equal v24 gradients bit for bit'
timeout $(left 60) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_none.log 2>&1
note "mutant build, no mutant rc $?: $(res /tmp/l/mut_none.log)"
for m in 295 296 297; do
  LINATTN_MUTANT=$m timeout $(left 60) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_$m.log 2>&1
  note "mutant $m rc $? (must fail): $(res /tmp/l/mut_$m.log)"
done
cp /tmp/l/summary.log "$OUT/"
SAN='CUDA v25 on small cases for the sanitizers'
timeout $(left 60) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SAN" -w NoTests \
  > /tmp/l/v25_memcheck.log 2>&1
note "memcheck rung 25 sanitizer test rc $?: $(res /tmp/l/v25_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/v25_memcheck.log | tail -1)"
timeout $(left 120) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SAN" -w NoTests \
  > /tmp/l/v25_racecheck.log 2>&1
note "racecheck rung 25 sanitizer test rc $?: $(res /tmp/l/v25_racecheck.log) | $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' /tmp/l/v25_racecheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 120) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
finish
