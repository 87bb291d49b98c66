#!/usr/bin/env bash
# Session 18 call 3 (the last of the session): planted bugs in backward rung 19 (262-265) and in forward rung 10's
# cluster state kernel (260, 261), GDN's speed on rungs 18 and 19 (no fla: its GDN backward refuses with Triton
# 3.6.0, fla #640; call 2's bench ran out of time there), every test case of test_cuda_backward (best = 19), and
# session 17's pending sanitizers of rung 10's bit test past its empty barriers (memcheck, synccheck 5 cases;
# racecheck 3 cases). Carry .cudabin (bins.tar.xz of this tree, mutants.tar.xz of bench/make_mutants.py's tree).
set -u
OUT=${OUT:-/tmp/out}; END=590
source optimized/cuda/bench/call_lib.sh
unpack
mkdir -p /tmp/m && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
BIT='CUDA v19 gradients equal v18 gradients bit for bit'
for n in 262 263 264 265 0; do
  LINATTN_MUTANT=$n timeout $(left 40) /tmp/m/test_cuda_backward "$BIT" > /tmp/l/mut_$n.log 2>&1
  note "mutant $n (v19 bit test): rc $? $(res /tmp/l/mut_$n.log)"
done
T10='CUDA v10 pipeline forward equals v7 bit for bit where it pipelines and in the segments it should'
for n in 260 261 0; do
  LINATTN_MUTANT=$n timeout $(left 60) /tmp/m/test_cuda_forward "$T10" > /tmp/l/mut10_$n.log 2>&1
  note "mutant $n (v10 bit test): rc $? $(res /tmp/l/mut10_$n.log)"
done
timeout $(left 100) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --ops gated_delta_rule --bwd-versions 18,19 --rep 50 --json /tmp/l/bbench_gdn.json > /tmp/l/bbench_gdn.log 2>&1
note "bench_backward GDN, rungs 18, 19 (no fla) rc $?"
grep -E "backward|saving|kernels" /tmp/l/bbench_gdn.log | grep -v "^summary" >> /tmp/l/summary.log
timeout $(left 330) /tmp/b/test_cuda_backward --durations yes > /tmp/l/backward.log 2>&1
note "test_cuda_backward (every test case) rc $?: $(res /tmp/l/backward.log)"
for tool in memcheck synccheck; do
  LINATTN_V10_BIT_CASES=5 timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 \
    /tmp/b/test_cuda_forward "$T10" > /tmp/l/san10_$tool.log 2>&1
  note "$tool rung 10 bit test (5 cases) rc $?: $(res /tmp/l/san10_$tool.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san10_$tool.log | tail -1)"
done
LINATTN_V10_BIT_CASES=3 timeout $(left 150) compute-sanitizer --tool racecheck --error-exitcode 9 \
  /tmp/b/test_cuda_forward "$T10" > /tmp/l/san10_racecheck.log 2>&1
note "racecheck rung 10 bit test (3 cases) rc $?: $(res /tmp/l/san10_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san10_racecheck.log | tail -1)"
finish
