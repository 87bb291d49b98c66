#!/usr/bin/env bash
# Session 18 call 1: backward rung 19 (bwd_v19_dsbf16.cu: DeltaNet's dS' in bf16 between the dstates kernel and G1')
# on the H200 -- its tests, its speed beside rung 18 and fla -- then every test case of
# test_cuda_forward (session 17's pending step 1 for the forward). Carry .cudabin (bins.tar.xz: the three test
# programs and the library built from this tree) and .fla. Bounded to 590 s. (The planted bugs run in call 2.)
set -u
OUT=${OUT:-/tmp/out}; END=590
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
BIT='CUDA v19 gradients equal v18 gradients bit for bit'
timeout $(left 120) /tmp/b/test_cuda_backward "CUDA v19*" --durations yes > /tmp/l/v19.log 2>&1
note "test_cuda_backward 'CUDA v19*' rc $?: $(res /tmp/l/v19.log)"
timeout $(left 200) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule --bwd-versions 18,19 --rep 50 --json /tmp/l/bbench.json > /tmp/l/bbench.log 2>&1
note "bench_backward DeltaNet rungs 18, 19 and fla rc $?"
grep -E "backward|saving|kernels|fla" /tmp/l/bbench.log | grep -v "^summary" >> /tmp/l/summary.log
timeout $(left 90) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward "$BIT" > /tmp/l/san_memcheck.log 2>&1
note "memcheck v19 bit test rc $?: $(res /tmp/l/san_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san_memcheck.log | tail -1)"
timeout $(left 150) /tmp/b/test_cuda_forward --durations yes > /tmp/l/forward.log 2>&1
note "test_cuda_forward (every test case) rc $?: $(res /tmp/l/forward.log)"
finish
