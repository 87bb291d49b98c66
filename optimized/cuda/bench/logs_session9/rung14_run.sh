#!/usr/bin/env bash
# optimized/cuda/bench/logs_session9/rung14_run.sh -- one device call for backward rung 14
# (bwd_v14_pchan.cu: for KDA and GDN2 rung 8's grads kernel split into G1', one block per 64-channel slab
# with B9's P half by levels, and G2, B9's L half by levels; DeltaNet and GDN run rung 13; written in session 9, not yet run on a GPU;
# RESULTS.md "Rung 14"). Part 1 (tests only, at most ~60 s; what the lead runs first): the closeness test
# against rung 8 for KDA and GDN2 (the claim of the rung; prints its differences, which set the bounds),
# bit for bit with rung 13 for DeltaNet and GDN, the two properties against the float64 reference,
# outside the range, then the shared packed / T = 1 / ragged / determinism cases (every rung of kRungs,
# 14 included). Part 2 (only with PART2=1, at most ~300 s in all): bench_backward.py --bwd-versions 8,13,14
# with the per-kernel profile ("grads" is G1', "wy" is G2), KDA and GDN2 again with the one-block G1 (the
# test hook), then memcheck and racecheck on the closeness
# test. Each step's timeout is the smaller of its own and the time left to the part's end.
# Needs .cudabin/bins.tar.xz built at a commit that has rung 14 as committed (test_cuda_backward and
# liblinattn_cuda_capi.so; RESULTS.md "How to build and carry"); carry `.cudabin` (.tcache optional).
# Writes two files to $OUT: env.log and logs.tar.xz (summary.log inside, one line per step).
# Usage on the device: bash optimized/cuda/bench/logs_session9/rung14_run.sh   (PART2=1 for the rest)
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
CL14='CUDA v14 per-channel split backward is rung 8 up to float32 summation order for KDA and GDN2'
BIT14='CUDA v14 gradients equal v13 gradients bit for bit for DeltaNet and GDN'
# 1a. Rung 14's own test cases: KDA and GDN2 against rung 8 (dq, dv, dw, dh0 bit for bit; dk, dg, db,
#     dbeta within the first-guess bounds; the worst ratios printed: "v14 vs v8 worst ..."), G1' against
#     the one-block G1 (bit for bit), DeltaNet and GDN bit for bit with rung 13, its two properties,
#     outside the range.
one $BT bwd 20 "$CL14"
grep -E "^v14 vs v8 worst" /tmp/l/bwd_$(echo "$CL14" | md5sum | cut -c1-6).log | tee -a /tmp/l/summary.log
one $BT bwd 12 'CUDA v14 slab G1 gives the one-block G1 gradients bit for bit for KDA and GDN2'
one $BT bwd 12 "$BIT14"
one $BT bwd 12 'CUDA v14 per-channel split chunked backward equals the float64 reference backward for every operator in bfloat16'
one $BT bwd 12 'CUDA v14 per-channel split chunked backward with bfloat16 gates equals the reference backward on the rounded gates'
one $BT bwd 6 'CUDA v14 per-channel split chunked backward outside rung 3 range runs rung 2 bit for bit'
# 1b. The shared fixed cases (every rung of the ladder, 14 included), as far as part 1's time goes.
for t in 'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
         'CUDA chunked backward stays finite and exact with log-decays of 0 and -1000 and gates of 0 and 1' \
         'CUDA chunked backward with ragged last chunks equals the reference for lengths around 64' \
         'CUDA chunked backward at T = 1 equals one step of the reference backward' \
         'CUDA chunked backward is deterministic: two runs give bitwise equal gradients'; do one $BT bwd 20 "$t"; done
if [ "${PART2:-0}" = 1 ]; then
  END=300
  # 2a. Speed beside rungs 8 and 13, with the per-kernel profile (rung 14 for KDA, GDN2: grads = G1',
  #     wy = G2; for DeltaNet and GDN rung 14 runs rung 13: the same times expected).
  timeout $(left 170) python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 8,13,14 --rep 30 --slow-rep 5 --json /tmp/l/bbench81314.json > /tmp/l/bbench81314.log 2>&1
  echo "[$(el) s] backward speed" | tee -a /tmp/l/summary.log; grep -E "backward v(8|13|14) |kernels" /tmp/l/bbench81314.log | tee -a /tmp/l/summary.log
  # 2b. KDA and GDN2 with the one-block G1 instead of G1' (the test hook; "grads" is then G1): what the
  #     slab retiling gains for per-channel gates (rung 12 measured it for GDN: 3.04 -> 2.04 ms).
  if [ $(el) -lt 200 ]; then
    LINATTN_BWD14_ONE_BLOCK_G1=1 timeout $(left 45) python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 14 --ops kda,gdn2 --rep 30 --slow-rep 5 > /tmp/l/bbench14_oneblock.log 2>&1
    echo "[$(el) s] rung 14 with the one-block G1 (LINATTN_BWD14_ONE_BLOCK_G1)" | tee -a /tmp/l/summary.log; grep -E "backward v14 |kernels" /tmp/l/bbench14_oneblock.log | tee -a /tmp/l/summary.log
  fi
  # 2c. memcheck on the closeness test (G2's in-place dG, the levels' stores), racecheck on it (the
  #     overlays of G2's phase-1 tiles by the levels' slabs), if time is left.
  for tool in memcheck racecheck; do
    if [ $(el) -lt 250 ]; then
      timeout $(left 50) compute-sanitizer --tool $tool --error-exitcode 9 $BT "$CL14" 2>&1 | grep -E "SUMMARY" | sed "s/^/[$(el) s] backward $tool ($CL14): /" | tee -a /tmp/l/summary.log
    fi
  done
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
