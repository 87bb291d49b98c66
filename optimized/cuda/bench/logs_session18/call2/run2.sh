#!/usr/bin/env bash
# Session 18 call 2: backward rung 19 as committed for review (DeltaNet: dS' and dw_aux in bf16, dS' stored by
# 16-byte rows from the dstates kernel's hi tile; GDN: dw_aux in bf16), `best` = 19 -- its tests (the bit test now
# over DeltaNet and GDN), its speed beside rung 18 and fla for DeltaNet and GDN, memcheck and racecheck of its bit
# test, and every test case of test_cuda_saved (whose saved rungs now include 19 and whose `best` is 19).
# Carry .cudabin (bins.tar.xz built from this tree) and .fla. Bounded to 560 s.
set -u
OUT=${OUT:-/tmp/out}; END=560
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
BIT='CUDA v19 gradients equal v18 gradients bit for bit'
timeout $(left 120) /tmp/b/test_cuda_backward "CUDA v19*" --durations yes > /tmp/l/v19.log 2>&1
note "test_cuda_backward 'CUDA v19*' rc $?: $(res /tmp/l/v19.log)"
timeout $(left 260) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule,gated_delta_rule --bwd-versions 18,19 --rep 50 --json /tmp/l/bbench.json > /tmp/l/bbench.log 2>&1
note "bench_backward DeltaNet and GDN, rungs 18, 19 and fla rc $?"
grep -E "backward|saving|kernels|fla" /tmp/l/bbench.log | grep -v "^summary" >> /tmp/l/summary.log
timeout $(left 60) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward "$BIT" > /tmp/l/san_memcheck.log 2>&1
note "memcheck v19 bit test rc $?: $(res /tmp/l/san_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san_memcheck.log | tail -1)"
timeout $(left 90) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward "$BIT" > /tmp/l/san_racecheck.log 2>&1
note "racecheck v19 bit test rc $?: $(res /tmp/l/san_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san_racecheck.log | tail -1)"
timeout $(left 120) /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved.log 2>&1
note "test_cuda_saved (every test case) rc $?: $(res /tmp/l/saved.log)"
finish
