#!/usr/bin/env bash
# Session 15 call 6: the value-column tile of rung 9's lean state kernel at B=8 (the knob `best` now depends
# on): GDN and DeltaNet forward, rung 9 at LINATTN_V2_BV = 32 and 64 beside `best` and fla, and each kernel
# alone (--split). Carry .cudabin (liblinattn_cuda_capi.so built at 626404d) and .fla. Bounded to 300 s.
set -u
OUT=${OUT:-/tmp/out}; END=300
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 280) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 0,9 --ops gated_delta_rule,delta_rule --shapes 8x4096x16x128x128 --sweep-versions 9 --bv-sweep 32,64 \
  --split --rep 40 --rounds 3 > /tmp/l/fbench.log 2>&1
note "bench_forward rung 9 BV sweep and split, GDN and DeltaNet at B=8 rc $?"
grep -E 'linattn|fla|rounds' /tmp/l/fbench.log | grep -v '^ *rounds.*fla:' >> /tmp/l/summary.log
finish
