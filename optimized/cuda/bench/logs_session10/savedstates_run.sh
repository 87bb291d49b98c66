#!/usr/bin/env bash
# optimized/cuda/bench/logs_session10/savedstates_run.sh -- one device call (<= 300 s) for the saving
# forward with states (chunk_cuda.hpp, SavedForward "With states"; RESULTS.md "Saved states"; written in
# session 10, not yet run on a GPU): the saving forward's state kernel also stores the state entering every
# chunk and v_new where the saved backward reads them, and that backward skips A's copy and its states
# kernel.
# Steps: (1) the new saved-states bit test (o, final state, every gradient bit for bit with the recompute
# path, every saved rung) and its refusal test; (2) the existing saved tests (unchanged by default);
# (3) bench_backward.py (no fla) at B=8 T=4096 H=16 K=V=128 with the saved rows of rung 17 (best): rows
# "(saving)" and "(saving states)", their bit checks ("saved vs recompute max |diff| ... must be 0") and
# per-kernel profiles (the states kernel should be absent / ~0 with states); (4) memcheck and racecheck
# on the initial-state refusal test (one case with states; review11: the bit test's fixed cases x 4 ops
# x 2 gate dtypes x 14 rungs would not end within 60 s under the sanitizers), 60 s each at most.
# Each step's timeout is the smaller of its own and the time left; each step's exit status is saved
# before anything else runs (rc=$?) and printed in summary.log.
# Needs .cudabin/bins.tar.xz built at a commit that has saved states, holding test_cuda_saved and
# liblinattn_cuda_capi.so (RESULTS.md "How to build and carry": add build/cuda/proofs_tests/test_cuda_saved
# to /tmp/pk). Carry `.cudabin`. Writes $OUT/env.log and $OUT/logs.tar.xz (summary.log inside).
# Usage on the device: bash optimized/cuda/bench/logs_session10/savedstates_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so ST=/tmp/b/test_cuda_saved
END=290
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }  # min(nominal, time left)
logof() { echo /tmp/l/$1_$(echo "$2" | md5sum | cut -c1-6).log; }
one() {  # binary, tag, timeout, test name
  local f rc; f=$(logof $2 "$4")
  timeout $(left $3) $1 "$4" > $f 2>&1; rc=$?
  echo "[$(el) s] $2 | $4 | rc $rc | $(res $f)" | tee -a /tmp/l/summary.log; }
SD='CUDA saving forward with states gives the forward output bit for bit and the saved backward without its states kernel gives the recompute gradients bit for bit'
SN='CUDA saving forward with states but no SavedForward is a linattn Error naming save'
SB='CUDA saving forward with states stores every state and v_new at value tiles of 16 and 32 and 64 columns'
SH='CUDA saved backward with states refuses another initial state and without states accepts it'
# 1. The new tests.
one $ST saved 80 "$SD"
one $ST saved 5 "$SN"
one $ST saved 60 "$SB"  # review11: LINATTN_V2_BV = 16 / 32 / 64 (the fixed cases all pick 16)
one $ST saved 20 "$SH"  # review11: another initial state refused with states
# 2. The existing saved tests (unchanged behaviour by default), one by one.
for t in 'CUDA saving forward gives the forward output bit for bit and the saved backward gives the recompute backward gradients bit for bit' \
         'CUDA saved backward can be run twice from one saved forward with the same gradients' \
         'CUDA saved backward after a saving forward equals the float64 reference backward within the rung 3 bounds' \
         'CUDA saved backward refuses an empty or moved-from SavedForward with a linattn Error naming saved' \
         'CUDA saving forward refuses a rung or a call whose intra kernel is not forward rung 4 with a linattn Error' \
         'CUDA saved backward refuses every backward rung outside saved_bwd_versions and rung 5 with LINATTN_BWD5_V3_FRONT' \
         'CUDA saved backward refuses a saved forward of another op or T or dtype or a rung 1 to 4 backward with a linattn Error naming saved' \
         'CUDA saved backward refuses other sequences or another q or v buffer or another B H K V with a linattn Error naming what differs' \
         'CUDA saved backward on another stream waits for the saving forward without a synchronisation' \
         'CUDA refill of a SavedForward on another stream waits for the backward that still reads it'; do
  one $ST saved 40 "$t"
done
# 3. Speed, rung 17 (best), without fla: '(saving) + backward (saved)' against '(saving states) + backward
#    (saved states)', and the per-kernel profiles (prepare / states / dstates / grads).
timeout $(left 90) python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 17 --rep 30 --slow-rep 5 --json /tmp/l/bbench_states.json > /tmp/l/bbench_states.log 2>&1; rc=$?
echo "[$(el) s] backward speed rc $rc" | tee -a /tmp/l/summary.log
grep -E "saving|saved|kernels|bwd_v17" /tmp/l/bbench_states.log | tee -a /tmp/l/summary.log
# 4. memcheck, then racecheck, on the initial-state test (review11: one GDN case, a forward with states
#    and its saved backward, best; it ends under the tools, where SD's 9 x 4 x 2 x 14 calls would not).
for tool in memcheck racecheck; do
  if [ $(el) -lt 270 ]; then
    timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 $ST "$SH" > /tmp/l/san_$tool.log 2>&1; rc=$?
    echo "[$(el) s] saved $tool ($SH) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san_$tool.log | tail -1)" | tee -a /tmp/l/summary.log
  fi
done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
