#!/usr/bin/env bash
# Session 23 call 4: rung 24 with its width picked by the wave-count model (bwd_v3_async.cu's dstates_wide_pick;
# call 3 measured 64 columns fastest at N H = 64, where the first rule kept rung 22's 32). Binaries built here at the
# commit named in .cudabin/BUILT_AT, the mutant build of make_mutants.py at that commit (.cudabin/mut.tar.xz).
#   1. every rung 24 test (its properties, bit test, outside range, sanitizer case);
#   2. mutants 293 (the pick's SM count 4 too high) and 294 (rung 22's width everywhere) at the default width alone,
#      291 (the 128-column kernel's single stage) likewise: each must fail; the mutant build without one must pass;
#   3. memcheck of rung 24's sanitizer test;
#   4. forward + backward with saved states, rungs 22 and 24 side by side, at 4 x 4096 (N H = 64: 32 -> 64 columns),
#      H = 16, K = V = 128, DeltaNet and GDN (call 3 timed the other shapes; about 330 s of device time were left).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-170}
source optimized/cuda/bench/call_lib.sh
unpack
mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 90) /tmp/b/test_cuda_backward "CUDA v24*" -w NoTests --durations yes > /tmp/l/v24_tests.log 2>&1
note "test_cuda_backward 'CUDA v24*' rc $?: $(res /tmp/l/v24_tests.log)"
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v24 gradients equal v22 gradients bit for bit'
LINATTN_BWD3_BV= timeout $(left 40) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_none.log 2>&1
note "mutant build, no mutant, default width rc $?: $(res /tmp/l/mut_none.log)"
for m in 293 294 291; do
  LINATTN_MUTANT=$m LINATTN_BWD3_BV= timeout $(left 40) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_$m.log 2>&1
  note "mutant $m (default width) rc $? (must fail): $(res /tmp/l/mut_$m.log)"
done
cp /tmp/l/summary.log "$OUT/"
SAN='CUDA v24 on small cases per scalar operator for the sanitizers'
timeout $(left 60) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SAN" -w NoTests \
  > /tmp/l/v24_memcheck.log 2>&1
note "memcheck rung 24 sanitizer test rc $?: $(res /tmp/l/v24_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/v24_memcheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 120) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --shapes 4x4096x16x128x128 --ops delta_rule,gated_delta_rule --bwd-versions 22,24 --rep 100 \
  --json /tmp/l/bench_pick.json > /tmp/l/bench_pick.log 2>&1
note "bench rungs 22, 24 rc $?"
grep -E "saved states\) v2[24].* ms|kernels \(ms\)" /tmp/l/bench_pick.log | cut -c1-200 >> /tmp/l/summary.log
finish
