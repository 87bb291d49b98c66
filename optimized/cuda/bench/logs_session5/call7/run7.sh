#!/usr/bin/env bash
# Session 5 device call 7: forward rung 4 revision 3 (phase 4's off-diagonal blocks of A on tensor
# cores, tc_common.cuh, V4Levels::tc_inverse): every forward test, speed side by side with revision 2
# (binaries of c3af334) in the same call, mutant 38, the 30-case property, memcheck, racecheck.
set -u
mkdir -p /tmp/b /tmp/old /tmp/m
tar -xJf .cudabin/bins.tar.xz -C /tmp/b; tar -xJf .cudabin/bins_c3af334.tar.xz -C /tmp/old; tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee $OUT/env.log
F=/tmp/b/test_cuda_forward
( time timeout 60 $F ) > $OUT/tests.log 2>&1; echo "forward tests: $(grep -E '^All tests|^test cases' $OUT/tests.log)"; grep -B2 -A12 "FAILED" $OUT/tests.log | head -30
for tag in old b; do
  timeout 60 python3 optimized/cuda/bench/bench_forward.py --lib /tmp/$tag/liblinattn_cuda_capi.so --fla .fla --versions 4 --sweep-versions 4 --split --rep 40 --json $OUT/bench_$tag.json > $OUT/bench_$tag.log 2>&1
  echo "== $tag"; sed -n '/^summary/,$p' $OUT/bench_$tag.log | grep -v softmax; done
M=/tmp/m/test_cuda_forward
P4='CUDA v4 chunked forward equals the float64 reference for every operator in bfloat16'
SZ='CUDA chunked forward is exact at the tuned and the largest head sizes up to K = V = 256'
for t in "$P4" "$SZ"; do r=$(LINATTN_MUTANT=38 RC_PARAMS="seed=20261129 max_success=30" timeout 20 $M "$t" 2>&1 | grep -E "^test cases|^All tests passed" | tail -1); echo "mutant 38 | $t | ${r:-none}"; done
RC_PARAMS="seed=20261129 max_success=30" timeout 15 $F "$P4" 2>&1 | grep -E "^All tests|^test cases" | sed 's/^/v4 property 30 cases: /'
PK='CUDA chunked forward of a packed batch of many short sequences equals the reference'
timeout 20 compute-sanitizer --tool memcheck --error-exitcode 9 $F "$PK" 2>&1 | grep -E "SUMMARY"
timeout 75 compute-sanitizer --tool racecheck --error-exitcode 9 $F "$PK" 2>&1 | grep -E "SUMMARY"
