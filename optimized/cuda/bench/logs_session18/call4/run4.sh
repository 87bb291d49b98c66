#!/usr/bin/env bash
# Session 18 call 4 (short; the session's last device seconds): rung 19 as merged -- dS' in bf16 for DeltaNet, dw_aux
# in bf16 only with LINATTN_BWD19_DWA_BF16=1 (call 3 found it no faster), GDN on rung 18 by default. Its tests (the
# bit test now over both knob settings) and DeltaNet's speed beside rung 18, no fla (fla's DeltaNet figures: calls
# 1-2). Carry .cudabin (bins.tar.xz: test_cuda_backward and the library of this tree). Bounded to 170 s; the summary is copied out after each step.
set -u
OUT=${OUT:-/tmp/out}; END=170
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
timeout $(left 60) /tmp/b/test_cuda_backward "CUDA v19*" --durations yes > /tmp/l/v19.log 2>&1
note "test_cuda_backward 'CUDA v19*' rc $?: $(res /tmp/l/v19.log)"
cp /tmp/l/summary.log /tmp/l/v19.log "$OUT/"
timeout $(left 130) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --ops delta_rule --bwd-versions 18,19 --rep 30 --json /tmp/l/bbench.json > /tmp/l/bbench.log 2>&1
note "bench_backward DeltaNet, rungs 18, 19 (no fla) rc $?"
grep -E "backward|saving|kernels" /tmp/l/bbench.log | grep -v "^summary" >> /tmp/l/summary.log
finish
