#!/usr/bin/env bash
# optimized/cuda/bench/logs_session10/fwd7_run.sh -- one device call for forward rung 7 (v7_overlap.cu: v4's
# intra kernel for DeltaNet and GDN with its shared arrays overlapped by lifetime, 71,168 B at KP = 128 so 3
# blocks fit per SM; bit for bit with v4 by design; written in session 10, not yet run on a GPU; RESULTS.md
# "Forward rung 7"). At most ~250 s:
#   1. rung 7's tests: v7 against v4 bit for bit, 3 blocks per SM, the two properties, outside the range;
#   2. memcheck and racecheck over the bit test's first 3 cases (LINATTN_V7_BIT_CASES=3: T = 1 at KP = 128
#      and 64, two ragged chunks at K = V = 128);
#   3. bench_forward.py --versions 4,7 --split for DeltaNet and GDN (no fla): the forward and each kernel alone;
#   4. the forward's shared cases (every rung of kVersions, v7 included) as far as the time goes, then
#      racecheck over all 11 cases of the bit test if time is left;
#   5. (only with MUT=1 and .cudabin/mutants.tar.xz built by make_mutants.py; 60 s more) mutants 230-232 on
#      the bit test.
# Each step's timeout is the smaller of its own and the time left; each step's exit status is saved before
# anything else runs (rc=$?) and printed in summary.log.
# Needs .cudabin/bins.tar.xz built at a commit that has rung 7 (test_cuda_forward and
# liblinattn_cuda_capi.so; RESULTS.md "How to build and carry"); carry `.cudabin` (.tcache optional).
# Writes env.log and logs.tar.xz (summary.log inside) to $OUT.
# Usage on the device: bash optimized/cuda/bench/logs_session10/fwd7_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l /tmp/m
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so BF=/tmp/b/test_cuda_forward
END=250
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }  # min(nominal, time left)
logof() { echo /tmp/l/$1_$(echo "$2" | md5sum | cut -c1-6).log; }
one() {  # binary, tag, timeout, test name
  local f rc; f=$(logof $2 "$4")
  timeout $(left $3) $1 "$4" > $f 2>&1; rc=$?
  echo "[$(el) s] $2 | $4 | rc $rc | $(res $f)" | tee -a /tmp/l/summary.log; }
BIT='CUDA v7 overlap forward equals v4 bit for bit for DeltaNet and GDN'
# 1. Rung 7's own tests.
one $BF fwd 25 "$BIT"
one $BF fwd 8 'CUDA v7 overlap intra kernel fits 3 blocks per SM at KP 64 and 128'
one $BF fwd 15 'CUDA v7 overlap chunked forward equals the float64 reference for every operator in bfloat16'
one $BF fwd 15 'CUDA v7 overlap chunked forward with bfloat16 gates equals the reference on the rounded gates'
one $BF fwd 8 'CUDA v7 overlap forward outside its range equals the rung best runs there bit for bit'
# 2. Sanitizers on the bit test's first 3 cases (an overwritten live array or a missing barrier is a race).
for tool in memcheck racecheck; do
  LINATTN_V7_BIT_CASES=3 timeout $(left 30) compute-sanitizer --tool $tool --error-exitcode 9 $BF "$BIT" > /tmp/l/san3_$tool.log 2>&1; rc=$?
  echo "[$(el) s] $tool ($BIT, 3 cases) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san3_$tool.log | tail -1) $(res /tmp/l/san3_$tool.log)" | tee -a /tmp/l/summary.log
done
# 3. Speed: v4 against v7, whole forward and each kernel alone (LINATTN_TC_ONLY), DeltaNet and GDN.
timeout $(left 60) python3 optimized/cuda/bench/bench_forward.py --lib $L --versions 4,7 --split --sweep-versions 4,7 \
  --ops delta_rule,gated_delta_rule --rep 100 --json /tmp/l/fbench47.json > /tmp/l/fbench47.log 2>&1; rc=$?
echo "[$(el) s] forward speed rc $rc" | tee -a /tmp/l/summary.log
grep -E "v4_levels|v7_overlap" /tmp/l/fbench47.log | tee -a /tmp/l/summary.log
# 4. The shared cases (every rung, v7 included), as far as the time goes.
for t in 'CUDA chunked forward at T = 1 equals one step of the reference' \
         'CUDA chunked forward of a packed batch of many short sequences equals the reference' \
         'CUDA chunked forward stays finite and exact with log-decays of 0 and -1000 and gates of 0 and 1' \
         'CUDA chunked forward with ragged last chunks equals the reference for lengths around 64' \
         'CUDA tensor-core chunked forward is exact for K in 16 to 128 with V up to 256' \
         'CUDA chunked forward with 32 and 64 column value tiles at K = 64 and 128 equals the reference' \
         'CUDA chunked forward over 0 to T equals 0 to t then t to T with the state carried' \
         'CUDA chunked forward is deterministic: two runs give bitwise equal outputs'; do
  [ $(el) -lt $((END - 5)) ] && one $BF fwd 15 "$t"; done
# 4b. racecheck over all 11 cases of the bit test if time is left.
if [ $(el) -lt 190 ]; then
  timeout $(left 60) compute-sanitizer --tool racecheck --error-exitcode 9 $BF "$BIT" > /tmp/l/san_racecheck.log 2>&1; rc=$?
  echo "[$(el) s] racecheck ($BIT, all cases) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san_racecheck.log | tail -1) $(res /tmp/l/san_racecheck.log)" | tee -a /tmp/l/summary.log
fi
# 5. Mutants, 60 s more (each must make the bit test fail: rc 1 is caught, 124 a timeout, 0 survived).
if [ "${MUT:-0}" = 1 ] && [ -f .cudabin/mutants.tar.xz ]; then
  END=$(( $(el) + 60 ))
  tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
  for n in 230 231 232; do
    LINATTN_MUTANT=$n timeout $(left 20) /tmp/m/test_cuda_forward "$BIT" > /tmp/l/mut$n.log 2>&1; rc=$?
    echo "[$(el) s] mutant $n rc $rc (1: caught) | $(res /tmp/l/mut$n.log)" | tee -a /tmp/l/summary.log
  done
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
