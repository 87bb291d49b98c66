#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 13.
# What session 13 changed after its last device call (RESULTS.md Status, "Forward rung 10"): rung 10 without
# rung 9 (so `best` is rung 4's bits everywhere again, which test_cuda_saved's 64-column case needs), the
# pipelining condition (one wave of state blocks; shared memory and registers from the kernels' attributes)
# and its tests (workspace grown before it is NaN-filled, each pipelined case without a final state, single
# sequences at 32- and 64-column tiles and a two-wave grid). Bounded to about 560 s so it fits one `run`
# call (600 s):
#   1. rung 10's tests (the bit test, the fallbacks, the properties, outside range);
#   2. every test case of test_cuda_saved (call 5 of session 13 failed one, with rung 9 inside `best`),
#      test_cuda_forward and test_cuda_backward;
#   3. if time is left: bench_forward.py --versions 7,9,10 with fla (both shapes; B=1 must still pipeline:
#      rung 10 about 1.37-1.38 ms, rung 7 about 1.45-1.48).
# Needs .cudabin/bins.tar.xz (test_cuda_forward, test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so,
# stripped, built at HEAD; RESULTS.md "How to reproduce") and, for 3, .fla; carry `.cudabin .fla`. Writes
# logs.tar.xz and summary.log to $OUT. Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
END=560
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
timeout $(left 90) /tmp/b/test_cuda_forward "CUDA v10*" --durations yes > /tmp/l/v10.log 2>&1; rc=$?
echo "[$(el) s] rung 10's tests rc $rc: $(res /tmp/l/v10.log)" | tee -a /tmp/l/summary.log
for t in saved:60 forward:170 backward:300; do
  n=${t%%:*}; lim=${t##*:}
  timeout $(left $lim) /tmp/b/test_cuda_$n --durations yes > /tmp/l/$n.log 2>&1; rc=$?
  echo "[$(el) s] test_cuda_$n (every test case) rc $rc: $(res /tmp/l/$n.log)" | tee -a /tmp/l/summary.log
done
if [ -d .fla ] && [ $(( END - $(el) )) -gt 100 ]; then
  timeout $(left 200) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --ops delta_rule,gated_delta_rule --versions 7,9,10 --rep 40 > /tmp/l/fbench.log 2>&1; rc=$?
  echo "[$(el) s] bench_forward rungs 7, 9, 10 with fla rc $rc: $(grep -E '^ +(delta_rule|gated_delta_rule):' /tmp/l/fbench.log | tr -s ' ' | tr '\n' ';')" | tee -a /tmp/l/summary.log
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log $OUT/
