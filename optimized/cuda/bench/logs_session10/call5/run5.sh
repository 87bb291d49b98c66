#!/usr/bin/env bash
# Session 10, device call 5: (1) rung 17's fixed-case test with its new assertion (rung 15 leaves a bound on
# some case for every operator); (2) rung 15's mutants 170-182 (planted in the hi-only code that rung 17's
# kernels share) against rung 17's fixed-case test and property; (3) racecheck and memcheck over rung 17's
# whole fixed-case test (its tiny cases and T = 100-150 cases, every operator, both gate dtypes).
# Binaries: .cudabin/BUILT_AT. Carry: .cudabin.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/m /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b; tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
FX17='CUDA v17 hybrid products keep every gradient within rung 3 bounds on rung 15 failing cases and fixed cases'
V17='CUDA v17 hybrid products chunked backward equals the float64 reference backward for every operator in bfloat16'
LINATTN_CUDA_BACKWARD_REPORT=1 timeout 40 /tmp/b/test_cuda_backward "$FX17" > /tmp/l/fx17.log 2>&1
rc=$?; echo "[$(el) s] fixed-case test (rc $rc) | $(res /tmp/l/fx17.log)" | tee -a /tmp/l/summary.log
for n in 0 170 171 172 173 174 175 176 177 178 179 180 181 182; do for t in "$FX17" "$V17"; do
  [ $(el) -gt 200 ] && break 2
  r=$(LINATTN_MUTANT=$n RC_PARAMS="seed=20261130 max_success=30" timeout 30 /tmp/m/test_cuda_backward "$t" 2>&1 | grep -E "^test cases|^All tests passed" | tail -1)
  echo "mutant $n | $t | ${r:-no summary (crash or timeout)}" | tee -a /tmp/l/summary.log; done; done
for tool in racecheck memcheck; do
  t=$(( 390 - $(el) )); [ $tool = racecheck ] && t=$(( t * 2 / 3 )); [ $t -lt 10 ] && break
  timeout $t compute-sanitizer --tool $tool --error-exitcode 9 /tmp/b/test_cuda_backward "$FX17" > /tmp/l/san_$tool.log 2>&1
  rc=$?; echo "[$(el) s] $tool (rc $rc, limit $t s) | $(grep -E 'SUMMARY' /tmp/l/san_$tool.log | tail -1) | $(res /tmp/l/san_$tool.log)" | tee -a /tmp/l/summary.log
done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
