#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 11.
# Session 12 ran all of it in its calls 1, 7 and 8 (logs_session12/: all pass; rung 18's racecheck over the
# whole bit test took ~190 s, more than the 120 s below; the K = V = 128 case 106 s). Nothing is pending.
# The list as written for that call:
# what session 11 left unrun (RESULTS.md Status, "Rung 18"), bounded to about 560 s so it fits one `run`
# call (600 s). Session 10's list (saved states, forward rung 7) ran in session 11 call 1.
#   1. Rung 18's bit test against rung 17 with the workspaces NaN-filled before each rung 18 call
#      (review12: the version run in session 11 could not see a stray read of E, Qg, Kd, which rung 17
#      leaves in the same workspace), then memcheck and racecheck over that whole test.
#   2. The backward test cases that session 11 call 6 did not reach with `best` = 18: the K = V = 128
#      value-tile case (its float64 reference on the CPU takes minutes), determinism, bad arguments.
#   3. The forward test renamed in session 11 ("CUDA best version gives v4 output bit for bit ...").
#   4. Static figures of rung 18's G2' (cuobjdump -res-usage, if the device has it): registers of
#      bwd11_wy<.., kLean = true> against rung 17's instantiation (G2' was 0.02-0.06 ms slower).
# Needs .cudabin/bins.tar.xz (test_cuda_forward, test_cuda_backward, test_cuda_saved,
# liblinattn_cuda_capi.so, stripped; RESULTS.md "How to build and carry") built at or after the commit
# that last changed optimized/cuda or proofs_tests; carry `.cudabin`. Writes logs.tar.xz to $OUT.
# Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > /tmp/l/env.log
END=550
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
one() { local f=/tmp/l/$2_$(echo "$4" | md5sum | cut -c1-6).log rc
  timeout $(left $3) $1 "$4" > $f 2>&1; rc=$?
  echo "[$(el) s] $2 | $4 | rc $rc | $(res $f)" | tee -a /tmp/l/summary.log; }
BB=/tmp/b/test_cuda_backward
B18='CUDA v18 gradients equal v17 gradients bit for bit'
one $BB bwd 60 "$B18"
for tool in memcheck racecheck; do
  timeout $(left 120) compute-sanitizer --tool $tool --error-exitcode 9 $BB "$B18" > /tmp/l/san18_$tool.log 2>&1; rc=$?
  echo "[$(el) s] $tool ($B18) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san18_$tool.log | tail -1) $(res /tmp/l/san18_$tool.log)" | tee -a /tmp/l/summary.log
done
one $BB bwd 20 'CUDA chunked backward is deterministic: two runs give bitwise equal gradients'
one $BB bwd 10 'CUDA chunked backward rejects bad arguments with a linattn Error naming the argument'
one /tmp/b/test_cuda_forward fwd 20 'CUDA best version gives v4 output bit for bit for bfloat16 at K = V = 128 and agrees with v1 v2 and v3'
one $BB bwd 300 'CUDA chunked backward at K = V = 128 with 64 and 32 column value tiles and at V up to 256 equals the reference'
if command -v cuobjdump > /dev/null; then
  cuobjdump -res-usage /tmp/b/liblinattn_cuda_capi.so 2>/dev/null | grep -A1 "bwd11_wy" > /tmp/l/g2_res_usage.txt
  echo "[$(el) s] cuobjdump: $(grep -c REG /tmp/l/g2_res_usage.txt) bwd11_wy instantiations in g2_res_usage.txt" | tee -a /tmp/l/summary.log
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log $OUT/
