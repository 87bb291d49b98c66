#!/usr/bin/env bash
# Session 8 device call 2: every backward test case with rung 8 in kRungs (binaries of ce1ca91,
# .cudabin/BUILT_AT), then racecheck on the forward's packed batch with the time left.
set -u
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
mkdir -p /tmp/b /tmp/l && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
( time LINATTN_CUDA_BACKWARD_REPORT=1 timeout 430 /tmp/b/test_cuda_backward --durations yes ) > /tmp/l/btests.log 2>&1
echo "[$(el) s] backward tests: $(grep -E '^All tests|^test cases|^real' /tmp/l/btests.log | tr '\n' ' ')"
grep -B3 -A25 "FAILED" /tmp/l/btests.log | head -60
grep -E "^ *[0-9.]+ s: " /tmp/l/btests.log | sort -rn | head -8
left=$(( 560 - $(el) )); echo "[$(el) s] ${left} s left"
PKF='CUDA chunked forward of a packed batch of many short sequences equals the reference'
if [ $left -gt 40 ]; then
  ( time timeout $left compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_forward "$PKF" ) > /tmp/l/racecheck_fwd_packed.log 2>&1
  echo "[$(el) s] forward racecheck: $(grep -E 'SUMMARY|^real' /tmp/l/racecheck_fwd_packed.log | tr '\n' ' ')"
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
