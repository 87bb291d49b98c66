#!/usr/bin/env bash
# Session 7 device call 4: ncu (hardware counters) of the forward intra kernel (v4_levels' tci::intra)
# for GDN and DeltaNet at B=8 T=4096 H=16 K=V=128 (call 3's attempt named the kernel 'tci::intra',
# which ncu's -k regex, matched against the bare function name, never sees: here 'intra').
set -u
mkdir -p /tmp/b /tmp/t /tmp/l && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
L=/tmp/b/liblinattn_cuda_capi.so
S="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters"
prof() {  # name, kernel regex, program...
  local n=$1 k=$2; shift 2
  timeout 120 ncu --clock-control none -k regex:$k --launch-count 1 $S -o /tmp/t/$n "$@" > /tmp/t/$n.run.txt 2>&1
  ncu -i /tmp/t/$n.ncu-rep --page details > /tmp/t/$n.details.txt 2>&1
  ncu -i /tmp/t/$n.ncu-rep --page source --csv --print-source sass > /tmp/t/$n.sass.csv 2>&1
  echo "== $n"; grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Memory Throughput|DRAM Throughput|Compute \(SM\)|Block Limit" /tmp/t/$n.details.txt | head -16; }
prof intra_gdn '^intra$' python3 optimized/cuda/bench/bench_forward.py --lib $L --versions 4 --ops gated_delta_rule --shapes 8x4096x16x128x128 --rep 1
prof intra_dn '^intra$' python3 optimized/cuda/bench/bench_forward.py --lib $L --versions 4 --ops delta_rule --shapes 8x4096x16x128x128 --rep 1
tar -cJf $OUT/ncu_text.tar.xz -C /tmp/t $(cd /tmp/t && ls *.txt *.csv)
