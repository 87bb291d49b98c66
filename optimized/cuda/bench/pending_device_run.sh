#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 22.
# (Session 21's pending script ran as session 22's calls 1-2: bench/logs_session22/.) Rung 22 (`best`) has passed every
# test case and memcheck of its bit test; what is left of its record is racecheck of that bit test, which was killed at
# its bound in sessions 21 and 22 (about 200 s each, 2,728 assertions passed, no hazard reported). This call gives it
# all of one call. Second call, if wanted: bench/accuracy_vs_fla.py for KDA and GDN2 at K=V=128 (--T 1,65,150), one
# process per operator with at least 260 s each (fla's cold Triton autotuning took 226 s for KDA in session 22 call 5).
# Export TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1 and pack it into $OUT/triton_cache.tgz at the end;
# copied to .tcache/ here and carried, it spares later calls that autotuning (device_run.sh unpacks .tcache/).
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at HEAD);
# carry `.cudabin`. Usage on the device: bash optimized/cuda/bench/pending_device_run.sh.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-575}
source optimized/cuda/bench/call_lib.sh
unpack
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
BIT='CUDA v22 gradients equal v21 gradients bit for bit'
LINATTN_BWD3_BV=64 timeout $(left 560) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward \
  "$BIT" -w NoTests > /tmp/l/san22_racecheck.log 2>&1
note "racecheck rung 22 bit test (BV 64) rc $?: $(res /tmp/l/san22_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san22_racecheck.log | tail -1)"
finish
