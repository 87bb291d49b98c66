#!/usr/bin/env bash
# Session 12 call 2 (carry .cudabin; forward rung 8 with its benchmark knobs LINATTN_V8_SKIP and
# LINATTN_V8_SPLIT). (1) rung 8's split variant (LINATTN_V8_SPLIT=1): its bit test against rung 7 and a
# property; (2) the state kernel alone under the knobs (bench/state_knob_sweep.py), GDN at both shapes,
# rungs 7 and 8; (3) ncu of the state kernels of rungs 7 and 8 (GDN, B=8 T=4096), stall reasons and
# SASS source counters.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l /tmp/t
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > /tmp/l/env.log
BF=/tmp/b/test_cuda_forward L=/tmp/b/liblinattn_cuda_capi.so
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
LINATTN_V8_SPLIT=1 timeout 60 $BF 'CUDA v8 wgmma forward equals v7 bit for bit for DeltaNet and GDN (informational)' > /tmp/l/split_bit.log 2>&1
echo "[$(el) s] split bit test rc $?: $(res /tmp/l/split_bit.log)" | tee -a /tmp/l/summary.log
LINATTN_V8_SPLIT=1 timeout 60 $BF 'CUDA v8 wgmma chunked forward equals the float64 reference for every operator in bfloat16' > /tmp/l/split_prop.log 2>&1
echo "[$(el) s] split property rc $?: $(res /tmp/l/split_prop.log)" | tee -a /tmp/l/summary.log
R="7:;8:;8:LINATTN_V8_SPLIT=1"
for k in 1 2 4 8 16 32 64 127; do R="$R;8:LINATTN_V8_SKIP=$k"; done
for k in 1 16 64; do R="$R;8:LINATTN_V8_SPLIT=1,LINATTN_V8_SKIP=$k"; done
R="$R;7:;8:"
timeout 150 python3 optimized/cuda/bench/state_knob_sweep.py --lib $L --runs "$R" --shapes 8x4096x16x128x128,1x32768x16x128x128 > /tmp/l/sweep.log 2>&1
echo "[$(el) s] sweep rc $?" | tee -a /tmp/l/summary.log
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters"
prof() {  # name, kernel regex, version
  timeout 100 ncu --clock-control none -k regex:$2 --launch-count 1 $SEC -o /tmp/t/$1 \
    python3 optimized/cuda/bench/state_knob_sweep.py --lib $L --runs "$3:" --rep 1 > /tmp/t/$1.run.txt 2>&1
  ncu -i /tmp/t/$1.ncu-rep --page details > /tmp/t/$1.details.txt 2>&1
  ncu -i /tmp/t/$1.ncu-rep --page source --csv --print-source sass > /tmp/t/$1.sass.csv 2>&1
  echo "[$(el) s] ncu $1: $(grep -E 'Duration' /tmp/t/$1.details.txt | head -1)" | tee -a /tmp/l/summary.log; }
prof state7 v2_state 7
prof state8 v8_state 8
cp /tmp/t/*.txt /tmp/t/*.csv /tmp/l/ 2>/dev/null
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log /tmp/l/sweep.log $OUT/
