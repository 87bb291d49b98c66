#!/usr/bin/env bash
# Session 14 call 5: every GPU test case after this session's changes (rung 7's intra kernel with 72-float
# rows, and its kA instantiation writing A for the saving forward and for backward rung 18's prepare; rung
# 18's G2' staging; rung 10's knob check), then compute-sanitizer memcheck and racecheck on rung 7's bit
# test (3 cases), the saved forward's bit test and rung 18's bf16 property (3 cases).
# Carry .cudabin (test_cuda_forward, test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
END=560
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
for t in saved:40 forward:130 backward:280; do
  n=${t%%:*}; lim=${t##*:}
  timeout $(left $lim) /tmp/b/test_cuda_$n --durations yes > /tmp/l/$n.log 2>&1; rc=$?
  echo "[$(el) s] test_cuda_$n (every test case) rc $rc: $(res /tmp/l/$n.log)" | tee -a /tmp/l/summary.log
done
for tool in memcheck racecheck; do
  LINATTN_V7_BIT_CASES=3 timeout $(left 40) compute-sanitizer --tool $tool --error-exitcode 9 /tmp/b/test_cuda_forward \
    'CUDA v7 overlap forward equals v4 bit for bit for DeltaNet and GDN' > /tmp/l/san7_$tool.log 2>&1; rc=$?
  echo "[$(el) s] $tool rung 7 bit test (3 cases) rc $rc: $(res /tmp/l/san7_$tool.log) | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/l/san7_$tool.log | tail -1)" | tee -a /tmp/l/summary.log
  RC_PARAMS="seed=20261201 max_success=3" timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 /tmp/b/test_cuda_backward \
    'CUDA v18 lean chunked backward equals the float64 reference backward for every operator in bfloat16' > /tmp/l/san18_$tool.log 2>&1; rc=$?
  echo "[$(el) s] $tool rung 18 bf16 property (3 cases) rc $rc: $(res /tmp/l/san18_$tool.log) | $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/l/san18_$tool.log | tail -1)" | tee -a /tmp/l/summary.log
done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log $OUT/
