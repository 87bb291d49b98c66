#!/usr/bin/env bash
# optimized/cuda/bench/logs_session10/rung17_run.sh -- one device call for backward rung 17
# (bwd_v17_hybrid.cu: rung 15's G1' and G2' for DeltaNet and GDN with the lo operand kept on dP's v_new
# and du0's dv_new, and in rung 8's chunk-gradient kernel for KDA and GDN2 (V17Mid); written in session
# 10, not yet run on a GPU;
# RESULTS.md "Rung 17"). At most ~330 s in all:
#   1. (~90 s) the fixed-case test (rung 17 within rung 3's bounds on rung 15's fixed cases and on the cases
#      rung 15's properties shrank to; its ratios printed beside rungs 15, 13 and 8: compare with
#      bench/models/bwd_v17_hybrid_model.py), the two properties (worst ratios printed), outside range, then
#      the shared packed / extreme-gate / ragged / T = 1 / determinism cases (every rung of kRungs, 17 included)
#      as far as the time goes;
#   2. bench_backward.py --bwd-versions 13,15,17 with the per-kernel profile ("grads" is G1', "wy" is G2');
#   3. memcheck and racecheck on rung 17's bf16 property with RC_PARAMS="max_success=3".
# Each step's timeout is the smaller of its own and the time left to its part's end; each step's exit
# status is saved before anything else runs (rc=$?) and printed in summary.log.
# Needs .cudabin/bins.tar.xz built at a commit that has rung 17 as committed (test_cuda_backward and
# liblinattn_cuda_capi.so; RESULTS.md "How to build and carry"); carry `.cudabin`.
# Writes two files to $OUT: env.log and logs.tar.xz (summary.log inside, one line per step).
# Usage on the device: bash optimized/cuda/bench/logs_session10/rung17_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so BT=/tmp/b/test_cuda_backward
END=90  # part 1 ends here (s)
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }  # min(nominal, time left)
logof() { echo /tmp/l/$1_$(echo "$2" | md5sum | cut -c1-6).log; }
one() {  # binary, tag, timeout, test name
  local f rc; f=$(logof $2 "$4")
  LINATTN_CUDA_BACKWARD_REPORT=1 timeout $(left $3) $1 "$4" > $f 2>&1; rc=$?
  echo "[$(el) s] $2 | $4 | rc $rc | $(res $f)" | tee -a /tmp/l/summary.log; }
FX17='CUDA v17 hybrid products keep every gradient within rung 3 bounds on rung 15 failing cases and fixed cases'
P17='CUDA v17 hybrid products chunked backward equals the float64 reference backward for every operator in bfloat16'
B17='CUDA v17 hybrid products chunked backward with bfloat16 gates equals the reference backward on the rounded gates'
# 1a. Rung 17's own tests: fixed cases ("v17 fixed cases worst ..." lines: v17, v15, v13, v8), the two
#     properties ("bwd_v17_hybrid ... worst" lines), outside the range.
one $BT bwd 30 "$FX17"
grep -E "^v17 fixed cases worst" $(logof bwd "$FX17") | tee -a /tmp/l/summary.log
grep -E "FAILED|with expansion|err [0-9]" $(logof bwd "$FX17") | head -20 | tee -a /tmp/l/summary.log
one $BT bwd 15 "$P17"
grep -E "^bwd_v17_hybrid .*worst|Falsifiable|Case\{" $(logof bwd "$P17") | head -20 | tee -a /tmp/l/summary.log
one $BT bwd 15 "$B17"
grep -E "^bwd_v17_hybrid .*worst|Falsifiable|Case\{" $(logof bwd "$B17") | head -20 | tee -a /tmp/l/summary.log
one $BT bwd 8 'CUDA v17 hybrid products chunked backward outside rung 3 range runs rung 2 bit for bit'
# 1b. The shared fixed cases (every rung of the ladder, 17 included), as far as part 1's time goes.
for t in 'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
         'CUDA chunked backward stays finite and exact with log-decays of 0 and -1000 and gates of 0 and 1' \
         'CUDA chunked backward at T = 1 equals one step of the reference backward' \
         'CUDA chunked backward with ragged last chunks equals the reference for lengths around 64' \
         'CUDA chunked backward is deterministic: two runs give bitwise equal gradients'; do
  [ $(el) -lt $(( END - 3 )) ] && one $BT bwd 20 "$t"; done
END=330
# 2. Speed beside rungs 13 and 15 with the per-kernel profile (DeltaNet, GDN: grads = G1', wy = G2'; KDA
#    and GDN2: "grads" is rung 8's kernel, hi-only in rung 15, V17Mid in rung 17).
timeout $(left 170) python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 13,15,17 --rep 30 --slow-rep 5 --json /tmp/l/bbench131517.json > /tmp/l/bbench131517.log 2>&1; rc=$?
echo "[$(el) s] backward speed rc $rc" | tee -a /tmp/l/summary.log; grep -E "backward v(13|15|17) |kernels" /tmp/l/bbench131517.log | tee -a /tmp/l/summary.log
# 3. memcheck and racecheck on one property, three cases per operator (G1''s sixth tile, G2''s X lo in
#    tile 1 before the de slab takes it).
for tool in memcheck racecheck; do
  if [ $(el) -lt 290 ]; then
    RC_PARAMS="seed=20261130 max_success=3" timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 $BT "$P17" > /tmp/l/san_$tool.log 2>&1; rc=$?
    echo "[$(el) s] backward $tool ($P17, max_success=3) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san_$tool.log | tail -1)" | tee -a /tmp/l/summary.log
  fi
done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
