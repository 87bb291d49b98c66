#!/usr/bin/env bash
# logs_session25/call3/run1.sh -- session 25's third device call: binaries of .cudabin/BUILT_AT, `best` = rung 28 (since
# call 2), bench_backward.py's saving forward keeping bf16 states for `best` (version 0) and rungs 28 and up.
#  1. every test_cuda_saved case (best = rung 28: with float32 saved states it runs rung 27's kernels, with bf16 ones
#     its own; the refusal test now expects best to read bf16 states);
#  2. the two dstates knob tests that run `best` (value tile first; 128 columns), now rung 28's front;
#  3. forward + backward of every operator with fla in the process at B=8 T=4096 H=16 K=V=128, backward `best`, and
#     rung 26 (session 24's best) for DeltaNet beside it: issue 6's goal table.
# Usage on the device: OUT=$OUT END=330 bash optimized/cuda/bench/logs_session25/call3/run1.sh
set -u
OUT=${OUT:-/tmp/out}; END=${END:-330}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 90) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
grep -E "FAILED|with expansion" /tmp/l/saved_all.log | head -10 >> /tmp/l/summary.log
timeout $(left 40) /tmp/b/test_cuda_backward 'CUDA dstates kernel with its value tile first in the grid gives the same gradients bit for bit,CUDA dstates kernel over 128 value columns per block gives the same gradients bit for bit' \
  -w NoTests --durations yes > /tmp/l/dstates_knobs.log 2>&1
note "dstates knob tests (best = rung 28) rc $?: $(res /tmp/l/dstates_knobs.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 120) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 0,26,0 --rep 50 --json /tmp/l/bench_dn.json \
  > /tmp/l/bench_dn.log 2>&1
note "bench_backward delta_rule best, 26, best with fla rc $?"
grep -E "backward|saving|kernels|fla" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-230 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 200) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops gated_delta_rule,kda,gdn2 --bwd-versions 0 --rep 20 --json /tmp/l/bench_ops.json \
  > /tmp/l/bench_ops.log 2>&1
note "bench_backward gdn, kda, gdn2 best with fla rc $?"
grep -E "backward|saving|fla|refuse|failed" /tmp/l/bench_ops.log | grep -v "^summary\|kernels" | cut -c1-230 >> /tmp/l/summary.log
finish
