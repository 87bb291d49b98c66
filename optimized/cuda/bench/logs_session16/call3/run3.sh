#!/usr/bin/env bash
# Session 16 call 3: rung 7's intra kernel with fewer instructions (the load loop's addresses by strength
# reduction, sL and A's off-diagonal zeroing and A's hi / lo split by 16-byte accesses; same values). Every test
# case of test_cuda_forward and test_cuda_saved (the bit tests of rungs 7, 9, 10 against 4 and 6, the saving
# forward against best), then an A/B in one process of this build against the previous one (call 2's, carried
# as old/liblinattn_cuda_capi.so): whole forward and the intra kernel alone (LINATTN_TC_ONLY=intra), GDN and
# DeltaNet at B=8, with fla, 5 rounds. Carry .cudabin and .fla. Bounded to 420 s.
set -u
OUT=${OUT:-/tmp/out}; END=420
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
for t in saved:80 forward:170; do
  n=${t%%:*}; lim=${t##*:}
  timeout $(left $lim) /tmp/b/test_cuda_$n --durations yes > /tmp/l/$n.log 2>&1; rc=$?
  note "test_cuda_$n (every test case) rc $rc: $(res /tmp/l/$n.log)"
done
timeout $(left 150) python3 optimized/cuda/bench/knob_rounds.py --lib /tmp/b/liblinattn_cuda_capi.so --lib2 /tmp/b/old/liblinattn_cuda_capi.so \
  --fla .fla --ops gated_delta_rule,delta_rule --rounds 5 --rep 100 \
  --runs "new:;old@2:;new-intra:LINATTN_TC_ONLY=intra;old-intra@2:LINATTN_TC_ONLY=intra" > /tmp/l/knobs.log 2>&1
note "knob_rounds new / old build, GDN and DeltaNet at B=8 rc $?"
grep -v "TC_ONLY\|intra:" /tmp/l/knobs.log | grep -v "^  round" >> /tmp/l/summary.log
grep -E "intra: min" /tmp/l/knobs.log >> /tmp/l/summary.log
finish
