#!/usr/bin/env bash
# Session 20 call 4 (the session's last 205 s of device time): the two test_cuda_backward cases that call 3's full run
# did not finish (its bound killed the determinism case; the bad-arguments case after it was not reached), on the same
# binaries (rung 21 `best`). Carry .cudabin/bins.tar.xz.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-60}
source optimized/cuda/bench/call_lib.sh
unpack
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 50) /tmp/b/test_cuda_backward 'CUDA chunked backward is deterministic*','CUDA chunked backward rejects*' \
  --durations yes > /tmp/l/last2.log 2>&1
note "test_cuda_backward determinism, bad arguments rc $?: $(res /tmp/l/last2.log)"
finish
