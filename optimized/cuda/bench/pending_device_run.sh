#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 15.
# Nothing of session 15 is unrun: its calls 2-5 (bench/logs_session15/) ran every test case at 626404d (rung 9
# in `best`), the mutants 280-284, and every operator's forward against fla at both shapes. This script checks a
# new tree the same way before any new measurement: every test case of test_cuda_saved, test_cuda_forward and
# test_cuda_backward (about 440 s on the H200), then DeltaNet's and GDN's forward, `best` and fla, 3 rounds at
# B=8 (about 60 s). Needs .cudabin/bins.tar.xz (the three test programs and liblinattn_cuda_capi.so, stripped,
# built at HEAD; pack with `xz -9e`, or the carry exceeds 64 MiB) and .fla; carry `.cudabin .fla`.
# Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; END=570
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
for t in saved:60 forward:150 backward:290; do
  n=${t%%:*}; lim=${t##*:}
  timeout $(left $lim) /tmp/b/test_cuda_$n --durations yes > /tmp/l/$n.log 2>&1
  note "test_cuda_$n (every test case) rc $?: $(res /tmp/l/$n.log)"
done
timeout $(left 90) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 0 --ops delta_rule,gated_delta_rule --shapes 8x4096x16x128x128 --rep 40 --rounds 3 > /tmp/l/fbench.log 2>&1
note "bench_forward DeltaNet, GDN at B=8, 3 rounds rc $?"
grep -E '^  rounds' /tmp/l/fbench.log >> /tmp/l/summary.log
finish
