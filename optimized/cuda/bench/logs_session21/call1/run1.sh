#!/usr/bin/env bash
# optimized/cuda/bench/logs_session21/call1/run1.sh -- session 21 call 1: session 20's pending_device_run.sh without its
# planted-bug step (moved to call 2, whose mutant tree also holds rung 23's), plus rung 21 at LINATTN_BWD3_BV=32.
# (Session 19's pending script, run as session 20's call 1, is kept as bench/logs_session20/call1/run1.sh.)
# Session 20 (bench/logs_session20/) left unrun on backward rung 21 (`best`, bwd_v21_duvsmem.cu):
#   1. the two test_cuda_backward cases its call 3 did not finish (determinism, killed at the bound; bad arguments, not
#      reached); every other case passed there, and every test_cuda_saved case;
#   2. a completed racecheck: of the bit test it was killed at its bound in calls 1 and 3 (as in sessions 18-19), so
#      here first of the test "CUDA v21 and v22 on two small cases per scalar operator for the sanitizers" (rungs 21
#      and 22's checks on two small cases; memcheck too), then of rung 21's bit test while time is left;
#   3. rung 22 (bwd_v22_kq8.cu, written after the device time was spent; never run): its tests (bit for bit with rung
#      21), its speed beside rung 21 (DeltaNet and GDN, no fla), and planted bugs 289-290 with the unmutated tree (0);
#   4. an Nsight Compute profile of DeltaNet's three backward kernels on rung 21 at the benchmark shape (G1' bwd12_g1,
#      G2' bwd11_wy, the dstates kernel bwd3_dstates) for the structural work RESULTS.md "Status (session 20)" names;
#      summarise with bench/ncu_sass_summary.py --epochs on the .sass.csv files.
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped, built at HEAD;
# `xz -9e`) and .cudabin/mutants.tar.xz (test_cuda_backward of `python3 optimized/cuda/bench/make_mutants.py
# /tmp/linattn_mutants_cuda`'s tree, built with `cmake --build /tmp/linattn_mutants_cuda/build --target
# test_cuda_backward`); carry `.cudabin`. Usage on the device: bash optimized/cuda/bench/pending_device_run.sh.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-560}
source optimized/cuda/bench/call_lib.sh
unpack
mkdir -p /tmp/t
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
# -w NoTests: a filter that matches no test fails instead of passing empty (session 20 call 2's slip)
timeout $(left 60) /tmp/b/test_cuda_backward 'CUDA chunked backward is deterministic*','CUDA chunked backward rejects*' \
  -w NoTests --durations yes > /tmp/l/last2.log 2>&1
note "test_cuda_backward determinism, bad arguments rc $?: $(res /tmp/l/last2.log)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 60) /tmp/b/test_cuda_backward "CUDA v22*" -w NoTests --durations yes > /tmp/l/v22.log 2>&1
note "test_cuda_backward 'CUDA v22*' rc $?: $(res /tmp/l/v22.log)"
for ops in delta_rule gated_delta_rule; do
  timeout $(left 60) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
    --ops $ops --bwd-versions 21,22 --rep 30 --json /tmp/l/bbench_$ops.json > /tmp/l/bbench_$ops.log 2>&1
  note "bench_backward $ops, rungs 21, 22 (no fla) rc $?"
  grep -E "backward|saving|kernels" /tmp/l/bbench_$ops.log | grep -v "^summary" >> /tmp/l/summary.log
done
# planted bugs 289-290 move to call 2 (their tree is built with rung 23's)
LINATTN_BWD3_BV=32 timeout $(left 40) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --ops delta_rule --bwd-versions 21 --rep 30 > /tmp/l/bbench_dn_bv32.log 2>&1
note "bench_backward delta_rule rung 21 at LINATTN_BWD3_BV=32 rc $?"
grep -E "backward|saving|kernels" /tmp/l/bbench_dn_bv32.log | grep -v "^summary" >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
SMALL='CUDA v21 and v22 on two small cases per scalar operator for the sanitizers'
timeout $(left 150) compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SMALL" -w NoTests \
  > /tmp/l/san_small_racecheck.log 2>&1
note "racecheck small rung 21 / 22 test rc $?: $(res /tmp/l/san_small_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san_small_racecheck.log | tail -1)"
timeout $(left 90) compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward "$SMALL" -w NoTests \
  > /tmp/l/san_small_memcheck.log 2>&1
note "memcheck small rung 21 / 22 test rc $?: $(res /tmp/l/san_small_memcheck.log) | $(grep -E 'ERROR SUMMARY' /tmp/l/san_small_memcheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
SEC="--section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section InstructionStats --section SourceCounters"
prof() {  # report name, kernel regex
  timeout $(left 60) ncu --clock-control none -k regex:$2 --launch-skip 1 --launch-count 1 $SEC -o /tmp/t/$1 \
    python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --ops delta_rule \
    --bwd-versions 21 --rep 2 --slow-rep 2 > /tmp/t/$1.run.txt 2>&1
  note "ncu $1 rc $?"
  ncu -i /tmp/t/$1.ncu-rep --page details > /tmp/l/$1.details.txt 2>&1
  ncu -i /tmp/t/$1.ncu-rep --page source --csv --print-source sass > /tmp/l/$1.sass.csv 2>&1
  grep -E "Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy" /tmp/l/$1.details.txt | head -4 >> /tmp/l/summary.log
}
prof dn21_g1 bwd12_g1
prof dn21_g2 bwd11_wy
prof dn21_dstates bwd3_dstates
cp /tmp/l/summary.log "$OUT/"
BIT='CUDA v21 gradients equal v20 gradients bit for bit but dbeta*'
LINATTN_BWD3_BV=64 timeout $(left 200) compute-sanitizer --tool racecheck --error-exitcode 9 \
  /tmp/b/test_cuda_backward "$BIT" -w NoTests > /tmp/l/san21_racecheck.log 2>&1
note "racecheck rung 21 bit test (BV 64) rc $?: $(res /tmp/l/san21_racecheck.log) | $(grep -E 'RACECHECK SUMMARY' /tmp/l/san21_racecheck.log | tail -1)"
finish
