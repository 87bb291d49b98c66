#!/usr/bin/env bash
# Session 16 call 2: the 16-warp lean state kernel (v2_state_lean_ws, knob LINATTN_LEAN_WS=1 in rung 9 only).
# First its bits: rung 9 with it against rung 6 without it (LINATTN_V2_BV=64, so every case takes 64-column
# tiles), rung 9's properties against the reference, and the saving forward (the old kernel's kSave) against
# `best` with it; racecheck on the bit test's first cases. Then speed: knob_rounds.py (GDN, DeltaNet, B=8,
# 5 rounds, with fla) and the state kernel alone. Carry .cudabin (test_cuda_forward, test_cuda_saved,
# liblinattn_cuda_capi.so) and .fla. Bounded to 420 s.
set -u
OUT=${OUT:-/tmp/out}; END=420
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
B9='CUDA v9 lean overlap forward equals v6 bit for bit for DeltaNet and GDN'
P9='CUDA v9 lean overlap chunked forward equals the float64 reference for every operator in bfloat16'
G9='CUDA v9 lean overlap chunked forward with bfloat16 gates equals the reference on the rounded gates'
SV='CUDA saving forward and every saved backward rung follow forward rung 9 where best runs it bit for bit'
LINATTN_LEAN_WS=1 LINATTN_V2_BV=64 timeout $(left 60) /tmp/b/test_cuda_forward "$B9" > /tmp/l/b9.log 2>&1
note "ws: v9 (ws) = v6 (old) bit for bit, BV 64 forced, rc $?: $(res /tmp/l/b9.log)"
LINATTN_LEAN_WS=1 LINATTN_V2_BV=64 timeout $(left 60) /tmp/b/test_cuda_forward "$P9" "$G9" > /tmp/l/p9.log 2>&1
note "ws: v9 properties, BV 64 forced, rc $?: $(res /tmp/l/p9.log)"
LINATTN_LEAN_WS=1 timeout $(left 80) /tmp/b/test_cuda_saved "$SV" > /tmp/l/sv.log 2>&1
note "ws: saving forward (old kSave kernel) = best (ws) bit for bit rc $?: $(res /tmp/l/sv.log)"
LINATTN_V9_BIT_CASES=4 LINATTN_LEAN_WS=1 LINATTN_V2_BV=64 timeout $(left 60) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_forward "$B9" > /tmp/l/race.log 2>&1
note "ws: racecheck of the bit test rc $?: $(res /tmp/l/race.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/race.log | tail -1)"
timeout $(left 150) python3 optimized/cuda/bench/knob_rounds.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops gated_delta_rule,delta_rule --rounds 5 --rep 100 \
  --runs "base:;ws:LINATTN_LEAN_WS=1;ws+flat:LINATTN_LEAN_WS=1,LINATTN_STATE_GRID=flat;ws+pdl:LINATTN_LEAN_WS=1,LINATTN_LEAN_PDL=1" \
  > /tmp/l/knobs.log 2>&1
note "knob_rounds GDN and DeltaNet at B=8 rc $?"
cat /tmp/l/knobs.log >> /tmp/l/summary.log
timeout $(left 60) python3 optimized/cuda/bench/state_knob_sweep.py --lib /tmp/b/liblinattn_cuda_capi.so --ops gated_delta_rule,delta_rule \
  --runs "9:;9:LINATTN_LEAN_WS=1;9:;9:LINATTN_LEAN_WS=1" > /tmp/l/state_alone.log 2>&1
note "state kernel alone rc $?"
cat /tmp/l/state_alone.log >> /tmp/l/summary.log
finish
