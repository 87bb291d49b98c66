#!/usr/bin/env bash
# Session 13 call 1 (carry .cudabin; bins.tar.xz holds head/ = 38a448b's test_cuda_forward and C API, and
# lean/ = 38a448b + bench/pending/lean_saved_states.patch's test_cuda_saved, test_cuda_backward and C API):
# every forward test case at HEAD (review13's changes: NaN-filled workspaces in the bit tests of rungs 7 and
# 8, rung 8's bit test in both divisions and the flat grid, the KP 128 / BV 64 case), then every saved and
# every backward test case with the lean saved-states patch applied.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
END=560
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
for t in head/forward:120 lean/saved:110 lean/backward:320; do
  n=${t%%:*}; lim=${t##*:}; log=/tmp/l/${n/\//_}.log
  timeout $(left $lim) /tmp/b/${n%%/*}/test_cuda_${n##*/} --durations yes > $log 2>&1; rc=$?
  echo "[$(el) s] $n (every test case) rc $rc: $(res $log)" | tee -a /tmp/l/summary.log
done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log $OUT/
