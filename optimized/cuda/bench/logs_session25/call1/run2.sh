#!/usr/bin/env bash
# logs_session25/call1/run2.sh -- session 25's first device call in its second form (run1.sh was refused four times
# before it could run; by then rung 28 was written and built): binaries of the working tree at .cudabin/BUILT_AT
# (`best` = rung 26; rungs 27 and 28 never yet run on a GPU), mutants from make_mutants.py's build of the same sources.
#  1. every rung 27 and rung 28 test ("CUDA v27*", "CUDA v28*": property, bit test against the previous rung, outside
#     range, sanitizer cases);
#  2. DeltaNet forward + backward with fla beside rungs 26, 27 and 28 (28's saving forward keeps bf16 states) in one
#     process at B=8 T=4096 H=16 K=V=128, twice each;
#  3. every test_cuda_saved case (rung 28's bf16 saved states among them);
#  4. mutants 301 (expected to fail: a race), 302 (rung 27), 303 and 304 (rung 28): each must fail its bit test;
#  5. compute-sanitizer memcheck and racecheck of rung 28's sanitizer test;
#  6. the fixed-case tests session 24's call 3 did not finish (K = V = 128 with both value tiles, determinism) and the
#     dstates 128-column bit test, with every rung of kRungs (27 and 28 among them).
# Usage on the device: OUT=$OUT bash optimized/cuda/bench/logs_session25/call1/run2.sh
set -u
OUT=${OUT:-/tmp/out}; END=${END:-585}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 200) /tmp/b/test_cuda_backward 'CUDA v27*,CUDA v28*' -w NoTests --durations yes > /tmp/l/v2728_tests.log 2>&1
note "rung 27 and 28 tests rc $?: $(res /tmp/l/v2728_tests.log)"
grep -E "FAILED|failed|with expansion" /tmp/l/v2728_tests.log | head -20 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 200) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 26,27,28,26,27,28 --rep 50 --json /tmp/l/bench_fla.json \
  > /tmp/l/bench_fla.log 2>&1
note "bench_backward delta_rule rungs 26, 27, 28 with fla rc $?"
grep -E "backward|saving|kernels|fla" /tmp/l/bench_fla.log | grep -v "^summary" | cut -c1-230 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 150) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
grep -E "FAILED|with expansion" /tmp/l/saved_all.log | head -10 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
if [ -f .cudabin/mut.tar.xz ]; then
  mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
  for m in 301:25:24 302:27:26 303:28:27 304:28:27; do
    IFS=: read -r n a b <<< "$m"
    LINATTN_MUTANT=$n timeout $(left 40) /tmp/m/test_cuda_backward "CUDA v$a gradients equal v$b gradients bit for bit" \
      -w NoTests > /tmp/l/mut_$n.log 2>&1
    note "mutant $n rc $? (must fail; 301 expected to: a race): $(res /tmp/l/mut_$n.log)"
  done
  LINATTN_MUTANT=0 timeout $(left 40) /tmp/m/test_cuda_backward "CUDA v28 gradients equal v27 gradients bit for bit" \
    -w NoTests > /tmp/l/mut_none.log 2>&1
  note "mutant build, no mutant rc $?: $(res /tmp/l/mut_none.log)"
fi
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
timeout $(left 60) $CS --tool memcheck /tmp/b/test_cuda_backward 'CUDA v28 on small cases for the sanitizers' -w NoTests \
  > /tmp/l/v28_memcheck.log 2>&1
note "memcheck rung 28 rc $?: $(grep -E 'ERROR SUMMARY' /tmp/l/v28_memcheck.log | tail -1)"
timeout $(left 60) $CS --tool racecheck /tmp/b/test_cuda_backward 'CUDA v28 on small cases for the sanitizers' -w NoTests \
  > /tmp/l/v28_racecheck.log 2>&1
note "racecheck rung 28 rc $?: $(grep -E 'RACECHECK SUMMARY' /tmp/l/v28_racecheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 200) /tmp/b/test_cuda_backward 'CUDA dstates kernel over 128 value columns per block gives the same gradients bit for bit,CUDA chunked backward is deterministic: two runs give bitwise equal gradients,CUDA chunked backward at K = V = 128 with 64 and 32 column value tiles and at V up to 256 equals the reference' \
  -w NoTests --durations yes > /tmp/l/fixed.log 2>&1
note "dstates-128, determinism, K = V = 128 fixed cases rc $?: $(res /tmp/l/fixed.log)"
finish
