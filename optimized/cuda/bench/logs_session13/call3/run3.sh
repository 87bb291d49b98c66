#!/usr/bin/env bash
# Session 13 call 3 (carry .cudabin .fla; bins.tar.xz: v10/ = the working tree with forward rungs 9 and 10
# (v9_lean_overlap.cu, v10_pipeline.cu) on the lean saved-states commit, built here): the tests of rungs 9
# and 10; memcheck over rung 10's first two bit cases; rungs 7, 9, 10 against fla (DeltaNet, GDN, both
# shapes) in one process; rung 10's segment length at B=1 T=32768 (no fla); every forward test case.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
END=570
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
T=/tmp/b/v10/test_cuda_forward
timeout $(left 150) $T "CUDA v9*,CUDA v10*" --durations yes > /tmp/l/v9v10_tests.log 2>&1; rc=$?
echo "[$(el) s] rungs 9 and 10's tests rc $rc: $(res /tmp/l/v9v10_tests.log)" | tee -a /tmp/l/summary.log
LINATTN_V10_BIT_CASES=2 timeout $(left 90) compute-sanitizer --tool memcheck $T "CUDA v10 pipeline forward equals v7 bit for bit where it pipelines, in the segments it should" > /tmp/l/v10_memcheck.log 2>&1; rc=$?
echo "[$(el) s] memcheck, rung 10's first 2 bit cases rc $rc: $(grep -E 'ERROR SUMMARY' /tmp/l/v10_memcheck.log | tail -1) $(res /tmp/l/v10_memcheck.log)" | tee -a /tmp/l/summary.log
timeout $(left 200) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/v10/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule,gated_delta_rule --versions 7,9,10 --rep 40 --json /tmp/l/fbench.json > /tmp/l/fbench.log 2>&1; rc=$?
echo "[$(el) s] bench_forward rungs 7, 9, 10 with fla rc $rc" | tee -a /tmp/l/summary.log
for seg in 1024 2048 8192; do
  LINATTN_V10_SEG=$seg timeout $(left 40) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/v10/liblinattn_cuda_capi.so \
    --shapes 1x32768x16x128x128 --ops delta_rule,gated_delta_rule --versions 7,10 --rep 40 > /tmp/l/seg$seg.log 2>&1; rc=$?
  echo "[$(el) s] LINATTN_V10_SEG=$seg rc $rc: $(grep -E '^ +(delta_rule|gated_delta_rule):' /tmp/l/seg$seg.log | tr -s ' ' | tr '\n' ';')" | tee -a /tmp/l/summary.log
done
timeout $(left 200) $T --durations yes > /tmp/l/forward_all.log 2>&1; rc=$?
echo "[$(el) s] every forward test case rc $rc: $(res /tmp/l/forward_all.log)" | tee -a /tmp/l/summary.log
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log /tmp/l/fbench.log $OUT/
