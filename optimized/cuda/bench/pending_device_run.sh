#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 8:
# what session 8 wrote after its last device call (RESULTS.md Status, "Next"), in priority order,
# bounded to about 560 s so it fits one `run` call (600 s). Each part is a script of
# bench/logs_session8/ run as written there, its /tmp/l logs moved aside after it:
#   1. rung11_run.sh part 1 (rung 11, the faster G2: bit for bit with rung 10, properties, shared cases)
#   2. rung12_run.sh part 1 (rung 12, G1 by 64-channel slabs at 2 blocks per SM: bit for bit with rung 10)
#   3. saved_run.sh (the saved forward's stream events, smaller workspace and new tests; memcheck)
#   4. rung 13's bit test (rung 12's G1' then rung 11's G2': bit for bit with rung 10), at most 20 s.
#   5. bench_backward.py --bwd-versions 8,10,11,12,13 in one process, with the saving rows and the profile.
# Needs .cudabin/bins.tar.xz (test_cuda_forward, test_cuda_backward, test_cuda_saved,
# liblinattn_cuda_capi.so, stripped; pack with `tar -cf - -C DIR . | xz -9 -T2`: 33 -> 9 MB, the carry
# limit is 64 MiB with the working tree) built at or after the commit that last changed optimized/cuda;
# carry `.cudabin .tcache` (.fla only to add fla's rows: --fla .fla). Writes logs.tar.xz to $OUT.
# Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/all
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
part() {  # name, script, env...
  local name=$1 script=$2; shift 2
  rm -rf /tmp/l; mkdir -p /tmp/l /tmp/o_$name
  env "$@" OUT=/tmp/o_$name bash "$script" 2>&1 | tail -30
  mv /tmp/l /tmp/all/$name; echo "[$(el) s] $name done"; }
part rung11 optimized/cuda/bench/logs_session8/rung11_run.sh
part rung12 optimized/cuda/bench/logs_session8/rung12_run.sh
part saved optimized/cuda/bench/logs_session8/saved_run.sh
mkdir -p /tmp/all/rung13 /tmp/all/bench  # rung 13: the binaries rung11_run.sh unpacked into /tmp/b
LINATTN_CUDA_BACKWARD_REPORT=1 timeout 20 /tmp/b/test_cuda_backward 'CUDA v13 gradients equal v10 gradients bit for bit' \
  > /tmp/all/rung13/bit13.log 2>&1
echo "[$(el) s] rung13 bit rc $? | $(grep -E '^All tests|^test cases' /tmp/all/rung13/bit13.log | tail -1)"
timeout $(( 560 - $(el) )) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so \
  --bwd-versions 8,10,11,12,13 --rep 30 --slow-rep 5 --json /tmp/all/bench/bbench.json > /tmp/all/bench/bbench.log 2>&1
echo "[$(el) s] bench rc $?"; sed -n '/^summary/,$p' /tmp/all/bench/bbench.log; grep "kernels" /tmp/all/bench/bbench.log
tar -cJf $OUT/logs.tar.xz -C /tmp/all .
# Second call: the mutants (BMUT_ONLY=v10, v11, v12 and smutants 95-97, 110-112: device_run.sh,
# MBIN= the mutant tree of make_mutants.py), racecheck on the packed backward, every test case of both
# binaries (device_run.sh tests btests, BIN=/tmp/b); then the rungs' PART2=1 runs if needed.
