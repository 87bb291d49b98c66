#!/usr/bin/env bash
# Session 6 device call 4: (A) forward + backward beside fla with `best` = rung 6, all four operators
# at B=8 T=4096 H=16 K=V=128 (fla's GDN backward tried; SDPA too); (B) ncu profiles (hardware
# counters, --clock-control none) of the kernels that dominate: the backward's grads kernel (rung 6)
# for DeltaNet and KDA, and the forward's state kernel for GDN at B=8 T=4096 and B=1 T=32768.
set -u
mkdir -p /tmp/b /tmp/t && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so
( time timeout 300 python3 optimized/cuda/bench/bench_backward.py --lib $L --fla .fla --bwd-versions 6 --rep 30 --slow-rep 10 --json $OUT/bbench.json ) > $OUT/bbench.log 2>&1
sed -n '/^summary/,$p' $OUT/bbench.log; grep -E "vs fla|failed|Error" $OUT/bbench.log | head -20
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters"
prof() {  # name, kernel regex, program...
  local n=$1 k=$2; shift 2
  timeout 150 ncu --clock-control none -k regex:$k --launch-count 1 $S -o /tmp/t/$n "$@" > /tmp/t/$n.run.txt 2>&1
  ncu -i /tmp/t/$n.ncu-rep --page details > /tmp/t/$n.details.txt 2>&1
  ncu -i /tmp/t/$n.ncu-rep --page source --csv --print-source sass > /tmp/t/$n.sass.csv 2>&1
  echo "== $n"; grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Stall Long|Stall Barrier|Stall Short|Memory Throughput|Compute \(SM\)" /tmp/t/$n.details.txt | head -16; }
prof grads_kda bwd_grads_tc python3 optimized/cuda/bench/bench_backward.py --lib $L --ops kda --bwd-versions 6 --rep 1 --slow-rep 1
prof grads_dn bwd_grads_tc python3 optimized/cuda/bench/bench_backward.py --lib $L --ops delta_rule --bwd-versions 6 --rep 1 --slow-rep 1
prof state_b8 v2_state python3 optimized/cuda/bench/bench_forward.py --lib $L --versions 4 --ops gated_delta_rule --shapes 8x4096x16x128x128 --rep 1
prof state_b1 v2_state python3 optimized/cuda/bench/bench_forward.py --lib $L --versions 4 --ops gated_delta_rule --shapes 1x32768x16x128x128 --rep 1
cp /tmp/t/*.ncu-rep $OUT/ 2>/dev/null
tar -cJf $OUT/ncu_text.tar.xz -C /tmp/t $(cd /tmp/t && ls *.txt *.csv)
ls -la $OUT
