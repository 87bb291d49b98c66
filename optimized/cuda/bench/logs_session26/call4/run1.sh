#!/usr/bin/env bash
# logs_session26/call4/run1.sh -- session 26 call 4 (binaries of cc0adc1, as call 3): more samples of rung 29 beside fla
# in one process (DeltaNet, B=8 T=4096 H=16 K=V=128), then fla again in a second process.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-250}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
timeout $(left 150) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 29,28,29,29 --rep 50 --json /tmp/l/bench_dn.json \
  > /tmp/l/bench_dn.log 2>&1
note "bench_backward delta_rule 29,28,29,29 with fla rc $?"
grep -E "fla|saved states" /tmp/l/bench_dn.log | grep -v "^summary\|kernels" | cut -c1-160 >> /tmp/l/summary.log
finish
