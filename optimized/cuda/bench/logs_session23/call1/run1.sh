#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 22.
# (Session 21's pending script ran as session 22's calls 1-2: bench/logs_session22/.)
# 1. Session 22's unrun trial: the dstates kernel with its value tile first in the grid (LINATTN_BWD3_VFIRST=1,
#    bwd_v3_async.cu's launch_dstates; off by default). bench/analysis_bwd_plan.md ("Session 22") counts 0.44-0.47 GB of
#    DRAM re-reads in that kernel because a head's two value tiles run in different waves, and estimates 0 to 0.16 ms.
#    Its bit-for-bit test, then DeltaNet and GDN forward + backward with saved states, `best`, the knob unset / set /
#    unset again in one process (bench_backward.py --env-variant; no fla: its cold Triton autotuning would not fit,
#    fla's DeltaNet figure is session 21's 2.84 ms). Session 22 wrote and built it but had too little device time
#    left to start a machine.
#    Also the dstates kernel over a head's whole value range, 128 columns per block (LINATTN_BWD3_BV=128 at key width
#    128; rung 23's single stage of the K-side tiles, 193,536 bytes, 207 registers, no spill): 128 blocks in one wave
#    instead of 256 in two, each chunk's K-side tiles read once per head. Its bit test, and the same bench rows.
#    Then memcheck of both knobs' tests.
# 2. (STEP=2, a second call) racecheck of rung 22's bit test with the whole call (killed at ~200 s in sessions 21 and
#    22, 2,728 assertions passed, no hazard reported), then racecheck of the two knobs' tests with what is left.
# Later, if wanted: bench/accuracy_vs_fla.py for KDA and GDN2 at K=V=128 (--T 1,65,150), one process per operator with
# at least 260 s each (fla's cold autotuning took 226 s for KDA in session 22 call 5). Export
# TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1 and pack it into $OUT/triton_cache.tgz at the end;
# copied to .tcache/ here and carried, it spares later calls that autotuning (device_run.sh unpacks .tcache/).
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at HEAD);
# carry `.cudabin`. Usage on the device: bash optimized/cuda/bench/pending_device_run.sh (STEP=2 bash ... for step 2).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-575}; STEP=${STEP:-1}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
KNOBS="CUDA dstates kernel with its value tile first in the grid gives the same gradients bit for bit,CUDA dstates kernel over 128 value columns per block gives the same gradients bit for bit"
if [ "$STEP" = 1 ]; then
  timeout $(left 150) /tmp/b/test_cuda_backward "$KNOBS" -w NoTests --durations yes > /tmp/l/dstates_knobs_test.log 2>&1
  note "dstates knobs bit tests rc $?: $(res /tmp/l/dstates_knobs_test.log)"
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 200) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
    --ops delta_rule,gated_delta_rule --bwd-versions 0 --env-variant LINATTN_BWD3_VFIRST=1 \
    --env-variant LINATTN_BWD3_BV=128 --json /tmp/l/bench_vf.json > /tmp/l/bench_vf.log 2>&1
  note "bench DeltaNet, GDN rc $?"
  grep -E "saving states|dstates|VFIRST|BWD3_BV" /tmp/l/bench_vf.log | cut -c1-260 >> /tmp/l/summary.log
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 200) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward "$KNOBS" -w NoTests \
    > /tmp/l/knobs_memcheck.log 2>&1
  note "memcheck knobs tests rc $?: $(res /tmp/l/knobs_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/knobs_memcheck.log | tail -1)"
else
  BIT='CUDA v22 gradients equal v21 gradients bit for bit'
  LINATTN_BWD3_BV=64 timeout $(left 400) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward \
    "$BIT" -w NoTests > /tmp/l/san22_racecheck.log 2>&1
  note "racecheck rung 22 bit test (BV 64) rc $?: $(res /tmp/l/san22_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san22_racecheck.log | tail -1)"
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 560) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward "$KNOBS" -w NoTests \
    > /tmp/l/knobs_racecheck.log 2>&1
  note "racecheck knobs tests rc $?: $(res /tmp/l/knobs_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/knobs_racecheck.log | tail -1)"
fi
finish
