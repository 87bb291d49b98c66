#!/usr/bin/env bash
# optimized/cuda/bench/logs_session8/rung10_run.sh -- one device call for backward rung 10
# (bwd_v10_split.cu: rung 8's grads kernel split into G1 and G2 for DeltaNet and GDN; written in session 8,
# not yet run on a GPU; RESULTS.md "Rung 10"). Part 1 (tests only, at most ~150 s; what the lead runs
# first): its four test cases (closeness to rung 8 first: the claim of the rung), then the shared packed
# / T = 1 / ragged / determinism cases (they run every rung of kRungs, 10 included). Part 2 (only with
# PART2=1, at most ~290 s in all): bench_backward.py --bwd-versions 8,10 with the per-kernel profile
# ("grads" is G1, "wy" is G2), memcheck on the packed backward and on the closeness test. Each step's
# timeout is the smaller of its own and the time left to the part's end.
# Needs .cudabin/bins.tar.xz built at a commit that has rung 10 as committed (test_cuda_backward and
# liblinattn_cuda_capi.so; RESULTS.md "How to build and carry"); carry `.cudabin` (.tcache optional).
# Writes two files to $OUT: env.log and logs.tar.xz (summary.log inside, one line per step).
# Usage on the device: bash optimized/cuda/bench/logs_session8/rung10_run.sh   (PART2=1 for the rest)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so BT=/tmp/b/test_cuda_backward
END=145  # part 1 ends here (s)
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }  # min(nominal, time left)
one() {  # binary, tag, timeout, test name
  local n; n=$2_$(echo "$4" | md5sum | cut -c1-6)
  LINATTN_CUDA_BACKWARD_REPORT=1 timeout $(left $3) $1 "$4" > /tmp/l/$n.log 2>&1; echo "[$(el) s] $2 | $4 | $(res /tmp/l/$n.log)" | tee -a /tmp/l/summary.log; }
CL10='CUDA v10 split chunked backward is rung 8 up to float32 summation order'
# 1a. Rung 10's own test cases: closeness to rung 8 (dq, dv, dh0 bit for bit; dk, dbeta, dg within the
#     bound; KDA, GDN2 bit for bit), its two properties against the float64 reference, outside the range.
one $BT bwd 40 "$CL10"
grep -h "v10 vs v8 worst" /tmp/l/bwd_*.log | tee -a /tmp/l/summary.log  # the measured differences (bound: tighten to 3x)
one $BT bwd 30 'CUDA v10 split chunked backward equals the float64 reference backward for every operator in bfloat16'
one $BT bwd 30 'CUDA v10 split chunked backward with bfloat16 gates equals the reference backward on the rounded gates'
one $BT bwd 20 'CUDA v10 split chunked backward outside rung 3 range runs rung 2 bit for bit'
# 1b. The shared fixed cases (every rung of the ladder, 10 included).
for t in 'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
         'CUDA chunked backward at T = 1 equals one step of the reference backward' \
         'CUDA chunked backward with ragged last chunks equals the reference for lengths around 64' \
         'CUDA chunked backward is deterministic: two runs give bitwise equal gradients'; do one $BT bwd 30 "$t"; done
if [ "${PART2:-0}" = 1 ]; then
  END=285
  # 2a. Speed beside rung 8, with the per-kernel profile (rung 10: grads = G1, wy = G2; KDA and GDN2 run rung 8).
  timeout $(left 150) python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 8,10 --rep 30 --slow-rep 5 --json /tmp/l/bbench810.json > /tmp/l/bbench810.log 2>&1
  echo "[$(el) s] backward speed" | tee -a /tmp/l/summary.log; grep -E "backward v(8|10) |kernels" /tmp/l/bbench810.log | tee -a /tmp/l/summary.log
  # 2b. memcheck on the packed backward and on the closeness test (G1's new tail, G2's stores), if time is left.
  PKB='CUDA chunked backward of a packed batch of many short sequences equals the reference'
  for t in "$PKB" "$CL10"; do
    if [ $(el) -lt 240 ]; then
      timeout $(left 45) compute-sanitizer --tool memcheck --error-exitcode 9 $BT "$t" 2>&1 | grep SUMMARY | sed "s/^/[$(el) s] backward memcheck ($t): /" | tee -a /tmp/l/summary.log
    fi
  done
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
