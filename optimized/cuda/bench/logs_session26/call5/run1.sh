#!/usr/bin/env bash
# logs_session26/call5/run1.sh -- session 26 call 5 (binaries of cc0adc1): rung 29's dstates width, 128 columns (its
# own pick at B=8 H=16) against LINATTN_BWD3_BV=64 and 32, each in its own process with fla, DeltaNet B=8 T=4096 H=16
# K=V=128.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-200}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
for bv in unset 64 32 unset; do
  if [ $bv = unset ]; then unset LINATTN_BWD3_BV; else export LINATTN_BWD3_BV=$bv; fi
  timeout $(left 60) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 29,29 --rep 50 > /tmp/l/bench_bv_$bv.log 2>&1
  note "LINATTN_BWD3_BV=$bv rc $?"
  grep -E "fla forward \+|saved states bf16\) v|kernels" /tmp/l/bench_bv_$bv.log | grep -v "^summary" | cut -c1-160 >> /tmp/l/summary.log
done
unset LINATTN_BWD3_BV
finish
