#!/usr/bin/env bash
# optimized/cuda/bench/logs_session9/rung15_run.sh -- one device call for backward rung 15
# (bwd_v15_hionly.cu: rung 13 with one bf16 MMA per product in G1' and G2', hi-only operands, for DeltaNet
# and GDN, and in rung 8's chunk-gradient kernel for KDA and GDN2; written in session 9, not yet run on a
# GPU; RESULTS.md "Rung 15").
# Part 1 (tests only, at most ~60 s; what the lead runs first): the fixed-case test (rung 15 against the
# float64 reference within rung 3's bounds, its error ratios printed beside rungs 13 and 8: compare with
# the model's prediction, bench/models/bwd_v15_hionly_model.py), the two properties, outside the range,
# then the shared packed / extreme-gate / ragged / T = 1 / determinism cases (every rung of kRungs, 15
# included). Part 2 (only with PART2=1, at most ~300 s in all): bench_backward.py --bwd-versions 8,13,15
# with the per-kernel profile ("grads" is G1', "wy" is G2'), then memcheck and racecheck on one property
# with RC_PARAMS="max_success=3" (racecheck of a whole bit test takes > 200 s). Part 3 (only with
# PART3=1, ~300 s): ncu of G1', G2' (DeltaNet, rungs 13 and 15) and rung 8's grads kernel (KDA, rungs 8
# and 15): whether these kernels are MMA-bound.
# Each step's timeout is the smaller of its own and the time left to the part's end; each step's exit
# status is saved before anything else runs (rc=$?) and printed in summary.log.
# Needs .cudabin/bins.tar.xz built at a commit that has rung 15 as committed (test_cuda_backward and
# liblinattn_cuda_capi.so; RESULTS.md "How to build and carry"); carry `.cudabin` (.tcache optional).
# Writes two files to $OUT: env.log and logs.tar.xz (summary.log inside, one line per step).
# Usage on the device: bash optimized/cuda/bench/logs_session9/rung15_run.sh   (PART2=1, PART3=1 for the rest)
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
logof() { echo /tmp/l/$1_$(echo "$2" | md5sum | cut -c1-6).log; }
one() {  # binary, tag, timeout, test name
  local f rc; f=$(logof $2 "$4")
  LINATTN_CUDA_BACKWARD_REPORT=1 timeout $(left $3) $1 "$4" > $f 2>&1; rc=$?
  echo "[$(el) s] $2 | $4 | rc $rc | $(res $f)" | tee -a /tmp/l/summary.log; }
FX15='CUDA v15 hi-only products keep every gradient within rung 3 bounds beside rungs 13 and 8 on fixed cases'
P15='CUDA v15 hi-only products chunked backward equals the float64 reference backward for every operator in bfloat16'
# 1a. Rung 15's own test cases: the fixed cases (every gradient within rung 3's bounds; DeltaNet / GDN dk
#     differs from rung 13's; KDA / GDN2 bit for bit with rung 8; the worst ratios printed as
#     "v15 fixed cases worst ..."), its two properties (their worst ratios printed: "bwd_v15_hionly ..."),
#     outside the range.
one $BT bwd 20 "$FX15"
grep -E "^v15 fixed cases worst" $(logof bwd "$FX15") | tee -a /tmp/l/summary.log
one $BT bwd 12 "$P15"
grep -E "^bwd_v15_hionly .*worst" $(logof bwd "$P15") | tee -a /tmp/l/summary.log
one $BT bwd 12 'CUDA v15 hi-only products chunked backward with bfloat16 gates equals the reference backward on the rounded gates'
grep -E "^bwd_v15_hionly .*worst" $(logof bwd 'CUDA v15 hi-only products chunked backward with bfloat16 gates equals the reference backward on the rounded gates') | tee -a /tmp/l/summary.log
one $BT bwd 6 'CUDA v15 hi-only products chunked backward outside rung 3 range runs rung 2 bit for bit'
# 1b. The shared fixed cases (every rung of the ladder, 15 included), as far as part 1's time goes.
for t in 'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
         'CUDA chunked backward stays finite and exact with log-decays of 0 and -1000 and gates of 0 and 1' \
         'CUDA chunked backward with ragged last chunks equals the reference for lengths around 64' \
         'CUDA chunked backward at T = 1 equals one step of the reference backward' \
         'CUDA chunked backward is deterministic: two runs give bitwise equal gradients'; do one $BT bwd 20 "$t"; done
