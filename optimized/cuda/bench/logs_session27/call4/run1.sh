#!/usr/bin/env bash
# logs_session27/call4/run1.sh -- session 27, device call 4 (best = rung 32 now): mutants 306 (rung 30's bit test), 307
# (rung 31's sanitizer case) and 308 (rung 32's bit test) and the mutant build without one (.cudabin/mut.tar.xz:
# make_mutants.py's tree with rung 32); the test_cuda_backward cases that run `best` (the 128-column knob test, rung 13's
# edge cases with best, determinism, T = 1, bad arguments) and the short shared fixed cases with rungs 31 and 32 in
# kRungs (ragged last chunks, extreme gates, packed short sequences); every test_cuda_saved case; DeltaNet forward +
# backward beside fla with best and rung 29. Binaries: .cudabin/bins.tar.xz built at 4be739d + rung 32 as best
# (uncommitted). Usage: OUT=$OUT bash .../run1.sh
set -u
OUT=${OUT:-/tmp/out}; END=${END:-420}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
B=/tmp/b/test_cuda_backward
mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
M=/tmp/m/test_cuda_backward
for m in 306 307 308; do
  case $m in
    306) t="CUDA v30 gradients equal v29 gradients bit for bit" ;;
    307) t="CUDA v31 on small cases for the sanitizers" ;;
    308) t="CUDA v32 gradients equal v31 gradients bit for bit" ;;
  esac
  LINATTN_MUTANT=$m timeout $(left 60) $M -w NoTests "$t" > /tmp/l/mut_$m.log 2>&1
  note "mutant $m ($t) rc $?: $(res /tmp/l/mut_$m.log)"
done
timeout $(left 60) $M -w NoTests "CUDA v30 gradients equal v29 gradients bit for bit,CUDA v31 on small cases for the sanitizers,CUDA v32 gradients equal v31 gradients bit for bit" > /tmp/l/mut_0.log 2>&1
note "mutant build without a mutant rc $?: $(res /tmp/l/mut_0.log)"
timeout $(left 120) $B -w NoTests --durations yes "CUDA dstates kernel over 128 value columns*,CUDA v13 chunked backward equals the float64 reference backward at odd*,CUDA chunked backward is deterministic*,CUDA chunked backward at T = 1*,CUDA chunked backward rejects*,CUDA chunked backward with ragged*,CUDA chunked backward stays finite*,CUDA chunked backward of a packed batch*" > /tmp/l/backward_best.log 2>&1
note "test_cuda_backward (best cases, short shared fixed cases) rc $?: $(res /tmp/l/backward_best.log)"
grep -E "FAILED|with expansion|  [0-9.]+ s: " /tmp/l/backward_best.log | cut -c1-250 | head -20 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 90) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved.log 2>&1
note "test_cuda_saved rc $?: $(res /tmp/l/saved.log)"
grep -E "FAILED|with expansion" /tmp/l/saved.log | head -20 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 150) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 0,29,0 --rep 50 --json /tmp/l/bench_dn.json \
  > /tmp/l/bench_dn.log 2>&1
note "bench_backward delta_rule best,29,best with fla rc $?"
grep -E "fla forward|saved states bf16\) v|kernels|vs fla" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-220 >> /tmp/l/summary.log
finish
