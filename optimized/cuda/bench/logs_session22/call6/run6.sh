#!/usr/bin/env bash
# optimized/cuda/bench/logs_session22/call6/run6.sh -- session 22 call 6 (the session's last ~300 device seconds): the
# dstates kernel with its value tile first in the grid (LINATTN_BWD3_VFIRST=1, bwd_v3_async.cu's launch_dstates; off by
# default). bench/analysis_bwd_plan.md ("Session 22") counts 463 MB of DRAM re-reads in that kernel because a head's
# two value tiles run in different waves today, and estimates 0 to 0.16 ms. (1) its bit-for-bit test; (2) DeltaNet
# forward + backward with saved states, `best`, the knob unset / set / unset again in one process (no fla: its Triton
# autotuning would not fit; fla's figure is session 21's 2.84 ms). Binaries of the commit that adds the knob
# (.cudabin/bins.tar.xz, carried).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-150}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 45) /tmp/b/test_cuda_backward \
  "CUDA dstates kernel with its value tile first in the grid gives the same gradients bit for bit" -w NoTests \
  --durations yes > /tmp/l/vfirst_test.log 2>&1
note "vfirst bit test rc $?: $(res /tmp/l/vfirst_test.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 140) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --ops delta_rule --bwd-versions 0 --env-variant LINATTN_BWD3_VFIRST=1 --json /tmp/l/bench_dn.json \
  > /tmp/l/bench_dn.log 2>&1
note "bench DeltaNet rc $?"
grep -E "saving states|dstates|VFIRST" /tmp/l/bench_dn.log | cut -c1-260 >> /tmp/l/summary.log
finish
