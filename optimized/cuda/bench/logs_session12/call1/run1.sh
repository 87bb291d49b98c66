#!/usr/bin/env bash
# Session 12 call 1 (carry .cudabin; binaries: .cudabin/BUILT_AT). (1) Forward rung 8 (v8_wgmma.cu) for
# the first time: its bit test against rung 7 (informational), both properties, outside range; the
# shared forward cases for every rung (v8 is in kVersions); (2) --split timing of rungs 7 and 8, DeltaNet
# and GDN, no fla; (3) memcheck and racecheck over rung 8's first 3 bit cases; (4) what session 11 left
# unrun (bench/pending_device_run.sh's list: rung 18's strengthened bit test and sanitizers over it,
# determinism, bad arguments, the renamed forward best test, then the K = V = 128 backward case).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > /tmp/l/env.log
END=540
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
one() { local f=/tmp/l/$2_$(echo "$4" | md5sum | cut -c1-6).log rc
  timeout $(left $3) $1 "$4" > $f 2>&1; rc=$?
  echo "[$(el) s] $2 | $4 | rc $rc | $(res $f)" | tee -a /tmp/l/summary.log; }
BF=/tmp/b/test_cuda_forward BB=/tmp/b/test_cuda_backward L=/tmp/b/liblinattn_cuda_capi.so
V8BIT='CUDA v8 wgmma forward equals v7 bit for bit for DeltaNet and GDN (informational)'
one $BF fwd 60 "$V8BIT"
grep -E "v8 against v7|FAILED|with expansion" /tmp/l/fwd_$(echo "$V8BIT" | md5sum | cut -c1-6).log | head -40 > /tmp/l/v8bit_excerpt.txt
one $BF fwd 60 'CUDA v8 wgmma chunked forward equals the float64 reference for every operator in bfloat16'
one $BF fwd 60 'CUDA v8 wgmma chunked forward with bfloat16 gates equals the reference on the rounded gates'
one $BF fwd 30 'CUDA v8 wgmma forward outside its range equals the rung best runs there bit for bit'
timeout $(left 110) python3 optimized/cuda/bench/bench_forward.py --lib $L --versions 7,8 --split --sweep-versions 7,8 \
  --ops delta_rule,gated_delta_rule --rep 100 --json /tmp/l/fbench.json > /tmp/l/fbench.log 2>&1; rc=$?
echo "[$(el) s] forward bench rc $rc" | tee -a /tmp/l/summary.log
for tool in memcheck racecheck; do
  LINATTN_V8_BIT_CASES=3 timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 $BF "$V8BIT" > /tmp/l/san8_$tool.log 2>&1; rc=$?
  echo "[$(el) s] $tool (v8 bit, 3 cases) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san8_$tool.log | tail -1) $(res /tmp/l/san8_$tool.log)" | tee -a /tmp/l/summary.log
done
B18='CUDA v18 gradients equal v17 gradients bit for bit'
one $BB bwd 60 "$B18"
one $BB bwd 20 'CUDA chunked backward is deterministic: two runs give bitwise equal gradients'
one $BB bwd 10 'CUDA chunked backward rejects bad arguments with a linattn Error naming the argument'
one $BF fwd 20 'CUDA best version gives v4 output bit for bit for bfloat16 at K = V = 128 and agrees with v1 v2 and v3'
for tool in memcheck racecheck; do
  timeout $(left 80) compute-sanitizer --tool $tool --error-exitcode 9 $BB "$B18" > /tmp/l/san18_$tool.log 2>&1; rc=$?
  echo "[$(el) s] $tool ($B18) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san18_$tool.log | tail -1) $(res /tmp/l/san18_$tool.log)" | tee -a /tmp/l/summary.log
done
# every forward test case (v8 among the shared cases' rungs) with what is left
timeout $(left 300) $BF > /tmp/l/fwd_all.log 2>&1; rc=$?
echo "[$(el) s] every forward test case rc $rc: $(res /tmp/l/fwd_all.log)" | tee -a /tmp/l/summary.log
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log /tmp/l/fbench.log /tmp/l/v8bit_excerpt.txt $OUT/ 2>/dev/null
