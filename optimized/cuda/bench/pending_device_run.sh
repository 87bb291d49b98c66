#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device calls of the session after session 24.
# Session 24 made rung 26 (bwd_v26_wyasync.cu: DeltaNet's G1' and G2' by cp.async) `best` after call 3 ran every rung 25
# and 26 test, mutants 298-300, memcheck, racecheck, test_cuda_saved and six of the eight shared fixed-case tests
# (bench/logs_session24/README.md), and wrote rung 27 (bwd_v27_dvplanes.cu: dv_new as bf16 hi and lo planes), never yet
# run on a GPU. What waits:
# STEP=1 (one call, bound 560 s; session 24 call 1 needed 449 s for all 109 cases, and the suite has grown by about 13
#   cases): every test_cuda_backward case with `best` = rung 26 (the two fixed-case tests call 3 did not finish, K = V =
#   128 with both value tiles and determinism, among them; rung 27's tests, and rung 27 through kRungs).
# STEP=2 (a second call; carry `.fla` too): every test_cuda_saved case with `best` = rung 26, then DeltaNet forward +
#   backward with fla beside rungs 26 and 24 in one process at B=8 T=4096 H=16 K=V=128: the goal's ratio measured on one
#   machine (sessions 21-24 compared with fla's 2.84 ms of session 21); then, if .cudabin/mut.tar.xz is carried (the
#   make_mutants.py build at HEAD), mutant 301 (rung 25's slab wait dropped: a race, expected to fail its bit test) and
#   302 (rung 27's lo plane zeroed on even columns: must fail rung 27's bit test). If rung 27 passes and is faster, it
#   becomes `best` (chunk_cuda.cu).
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at HEAD: the
# binaries packed at the end of session 24: .cudabin/BUILT_AT says which commit, `best` = rung 26, rung 27 written); carry
# `.cudabin` (and `.fla` for STEP=2; the carry limit is 64 MiB in all: the tree is about 23 MB, bins 19, mut 17.5, .fla
# 7 -- move mut.tar.xz aside for a call that does not need it).
# Usage on the device: bash optimized/cuda/bench/pending_device_run.sh (STEP=2 bash ... for step 2).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-585}; STEP=${STEP:-1}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
if [ "$STEP" = 1 ]; then
  timeout $(left 575) /tmp/b/test_cuda_backward -w NoTests --durations yes > /tmp/l/backward_all.log 2>&1
  note "test_cuda_backward (all) rc $?: $(res /tmp/l/backward_all.log)"
else
  timeout $(left 120) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
  note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 300) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 26,27,24,26,27 --rep 50 --json /tmp/l/bench_fla.json \
    > /tmp/l/bench_fla.log 2>&1
  note "bench_backward delta_rule rungs 26, 27, 24 with fla rc $?"
  grep -E "backward|saving|kernels|fla" /tmp/l/bench_fla.log | grep -v "^summary" | cut -c1-220 >> /tmp/l/summary.log
  cp /tmp/l/summary.log "$OUT/"
  if [ -f .cudabin/mut.tar.xz ]; then  # mutant 301 (session 24's review: an ordering bug), make_mutants.py's build at HEAD
    mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
    LINATTN_MUTANT=301 timeout $(left 60) /tmp/m/test_cuda_backward 'CUDA v25 gradients equal v24 gradients bit for bit' \
      -w NoTests > /tmp/l/mut_301.log 2>&1
    note "mutant 301 rc $? (expected to fail: a race): $(res /tmp/l/mut_301.log)"
    LINATTN_MUTANT=302 timeout $(left 60) /tmp/m/test_cuda_backward 'CUDA v27 gradients equal v26 gradients bit for bit' \
      -w NoTests > /tmp/l/mut_302.log 2>&1
    note "mutant 302 rc $? (must fail): $(res /tmp/l/mut_302.log)"
  fi
fi
finish
