#!/usr/bin/env bash
# Session 12 call 9 (carry .cudabin; binaries of 2665268, the session's last code change): every GPU test
# case of the three CUDA test programs, at the commit the session ends on (forward, backward, saved).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
END=545
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
for t in backward:340 saved:110 forward:110; do
  n=${t%%:*}; lim=${t##*:}
  timeout $(left $lim) /tmp/b/test_cuda_$n --durations yes > /tmp/l/$n.log 2>&1; rc=$?
  echo "[$(el) s] test_cuda_$n (every test case) rc $rc: $(res /tmp/l/$n.log)" | tee -a /tmp/l/summary.log
done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log $OUT/
