#!/usr/bin/env bash
# Session 16 call 4: the experiment knobs removed; rung 7's intra kernel writes L and P a column pair at a time;
# the state kernel's lean loads and u loads by constant offset steps (same values). Every test case of
# test_cuda_forward and test_cuda_saved, then an A/B in one process against call 3's build (carried as
# old/liblinattn_cuda_capi.so): whole forward, intra kernel alone, state kernel alone; GDN and DeltaNet at B=8,
# with fla, 5 rounds. Carry .cudabin and .fla. Bounded to 420 s.
set -u
OUT=${OUT:-/tmp/out}; END=420
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
for t in saved:80 forward:150; do
  n=${t%%:*}; lim=${t##*:}
  timeout $(left $lim) /tmp/b/test_cuda_$n --durations yes > /tmp/l/$n.log 2>&1; rc=$?
  note "test_cuda_$n (every test case) rc $rc: $(res /tmp/l/$n.log)"
done
timeout $(left 170) python3 optimized/cuda/bench/knob_rounds.py --lib /tmp/b/liblinattn_cuda_capi.so --lib2 /tmp/b/old/liblinattn_cuda_capi.so \
  --fla .fla --ops gated_delta_rule,delta_rule --rounds 5 --rep 100 \
  --runs "new:;c3@2:;new-intra:LINATTN_TC_ONLY=intra;c3-intra@2:LINATTN_TC_ONLY=intra;new-state:LINATTN_TC_ONLY=state;c3-state@2:LINATTN_TC_ONLY=state" > /tmp/l/knobs.log 2>&1
note "knob_rounds new / call 3 build, GDN and DeltaNet at B=8 rc $?"
grep -E "(fla|new|c3@2): min|(intra|state)(@2)?: min|new: o|c3@2: o" /tmp/l/knobs.log >> /tmp/l/summary.log
finish