if [ "${PART2:-0}" = 1 ]; then
  END=300
  # 2a. Speed beside rungs 8 and 13, with the per-kernel profile (rung 15 for DeltaNet, GDN: grads = G1'
  #     hi, wy = G2' hi; for KDA and GDN2 "grads" is rung 8's kernel with hi-only products).
  timeout $(left 170) python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 8,13,15 --rep 30 --slow-rep 5 --json /tmp/l/bbench81315.json > /tmp/l/bbench81315.log 2>&1; rc=$?
  echo "[$(el) s] backward speed rc $rc" | tee -a /tmp/l/summary.log; grep -E "backward v(8|13|15) |kernels" /tmp/l/bbench81315.log | tee -a /tmp/l/summary.log
  # 2b. memcheck and racecheck on one property, three cases per operator (the hi layouts' overlays: G1''s
  #     M2 / k / q tiles and float32 dG_part over the 5 hi tiles; G2''s de slab over A hi and tile 1).
  for tool in memcheck racecheck; do
    if [ $(el) -lt 250 ]; then
      RC_PARAMS="seed=20261130 max_success=3" timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 $BT "$P15" > /tmp/l/san_$tool.log 2>&1; rc=$?
      echo "[$(el) s] backward $tool ($P15, max_success=3) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san_$tool.log | tail -1)" | tee -a /tmp/l/summary.log
    fi
  done
fi
if [ "${PART3:-0}" = 1 ]; then
  # 3. Is the chunk gradient MMA-bound? ncu (hardware counters, one launch each at B=8 T=4096 H=16 K=V=128)
  #    of G1' and G2' (DeltaNet; rung 13 hi + lo against rung 15 hi-only) and of rung 8's grads kernel (KDA;
  #    rung 8 against rung 15's V15Mid): duration, issue slots busy, stall reasons, and the tensor pipe's
  #    active cycles. A tensor pipe far from busy with few "math pipe throttle" stalls says the lo MMAs
  #    were not what bounded the kernel (RESULTS.md "Rung 15", the estimate's two ends).
  END=$(( $(el) + 300 ))
  S="--section SpeedOfLight --section Occupancy --section WarpStateStats --section ComputeWorkloadAnalysis --section InstructionStats"
  M="--metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_tensor_op_hmma.sum,smsp__inst_executed.sum"
  prof() {  # name, kernel regex, rung, op
    local n=$1 rc
    timeout $(left 60) ncu --clock-control none -k regex:$2 --launch-count 1 $S $M -o /tmp/l/$n \
      python3 optimized/cuda/bench/bench_backward.py --lib $L --ops $4 --bwd-versions $3 --rep 1 --slow-rep 1 > /tmp/l/$n.run.txt 2>&1; rc=$?
    ncu -i /tmp/l/$n.ncu-rep --page details > /tmp/l/$n.details.txt 2>&1
    echo "[$(el) s] ncu $n rc $rc" | tee -a /tmp/l/summary.log
    grep -E "Duration|Issue Slots Busy|Compute \(SM\) Throughput|Achieved Occupancy|Warp Cycles Per Issued|sm__pipe_tensor|sm__inst_executed_pipe_tensor|smsp__inst_executed.sum" /tmp/l/$n.details.txt | head -10 | tee -a /tmp/l/summary.log
    rm -f /tmp/l/$n.ncu-rep; }
  prof g1_v13_dn bwd12_g1 13 delta_rule
  prof g1_v15_dn bwd12_g1 15 delta_rule
  prof g2_v13_dn bwd11_wy 13 delta_rule
  prof g2_v15_dn bwd11_wy 15 delta_rule
  prof grads_v8_kda bwd_grads_tc 8 kda
  prof grads_v15_kda bwd_grads_tc 15 kda
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
