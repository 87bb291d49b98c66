#!/usr/bin/env bash
# logs_session27/call3/run1.sh -- session 27, device call 3: rung 32 (bwd_v32_g1stage.cu, never run before) -- every
# "CUDA v32*" test, its sanitizer case under memcheck and racecheck; DeltaNet forward + backward beside fla for rungs 29,
# 31 and 32, three times each; every test_cuda_saved case. Binaries: .cudabin/bins.tar.xz built at 4be739d + rung 32
# (uncommitted) on the CPU machine. Usage: OUT=$OUT bash .../run1.sh
set -u
OUT=${OUT:-/tmp/out}; END=${END:-585}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
B=/tmp/b/test_cuda_backward
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
timeout $(left 150) $B -w NoTests --durations yes "CUDA v32*" > /tmp/l/v32.log 2>&1
note "rung 32 tests rc $?: $(res /tmp/l/v32.log)"
grep -E "FAILED|with expansion|  [0-9.]+ s: " /tmp/l/v32.log | cut -c1-300 | head -20 >> /tmp/l/summary.log
timeout $(left 60) $CS --tool memcheck $B "CUDA v32 on small cases for the sanitizers" > /tmp/l/v32_memcheck.log 2>&1
note "memcheck rc $?: $(grep -E 'ERROR SUMMARY' /tmp/l/v32_memcheck.log | tail -1)"
timeout $(left 90) $CS --tool racecheck $B "CUDA v32 on small cases for the sanitizers" > /tmp/l/v32_racecheck.log 2>&1
note "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY' /tmp/l/v32_racecheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 200) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 29,31,32,29,31,32,29,31,32 --rep 50 --json /tmp/l/bench_dn.json \
  > /tmp/l/bench_dn.log 2>&1
note "bench_backward delta_rule 29,31,32 x3 with fla rc $?"
grep -E "fla forward|saved states bf16\) v|kernels|vs fla" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-220 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 120) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved.log 2>&1
note "test_cuda_saved rc $?: $(res /tmp/l/saved.log)"
grep -E "FAILED|with expansion" /tmp/l/saved.log | head -20 >> /tmp/l/summary.log
finish
