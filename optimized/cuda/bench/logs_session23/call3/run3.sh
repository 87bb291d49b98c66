#!/usr/bin/env bash
# Session 23 call 3: what call 2 left (its full test_cuda_backward run was cut off at 330 s, every test on that machine
# taking about 1.8x its session 22 time; mutant 291 was run at LINATTN_BWD3_BV=128, which sets both rungs' width, so
# both ran the mutated kernel and agreed), rung 24's width rule measured at five shapes, and racecheck.
#   0. the three test_cuda_backward cases call 2 did not reach; mutant 291 against rung 24's bit test at the default
#      width (there rung 22 runs the two-stage kernel and rung 24 the mutated single-stage one): must fail.
#   1. DeltaNet and GDN forward + backward with saved states, rung 24 (`best`), K = V = 128, H = 16 at B x T =
#      8 x 4096 (N H = 128: 256 blocks of 64 columns, rung 24 takes 128), 6 x 4096 (96: 192 blocks, takes 128),
#      16 x 4096 (256: 512 blocks, takes 128), 4 x 4096 (64: 128 blocks, one wave: keeps 64) and 2 x 16384 (32:
#      64 blocks, keeps 32), each with LINATTN_BWD3_BV forced to 32, 64 and 128 between two unforced runs
#      (bench_backward.py --env-variant), so that the rule's pick is seen beside both alternatives in one process.
#   2. racecheck of rung 24's sanitizer test (the 128-column kernel at its default), then of session 22's knob tests.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-575}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
BIT='CUDA v24 gradients equal v22 gradients bit for bit'
LINATTN_MUTANT=291 LINATTN_BWD3_BV= timeout $(left 60) /tmp/m/test_cuda_backward "$BIT" -w NoTests > /tmp/l/mut_291.log 2>&1
note "mutant 291 (default width) rc $? (must fail): $(res /tmp/l/mut_291.log)"
REST="CUDA chunked backward at K = V = 128 with 64 and 32 column value tiles and at V up to 256 equals the reference,CUDA chunked backward is deterministic: two runs give bitwise equal gradients,CUDA chunked backward rejects bad arguments with a linattn Error naming the argument"
timeout $(left 200) /tmp/b/test_cuda_backward "$REST" -w NoTests --durations yes > /tmp/l/backward_rest.log 2>&1
note "test_cuda_backward, the 3 cases call 2 did not reach, rc $?: $(res /tmp/l/backward_rest.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 230) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --shapes 8x4096x16x128x128,6x4096x16x128x128,16x4096x16x128x128,4x4096x16x128x128,2x16384x16x128x128 \
  --ops delta_rule,gated_delta_rule --bwd-versions 24 --rep 100 --env-variant LINATTN_BWD3_BV=32 \
  --env-variant LINATTN_BWD3_BV=64 --env-variant LINATTN_BWD3_BV=128 --json /tmp/l/bench_rule.json > /tmp/l/bench_rule.log 2>&1
note "bench rung 24 width rule rc $?"
grep -E "saved states\) v24.* ms|kernels \(ms\)" /tmp/l/bench_rule.log | cut -c1-230 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
SAN='CUDA v24 on small cases per scalar operator for the sanitizers'
timeout $(left 200) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SAN" -w NoTests \
  > /tmp/l/v24_racecheck.log 2>&1
note "racecheck rung 24 sanitizer test rc $?: $(res /tmp/l/v24_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/v24_racecheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
KNOBS="CUDA dstates kernel with its value tile first in the grid gives the same gradients bit for bit,CUDA dstates kernel over 128 value columns per block gives the same gradients bit for bit"
timeout $(left 560) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward "$KNOBS" -w NoTests \
  > /tmp/l/knobs_racecheck.log 2>&1
note "racecheck knobs tests rc $?: $(res /tmp/l/knobs_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/knobs_racecheck.log | tail -1)"
finish
