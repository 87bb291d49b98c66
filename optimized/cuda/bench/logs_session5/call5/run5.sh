#!/usr/bin/env bash
# Session 5 device call 5: backward sanitizers (all rungs' tests) and 50 determinism repeats; rung 4's
# planted bugs 51-55; then v5's (61-65) if time is left.
set -u
mkdir -p /tmp/b /tmp/m && tar -xJf .cudabin/bins.tar.xz -C /tmp/b && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
BIN=/tmp/b DET_REPEATS=50 timeout 300 bash optimized/cuda/bench/device_run.sh bsanitize 2>&1 | grep -E "===|SUMMARY|All tests|test cases|determinism|real"
BIN=/tmp/b MBIN=/tmp/m BMUT_ONLY=v4 timeout 150 bash optimized/cuda/bench/device_run.sh bmutants 2>&1 | tail -20
M=/tmp/m/test_cuda_forward
P5='CUDA v5 split forward equals the float64 reference for every operator in bfloat16'
BIT5='CUDA v5 split forward equals v4 fused forward bit for bit'
RG='CUDA chunked forward with ragged last chunks equals the reference for lengths around 64'
SZ='CUDA chunked forward is exact at the tuned and the largest head sizes up to K = V = 256'
T1='CUDA chunked forward at T = 1 equals one step of the reference'
DT='CUDA chunked forward is deterministic: two runs give bitwise equal outputs'
rm() { local n=$1; shift; for t in "$@"; do r=$(LINATTN_MUTANT=$n RC_PARAMS="seed=20261129 max_success=30" timeout 40 $M "$t" 2>&1 | grep -E "^test cases|^All tests passed" | tail -1); echo "mutant $n | $t | ${r:-no summary (crash or timeout)}"; done; }
{ rm 0 "$P5" "$BIT5"; rm 61 "$P5" "$RG"; rm 62 "$P5" "$T1"; rm 63 "$DT" "$P5"; rm 64 "$SZ" "$BIT5"; rm 65 "$P5" "$RG"; } 2>&1 | tee $OUT/fmutants_v5.log
