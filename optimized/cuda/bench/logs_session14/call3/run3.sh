#!/usr/bin/env bash
# Session 14 call 3: backward rung 18's G2' with the dw_aux and k loads of each K slab issued together
# (bwd_v11_wyfast.cu stage_dwa_e; session 11's candidate for its 0.02-0.06 ms against rung 17): rung 18's
# tests (bit for bit with rung 17, properties, outside range), every saved test case, then backward rungs 17
# and 18 timed in one process (and per kernel: bench_backward.py sets LINATTN_BWD_PROFILE for one extra call; DeltaNet and GDN, no fla), then ncu of
# rung 9's intra kernel for DeltaNet and GDN (where GDN's extra 0.03 ms goes; for the next session).
# Carry .cudabin (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at HEAD).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l /tmp/t
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
timeout 150 /tmp/b/test_cuda_backward "CUDA v18*" --durations yes > /tmp/l/v18.log 2>&1; rc=$?
echo "[$(el) s] rung 18's tests rc $rc: $(res /tmp/l/v18.log)" | tee -a /tmp/l/summary.log
timeout 60 /tmp/b/test_cuda_saved --durations yes > /tmp/l/saved.log 2>&1; rc=$?
echo "[$(el) s] test_cuda_saved rc $rc: $(res /tmp/l/saved.log)" | tee -a /tmp/l/summary.log
timeout 200 python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --ops delta_rule,gated_delta_rule --bwd-versions 17,18,17,18 --rep 100 > /tmp/l/bbench.log 2>&1; rc=$?
echo "[$(el) s] bench_backward rungs 17, 18, 17, 18 rc $rc" | tee -a /tmp/l/summary.log
grep -E 'ms' /tmp/l/bbench.log | grep -vE 'kernels \(ms\)' | head -40 >> /tmp/l/summary.log
grep -E 'kernels \(ms\)' /tmp/l/bbench.log | sort | uniq -c | sort -rn | head -12 >> /tmp/l/summary.log
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters"
prof() {  # name, operator
  timeout 100 ncu --clock-control none -k regex:intra_v7 --launch-count 1 $SEC -o /tmp/t/$1 \
    python3 optimized/cuda/bench/state_knob_sweep.py --lib /tmp/b/liblinattn_cuda_capi.so --runs "9:" --only intra --ops $2 --rep 1 > /tmp/t/$1.run.txt 2>&1
  ncu -i /tmp/t/$1.ncu-rep --page details > /tmp/t/$1.details.txt 2>&1
  ncu -i /tmp/t/$1.ncu-rep --page source --csv --print-source sass > /tmp/t/$1.sass.csv 2>&1
  echo "[$(el) s] ncu $1: $(grep -E 'Duration' /tmp/t/$1.details.txt | head -1)" | tee -a /tmp/l/summary.log; }
prof intra9_dn delta_rule
prof intra9_gdn gated_delta_rule
cp /tmp/t/*.txt /tmp/t/*.csv /tmp/l/ 2>/dev/null
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log $OUT/
