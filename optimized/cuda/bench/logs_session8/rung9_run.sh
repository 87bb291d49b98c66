#!/usr/bin/env bash
# optimized/cuda/bench/logs_session8/rung9_run.sh -- one device call for backward rung 9
# (bwd_v9_noextras.cu, written in session 8, not yet run on a GPU; RESULTS.md "Rung 9"): its four test
# cases, the shared packed / T = 1 / ragged / determinism cases (they run every rung, 9 included),
# its speed beside rung 8 with the per-kernel profile, memcheck on the packed backward. At most about
# 290 s: each step's timeout is the smaller of its own and the time left to 285 s; memcheck only
# while under 235 s. Modelled on pending_device_run.sh's
# first section. Needs .cudabin/bins.tar.xz built at a commit that has rung 9 as committed (baaa4fa or later, not a793d3c .. 9a20142:
# test_cuda_backward and liblinattn_cuda_capi.so; rebuild as RESULTS.md "How to build and carry" says);
# carry `.cudabin` (.tcache optional). Writes two files to $OUT: env.log and logs.tar.xz.
# Usage on the device: bash optimized/cuda/bench/logs_session8/rung9_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so BT=/tmp/b/test_cuda_backward
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( 285 - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }  # min(nominal, time left)
one() {  # binary, tag, timeout, test name
  local n; n=$2_$(echo "$4" | md5sum | cut -c1-6)
  LINATTN_CUDA_BACKWARD_REPORT=1 timeout $(left $3) $1 "$4" > /tmp/l/$n.log 2>&1; echo "[$(el) s] $2 | $4 | $(res /tmp/l/$n.log)" | tee -a /tmp/l/summary.log; }
# 1. Rung 9's own test cases: bit for bit with rung 8 first (the claim of the rung), its two
#    properties against the float64 reference, the calls outside rung 3's range.
one $BT bwd 90 'CUDA v9 chunked backward gives rung 8 gradients bit for bit'
one $BT bwd 60 'CUDA v9 chunked backward with G E Qg Kd formed in the grads kernel equals the float64 reference backward for every operator in bfloat16'
one $BT bwd 60 'CUDA v9 chunked backward with G E Qg Kd formed in the grads kernel and bfloat16 gates equals the reference backward on the rounded gates'
one $BT bwd 40 'CUDA v9 chunked backward outside rung 3 range runs rung 2 bit for bit'
# 2. The shared fixed cases (every rung of the ladder, 9 included).
for t in 'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
         'CUDA chunked backward at T = 1 equals one step of the reference backward' \
         'CUDA chunked backward with ragged last chunks equals the reference for lengths around 64' \
         'CUDA chunked backward is deterministic: two runs give bitwise equal gradients'; do one $BT bwd 60 "$t"; done
# 3. Speed beside rung 8, with the per-kernel profile (prepare is the intra kernel alone in rung 9; the
#    saved-forward rows run for both rungs: rung 9's saved prepare is A's copy alone).
timeout $(left 150) python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 8,9 --rep 30 --slow-rep 5 --json /tmp/l/bbench89.json > /tmp/l/bbench89.log 2>&1
echo "[$(el) s] backward speed" | tee -a /tmp/l/summary.log; grep -E "backward v[89] |kernels" /tmp/l/bbench89.log | tee -a /tmp/l/summary.log
# 4. memcheck on the packed backward (rung 9's G scratch, its scan and the shared Kd included), if time is left.
PKB='CUDA chunked backward of a packed batch of many short sequences equals the reference'
if [ $(el) -lt 235 ]; then
  timeout $(left 50) compute-sanitizer --tool memcheck --error-exitcode 9 $BT "$PKB" 2>&1 | grep SUMMARY | sed "s/^/[$(el) s] backward memcheck: /" | tee -a /tmp/l/summary.log
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
