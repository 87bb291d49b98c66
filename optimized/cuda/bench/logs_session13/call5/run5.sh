#!/usr/bin/env bash
# Session 13 call 5 (carry .cudabin .fla; bins.tar.xz: test_cuda_forward / _backward / _saved and the C API of
# the working tree with forward best = rung 10 and the lean saved-states layout): every GPU test case of the
# three CUDA test programs; then DeltaNet and GDN forward + backward against fla in one process (rung 18,
# forward best = rung 10; fla's GDN backward refuses on Triton 3.6.0: the error is printed).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
END=560
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
for t in forward:170 saved:60 backward:300; do
  n=${t%%:*}; lim=${t##*:}
  timeout $(left $lim) /tmp/b/test_cuda_$n --durations yes > /tmp/l/$n.log 2>&1; rc=$?
  echo "[$(el) s] test_cuda_$n (every test case) rc $rc: $(res /tmp/l/$n.log)" | tee -a /tmp/l/summary.log
done
timeout $(left 150) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule,gated_delta_rule --bwd-versions 18 --rep 40 --json /tmp/l/bbench.json > /tmp/l/bbench.log 2>&1; rc=$?
echo "[$(el) s] DeltaNet, GDN forward + backward against fla rc $rc" | tee -a /tmp/l/summary.log
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log /tmp/l/bbench.log $OUT/
