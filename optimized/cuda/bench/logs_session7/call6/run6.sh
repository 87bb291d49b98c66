#!/usr/bin/env bash
# Session 7 device call 6: call 5's change with the forward's final-state store restored (the forward
# state kernels' PTX identical to 4bbf9ee again; only the backward's per-chunk S / dS' stores by
# pairs): every forward test, the backward tests that run every rung (packed, T = 1, ragged, sizes,
# determinism) and rung 7's property; then forward old / new beside fla (one process each) and the
# backward (new; DeltaNet, KDA).
set -u
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
mkdir -p /tmp/b /tmp/o /tmp/l && tar -xJf .cudabin/bins.tar.xz -C /tmp/b && tar -xJf .cudabin/old_bins.tar.xz -C /tmp/o
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
for tag in old new; do d=/tmp/b; [ "$tag" != new ] && d=/tmp/o
  timeout 60 python3 optimized/cuda/bench/bench_forward.py --lib $d/liblinattn_cuda_capi.so --fla .fla --versions 4 --sweep-versions 4 --split --rep 40 --json /tmp/l/fbench_$tag.json > /tmp/l/fbench_$tag.log 2>&1
  echo "[$(el) s] == forward, $tag"; sed -n '/^summary/,$p' /tmp/l/fbench_$tag.log | grep -v softmax | grep -E "v4 |fla"; done
timeout 40 python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --ops delta_rule,kda --bwd-versions 7 --rep 30 --slow-rep 5 > /tmp/l/bbench_new.log 2>&1
echo "[$(el) s] == backward, new"; grep -E "backward v7 |kernels" /tmp/l/bbench_new.log | head -4
timeout 60 /tmp/b/test_cuda_forward > /tmp/l/ftests.log 2>&1; echo "[$(el) s] forward tests (new): $(res /tmp/l/ftests.log)"
n=0; for t in 'CUDA v7 chunked backward with per-block row bases equals the float64 reference backward for every operator in bfloat16' \
  'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
  'CUDA chunked backward at T = 1 equals one step of the reference backward' \
  'CUDA chunked backward with ragged last chunks equals the reference for lengths around 64' \
  'CUDA chunked backward is deterministic: two runs give bitwise equal gradients' \
  'CUDA chunked backward is exact at the tuned and the largest head sizes up to K = V = 256'; do
  n=$((n + 1)); [ $(el) -gt 200 ] && break
  timeout 60 /tmp/b/test_cuda_backward "$t" > /tmp/l/bt$n.log 2>&1; echo "[$(el) s] backward (new) | $t | $(res /tmp/l/bt$n.log)"; done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
