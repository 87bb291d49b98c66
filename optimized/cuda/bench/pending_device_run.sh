#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 9:
# what session 9 wrote after its last device call (RESULTS.md Status, "Next"), bounded to about 550 s so it
# fits one `run` call (600 s). Session 8's list (rungs 11-13, the saved forward's review fixes) ran in
# session 9 call 1 (bench/logs_session9/README.md).
#   1. logs_session9/rung15_run.sh with PART2=1 (at most 280 s): rung 15 (one bf16 MMA per product,
#      bwd_v15_hionly.cu) -- its fixed-case test against the float64 reference beside rungs 13 and 8
#      (compare with bench/models/bwd_v15_hionly_model.py's prediction), properties, shared cases; then
#      bench_backward.py --bwd-versions 8,13,15 with the per-kernel profile, memcheck and racecheck on one
#      property (3 cases).
#   2. logs_session9/rung16_run.sh with PART2=1 (the time left, at most 260 s): rung 16 (KDA / GDN2: the
#      split without B9, then one B9 kernel, bwd_v16_b9one.cu) -- its closeness test against rung 8, bit
#      test against rung 13, properties; bench_backward.py --ops kda,gdn2 --bwd-versions 8,13,16.
# Second call: `device_run.sh bbench` (BBENCH_ARGS="--bwd-versions 13,<the new best candidates>"), which
# writes $OUT/triton_cache.tgz: copy it to .tcache/ (fla's GDN2 kernels were missing from the carried
# cache in session 9, so its GDN2 row never ran there); the mutants (make_mutants.py tree;
# BMUT_ONLY="v15 v16" MUT_SAN=0 device_run.sh bmutants); racecheck over the new best's whole bit test
# (> 200 s); rung15_run.sh with PART3=1 (ncu: are the chunk-gradient kernels MMA-bound?).
# Needs .cudabin/bins.tar.xz (test_cuda_forward, test_cuda_backward, test_cuda_saved,
# liblinattn_cuda_capi.so, stripped; pack with `tar -cf - -C DIR . | xz -9 -T2`: ~11 MB, the carry
# limit is 64 MiB with the working tree) built at or after the commit that last changed optimized/cuda;
# carry `.cudabin .tcache`. Writes logs.tar.xz to $OUT.
# Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/all
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
for r in 15 16; do
  rm -rf /tmp/l; mkdir -p /tmp/l /tmp/o$r
  lim=280; [ $r = 16 ] && lim=$(( 550 - $(el) ))
  [ $lim -lt 30 ] && { echo "[$(el) s] rung $r: no time left"; continue; }
  PART2=1 OUT=/tmp/o$r timeout $lim bash optimized/cuda/bench/logs_session9/rung${r}_run.sh > /tmp/all/rung${r}_stdout.log 2>&1
  rc=$?; mv /tmp/l /tmp/all/rung$r; echo "[$(el) s] rung $r (rc $rc)"; cat /tmp/all/rung$r/summary.log
done
tar -cJf $OUT/logs.tar.xz -C /tmp/all .
