#!/usr/bin/env bash
# Session 18 call 5: every test case of test_cuda_saved on the merged tree (call 2 ran them with rung 19's dw_aux in
# bf16 by default; since call 4 that is LINATTN_BWD19_DWA_BF16=1 only). Carry .cudabin (bins.tar.xz: test_cuda_saved).
set -u
OUT=${OUT:-/tmp/out}; END=150
source optimized/cuda/bench/call_lib.sh
unpack
timeout $(left 140) /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved.log 2>&1
note "test_cuda_saved (every test case) rc $?: $(res /tmp/l/saved.log)"
finish
