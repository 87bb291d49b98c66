#!/usr/bin/env bash
# Session 19 call 3 (the last of the session; its first try got no machine, which cost 90 of the 659 s left, hence
# END = 440 by default; the run used END=449, run_reply.txt): rung 20 after call 2 -- bf16 dv_new copied after B3's products (it ran
# between B1 and B3 in call 2, where DeltaNet's dstates took 0.56 -> 0.67 ms) and LINATTN_BWD20_DN=0 (DeltaNet on
# rung 19); the route check (route.hpp). Its tests (bit test over LINATTN_BWD3_BV 32 / 64 and both LINATTN_BWD20_DN
# settings), DeltaNet's and GDN's speed on rungs 19 / 20 (no fla: call 2 has fla's 2.836 ms), planted bugs 266-268
# (the mutant tree is call 2's source: copy before B3) and 172, every test_cuda_saved case, the test_cuda_backward case
# call 2's full run did not reach (and the two after it), then racecheck of rung 20's bit test while time is left.
# Carry .cudabin (bins.tar.xz of this tree, mutants.tar.xz: test_cuda_backward of bench/make_mutants.py's tree).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-440}
source optimized/cuda/bench/call_lib.sh
unpack
mkdir -p /tmp/m && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 60) /tmp/b/test_cuda_backward "CUDA v20*" --durations yes > /tmp/l/v20.log 2>&1
note "test_cuda_backward 'CUDA v20*' rc $?: $(res /tmp/l/v20.log)"
cp /tmp/l/summary.log "$OUT/"
for ops in delta_rule gated_delta_rule; do
  timeout $(left 60) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
    --ops $ops --bwd-versions 19,20 --rep 30 --json /tmp/l/bbench_$ops.json > /tmp/l/bbench_$ops.log 2>&1
  note "bench_backward $ops, rungs 19, 20 (no fla) rc $?"
  grep -E "backward|saving|kernels" /tmp/l/bbench_$ops.log | grep -v "^summary" >> /tmp/l/summary.log
done
LINATTN_BWD20_DN=0 timeout $(left 40) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --ops delta_rule --bwd-versions 20 --rep 30 > /tmp/l/bbench_dn0.log 2>&1
note "bench_backward delta_rule, rung 20 with LINATTN_BWD20_DN=0 rc $?"
grep -E "backward|saving|kernels" /tmp/l/bbench_dn0.log | grep -v "^summary" >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v20 gradients equal v19 gradients bit for bit'
for n in 266 267 268 0; do
  LINATTN_MUTANT=$n timeout $(left 45) /tmp/m/test_cuda_backward "$BIT" > /tmp/l/mut_$n.log 2>&1
  note "mutant $n (v20 bit test): rc $? $(res /tmp/l/mut_$n.log)"
done
T15='CUDA v15 hi-only products keep every gradient within rung 3 bounds beside rungs 13 and 8 on fixed cases'
LINATTN_MUTANT=172 timeout $(left 60) /tmp/m/test_cuda_backward "$T15" > /tmp/l/mut_172.log 2>&1
note "mutant 172 (v15 fixed-case test): rc $? $(res /tmp/l/mut_172.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 120) /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved.log 2>&1
note "test_cuda_saved (every test case) rc $?: $(res /tmp/l/saved.log)"
T128='CUDA chunked backward at K = V = 128 with 64 and 32 column value tiles and at V up to 256 equals the reference'
timeout $(left 140) /tmp/b/test_cuda_backward "$T128" --durations yes > /tmp/l/k128.log 2>&1
note "test_cuda_backward K = V = 128 case rc $?: $(res /tmp/l/k128.log)"
timeout $(left 40) /tmp/b/test_cuda_backward 'CUDA chunked backward is deterministic*','CUDA chunked backward rejects*' \
  --durations yes > /tmp/l/last2.log 2>&1
note "test_cuda_backward determinism, bad arguments rc $?: $(res /tmp/l/last2.log)"
cp /tmp/l/summary.log "$OUT/"
LINATTN_BWD3_BV=64 LINATTN_BWD20_DN=1 timeout $(left 200) compute-sanitizer --tool racecheck --error-exitcode 9 \
  /tmp/b/test_cuda_backward "$BIT" > /tmp/l/san20_racecheck.log 2>&1
note "racecheck rung 20 bit test (BV 64, DN on) rc $?: $(res /tmp/l/san20_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san20_racecheck.log | tail -1)"
finish
