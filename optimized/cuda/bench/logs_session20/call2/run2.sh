#!/usr/bin/env bash
# Session 20 call 2: backward rung 21 (bwd_v21_duvsmem.cu: G2' forms dbeta's du0 v terms on chip instead of storing
# du0 as float32 and reading it back with v). Its tests (the two reference properties, the bit test against rung 20
# but dbeta, with worst dbeta ratios reported; outside rung 3's range), its speed beside rungs 19 / 20 (DeltaNet with
# fla), planted bugs 285-288 and the unmutated mutant tree (0), memcheck of its bit test, every test_cuda_saved case
# (rung 21 among the saved rungs), then racecheck of the bit test while time is left.
# Carry .cudabin (bins.tar.xz of this tree, mutants.tar.xz: test_cuda_backward of bench/make_mutants.py's tree) and .fla.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-540}
source optimized/cuda/bench/call_lib.sh
unpack
mkdir -p /tmp/m && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
LINATTN_CUDA_BACKWARD_REPORT=1 timeout $(left 90) /tmp/b/test_cuda_backward "CUDA v21*" --durations yes > /tmp/l/v21.log 2>&1
note "test_cuda_backward 'CUDA v21*' rc $?: $(res /tmp/l/v21.log)"
grep -E "v21 vs v20 worst" /tmp/l/v21.log >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 60) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --ops gated_delta_rule --bwd-versions 20,21 --rep 30 --json /tmp/l/bbench_gdn.json > /tmp/l/bbench_gdn.log 2>&1
note "bench_backward GDN, rungs 20, 21 (no fla) rc $?"
grep -E "backward|saving|kernels" /tmp/l/bbench_gdn.log | grep -v "^summary" >> /tmp/l/summary.log
timeout $(left 200) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule --bwd-versions 19,21 --rep 30 --json /tmp/l/bbench_dn.json > /tmp/l/bbench_dn.log 2>&1
note "bench_backward DeltaNet, rungs 19, 21, fla rc $?"
grep -E "backward|saving|kernels" /tmp/l/bbench_dn.log | grep -v "^summary" >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v21 gradients equal v20 gradients bit for bit but dbeta, within float32 summation order'
for n in 285 286 287 288 0; do
  LINATTN_BWD3_BV=64 LINATTN_MUTANT=$n timeout $(left 40) /tmp/m/test_cuda_backward "$BIT" > /tmp/l/mut_$n.log 2>&1
  note "mutant $n (v21 bit test, BV 64): rc $? $(res /tmp/l/mut_$n.log)"
done
cp /tmp/l/summary.log "$OUT/"
timeout $(left 120) /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved.log 2>&1
note "test_cuda_saved (every test case) rc $?: $(res /tmp/l/saved.log)"
cp /tmp/l/summary.log "$OUT/"
LINATTN_BWD3_BV=64 timeout $(left 120) compute-sanitizer --tool memcheck --error-exitcode 9 \
  /tmp/b/test_cuda_backward "$BIT" > /tmp/l/san21_memcheck.log 2>&1
note "memcheck rung 21 bit test (BV 64) rc $?: $(res /tmp/l/san21_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san21_memcheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
LINATTN_BWD3_BV=64 timeout $(left 200) compute-sanitizer --tool racecheck --error-exitcode 9 \
  /tmp/b/test_cuda_backward "$BIT" > /tmp/l/san21_racecheck.log 2>&1
note "racecheck rung 21 bit test (BV 64) rc $?: $(res /tmp/l/san21_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san21_racecheck.log | tail -1)"
finish
