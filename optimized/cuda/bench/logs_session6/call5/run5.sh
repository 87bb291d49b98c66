#!/usr/bin/env bash
# Session 6 device call 5: the state kernel's fragment prefetch (v2_state kPF, LINATTN_STATE_PREFETCH=1;
# from call 4's ncu profile): forward speed beside fla without and with it (two processes), the
# backward (rung 6, whose states kernel is v2_state's kBwd) without and with it, then with it on:
# every forward test, the v4 property at 30 cases, memcheck + racecheck (packed batch), and the
# backward's packed-batch, T = 1 and rung 6 property tests.
set -u
mkdir -p /tmp/b && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so F=/tmp/b/test_cuda_forward BT=/tmp/b/test_cuda_backward
for pf in 0 1; do
  LINATTN_STATE_PREFETCH=$pf timeout 80 python3 optimized/cuda/bench/bench_forward.py --lib $L --fla .fla --versions 4 --sweep-versions 4 --split --rep 40 --json /tmp/bench_pf$pf.json > /tmp/bench_pf$pf.log 2>&1
  echo "== forward, LINATTN_STATE_PREFETCH=$pf"; sed -n '/^summary/,$p' /tmp/bench_pf$pf.log | grep -v softmax | grep -E "v4 |fla"
done
for pf in 0 1; do
  LINATTN_STATE_PREFETCH=$pf timeout 40 python3 optimized/cuda/bench/bench_backward.py --lib $L --ops delta_rule,kda --bwd-versions 6 --rep 30 --slow-rep 10 > /tmp/bbench_pf$pf.log 2>&1
  echo "== backward, LINATTN_STATE_PREFETCH=$pf"; grep -E "backward v6|kernels" /tmp/bbench_pf$pf.log
done
tar -cJf $OUT/bench_logs.tar.xz -C /tmp bench_pf0.log bench_pf1.log bench_pf0.json bench_pf1.json bbench_pf0.log bbench_pf1.log
export LINATTN_STATE_PREFETCH=1
( time timeout 60 $F ) > $OUT/tests_pf.log 2>&1; echo "forward tests, prefetch: $(grep -E '^All tests|^test cases' $OUT/tests_pf.log)"; grep -B2 -A12 "FAILED" $OUT/tests_pf.log | head -30
RC_PARAMS="seed=20261130 max_success=30" timeout 30 $F 'CUDA v4 chunked forward equals the float64 reference for every operator in bfloat16' 2>&1 | grep -E "^All tests|^test cases" | sed 's/^/v4 property 30 cases, prefetch: /'
PK='CUDA chunked forward of a packed batch of many short sequences equals the reference'
timeout 30 compute-sanitizer --tool memcheck --error-exitcode 9 $F "$PK" 2>&1 | grep -E "SUMMARY"
timeout 90 compute-sanitizer --tool racecheck --error-exitcode 9 $F "$PK" 2>&1 | grep -E "SUMMARY"
for t in 'CUDA chunked backward of a packed batch of many short sequences equals the reference' 'CUDA chunked backward at T = 1 equals one step of the reference backward' 'CUDA v6 chunked backward with the per-channel B9 by levels on tensor cores equals the float64 reference backward for every operator in bfloat16'; do
  echo "backward, prefetch: $t: $(timeout 60 $BT "$t" 2>&1 | grep -E '^All tests|^test cases')"; done
