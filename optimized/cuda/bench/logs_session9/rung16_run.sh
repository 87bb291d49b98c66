#!/usr/bin/env bash
# optimized/cuda/bench/logs_session9/rung16_run.sh -- one device call for backward rung 16
# (bwd_v16_b9one.cu: for KDA and GDN2 rung 14's split without B9 -- G1s: B2, B4, B5; G2s: B6, B8, B7 -- and
# one B9 kernel running rung 8's per-channel B9 by levels with both halves in one pass per level, then B10
# and B11; DeltaNet and GDN run rung 13; written in session 9, not yet run on a GPU; RESULTS.md "Rung 16").
# Part 1 (tests only, at most ~60 s; what the lead runs first): the closeness test against rung 8 (dq, dv,
# dw, dh0 bit for bit; dk, dg, db, dbeta within rung 14's bounds; its worst ratios printed as "v16 vs v8
# worst ..."), the bit test against rung 13 (DeltaNet, GDN), the two properties, outside the range, then the
# shared packed / extreme-gate / ragged / T = 1 / determinism cases (every rung of kRungs, 16 included) and
# test_cuda_saved's property (the saved forward's workspace: rung 16's hand-over lies past the saved path's
# usual end, chunk_cuda.cu). Part 2 (only with PART2=1, at most ~300 s in all): bench_backward.py
# --bwd-versions 8,13,16 --ops kda,gdn2 with the per-kernel profile ("grads" is G1s, "wy" is G2s, and the
# line "bwd_v16 b9 kernel (ms)" the B9 kernel), then memcheck and racecheck on one property with
# RC_PARAMS="max_success=3".
# Each step's timeout is the smaller of its own and the time left to the part's end; each step's exit
# status is saved before anything else runs (rc=$?) and printed in summary.log.
# Needs .cudabin/bins.tar.xz built at a commit that has rung 16 as committed (test_cuda_backward,
# test_cuda_saved and liblinattn_cuda_capi.so; RESULTS.md "How to build and carry"); carry `.cudabin`
# (.tcache optional).
# Writes two files to $OUT: env.log and logs.tar.xz (summary.log inside, one line per step).
# Usage on the device: bash optimized/cuda/bench/logs_session9/rung16_run.sh   (PART2=1 for part 2)
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so BT=/tmp/b/test_cuda_backward ST=/tmp/b/test_cuda_saved
END=90  # part 1 ends here (s): review10's two cases added 25 s
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }  # min(nominal, time left)
logof() { echo /tmp/l/$1_$(echo "$2" | md5sum | cut -c1-6).log; }
one() {  # binary, tag, timeout, test name
  local f rc; f=$(logof $2 "$4")
  LINATTN_CUDA_BACKWARD_REPORT=1 timeout $(left $3) $1 "$4" > $f 2>&1; rc=$?
  echo "[$(el) s] $2 | $4 | rc $rc | $(res $f)" | tee -a /tmp/l/summary.log; }
CL16='CUDA v16 one B9 kernel backward is rung 8 up to float32 summation order for KDA and GDN2'
P16='CUDA v16 one B9 kernel chunked backward equals the float64 reference backward for every operator in bfloat16'
P16B='CUDA v16 one B9 kernel chunked backward with bfloat16 gates equals the reference backward on the rounded gates'
# 1a. Rung 16's own test cases.
one $BT bwd 15 "$CL16"
grep -E "^v16 vs v8 worst" $(logof bwd "$CL16") | tee -a /tmp/l/summary.log
# review10's two cases (review9's odd / extreme head sizes and many short sequences, plus K = 120 V = 255):
# rung 16 against rung 8 there, then rungs 15 and 16 against the float64 reference.
one $BT bwd 10 'CUDA v16 one B9 kernel backward is rung 8 up to float32 summation order at odd and extreme head sizes and on many short sequences'
one $BT bwd 15 'CUDA v15 and v16 chunked backward equal the float64 reference backward at odd and extreme head sizes and on many short sequences'
one $BT bwd 8 'CUDA v16 gradients equal v13 gradients bit for bit for DeltaNet and GDN'
one $BT bwd 10 "$P16"
grep -E "^bwd_v16_b9one .*worst" $(logof bwd "$P16") | tee -a /tmp/l/summary.log
one $BT bwd 10 "$P16B"
grep -E "^bwd_v16_b9one .*worst" $(logof bwd "$P16B") | tee -a /tmp/l/summary.log
one $BT bwd 5 'CUDA v16 one B9 kernel chunked backward outside rung 3 range runs rung 2 bit for bit'
# 1b. The saved forward (every rung of saved_bwd_versions(), 16 included), then the shared fixed cases, as
#     far as part 1's time goes.
one $ST saved 12 'CUDA saving forward gives the forward output bit for bit and the saved backward gives the recompute backward gradients bit for bit'
for t in 'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
         'CUDA chunked backward stays finite and exact with log-decays of 0 and -1000 and gates of 0 and 1' \
         'CUDA chunked backward with ragged last chunks equals the reference for lengths around 64' \
         'CUDA chunked backward at T = 1 equals one step of the reference backward' \
         'CUDA chunked backward is deterministic: two runs give bitwise equal gradients'; do one $BT bwd 20 "$t"; done
if [ "${PART2:-0}" = 1 ]; then
  END=300
  # 2a. Speed beside rungs 8 and 13 for KDA and GDN2, with the per-kernel profile.
  timeout $(left 170) python3 optimized/cuda/bench/bench_backward.py --lib $L --ops kda,gdn2 --bwd-versions 8,13,16 --rep 30 --slow-rep 5 --json /tmp/l/bbench81316.json > /tmp/l/bbench81316.log 2>&1; rc=$?
  echo "[$(el) s] backward speed rc $rc" | tee -a /tmp/l/summary.log; grep -E "backward v(8|13|16) |kernel" /tmp/l/bbench81316.log | tee -a /tmp/l/summary.log
  # 2b. memcheck and racecheck on one property, three cases per operator (the hand-over through the
  #     workspace, b9_levels' shared memory with beta after it, G1s's tail overlay, G2s's 6 tiles).
  for tool in memcheck racecheck; do
    if [ $(el) -lt 250 ]; then
      RC_PARAMS="seed=20261130 max_success=3" timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 $BT "$P16" > /tmp/l/san_$tool.log 2>&1; rc=$?
      echo "[$(el) s] backward $tool ($P16, max_success=3) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san_$tool.log | tail -1)" | tee -a /tmp/l/summary.log
    fi
  done
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
