#!/usr/bin/env bash
# Session 16 call 5: call 4's binaries (the tree of commit "Session 16 call 4"). Every test case of
# test_cuda_backward (backward rung 18's prepare runs rung 7's kA intra kernel, the recompute the lean kBwd
# state kernel, the states pass the default kBwd one: all changed in their address arithmetic); memcheck and
# racecheck on the first cases of the rung 7 and rung 9 bit tests and on the quick lean saved test; then
# bench_forward.py (best, fla, SDPA; 3 interleaved rounds) for every operator at B=8 T=4096 and, while time is
# left, at B=1 T=32768. Carry .cudabin and .fla. Bounded to 560 s.
set -u
OUT=${OUT:-/tmp/out}; END=560
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 300) /tmp/b/test_cuda_backward --durations yes > /tmp/l/backward.log 2>&1
note "test_cuda_backward (every test case) rc $?: $(res /tmp/l/backward.log)"
B7='CUDA v7 overlap forward equals v4 bit for bit for DeltaNet and GDN'
B9='CUDA v9 lean overlap forward equals v6 bit for bit for DeltaNet and GDN'
L='CUDA saving forward and every saved backward rung follow forward rung 9 where best runs it bit for bit'
for tool in memcheck racecheck; do
  LINATTN_V7_BIT_CASES=3 LINATTN_V9_BIT_CASES=3 timeout $(left 40) compute-sanitizer --tool $tool --error-exitcode 9 \
    /tmp/b/test_cuda_forward "$B7" "$B9" > /tmp/l/san_fwd_$tool.log 2>&1; rc=$?
  note "$tool rung 7 and 9 bit tests (3 cases each) rc $rc: $(res /tmp/l/san_fwd_$tool.log) | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/l/san_fwd_$tool.log | tail -1)"
done
LINATTN_LEAN_SAVED_QUICK=1 timeout $(left 40) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_saved "$L" \
  > /tmp/l/san_saved_memcheck.log 2>&1; rc=$?
note "memcheck lean saved test (quick) rc $rc: $(res /tmp/l/san_saved_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san_saved_memcheck.log | tail -1)"
timeout $(left 200) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 0 --shapes 8x4096x16x128x128 --rep 40 --rounds 3 --json /tmp/l/fbench_b8.json > /tmp/l/fbench_b8.log 2>&1
note "bench_forward every operator at B=8, best and fla, 3 rounds rc $?"
grep -E '^ceilings|^  rounds|sdpa' /tmp/l/fbench_b8.log >> /tmp/l/summary.log
if [ $(left 200) -gt 60 ]; then
  timeout $(left 200) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --versions 0 --shapes 1x32768x16x128x128 --ops delta_rule,gated_delta_rule,kda,gdn2 --rep 40 --rounds 3 \
    --json /tmp/l/fbench_b1.json > /tmp/l/fbench_b1.log 2>&1
  note "bench_forward at B=1 T=32768 rc $?"
  grep -E '^  rounds|sdpa' /tmp/l/fbench_b1.log >> /tmp/l/summary.log
fi
finish
