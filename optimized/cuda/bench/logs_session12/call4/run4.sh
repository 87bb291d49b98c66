#!/usr/bin/env bash
# Session 12 call 4 (carry .cudabin): call 3 again with rung 8 issuing the next chunk's tile loads after its
# wgmma instructions (behind the tensor cores) instead of before them.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1
BF=/tmp/b/test_cuda_forward L=/tmp/b/liblinattn_cuda_capi.so
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
for sp in 0 1; do
  LINATTN_V8_SPLIT=$sp timeout 60 $BF 'CUDA v8 wgmma forward equals v7 bit for bit for DeltaNet and GDN (informational)' > /tmp/l/bit$sp.log 2>&1
  echo "[$(el) s] split=$sp bit test rc $?: $(res /tmp/l/bit$sp.log)" | tee -a /tmp/l/summary.log
  LINATTN_V8_SPLIT=$sp timeout 60 $BF 'CUDA v8 wgmma chunked forward equals the float64 reference for every operator in bfloat16' > /tmp/l/prop$sp.log 2>&1
  echo "[$(el) s] split=$sp property rc $?: $(res /tmp/l/prop$sp.log)" | tee -a /tmp/l/summary.log
done
R="7:;8:;8:LINATTN_V8_SPLIT=1"
for k in 1 2 4 8 16 32; do R="$R;8:LINATTN_V8_SKIP=$k"; done
R="$R;8:LINATTN_V8_SPLIT=1,LINATTN_V8_SKIP=4;7:;8:"
timeout 150 python3 optimized/cuda/bench/state_knob_sweep.py --lib $L --runs "$R" --shapes 8x4096x16x128x128,1x32768x16x128x128 > /tmp/l/sweep.log 2>&1
echo "[$(el) s] sweep rc $?" | tee -a /tmp/l/summary.log
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log /tmp/l/sweep.log $OUT/
