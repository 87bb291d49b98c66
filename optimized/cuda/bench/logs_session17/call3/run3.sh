#!/usr/bin/env bash
# Session 17 call 3: every test case of test_cuda_forward, test_cuda_saved and test_cuda_backward on the tree of
# call 2 (main 33d2ebc + next/intra-stores rebased + the 16-column state-kernel fragment loads), built here.
# Carry .cudabin (this call's bins.tar.xz). Bounded to 590 s.
set -u
OUT=${OUT:-/tmp/out}; END=590
source optimized/cuda/bench/call_lib.sh
unpack
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 150) /tmp/b/test_cuda_forward --durations yes > /tmp/l/forward.log 2>&1
note "test_cuda_forward (every test case) rc $?: $(res /tmp/l/forward.log)"
timeout $(left 110) /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved.log 2>&1
note "test_cuda_saved (every test case) rc $?: $(res /tmp/l/saved.log)"
timeout $(left 400) /tmp/b/test_cuda_backward --durations yes > /tmp/l/backward.log 2>&1
note "test_cuda_backward (every test case) rc $?: $(res /tmp/l/backward.log)"
finish
