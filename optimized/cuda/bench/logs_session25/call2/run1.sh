#!/usr/bin/env bash
# logs_session25/call2/run1.sh -- session 25's second device call: binaries of .cudabin/BUILT_AT, where rung 28's states
# kernels (kSbf) store the bf16 state from their hi tile by 16-byte row stores (state_hi_store_rows) instead of from the
# fragments by 4-byte pairs: call 1 measured the pair-store variant's recompute kernel at 0.73-0.78 ms against 0.48
# (v2_state_bwd_lean_sbf<128, 64> spilled 16 bytes) and its saving forward no faster (1.061 against 1.045 ms).
#  1. every rung 28 test ("CUDA v28*") and every test_cuda_saved case;
#  2. DeltaNet forward + backward with fla beside rungs 27 and 28, twice each, at B=8 T=4096 H=16 K=V=128;
#  3. mutants 303 and 304 (must fail rung 28's bit test) and the mutant build without one;
#  4. memcheck and racecheck of rung 28's sanitizer case;
#  5. the five shared fixed-case tests call 1 did not run (every rung of kRungs, 27 and 28 among them, against the
#     float64 reference).
# Usage on the device: OUT=$OUT END=560 bash optimized/cuda/bench/logs_session25/call2/run1.sh
set -u
OUT=${OUT:-/tmp/out}; END=${END:-560}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 120) /tmp/b/test_cuda_backward 'CUDA v28*' -w NoTests --durations yes > /tmp/l/v28_tests.log 2>&1
note "rung 28 tests rc $?: $(res /tmp/l/v28_tests.log)"
grep -E "FAILED|with expansion" /tmp/l/v28_tests.log | head -20 >> /tmp/l/summary.log
timeout $(left 120) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved_all.log 2>&1
note "test_cuda_saved (all) rc $?: $(res /tmp/l/saved_all.log)"
grep -E "FAILED|with expansion" /tmp/l/saved_all.log | head -10 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
timeout $(left 180) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 27,28,27,28 --rep 50 --json /tmp/l/bench_fla.json \
  > /tmp/l/bench_fla.log 2>&1
note "bench_backward delta_rule rungs 27, 28 with fla rc $?"
grep -E "backward|saving|kernels|fla" /tmp/l/bench_fla.log | grep -v "^summary" | cut -c1-230 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
if [ -f .cudabin/mut.tar.xz ]; then
  mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
  for n in 303 304 0; do
    LINATTN_MUTANT=$n timeout $(left 40) /tmp/m/test_cuda_backward "CUDA v28 gradients equal v27 gradients bit for bit" \
      -w NoTests > /tmp/l/mut_$n.log 2>&1
    note "mutant $n rc $? (303, 304 must fail; 0 = none must pass): $(res /tmp/l/mut_$n.log)"
  done
fi
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
timeout $(left 60) $CS --tool memcheck /tmp/b/test_cuda_backward 'CUDA v28 on small cases for the sanitizers' -w NoTests \
  > /tmp/l/v28_memcheck.log 2>&1
note "memcheck rung 28 rc $?: $(grep -E 'ERROR SUMMARY' /tmp/l/v28_memcheck.log | tail -1)"
timeout $(left 60) $CS --tool racecheck /tmp/b/test_cuda_backward 'CUDA v28 on small cases for the sanitizers' -w NoTests \
  > /tmp/l/v28_racecheck.log 2>&1
note "racecheck rung 28 rc $?: $(grep -E 'RACECHECK SUMMARY' /tmp/l/v28_racecheck.log | tail -1)"
cp /tmp/l/summary.log "$OUT/"
timeout $(left 200) /tmp/b/test_cuda_backward 'CUDA chunked backward is exact at the tuned and the largest head sizes up to K = V = 256,CUDA chunked backward of 66 sequences of two heads with wide value tiles equals the reference,CUDA chunked backward with ragged last chunks equals the reference for lengths around 64,CUDA chunked backward stays finite and exact with log-decays of 0 and -1000 and gates of 0 and 1,CUDA chunked backward of a packed batch of many short sequences equals the reference' \
  -w NoTests --durations yes > /tmp/l/fixed.log 2>&1
note "five shared fixed-case tests rc $?: $(res /tmp/l/fixed.log)"
finish
