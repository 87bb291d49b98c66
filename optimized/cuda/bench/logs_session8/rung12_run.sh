#!/usr/bin/env bash
# optimized/cuda/bench/logs_session8/rung12_run.sh -- one device call for backward rung 12
# (bwd_v12_g1slab.cu: rung 10 with its state-side kernel G1 retiled by 64-channel slabs of K, 2 blocks per
# SM; written in session 8, not yet run on a GPU; RESULTS.md "Rung 12"). Part 1 (tests only, at most ~60 s;
# what the lead runs first): bit for bit with rung 10 first (the claim of the rung), its two properties
# against the float64 reference, outside the range, then the shared packed / T = 1 / ragged / determinism
# cases (they run every rung of kRungs, 12 included). Part 2 (only with PART2=1, at most ~300 s in all):
# bench_backward.py --bwd-versions 8,10,12 with the per-kernel profile ("grads" is G1 / G1', "wy" is G2),
# then memcheck and racecheck on the bit-for-bit test. Each step's timeout is the smaller of its own and
# the time left to the part's end.
# Needs .cudabin/bins.tar.xz built at a commit that has rung 12 as committed (test_cuda_backward and
# liblinattn_cuda_capi.so; RESULTS.md "How to build and carry"); carry `.cudabin` (.tcache optional).
# Writes two files to $OUT: env.log and logs.tar.xz (summary.log inside, one line per step).
# Usage on the device: bash optimized/cuda/bench/logs_session8/rung12_run.sh   (PART2=1 for the rest)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so BT=/tmp/b/test_cuda_backward
END=60  # part 1 ends here (s)
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }  # min(nominal, time left)
one() {  # binary, tag, timeout, test name
  local n; n=$2_$(echo "$4" | md5sum | cut -c1-6)
  LINATTN_CUDA_BACKWARD_REPORT=1 timeout $(left $3) $1 "$4" > /tmp/l/$n.log 2>&1; echo "[$(el) s] $2 | $4 | $(res /tmp/l/$n.log)" | tee -a /tmp/l/summary.log; }
BIT12='CUDA v12 gradients equal v10 gradients bit for bit'
# 1a. Rung 12's own test cases: every gradient bit for bit with rung 10 (and finite), its two properties
#     against the float64 reference, outside the range.
one $BT bwd 20 "$BIT12"
one $BT bwd 12 'CUDA v12 slab G1 chunked backward equals the float64 reference backward for every operator in bfloat16'
one $BT bwd 12 'CUDA v12 slab G1 chunked backward with bfloat16 gates equals the reference backward on the rounded gates'
one $BT bwd 6 'CUDA v12 slab G1 chunked backward outside rung 3 range runs rung 2 bit for bit'
# 1b. The shared fixed cases (every rung of the ladder, 12 included), as far as part 1's time goes.
for t in 'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
         'CUDA chunked backward with ragged last chunks equals the reference for lengths around 64' \
         'CUDA chunked backward at T = 1 equals one step of the reference backward' \
         'CUDA chunked backward is deterministic: two runs give bitwise equal gradients'; do one $BT bwd 20 "$t"; done
if [ "${PART2:-0}" = 1 ]; then
  END=300
  # 2a. Speed beside rungs 8 and 10, with the per-kernel profile (rungs 10, 12: grads = G1, wy = G2;
  #     KDA and GDN2 run rung 8 in both).
  timeout $(left 170) python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 8,10,12 --rep 30 --slow-rep 5 --json /tmp/l/bbench81012.json > /tmp/l/bbench81012.log 2>&1
  echo "[$(el) s] backward speed" | tee -a /tmp/l/summary.log; grep -E "backward v(8|10|12) |kernels" /tmp/l/bbench81012.log | tee -a /tmp/l/summary.log
  # 2b. memcheck on the bit-for-bit test (G1' stores by slab), racecheck on it (the overlays), if time is left.
  for tool in memcheck racecheck; do
    if [ $(el) -lt 250 ]; then
      timeout $(left 50) compute-sanitizer --tool $tool --error-exitcode 9 $BT "$BIT12" 2>&1 | grep -E "SUMMARY" | sed "s/^/[$(el) s] backward $tool ($BIT12): /" | tee -a /tmp/l/summary.log
    fi
  done
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
