#!/usr/bin/env bash
# Session 14 call 4. (1) Backward rung 18's planted bugs 240, 241 (stage_e's own call) and 245-247 (the
# fused K- and V-slab staging of G2') against "CUDA v18 gradients equal v17 gradients bit for bit" (mutant
# binary of make_mutants.py, LINATTN_MUTANT=n). (2) EXPERIMENT: the row stride of the intra kernel's float32
# sL / sA matrices in forward rung 7's kernel (call 3's ncu: 4-way bank conflicts on the mma fragment
# accesses of the [64][65] layout, 23% of shared wavefronts excessive): LINATTN_V7_LDF = 68 or 72 selects
# an instantiation with that stride. Bit tests of rungs 7 (against 4) and 9 (against 6) under each stride,
# then the intra kernel alone and the whole forward, rungs 7 and 9, strides 65 / 68 / 72, DeltaNet and
# GDN at B=8 T=4096 (bench/state_knob_sweep.py, interleaved twice), then ncu of rung 9's GDN intra kernel
# at the better stride. Carry .cudabin (test_cuda_forward, test_cuda_backward_mut, liblinattn_cuda_capi.so).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l /tmp/t
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
BT='CUDA v18 gradients equal v17 gradients bit for bit'
timeout 40 /tmp/b/test_cuda_backward_mut "$BT" > /tmp/l/mut0.log 2>&1; rc=$?
echo "[$(el) s] no mutant rc $rc: $(res /tmp/l/mut0.log)" | tee -a /tmp/l/summary.log
for m in 240 241 245 246 247; do
  LINATTN_MUTANT=$m timeout 40 /tmp/b/test_cuda_backward_mut "$BT" > /tmp/l/mut$m.log 2>&1; rc=$?
  echo "[$(el) s] mutant $m rc $rc (must fail): $(res /tmp/l/mut$m.log)" | tee -a /tmp/l/summary.log
done
for ldf in 65 68 72; do
  for t in 'CUDA v7 overlap forward equals v4 bit for bit for DeltaNet and GDN' 'CUDA v9 lean overlap forward equals v6 bit for bit for DeltaNet and GDN'; do
    LINATTN_V7_LDF=$ldf timeout 60 /tmp/b/test_cuda_forward "$t" > /tmp/l/bit_$ldf.log 2>&1; rc=$?
    echo "[$(el) s] LDF $ldf '$t' rc $rc: $(res /tmp/l/bit_$ldf.log)" | tee -a /tmp/l/summary.log
  done
done
R="7:;7:LINATTN_V7_LDF=68;7:LINATTN_V7_LDF=72;9:;9:LINATTN_V7_LDF=68;9:LINATTN_V7_LDF=72"
R="$R;$R"
timeout 120 python3 optimized/cuda/bench/state_knob_sweep.py --lib /tmp/b/liblinattn_cuda_capi.so --runs "$R" --only intra \
  --ops delta_rule,gated_delta_rule > /tmp/l/intra_sweep.log 2>&1
echo "[$(el) s] intra kernel alone rc $?" | tee -a /tmp/l/summary.log; cat /tmp/l/intra_sweep.log >> /tmp/l/summary.log
timeout 120 python3 optimized/cuda/bench/state_knob_sweep.py --lib /tmp/b/liblinattn_cuda_capi.so --runs "$R" --only '' \
  --ops delta_rule,gated_delta_rule > /tmp/l/whole_sweep.log 2>&1
echo "[$(el) s] whole forward rc $?" | tee -a /tmp/l/summary.log; cat /tmp/l/whole_sweep.log >> /tmp/l/summary.log
SEC="--section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section SourceCounters"
for ldf in 68 72; do
  LINATTN_V7_LDF=$ldf timeout 60 ncu --clock-control none -k regex:intra_v7 --launch-count 1 $SEC -o /tmp/t/intra9_gdn_$ldf \
    python3 optimized/cuda/bench/state_knob_sweep.py --lib /tmp/b/liblinattn_cuda_capi.so --runs "9:" --only intra --ops gated_delta_rule --rep 1 > /tmp/t/run_$ldf.txt 2>&1
  ncu -i /tmp/t/intra9_gdn_$ldf.ncu-rep --page details > /tmp/t/intra9_gdn_$ldf.details.txt 2>&1
  ncu -i /tmp/t/intra9_gdn_$ldf.ncu-rep --page source --csv --print-source sass > /tmp/t/intra9_gdn_$ldf.sass.csv 2>&1
  echo "[$(el) s] ncu LDF $ldf: $(grep -E 'Duration' /tmp/t/intra9_gdn_$ldf.details.txt | head -1)" | tee -a /tmp/l/summary.log
done
cp /tmp/t/*.txt /tmp/t/*.csv /tmp/l/ 2>/dev/null
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log $OUT/
