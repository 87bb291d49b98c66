#!/usr/bin/env bash
# Session 6 device call 1: backward rungs 5 and 6 on a GPU for the first time. Speed first (rungs 4,
# 5, 6 for all four operators, without fla: bench_backward.py checks each rung's gradients against
# rung 1 before timing), then every backward test case (binaries of efb0b1e from .cudabin).
set -u
mkdir -p /tmp/b && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee $OUT/env.log
( time timeout 150 python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --bwd-versions 4,5,6 --rep 30 --slow-rep 5 --json $OUT/bbench.json ) > $OUT/bbench.log 2>&1
grep -v "^\s*$" $OUT/bbench.log | tail -45
( time LINATTN_CUDA_BACKWARD_REPORT=1 timeout 400 /tmp/b/test_cuda_backward --durations yes ) > $OUT/btests.log 2>&1
echo "backward tests: $(grep -E '^All tests|^test cases|^real' $OUT/btests.log | tr '\n' ' ')"
grep -B3 -A25 "FAILED" $OUT/btests.log | head -80
