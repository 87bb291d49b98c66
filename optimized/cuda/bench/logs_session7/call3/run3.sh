#!/usr/bin/env bash
# Session 7 device call 3: the backward test cases call 2's 220 s limit cut (the value-tile case
# was killed mid-way, the determinism and bad-argument cases did not start), racecheck at T = 1 and
# 10 determinism repeats with rung 7 in; then ncu (hardware counters) of the forward intra kernel
# for GDN and DeltaNet (B=8 T=4096: profile_kernels.py in call 2 put the GDN gap to fla there,
# 0.497 ms against fla's kkt_solve + recompute_w_u 0.347) and of rung 7's grads kernel (DeltaNet).
set -u
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
mkdir -p /tmp/b /tmp/t /tmp/l && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1
BT=/tmp/b/test_cuda_backward L=/tmp/b/liblinattn_cuda_capi.so
for t in 'CUDA chunked backward at K = V = 128 with 64 and 32 column value tiles and at V up to 256 equals the reference' \
         'CUDA chunked backward is deterministic: two runs give bitwise equal gradients' \
         'CUDA chunked backward rejects bad arguments with a linattn Error naming the argument'; do
  n=$(echo "$t" | md5sum | cut -c1-6); ( time timeout 200 $BT "$t" ) > /tmp/l/bt_$n.log 2>&1
  echo "[$(el) s] $t | $(grep -E '^All tests|^test cases|^real' /tmp/l/bt_$n.log | tr '\n' ' ')"; done
T1='CUDA chunked backward at T = 1 equals one step of the reference backward'
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $BT "$T1" > /tmp/l/racecheck_t1.log 2>&1; echo "[$(el) s] racecheck T=1 rc $?: $(grep SUMMARY /tmp/l/racecheck_t1.log)"
DT='CUDA chunked backward is deterministic: two runs give bitwise equal gradients'
f=0; for r in $(seq 1 10); do timeout 60 $BT "$DT" > /dev/null 2>&1 || f=$((f + 1)); done; echo "[$(el) s] determinism: $f failures in 10" | tee /tmp/l/det.log
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters"
prof() {  # name, kernel regex, program...
  local n=$1 k=$2; shift 2
  timeout 120 ncu --clock-control none -k regex:$k --launch-count 1 $S -o /tmp/t/$n "$@" > /tmp/t/$n.run.txt 2>&1
  ncu -i /tmp/t/$n.ncu-rep --page details > /tmp/t/$n.details.txt 2>&1
  ncu -i /tmp/t/$n.ncu-rep --page source --csv --print-source sass > /tmp/t/$n.sass.csv 2>&1
  echo "[$(el) s] == $n"; grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Memory Throughput|DRAM Throughput|Compute \(SM\)" /tmp/t/$n.details.txt | head -12; }
prof intra_gdn 'tci::intra' python3 optimized/cuda/bench/bench_forward.py --lib $L --versions 4 --ops gated_delta_rule --shapes 8x4096x16x128x128 --rep 1
prof intra_dn 'tci::intra' python3 optimized/cuda/bench/bench_forward.py --lib $L --versions 4 --ops delta_rule --shapes 8x4096x16x128x128 --rep 1
[ $(el) -lt 380 ] && prof grads7_dn bwd_grads_tc python3 optimized/cuda/bench/bench_backward.py --lib $L --ops delta_rule --bwd-versions 7 --rep 1 --slow-rep 1
tar -cJf /tmp/l/ncu_text.tar.xz -C /tmp/t $(cd /tmp/t && ls *.txt *.csv)
echo "[$(el) s] end"
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
