#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 9:
# what session 9 wrote after its last device call (RESULTS.md Status, "Next"), bounded to about 540 s so it
# fits one `run` call (600 s). Session 8's list (rungs 11-13, the saved forward's review fixes) ran in
# session 9 call 1 (bench/logs_session9/README.md).
#   1. logs_session9/rung15_run.sh with PART2=1: rung 15 (one bf16 MMA per product, bwd_v15_hionly.cu)
#      -- its fixed-case test against the float64 reference beside rungs 13 and 8 (compare with the
#      model's prediction, bench/models/bwd_v15_hionly_model.py), properties, shared cases; then
#      bench_backward.py --bwd-versions 8,13,15 with the per-kernel profile, memcheck and racecheck on
#      one property (3 cases). At most ~300 s.
#   2. The backward benchmark beside fla for every operator (device_run.sh bbench, --bwd-versions 13,15),
#      which also writes $OUT/triton_cache.tgz: copy it to .tcache/ (fla's GDN2 kernels were missing
#      from the carried cache in session 9, so its GDN2 row never ran there). With the time left.
# Second call: the mutants of rung 15 (make_mutants.py tree; BMUT_ONLY=v15 MUT_SAN=0 device_run.sh
# bmutants), then racecheck over rung 13's (or 15's, if it becomes best) whole bit test (> 200 s), and
# rung15_run.sh with PART3=1 (ncu: are the chunk-gradient kernels MMA-bound?).
# Needs .cudabin/bins.tar.xz (test_cuda_forward, test_cuda_backward, test_cuda_saved,
# liblinattn_cuda_capi.so, stripped; pack with `tar -cf - -C DIR . | xz -9 -T2`: ~11 MB, the carry
# limit is 64 MiB with the working tree) built at or after the commit that last changed optimized/cuda;
# carry `.cudabin .fla .tcache`. Writes logs.tar.xz (and triton_cache.tgz) to $OUT.
# Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/all
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
rm -rf /tmp/l; mkdir -p /tmp/l /tmp/o15
PART2=1 OUT=/tmp/o15 timeout 320 bash optimized/cuda/bench/logs_session9/rung15_run.sh > /tmp/all/rung15_stdout.log 2>&1
rc=$?; mv /tmp/l /tmp/all/rung15; echo "[$(el) s] rung15 (rc $rc)"; cat /tmp/all/rung15/summary.log
left=$(( 540 - $(el) ))
if [ $left -gt 60 ]; then
  OUT=/tmp/all/bbench BIN=/tmp/b BBENCH_TIMEOUT=$(( left - 15 )) \
    BBENCH_ARGS="--bwd-versions 13,15 --rep 30 --slow-rep 5" bash optimized/cuda/bench/device_run.sh bbench > /dev/null 2>&1
  rc=$?; echo "[$(el) s] bbench with fla (rc $rc)"; grep -E " ms" /tmp/all/bbench/bbench.log | grep -v kernels
  [ -f /tmp/all/bbench/triton_cache.tgz ] && mv /tmp/all/bbench/triton_cache.tgz $OUT/
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/all .
