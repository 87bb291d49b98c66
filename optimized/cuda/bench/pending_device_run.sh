#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 14.
# Session 14 ran every change it made (bench/logs_session14/), so nothing here is an unrun change: this call
# refreshes the tables that are oldest. KDA's and GDN2's forward + backward against fla date from session 11
# and their forward from session 13, while session 14 changed code both share (tc_common.cuh's split_a_hilo,
# PTX unchanged for rung 4's kernels; bwd_v11_wyfast.cu, not used by them). Bounded to about 560 s:
#   1. every operator's forward, rungs 7, 9, 10 and fla, 3 interleaved rounds, both shapes;
#   2. KDA and GDN2 forward + backward, backward `best`, with fla.
# Needs .cudabin/bins.tar.xz (liblinattn_cuda_capi.so, stripped, built at HEAD) and .fla; carry `.cudabin .fla`.
# Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; END=560
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 200) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 7,9,10 --rep 40 --rounds 3 > /tmp/l/fbench.log 2>&1
note "bench_forward every operator, 3 rounds rc $?"
grep -E '^  rounds' /tmp/l/fbench.log >> /tmp/l/summary.log
timeout $(left 330) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops kda,gdn2 --bwd-versions 0 --rep 50 > /tmp/l/bbench.log 2>&1
note "bench_backward KDA, GDN2 with fla rc $?"
grep -E ' ms|kernels \(ms\)' /tmp/l/bbench.log | grep -v '^  ' >> /tmp/l/summary.log
finish
