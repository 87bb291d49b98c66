#!/usr/bin/env bash
# Session 6 device call 2: the forward state kernel's two experiments (bench/analysis_fwd_gdn.md),
# as run-time knobs of one library: LINATTN_STATE_GRID=flat (value tile the fastest grid dimension)
# and LINATTN_STATE_STAGES=3 (3-stage cp.async pipeline at BV = 16), each alone and together, beside
# fla in separate processes of this call; ncu DRAM bytes of the B=8 state kernel in both grids; every
# forward test with both knobs on, memcheck + racecheck with them; the fixed v5-vs-v4 backward test.
set -u
mkdir -p /tmp/b && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so F=/tmp/b/test_cuda_forward
bench() {  # tag, env...
  local tag=$1; shift
  env "$@" timeout 90 python3 optimized/cuda/bench/bench_forward.py --lib $L --fla .fla --versions 4 --sweep-versions 4 --split --rep 40 --json /tmp/bench_$tag.json > /tmp/bench_$tag.log 2>&1
  echo "== $tag ($*)"; sed -n '/^summary/,$p' /tmp/bench_$tag.log | grep -v softmax | grep -E "v4 |fla" ; }
bench base X=1
bench flat LINATTN_STATE_GRID=flat
bench st3 LINATTN_STATE_STAGES=3
bench both LINATTN_STATE_GRID=flat LINATTN_STATE_STAGES=3
bench base2 X=1
tar -cJf $OUT/bench_logs.tar.xz -C /tmp bench_base.log bench_flat.log bench_st3.log bench_both.log bench_base2.log bench_base.json bench_flat.json bench_st3.json bench_both.json bench_base2.json
for g in grid3 flat; do
  echo "== ncu state kernel B=8 T=4096 GDN, $g"
  LINATTN_STATE_GRID=$g timeout 60 ncu --clock-control none -k regex:v2_state --launch-count 1 --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,gpu__time_duration.sum \
    python3 optimized/cuda/bench/bench_forward.py --lib $L --versions 4 --ops gated_delta_rule --shapes 8x4096x16x128x128 --rep 1 2>&1 | grep -E "v2_state|dram__|lts__|gpu__time|==PROF==|Error" | head -12
done
export LINATTN_STATE_GRID=flat LINATTN_STATE_STAGES=3
( time timeout 90 $F ) > $OUT/tests_knobs.log 2>&1; echo "forward tests, both knobs: $(grep -E '^All tests|^test cases' $OUT/tests_knobs.log)"; grep -B2 -A12 "FAILED" $OUT/tests_knobs.log | head -30
RC_PARAMS="seed=20261130 max_success=30" timeout 30 $F 'CUDA v4 chunked forward equals the float64 reference for every operator in bfloat16' 2>&1 | grep -E "^All tests|^test cases" | sed 's/^/v4 property 30 cases, both knobs: /'
PK='CUDA chunked forward of a packed batch of many short sequences equals the reference'
timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 $F "$PK" 2>&1 | grep -E "SUMMARY"
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $F "$PK" 2>&1 | grep -E "SUMMARY"
timeout 60 compute-sanitizer --tool synccheck --error-exitcode 9 $F "$PK" 2>&1 | grep -E "SUMMARY"
echo "backward with the flat grid:"; LINATTN_STATE_STAGES=2 timeout 60 /tmp/b/test_cuda_backward 'CUDA chunked backward of a packed batch of many short sequences equals the reference' 2>&1 | grep -E "^All tests|^test cases"
unset LINATTN_STATE_GRID LINATTN_STATE_STAGES
LINATTN_CUDA_BACKWARD_REPORT=1 timeout 60 /tmp/b/test_cuda_backward 'CUDA v5 grads kernel after rung 3 prepare gives rung 4 gradients bit for bit' > $OUT/btest_v5bit.log 2>&1
grep -E "^rung 5 vs|^All tests|^test cases" $OUT/btest_v5bit.log | head -30
