#!/usr/bin/env bash
# Session 7 device call 5: 16-byte / 8-byte global stores (tc_common.cuh st_global16, st_pair) where
# nvcc had emitted 4-byte ones: the intra kernel's q~ / k~ / exp(G_C) (call 4's ncu: 75% excess L2
# sectors), the states / state-gradient kernels' S, dS', v_new, dv_new. New binaries (.cudabin/
# bins.tar.xz, working tree on 4bbf9ee) against old (.cudabin/old_bins.tar.xz, 4bbf9ee): tests of
# the new ones, then speed old and new in separate processes, fla in each forward process.
set -u
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
mkdir -p /tmp/b /tmp/o /tmp/l && tar -xJf .cudabin/bins.tar.xz -C /tmp/b && tar -xJf .cudabin/old_bins.tar.xz -C /tmp/o
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
timeout 90 /tmp/b/test_cuda_forward > /tmp/l/ftests.log 2>&1; echo "[$(el) s] forward tests (new): $(res /tmp/l/ftests.log)"
n=0; for t in 'CUDA v7 chunked backward with per-block row bases equals the float64 reference backward for every operator in bfloat16' \
  'CUDA v7 chunked backward gives rung 6 gradients bit for bit' \
  'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
  'CUDA chunked backward at T = 1 equals one step of the reference backward' \
  'CUDA chunked backward with ragged last chunks equals the reference for lengths around 64' \
  'CUDA chunked backward is deterministic: two runs give bitwise equal gradients' \
  'CUDA chunked backward is exact at the tuned and the largest head sizes up to K = V = 256' \
  'CUDA v3 chunked backward on the forward tensor-core kernels equals the float64 reference backward for every operator in bfloat16'; do
  n=$((n + 1)); timeout 80 /tmp/b/test_cuda_backward "$t" > /tmp/l/bt$n.log 2>&1; echo "[$(el) s] backward (new) | $t | $(res /tmp/l/bt$n.log)"; done
PK='CUDA chunked forward of a packed batch of many short sequences equals the reference'
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_forward "$PK" 2>&1 | grep SUMMARY | sed 's/^/forward memcheck (new): /'
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward 'CUDA chunked backward of a packed batch of many short sequences equals the reference' 2>&1 | grep SUMMARY | sed 's/^/backward memcheck (new): /'
for tag in old new; do d=/tmp/b; [ "$tag" != new ] && d=/tmp/o
  [ $(el) -gt 330 ] && break
  timeout 70 python3 optimized/cuda/bench/bench_forward.py --lib $d/liblinattn_cuda_capi.so --fla .fla --versions 4 --sweep-versions 4 --split --rep 40 --json /tmp/l/fbench_$tag.json > /tmp/l/fbench_$tag.log 2>&1
  echo "[$(el) s] == forward, $tag"; sed -n '/^summary/,$p' /tmp/l/fbench_$tag.log | grep -v softmax | grep -E "v4 |fla"
  timeout 50 python3 optimized/cuda/bench/bench_backward.py --lib $d/liblinattn_cuda_capi.so --ops delta_rule,kda --bwd-versions 7 --rep 30 --slow-rep 5 > /tmp/l/bbench_$tag.log 2>&1
  echo "[$(el) s] == backward, $tag"; grep -E "backward v7 |kernels" /tmp/l/bbench_$tag.log; done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
