#!/usr/bin/env bash
# Session 5 device call 6: forward rung 4 revision 2 (v4_levels.cu operand build): every forward test,
# the 30-case bf16 properties, memcheck and racecheck, v4's mutants 31-37, and its speed side by side
# with the binaries of 58536b9 (rung 4 as measured in calls 1-3) in the same call.
set -u
mkdir -p /tmp/b /tmp/old /tmp/m
tar -xJf .cudabin/bins.tar.xz -C /tmp/b; tar -xJf .cudabin/bins_58536b9.tar.xz -C /tmp/old; tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee $OUT/env.log
F=/tmp/b/test_cuda_forward
( time timeout 120 $F --durations yes ) > $OUT/tests.log 2>&1; echo "forward tests: $(grep -E '^All tests|^test cases' $OUT/tests.log)"; grep -B2 -A12 "FAILED" $OUT/tests.log | head -40
for r in v3 v4; do RC_PARAMS="seed=20261129 max_success=30" timeout 40 $F "CUDA $r chunked forward equals the float64 reference for every operator in bfloat16" > $OUT/p30_$r.log 2>&1
  echo "fwd $r property 30 cases: $(grep -E '^All tests|^test cases' $OUT/p30_$r.log)"; done
PK='CUDA chunked forward of a packed batch of many short sequences equals the reference'
timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 $F "$PK" 2>&1 | grep -E "SUMMARY|All tests|test cases"
timeout 110 compute-sanitizer --tool racecheck --error-exitcode 9 $F "$PK" 2>&1 | grep -E "SUMMARY|All tests|test cases"
# Speed: old (58536b9) and new v4 side by side, the intra kernel alone too (--split); fla as the yardstick.
for tag in old b; do
  timeout 100 python3 optimized/cuda/bench/bench_forward.py --lib /tmp/$tag/liblinattn_cuda_capi.so --fla .fla --ops gated_delta_rule,kda,gdn2 --versions 4 --sweep-versions 4 --split --rep 60 --json $OUT/bench_$tag.json > $OUT/bench_$tag.log 2>&1
  echo "== $tag"; sed -n '/^summary/,$p' $OUT/bench_$tag.log; done
M=/tmp/m/test_cuda_forward
P4='CUDA v4 chunked forward equals the float64 reference for every operator in bfloat16'
RG='CUDA chunked forward with ragged last chunks equals the reference for lengths around 64'
SZ='CUDA chunked forward is exact at the tuned and the largest head sizes up to K = V = 256'
DT='CUDA chunked forward is deterministic: two runs give bitwise equal outputs'
rm_() { local n=$1; shift; for t in "$@"; do r=$(LINATTN_MUTANT=$n RC_PARAMS="seed=20261129 max_success=30" timeout 30 $M "$t" 2>&1 | grep -E "^test cases|^All tests passed" | tail -1); echo "mutant $n | $t | ${r:-no summary (crash or timeout)}"; done; }
{ rm_ 0 "$P4"; rm_ 31 "$P4" "$RG"; rm_ 32 "$P4" "$RG"; rm_ 33 "$DT" "$P4"; rm_ 34 "$P4" "$RG"; rm_ 35 "$P4" "$RG"; rm_ 36 "$P4" "$RG"; rm_ 37 "$P4" "$SZ"; } 2>&1 | tee $OUT/mutants_v4.log
echo "mutant 33 under racecheck:"; LINATTN_MUTANT=33 timeout 100 compute-sanitizer --tool racecheck $M "$PK" 2>&1 | grep -E "RACECHECK SUMMARY" | head -2
