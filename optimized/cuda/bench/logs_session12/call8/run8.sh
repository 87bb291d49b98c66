#!/usr/bin/env bash
# Session 12 call 8 (carry .cudabin with bins.tar.xz and mutants.tar.xz): (1) rung 8's bit test under its
# binding name; (2) mutants 250-253 (make_mutants.py tree of this commit, test_cuda_forward): each must
# fail that test (rc 1: caught), and the mutant binary with no mutant must pass; (3) the backward case that
# has not run with best = 18 (K = V = 128 value tiles; its float64 reference takes minutes).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/m /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b; tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
T='CUDA v8 wgmma forward equals v7 bit for bit for DeltaNet and GDN'
timeout 60 /tmp/b/test_cuda_forward "$T" > /tmp/l/bit.log 2>&1
echo "[$(el) s] v8 bit rc $?: $(res /tmp/l/bit.log)" | tee -a /tmp/l/summary.log
timeout 60 /tmp/m/test_cuda_forward "$T" > /tmp/l/mut_none.log 2>&1
echo "[$(el) s] mutant binary, no mutant: rc $?: $(res /tmp/l/mut_none.log)" | tee -a /tmp/l/summary.log
for m in 250 251 252 253; do
  LINATTN_MUTANT=$m timeout 60 /tmp/m/test_cuda_forward "$T" > /tmp/l/mut_$m.log 2>&1; rc=$?
  echo "[$(el) s] mutant $m: rc $rc: $(res /tmp/l/mut_$m.log)" | tee -a /tmp/l/summary.log
done
timeout 420 /tmp/b/test_cuda_backward 'CUDA chunked backward at K = V = 128 with 64 and 32 column value tiles and at V up to 256 equals the reference' > /tmp/l/bwd128.log 2>&1
echo "[$(el) s] backward K = V = 128 case rc $?: $(res /tmp/l/bwd128.log)" | tee -a /tmp/l/summary.log
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log $OUT/
