#!/usr/bin/env bash
# logs_session26/call6/run1.sh -- session 26 call 6: binaries with backward `best` = rung 29 (the last of the session's
# device budget, about 170 s of run): every test_cuda_saved case (best now reads bf16 states), the test_cuda_backward
# cases that run `best` or rung 29 and had not run (rung 29 outside rung 3's range; the 128-column knob test, whose
# `best` is now rung 29; determinism; T = 1; bad arguments), then DeltaNet with fla beside `best` if time is left.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-165}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
timeout $(left 75) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
grep -E "FAILED|with expansion" /tmp/l/saved_all.log | head -10 >> /tmp/l/summary.log
timeout $(left 40) /tmp/b/test_cuda_backward -w NoTests --durations yes "CUDA v29 chunked backward outside*,CUDA dstates kernel over 128 value columns*,CUDA chunked backward is deterministic*,CUDA chunked backward at T = 1*,CUDA chunked backward rejects*" > /tmp/l/backward_best.log 2>&1
note "test_cuda_backward (best and rung 29 cases) rc $?: $(res /tmp/l/backward_best.log)"
grep -E "FAILED|with expansion" /tmp/l/backward_best.log | head -10 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 90) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 0,0 --rep 50 > /tmp/l/bench_dn.log 2>&1
note "bench_backward delta_rule best with fla rc $?"
grep -E "fla forward|saved states bf16\) v|kernels" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-160 >> /tmp/l/summary.log
finish
