#!/usr/bin/env bash
# logs_session26/call3/run1.sh -- session 26 call 3: binaries with rung 29's fixed-case test on small cases at every
# dstates width (call 2's version was cut by its bound on rung 24's SM-sized cases); `best` = rung 28.
#  1. rung 29's fixed-case test and sanitizer case, with LINATTN_CUDA_BACKWARD_REPORT=1;
#  2. mutant 305 (dstates' B1 drops 16 key rows of Kd dS' in rung 29 only) against rung 29's tests, and the mutant
#     build without a mutant (.cudabin/mut.tar.xz: make_mutants.py's test_cuda_backward);
#  3. DeltaNet forward + backward with fla in the same process beside rungs 28 and 29, twice each.
# Usage on the device: OUT=$OUT bash optimized/cuda/bench/logs_session26/call3/run1.sh
set -u
OUT=${OUT:-/tmp/out}; END=${END:-450}
source optimized/cuda/bench/call_lib.sh
unpack
mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
B=/tmp/b/test_cuda_backward
LINATTN_CUDA_BACKWARD_REPORT=1 timeout $(left 170) $B -w NoTests --durations yes \
  "CUDA v29 B1 on the hi part of dS' keeps every gradient within rung 3 bounds beside rung 28 on fixed cases,CUDA v29 on small cases for the sanitizers" \
  > /tmp/l/v29_fixed.log 2>&1
note "rung 29 fixed cases and sanitizer case rc $?: $(res /tmp/l/v29_fixed.log)"
grep -E "FAILED|with expansion|worst" /tmp/l/v29_fixed.log | cut -c1-900 | head -20 >> /tmp/l/summary.log
for m in 305 0; do
  if [ $m = 0 ]; then unset LINATTN_MUTANT; else export LINATTN_MUTANT=$m; fi
  timeout $(left 60) /tmp/m/test_cuda_backward -w NoTests "CUDA v29 chunked backward with B1*,CUDA v29 on small cases for the sanitizers" \
    > /tmp/l/mut_$m.log 2>&1
  note "mutant $m rc $?: $(res /tmp/l/mut_$m.log)"
done
unset LINATTN_MUTANT
cp /tmp/l/summary.log "$OUT/"
timeout $(left 200) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 28,29,28,29 --rep 50 --json /tmp/l/bench_dn.json \
  > /tmp/l/bench_dn.log 2>&1
note "bench_backward delta_rule 28,29 x2 with fla rc $?"
grep -E "backward|saving|kernels|fla" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-230 >> /tmp/l/summary.log
finish
