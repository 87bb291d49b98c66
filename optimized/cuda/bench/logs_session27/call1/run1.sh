#!/usr/bin/env bash
# logs_session27/call1/run1.sh -- session 27, device call 1: pending_device_run.sh STEP=1 (rung 30's tests under the
# sanitizers, DeltaNet forward + backward beside fla for rungs 29 and 30, three times each) without the mutant (its
# binary was still building), then STEP=3's benchmark of the other operators (GDN, KDA, GDN2; `best`) with fla.
# Binaries: .cudabin/bins.tar.xz built at 66e4c11 on the CPU machine. Usage: OUT=$OUT bash .../run1.sh
set -u
OUT=${OUT:-/tmp/out}; END=${END:-585}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
B=/tmp/b/test_cuda_backward
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
timeout $(left 200) $B -w NoTests --durations yes "CUDA v30*" > /tmp/l/v30.log 2>&1
note "rung 30 tests rc $?: $(res /tmp/l/v30.log)"
grep -E "FAILED|with expansion" /tmp/l/v30.log | head -20 >> /tmp/l/summary.log
timeout $(left 60) $CS --tool memcheck $B "CUDA v30 on small cases for the sanitizers" > /tmp/l/v30_memcheck.log 2>&1
note "memcheck rc $?: $(grep -E 'ERROR SUMMARY' /tmp/l/v30_memcheck.log | tail -1)"
timeout $(left 90) $CS --tool racecheck $B "CUDA v30 on small cases for the sanitizers" > /tmp/l/v30_racecheck.log 2>&1
note "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY' /tmp/l/v30_racecheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 170) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 29,30,29,30,29,30 --rep 50 --json /tmp/l/bench_dn.json \
  > /tmp/l/bench_dn.log 2>&1
note "bench_backward delta_rule 29,30 x3 with fla rc $?"
grep -E "fla forward|saved states bf16\) v|kernels" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-200 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 320) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops gated_delta_rule,kda,gdn2 --bwd-versions 0 --rep 20 --json /tmp/l/bench_ops.json \
  > /tmp/l/bench_ops.log 2>&1
note "bench_backward gdn, kda, gdn2 best with fla rc $?"
grep -E "backward|saving|fla" /tmp/l/bench_ops.log | grep -v "^summary\|kernels" | cut -c1-230 >> /tmp/l/summary.log
finish
