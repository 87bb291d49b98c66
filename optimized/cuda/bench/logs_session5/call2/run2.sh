#!/usr/bin/env bash
# Session 5 device call 2: the forward bf16 properties at 30 cases (seed 20261129), then forward sanitizers.
set -u
mkdir -p /tmp/b && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
for r in v3 v4 v5; do n="CUDA $r chunked forward equals the float64 reference for every operator in bfloat16"
  [ $r = v5 ] && n="CUDA v5 split forward equals the float64 reference for every operator in bfloat16"
  RC_PARAMS="seed=20261129 max_success=30" timeout 90 /tmp/b/test_cuda_forward "$n" > $OUT/p30_$r.log 2>&1
  echo "fwd $r property 30 cases: $(grep -E '^All tests|^test cases' $OUT/p30_$r.log)"; grep -A6 "^Falsifiable\|FAILED" $OUT/p30_$r.log | head -12; done
BIN=/tmp/b bash optimized/cuda/bench/device_run.sh sanitize 2>&1 | tail -30
