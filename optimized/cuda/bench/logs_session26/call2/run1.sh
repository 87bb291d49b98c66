#!/usr/bin/env bash
# logs_session26/call2/run1.sh -- session 26 call 2: binaries with rung 29 (bwd_v29_b1hi.cu; `best` still rung 28).
#  1. every rung 29 test, with LINATTN_CUDA_BACKWARD_REPORT=1 (worst ratios of rungs 29 and 28);
#  2. DeltaNet forward + backward with fla in the same process beside rungs 28 and 29 (twice each);
#  3. every "CUDA chunked backward*" case: the shared fixed cases (every rung of kRungs, rung 29 now among them) and the
#     five that call 1's 575 s bound cut (from the packed batch on);
#  4. every test_cuda_saved case (rung 29 now in saved_bwd_versions);
#  5. memcheck and racecheck of rung 29's sanitizer case.
# Usage on the device: OUT=$OUT bash optimized/cuda/bench/logs_session26/call2/run1.sh
set -u
OUT=${OUT:-/tmp/out}; END=${END:-585}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
B=/tmp/b/test_cuda_backward
LINATTN_CUDA_BACKWARD_REPORT=1 timeout $(left 150) $B -w NoTests --durations yes "CUDA v29*" > /tmp/l/v29.log 2>&1
note "rung 29 tests rc $?: $(res /tmp/l/v29.log)"
grep -E "FAILED|with expansion|worst" /tmp/l/v29.log | cut -c1-600 | head -30 >> /tmp/l/summary.log
timeout $(left 120) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 28,29,28,29 --rep 50 --json /tmp/l/bench_dn.json \
  > /tmp/l/bench_dn.log 2>&1
note "bench_backward delta_rule 28,29 with fla rc $?"
grep -E "backward|saving|kernels|fla" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-230 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 250) $B -w NoTests --durations yes "CUDA chunked backward*" > /tmp/l/backward_rest.log 2>&1
note "test_cuda_backward 'CUDA chunked backward*' (the shared cases, rung 29 among kRungs) rc $?: $(res /tmp/l/backward_rest.log)"
grep -E "FAILED|with expansion" /tmp/l/backward_rest.log | head -10 >> /tmp/l/summary.log
timeout $(left 110) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
grep -E "FAILED|with expansion" /tmp/l/saved_all.log | head -10 >> /tmp/l/summary.log
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
timeout $(left 60) $CS --tool memcheck $B "CUDA v29 on small cases for the sanitizers" > /tmp/l/v29_memcheck.log 2>&1
note "memcheck rc $?: $(grep -E 'ERROR SUMMARY' /tmp/l/v29_memcheck.log | tail -1)"
timeout $(left 60) $CS --tool racecheck $B "CUDA v29 on small cases for the sanitizers" > /tmp/l/v29_racecheck.log 2>&1
note "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' /tmp/l/v29_racecheck.log | tail -1)"
finish
