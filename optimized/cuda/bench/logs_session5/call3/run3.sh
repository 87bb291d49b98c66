#!/usr/bin/env bash
# Session 5 device call 3: forward speed, v4 against v5 (split on and off) and fla, both shapes.
set -u
mkdir -p /tmp/b && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
BIN=/tmp/b BENCH_TIMEOUT=400 BENCH_ARGS="--versions 1,4,5 --sweep-versions 5 --split --rep 40" bash optimized/cuda/bench/device_run.sh bench 2>&1 | tail -70
