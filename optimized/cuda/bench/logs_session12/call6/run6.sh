#!/usr/bin/env bash
# Session 12 call 6 (carry .cudabin): rung 8's state kernel with the flat grid (a head's two value tiles
# side by side, sharing the w_aux / q~ / Kd / P reads in L2) and the load knobs; ncu raw stall and memory
# metrics of rungs 7 and 8 (GDN, B=8 T=4096).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l /tmp/t
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1
L=/tmp/b/liblinattn_cuda_capi.so
F=LINATTN_STATE_GRID=flat
R="7:;7:$F;8:;8:$F;8:$F,LINATTN_V8_SKIP=4;8:$F,LINATTN_V8_SKIP=128;8:$F,LINATTN_V8_SKIP=1;7:;8:$F"
timeout 120 python3 optimized/cuda/bench/state_knob_sweep.py --lib $L --runs "$R" --shapes 8x4096x16x128x128,1x32768x16x128x128 > $OUT/sweep.log 2>&1
echo "sweep rc $?"; cat $OUT/sweep.log
for v in 7 8; do
  k=v2_state; [ $v = 8 ] && k=v8_state
  timeout 100 ncu --clock-control none -k regex:$k --launch-count 1 --section WarpStateStats --section MemoryWorkloadAnalysis_Tables --section MemoryWorkloadAnalysis --section SpeedOfLight -o /tmp/t/s$v \
    python3 optimized/cuda/bench/state_knob_sweep.py --lib $L --runs "$v:" --rep 1 > /tmp/t/s$v.run.txt 2>&1
  ncu -i /tmp/t/s$v.ncu-rep --page raw > /tmp/t/s$v.raw.txt 2>&1
  ncu -i /tmp/t/s$v.ncu-rep --page details > /tmp/t/s$v.details.txt 2>&1
  echo "== rung $v"; grep -E "warp_issue_stalled_[a-z_]+_per_warp_active.pct |gpu__time_duration.sum|dram__bytes_read.sum |lts__t_sector_hit_rate.pct|l1tex__data_bank|lts__t_bytes.sum " /tmp/t/s$v.raw.txt | head -40
done
tar -cJf $OUT/ncu.tar.xz -C /tmp/t .
