#!/usr/bin/env bash
# Session 8 device call 6 (binaries of bf95605, .cudabin/BUILT_AT): backward rung 10 (helper rung10's
# bwd_v10_split.cu, not run before): logs_session8/rung10_run.sh with PART2=1 (its four test cases, the
# shared packed / T = 1 / ragged / determinism cases, bench_backward.py --bwd-versions 8,10 with the
# saving rows, memcheck on the packed backward and the closeness test). Logs: $OUT/logs.tar.xz.
set -u
PART2=1 bash optimized/cuda/bench/logs_session8/rung10_run.sh
sed -n '/^summary/,$p' /tmp/l/bbench810.log
