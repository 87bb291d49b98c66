#!/usr/bin/env bash
# Session 12 call 5 (carry .cudabin): is the state kernel bound by the bytes its tiles bring in? Rung 8's
# state kernel alone with each group of tile loads left out (LINATTN_V8_SKIP: 128 w_aux + q~, 32 KB per
# block and chunk at K = 128; 256 Kd + P, 24 KB; 512 u, 16 KB at 64 value columns; 4 all of them).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1
L=/tmp/b/liblinattn_cuda_capi.so
R="7:;8:;8:LINATTN_V8_SKIP=4;8:LINATTN_V8_SKIP=128;8:LINATTN_V8_SKIP=256;8:LINATTN_V8_SKIP=512;8:LINATTN_V8_SKIP=384;8:LINATTN_V8_SKIP=640;8:LINATTN_V8_SKIP=768;7:;8:"
timeout 150 python3 optimized/cuda/bench/state_knob_sweep.py --lib $L --runs "$R" --shapes 8x4096x16x128x128,1x32768x16x128x128 > $OUT/sweep.log 2>&1
echo "sweep rc $?"; cat $OUT/sweep.log
