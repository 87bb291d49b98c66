#!/usr/bin/env bash
# Session 13 call 4 (carry .cudabin .fla; bins.tar.xz: b/ = the working tree of call 3 with the rung 10 test
# renamed (no comma: Catch2 splits test names at commas, so call 3's memcheck matched nothing), m/ = its
# make_mutants.py tree): memcheck over rung 10's first 2 bit cases; mutants 270-271 (rung 9), 260-263
# (rung 10) against their bit tests and 222 (renamed to the lean layout) against the saved-states bit
# test, each mutant binary also without a mutant; then rungs 7, 9, 10 against fla twice (two processes).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
END=570
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
T10='CUDA v10 pipeline forward equals v7 bit for bit where it pipelines and in the segments it should'
T9='CUDA v9 lean overlap forward equals v6 bit for bit for DeltaNet and GDN'
TS='CUDA saving forward with states gives the forward output bit for bit and the saved backward without its states kernel gives the recompute gradients bit for bit'
LINATTN_V10_BIT_CASES=2 timeout $(left 90) compute-sanitizer --tool memcheck /tmp/b/b/test_cuda_forward "$T10" > /tmp/l/v10_memcheck.log 2>&1; rc=$?
echo "[$(el) s] memcheck, rung 10's first 2 bit cases rc $rc: $(grep -E 'ERROR SUMMARY' /tmp/l/v10_memcheck.log | tail -1); $(res /tmp/l/v10_memcheck.log)" | tee -a /tmp/l/summary.log
one() {  # one <label> <binary> <test> [mutant]
  local log=/tmp/l/mut_$1.log
  LINATTN_MUTANT=${4:-0} timeout $(left 60) "$2" "$3" > $log 2>&1; local rc=$?
  echo "[$(el) s] $1 rc $rc: $(res $log)" | tee -a /tmp/l/summary.log
}
one none_v9 /tmp/b/m/test_cuda_forward "$T9"
for m in 270 271; do one $m /tmp/b/m/test_cuda_forward "$T9" $m; done
one none_v10 /tmp/b/m/test_cuda_forward "$T10"
for m in 260 261 262 263; do one $m /tmp/b/m/test_cuda_forward "$T10" $m; done
one none_saved /tmp/b/m/test_cuda_saved "$TS"
one 222 /tmp/b/m/test_cuda_saved "$TS" 222
for r in 1 2; do
  timeout $(left 150) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/b/liblinattn_cuda_capi.so --fla .fla \
    --ops delta_rule,gated_delta_rule --versions 7,9,10 --rep 60 > /tmp/l/fbench$r.log 2>&1; rc=$?
  echo "[$(el) s] bench_forward run $r rc $rc: $(grep -E '^ +(delta_rule|gated_delta_rule):' /tmp/l/fbench$r.log | tr -s ' ' | tr '\n' ';')" | tee -a /tmp/l/summary.log
done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log /tmp/l/fbench*.log $OUT/
