#!/usr/bin/env bash
# Session 15 call 5: KDA's and GDN2's forward at both shapes, `best` against fla, 3 interleaved rounds (call 1
# reached KDA at B=8 only before its bound), so that every operator's forward has this session's figures.
# Carry .cudabin (liblinattn_cuda_capi.so built at 626404d; no kernel changed since) and .fla. Bounded to 300 s.
set -u
OUT=${OUT:-/tmp/out}; END=300
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 280) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 0 --ops kda,gdn2 --rep 40 --rounds 3 > /tmp/l/fbench.log 2>&1
note "bench_forward KDA, GDN2, best and fla, 3 rounds, both shapes rc $?"
grep -E '^  rounds' /tmp/l/fbench.log >> /tmp/l/summary.log
finish
