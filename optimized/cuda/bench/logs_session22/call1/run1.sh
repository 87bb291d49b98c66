#!/usr/bin/env bash
# optimized/cuda/bench/logs_session22/call1/run1.sh -- session 22 call 1: accuracy of linattn's `best` backward (rung 22)
# and of fla's backward against the exact (float64 autograd) gradients on the property tests' kinds of cases
# (bench/accuracy_vs_fla.py, new), then memcheck of rung 22's bit test at LINATTN_BWD3_BV=64 (session 21's pending
# script, step 2). Binaries of 9407d3f (session 21's last commit; `best` = rung 22), carried as .cudabin/bins.tar.xz;
# fla's source carried as .fla.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-570}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 430) python3 optimized/cuda/bench/accuracy_vs_fla.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --kv 128x128 --T 1,2,3,65,150,1024 --seeds 3 --deadline 380 --json /tmp/l/acc128.json > /tmp/l/acc128.log 2>&1
note "accuracy_vs_fla K=V=128 rc $?: $(tail -1 /tmp/l/acc128.log)"
sed -n '/^worst ratio/,$p' /tmp/l/acc128.log >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v22 gradients equal v21 gradients bit for bit'
LINATTN_BWD3_BV=64 timeout $(left 100) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward \
  "$BIT" -w NoTests > /tmp/l/san22_memcheck.log 2>&1
note "memcheck rung 22 bit test (BV 64) rc $?: $(res /tmp/l/san22_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san22_memcheck.log | tail -1)"
finish
