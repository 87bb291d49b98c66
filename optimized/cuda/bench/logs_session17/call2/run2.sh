#!/usr/bin/env bash
# Session 17 call 2: the local branch next/intra-stores (rebased on 33d2ebc) plus this session's state-kernel
# change at 16 value columns (S's hi and lo fragments of a warp's one n-tile in one ldmatrix.x4; P v_new's
# n-tile by ldmatrix.x2; P tile loads by constant steps), built here, against main's library (33d2ebc, as
# old/): (1) the two builds' o and final state bit for bit, every operator, odd shapes and one pipelined
# B=1 sequence; (2) A/B timings in one process at B=1 T=32768 (whole forward, state kernels alone, intra
# kernels alone) and at B=8 T=4096, with fla; (3) the rung 7 / 9 / 10 bit tests; (4) ncu of one segment's
# state kernel at B=1 (GDN). Carry .cudabin (this call's bins.tar.xz) and .fla.
set -u
OUT=${OUT:-/tmp/out}; END=470
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > /tmp/l/env.log
KR="python3 optimized/cuda/bench/knob_rounds.py --lib /tmp/b/liblinattn_cuda_capi.so --lib2 /tmp/b/old/liblinattn_cuda_capi.so"
timeout $(left 60) $KR --ops delta_rule,gated_delta_rule,kda,gdn2 --rounds 1 --rep 5 \
  --shapes 2x200x3x64x72,1x130x2x100x200,1x9000x16x128x128,1x5000x16x64x64,3x4100x8x128x128,17x300x8x64x64 \
  --runs "new:;main@2:" > /tmp/l/bits_two_builds.log 2>&1
note "two-build bit check (branch against main) rc $?: $(grep -c 'against new: o 0.000e+00 state 0.000e+00' /tmp/l/bits_two_builds.log) of 24 equal"
timeout $(left 170) $KR --fla .fla --ops gated_delta_rule,delta_rule --shapes 1x32768x16x128x128 --rounds 3 --rep 40 \
  --runs "new:;main@2:;new-state:LINATTN_TC_ONLY=state;main-state@2:LINATTN_TC_ONLY=state;new-intra:LINATTN_TC_ONLY=intra;main-intra@2:LINATTN_TC_ONLY=intra" \
  > /tmp/l/ab_b1.log 2>&1
note "A/B at B=1 T=32768 rc $?"
grep -E 'against new|ms$' /tmp/l/ab_b1.log | grep -v intra >> /tmp/l/summary.log; grep -E ' ms$' /tmp/l/ab_b1.log | grep intra >> /tmp/l/summary.log
timeout $(left 110) $KR --fla .fla --ops gated_delta_rule,delta_rule --shapes 8x4096x16x128x128 --rounds 3 --rep 100 \
  --runs "new:;main@2:;new-intra:LINATTN_TC_ONLY=intra;main-intra@2:LINATTN_TC_ONLY=intra" > /tmp/l/ab_b8.log 2>&1
note "A/B at B=8 T=4096 rc $?"
grep -E ' ms$' /tmp/l/ab_b8.log >> /tmp/l/summary.log
B='CUDA v7 overlap forward equals v4 bit for bit for DeltaNet and GDN,CUDA v9 lean overlap forward equals v6 bit for bit for DeltaNet and GDN'
timeout $(left 60) /tmp/b/test_cuda_forward --durations yes "$B" > /tmp/l/bit_tests.log 2>&1
note "rung 7 / 9 bit tests rc $?: $(res /tmp/l/bit_tests.log)"
timeout $(left 60) /tmp/b/test_cuda_forward --durations yes "CUDA v10*" > /tmp/l/v10_tests.log 2>&1
note "rung 10 tests (CUDA v10*) rc $?: $(res /tmp/l/v10_tests.log)"
SEC="--section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters"
mkdir -p /tmp/t
timeout $(left 120) ncu --clock-control none -k regex:v2_state_pdl --launch-skip 3 --launch-count 1 $SEC -o /tmp/t/state_b1 \
  python3 optimized/cuda/bench/state_knob_sweep.py --lib /tmp/b/liblinattn_cuda_capi.so --runs "10:" --only state \
  --ops gated_delta_rule --shapes 1x32768x16x128x128 --rep 1 > /tmp/t/state_b1.run.txt 2>&1
note "ncu state kernel B=1 rc $?"
ncu -i /tmp/t/state_b1.ncu-rep --page details > /tmp/l/state_b1.details.txt 2>&1
ncu -i /tmp/t/state_b1.ncu-rep --page source --csv --print-source sass > /tmp/l/state_b1.sass.csv 2>&1
cp /tmp/t/state_b1.run.txt /tmp/l/
note "$(grep -E 'Duration' /tmp/l/state_b1.details.txt | head -1)"
finish
