#!/usr/bin/env bash
# optimized/cuda/bench/logs_session21/call2/run2.sh -- session 21 call 2: backward rung 23 (bwd_v23_dsone.cu: rung 22
# with the dstates kernel holding one stage of its w_aux, Qg, Kd tiles, two blocks per SM; never run before) --
# its tests, its speed beside rungs 21 and 22 (DeltaNet and GDN, no fla), planted bugs 289-290 (rung 22, moved from
# call 1) and 291-292 (rung 23) with the unmutated tree, racecheck and memcheck of its small test, an ncu profile of its
# dstates kernel, then DeltaNet with fla while time is left.
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so at rung 23's tree) and
# .cudabin/mutants.tar.xz (test_cuda_backward of bench/make_mutants.py's tree); carry `.cudabin` (and `.fla`).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-570}
source optimized/cuda/bench/call_lib.sh
unpack
mkdir -p /tmp/t
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 150) /tmp/b/test_cuda_backward "CUDA v23*" -w NoTests --durations yes > /tmp/l/v23.log 2>&1
note "test_cuda_backward 'CUDA v23*' rc $?: $(res /tmp/l/v23.log)"
cp /tmp/l/summary.log "$OUT/"
bb() {  # tag, ops, rungs, extra env
  env $4 timeout $(left 60) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
    --ops $2 --bwd-versions $3 --rep 30 --json /tmp/l/bbench_$1.json > /tmp/l/bbench_$1.log 2>&1
  note "bench_backward $1 ($2, rungs $3, $4) rc $?"
  grep -E "backward|saving|kernels" /tmp/l/bbench_$1.log | grep -v "^summary" >> /tmp/l/summary.log
}
bb dn delta_rule 21,22,23 X=0
bb gdn gated_delta_rule 21,22,23 X=0
bb dn_bv64 delta_rule 23 LINATTN_BWD3_BV=64
cp /tmp/l/summary.log "$OUT/"
mkdir -p /tmp/m && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
for n in 289 290; do
  LINATTN_BWD3_BV=64 LINATTN_MUTANT=$n timeout $(left 40) /tmp/m/test_cuda_backward "CUDA v22 gradients equal v21*" \
    -w NoTests > /tmp/l/mut_$n.log 2>&1
  note "mutant $n (v22 bit test, BV 64): rc $? $(res /tmp/l/mut_$n.log)"
done
for n in 291 292; do
  LINATTN_BWD3_BV=32 LINATTN_MUTANT=$n timeout $(left 40) /tmp/m/test_cuda_backward "CUDA v23 gradients equal v22*" \
    -w NoTests > /tmp/l/mut_$n.log 2>&1
  note "mutant $n (v23 bit test, BV 32): rc $? $(res /tmp/l/mut_$n.log)"
done
LINATTN_MUTANT=0 timeout $(left 60) /tmp/m/test_cuda_backward "CUDA v22 gradients equal v21*","CUDA v23 gradients equal v22*" \
  -w NoTests > /tmp/l/mut_0.log 2>&1
note "mutant 0 (v22 BV 32 and 64, v23 BV unset, 32, 64): rc $? $(res /tmp/l/mut_0.log)"
cp /tmp/l/summary.log "$OUT/"
SMALL='CUDA v23 on two small cases per scalar operator for the sanitizers'
timeout $(left 120) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SMALL" -w NoTests \
  > /tmp/l/san23_racecheck.log 2>&1
note "racecheck small rung 23 test rc $?: $(res /tmp/l/san23_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san23_racecheck.log | tail -1)"
timeout $(left 60) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SMALL" -w NoTests \
  > /tmp/l/san23_memcheck.log 2>&1
note "memcheck small rung 23 test rc $?: $(res /tmp/l/san23_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san23_memcheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters"
timeout $(left 60) ncu --clock-control none -k regex:bwd3_dstates --launch-skip 1 --launch-count 1 $SEC -o /tmp/t/dn23_dstates \
  python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --ops delta_rule \
  --bwd-versions 23 --rep 2 --slow-rep 2 > /tmp/t/dn23_dstates.run.txt 2>&1
note "ncu dn23_dstates rc $?"
ncu -i /tmp/t/dn23_dstates.ncu-rep --page details > /tmp/l/dn23_dstates.details.txt 2>&1
ncu -i /tmp/t/dn23_dstates.ncu-rep --page source --csv --print-source sass > /tmp/l/dn23_dstates.sass.csv 2>&1
grep -E "Duration|DRAM Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread" /tmp/l/dn23_dstates.details.txt | head -6 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
if [ $(left 200) -ge 170 ]; then
  timeout $(left 200) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --ops delta_rule --bwd-versions 21,23 --rep 30 --json /tmp/l/bbench_dn_fla.json > /tmp/l/bbench_dn_fla.log 2>&1
  note "bench_backward delta_rule rungs 21, 23 with fla rc $?"
  grep -E "backward|saving|kernels|fla" /tmp/l/bbench_dn_fla.log | grep -v "^summary" >> /tmp/l/summary.log
else
  note "no time left for the fla run"
fi
finish
