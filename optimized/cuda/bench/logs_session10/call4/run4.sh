#!/usr/bin/env bash
# Session 10, device call 4: backward best = rung 17. Every backward test case and every saved-forward test
# case with the binaries of the commit that made rung 17 best, then rung 17's mutants 210-216 in the
# make_mutants.py tree (MUT_SAN=0: call 3 ran the sanitizers on rung 17). Carry: .cudabin.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/m /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b; tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > /tmp/l/env.log
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
LINATTN_CUDA_BACKWARD_REPORT=1 timeout 380 /tmp/b/test_cuda_backward --durations yes > /tmp/l/btests.log 2>&1
rc=$?; echo "[$(el) s] every backward test case (rc $rc) | $(res /tmp/l/btests.log)" | tee -a /tmp/l/summary.log
timeout 60 /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved.log 2>&1
rc=$?; echo "[$(el) s] every saved test case (rc $rc) | $(res /tmp/l/saved.log)" | tee -a /tmp/l/summary.log
t=$(( 540 - $(el) )); [ $t -lt 20 ] && t=20
MBIN=/tmp/m BMUT_ONLY=v17 MUT_SAN=0 OUT=/tmp/l timeout $t bash optimized/cuda/bench/device_run.sh bmutants > /tmp/l/bmut_stdout.log 2>&1
rc=$?; echo "[$(el) s] mutants v17 (rc $rc, limit $t s)" | tee -a /tmp/l/summary.log
grep -E "^mutant" /tmp/l/bmutants.log | tee -a /tmp/l/summary.log
grep -E "^\[|FAILED" /tmp/l/btests.log | head -20
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
