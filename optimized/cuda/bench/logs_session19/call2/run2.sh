#!/usr/bin/env bash
# Session 19 call 2: backward rung 20 (bwd_v20_dvbf16.cu: dv_new handed from the dstates kernel to G1' in bf16, DeltaNet
# and GDN) -- its tests (bit test against rung 19 over LINATTN_BWD3_BV 32 / 64, outside-range test), then DeltaNet's
# speed beside rungs 19 and fla, GDN's beside rungs 18 / 19 (no fla: its GDN backward refuses), then memcheck of
# the bit test, then every test_cuda_backward case (best = rung 20 in these binaries). Carry .cudabin (bins.tar.xz: test_cuda_backward, test_cuda_forward, test_cuda_saved and the library of
# this tree) and .fla. Bounded to 560 s; the summary is copied out after each step.
set -u
OUT=${OUT:-/tmp/out}; END=580
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 90) /tmp/b/test_cuda_backward "CUDA v20*" --durations yes > /tmp/l/v20.log 2>&1
note "test_cuda_backward 'CUDA v20*' rc $?: $(res /tmp/l/v20.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 170) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule --bwd-versions 19,20 --rep 40 --json /tmp/l/bbench_dn.json > /tmp/l/bbench_dn.log 2>&1
note "bench_backward DeltaNet, rungs 19, 20, fla rc $?"
grep -E "backward|saving|kernels|fla" /tmp/l/bbench_dn.log | grep -v "^summary" >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 120) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --ops gated_delta_rule --bwd-versions 18,19,20 --rep 30 --json /tmp/l/bbench_gdn.json > /tmp/l/bbench_gdn.log 2>&1
note "bench_backward GDN, rungs 18, 19, 20 (no fla) rc $?"
grep -E "backward|saving|kernels" /tmp/l/bbench_gdn.log | grep -v "^summary" >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
LINATTN_BWD3_BV=64 timeout $(left 90) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward \
  'CUDA v20 gradients equal v19 gradients bit for bit' > /tmp/l/san20_memcheck.log 2>&1
note "memcheck rung 20 bit test (BV 64) rc $?: $(res /tmp/l/san20_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san20_memcheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 330) /tmp/b/test_cuda_backward --durations yes > /tmp/l/backward.log 2>&1
note "test_cuda_backward (every test case) rc $?: $(res /tmp/l/backward.log)"
finish
