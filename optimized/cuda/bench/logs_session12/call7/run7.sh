#!/usr/bin/env bash
# Session 12 call 7 (carry .cudabin; rung 8 as committed, with its knobs): rung 8's tests at its final code
# (bit test against rung 7 in both modes, properties, outside range, memcheck and racecheck over 3 bit
# cases), every forward test case, then racecheck over rung 18's whole bit test (call 1 cut it at 80 s).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
END=520
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
BF=/tmp/b/test_cuda_forward BB=/tmp/b/test_cuda_backward
V8BIT='CUDA v8 wgmma forward equals v7 bit for bit for DeltaNet and GDN (informational)'
for sp in 0 1; do
  LINATTN_V8_SPLIT=$sp timeout $(left 60) $BF "$V8BIT" > /tmp/l/bit$sp.log 2>&1
  echo "[$(el) s] split=$sp v8 bit rc $?: $(res /tmp/l/bit$sp.log)" | tee -a /tmp/l/summary.log
done
for t in 'CUDA v8 wgmma chunked forward equals the float64 reference for every operator in bfloat16' \
         'CUDA v8 wgmma chunked forward with bfloat16 gates equals the reference on the rounded gates' \
         'CUDA v8 wgmma forward outside its range equals the rung best runs there bit for bit'; do
  timeout $(left 60) $BF "$t" > /tmp/l/t.log 2>&1
  echo "[$(el) s] $t rc $?: $(res /tmp/l/t.log)" | tee -a /tmp/l/summary.log
done
for tool in memcheck racecheck; do
  LINATTN_V8_BIT_CASES=3 timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 $BF "$V8BIT" > /tmp/l/san8_$tool.log 2>&1; rc=$?
  echo "[$(el) s] $tool (v8 bit, 3 cases) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san8_$tool.log | tail -1) $(res /tmp/l/san8_$tool.log)" | tee -a /tmp/l/summary.log
done
timeout $(left 200) $BF > /tmp/l/fwd_all.log 2>&1
echo "[$(el) s] every forward test case rc $?: $(res /tmp/l/fwd_all.log)" | tee -a /tmp/l/summary.log
B18='CUDA v18 gradients equal v17 gradients bit for bit'
timeout $(left 400) compute-sanitizer --tool racecheck --error-exitcode 9 $BB "$B18" > /tmp/l/san18_racecheck.log 2>&1; rc=$?
echo "[$(el) s] racecheck ($B18) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san18_racecheck.log | tail -1) $(res /tmp/l/san18_racecheck.log)" | tee -a /tmp/l/summary.log
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log $OUT/
