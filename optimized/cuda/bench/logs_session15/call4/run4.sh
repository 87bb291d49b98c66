#!/usr/bin/env bash
# Session 15 call 4: where the time goes now that `best` runs rung 9 at B=8: per-kernel times
# (profile_kernels.py, torch.profiler) of DeltaNet's and GDN's forward and DeltaNet's forward + backward, ours
# and fla's in one process; then GDN's forward alone, best against fla, 5 interleaved rounds at B=8.
# Carry .cudabin (liblinattn_cuda_capi.so built at 626404d) and .fla. Bounded to about 400 s.
set -u
OUT=${OUT:-/tmp/out}; END=400
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 200) python3 optimized/cuda/bench/profile_kernels.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule,gated_delta_rule --backward delta_rule > /tmp/l/profile.log 2>&1
note "profile_kernels DeltaNet, GDN (DeltaNet backward too) rc $?"
timeout $(left 200) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 0 --ops gated_delta_rule --shapes 8x4096x16x128x128 --rep 40 --rounds 5 > /tmp/l/fbench.log 2>&1
note "bench_forward GDN B=8, best and fla, 5 rounds rc $?"
grep -E '^  rounds' /tmp/l/fbench.log >> /tmp/l/summary.log
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv >> /tmp/l/env.log
finish
