#!/usr/bin/env bash
# logs_session25/call1/run1.sh -- session 25's first device call (binaries of 463faaa, .cudabin/BUILT_AT; `best` = rung 26,
# rung 27 written and never run). Targeted rather than the whole suite, to leave device time for a new rung:
#  1. every rung 27 test ("CUDA v27*": property, bit test against rung 26, outside range, sanitizer cases), the dstates
#     128-column bit test (rung 27 changed the dstates kernel's store), and the two shared fixed-case tests session 24's
#     call 3 did not finish (K = V = 128 with both value tiles; determinism), with `best` = rung 26;
#  2. DeltaNet forward + backward with fla beside rungs 26, 27 and 24 in one process at B=8 T=4096 H=16 K=V=128;
#  3. mutants 301 (expected to fail: a race) and 302 (must fail rung 27's bit test);
#  4. every test_cuda_saved case;
#  5. compute-sanitizer memcheck of rung 27's sanitizer test.
# Usage on the device: OUT=$OUT bash optimized/cuda/bench/logs_session25/call1/run1.sh
set -u
OUT=${OUT:-/tmp/out}; END=${END:-585}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 200) /tmp/b/test_cuda_backward 'CUDA v27*' -w NoTests --durations yes > /tmp/l/v27_tests.log 2>&1
note "rung 27 tests rc $?: $(res /tmp/l/v27_tests.log)"
timeout $(left 150) /tmp/b/test_cuda_backward 'CUDA dstates kernel over 128 value columns per block gives the same gradients bit for bit,CUDA chunked backward is deterministic: two runs give bitwise equal gradients,CUDA chunked backward at K = V = 128 with 64 and 32 column value tiles and at V up to 256 equals the reference' \
  -w NoTests --durations yes > /tmp/l/fixed.log 2>&1
note "dstates-128, determinism, K = V = 128 fixed cases rc $?: $(res /tmp/l/fixed.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 200) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 26,27,24,26,27 --rep 50 --json /tmp/l/bench_fla.json \
  > /tmp/l/bench_fla.log 2>&1
note "bench_backward delta_rule rungs 26, 27, 24 with fla rc $?"
grep -E "backward|saving|kernels|fla" /tmp/l/bench_fla.log | grep -v "^summary" | cut -c1-220 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
LINATTN_MUTANT=301 timeout $(left 60) /tmp/m/test_cuda_backward 'CUDA v25 gradients equal v24 gradients bit for bit' \
  -w NoTests > /tmp/l/mut_301.log 2>&1
note "mutant 301 rc $? (expected to fail: a race): $(res /tmp/l/mut_301.log)"
LINATTN_MUTANT=302 timeout $(left 60) /tmp/m/test_cuda_backward 'CUDA v27 gradients equal v26 gradients bit for bit' \
  -w NoTests > /tmp/l/mut_302.log 2>&1
note "mutant 302 rc $? (must fail): $(res /tmp/l/mut_302.log)"
timeout $(left 120) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
timeout $(left 90) $CS --tool memcheck /tmp/b/test_cuda_backward 'CUDA v27 on small cases for the sanitizers' -w NoTests \
  > /tmp/l/v27_memcheck.log 2>&1
note "memcheck rung 27 rc $?: $(grep -E 'ERROR SUMMARY' /tmp/l/v27_memcheck.log | tail -1)"
finish
