#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 10:
# what session 10 wrote after its last device call (RESULTS.md Status, "Next"), bounded to about 560 s so it
# fits one `run` call (600 s). Session 9's list (rungs 15, 16) ran in session 10 call 1 (bench/logs_session10/).
#   1. logs_session10/savedstates_run.sh (at most 300 s): the saving forward with states (RESULTS.md "Saved
#      states"; helper savedst, reviewed by review11): its bit test against the recompute path, refusal test,
#      the existing saved tests, bench_backward.py with the "(saving states)" rows, memcheck and racecheck.
#   2. logs_session10/fwd7_run.sh (the time left, at most 250 s), if it exists: forward rung 7 (the intra
#      kernel at 3 blocks per SM by shared-memory overlap; RESULTS.md "Forward rung 7"; helper fwd7).
# Second call: `bench_backward.py --fla .fla --ops gdn2,kda --bwd-versions 17` (fla's GDN2 kernels compile
# there for ~130 s: the Triton cache tarball with them was too large to come back in session 10) for
# one-process figures of rung 17 and of the saved states beside fla; the forward bench with fla if rung 7 is
# faster (`device_run.sh bench` with BENCH_ARGS="--versions 4,7"); the mutants 220-223 (`device_run.sh
# smutants` in the make_mutants.py tree) and those of rung 7.
# Needs .cudabin/bins.tar.xz (test_cuda_forward, test_cuda_backward, test_cuda_saved,
# liblinattn_cuda_capi.so, stripped; RESULTS.md "How to build and carry") built at or after the commit that
# last changed optimized/cuda; carry `.cudabin`. Writes logs.tar.xz to $OUT.
# Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/all
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
for s in savedstates fwd7; do
  f=optimized/cuda/bench/logs_session10/${s}_run.sh
  [ -f $f ] || { echo "[$(el) s] $s: no script"; continue; }
  rm -rf /tmp/l; mkdir -p /tmp/l /tmp/o_$s
  lim=300; [ $s = fwd7 ] && lim=$(( 560 - $(el) )); [ $lim -gt 250 ] && lim=250
  [ $lim -lt 30 ] && { echo "[$(el) s] $s: no time left"; continue; }
  OUT=/tmp/o_$s timeout $lim bash $f > /tmp/all/${s}_stdout.log 2>&1
  rc=$?; mv /tmp/l /tmp/all/$s; echo "[$(el) s] $s (rc $rc)"; cat /tmp/all/$s/summary.log
done
tar -cJf $OUT/logs.tar.xz -C /tmp/all .
