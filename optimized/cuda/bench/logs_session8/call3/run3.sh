#!/usr/bin/env bash
# Session 8 device call 3: every forward test case (v6 in the ladder), racecheck on the backward's
# packed batch (rung 8 in), then rung 8's planted bugs (BMUT_ONLY=v8) and, with the time left,
# forward rung 6's (MUT_ONLY=v6). Binaries and mutants of ce1ca91 (.cudabin/BUILT_AT).
set -u
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
mkdir -p /tmp/b /tmp/m /tmp/l && tar -xJf .cudabin/bins.tar.xz -C /tmp/b && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
( time timeout 200 /tmp/b/test_cuda_forward --durations yes ) > /tmp/l/tests.log 2>&1
echo "[$(el) s] forward tests: $(grep -E '^All tests|^test cases|^real' /tmp/l/tests.log | tr '\n' ' ')"
grep -B3 -A25 "FAILED" /tmp/l/tests.log | head -40
PKB='CUDA chunked backward of a packed batch of many short sequences equals the reference'
( time timeout 160 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward "$PKB" ) > /tmp/l/racecheck_bwd_packed.log 2>&1
echo "[$(el) s] backward racecheck: $(grep -E 'SUMMARY|^real' /tmp/l/racecheck_bwd_packed.log | tr '\n' ' ')"
left=$(( 570 - $(el) ))
BMUT_ONLY=v8 MBIN=/tmp/m BIN=/tmp/b OUT=/tmp/o_v8 timeout $left bash optimized/cuda/bench/device_run.sh bmutants > /dev/null 2>&1; cp /tmp/o_v8/bmutants.log /tmp/l/bmutants_v8.log 2>/dev/null; cat /tmp/l/bmutants_v8.log
echo "[$(el) s] v8 mutants done"
left=$(( 575 - $(el) ))
if [ $left -gt 30 ]; then
  MUT_ONLY=v6 MBIN=/tmp/m BIN=/tmp/b OUT=/tmp/o_v6 timeout $left bash optimized/cuda/bench/device_run.sh mutants > /dev/null 2>&1; cp /tmp/o_v6/mutants.log /tmp/l/mutants_v6.log 2>/dev/null; cat /tmp/l/mutants_v6.log
fi
echo "[$(el) s] end"
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
