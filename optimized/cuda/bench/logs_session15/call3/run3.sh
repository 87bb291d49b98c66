#!/usr/bin/env bash
# Session 15 call 3: the mutants of "rung 9 in best" (make_mutants.py 280-284; 0 must pass, each of the others
# must fail its test), then DeltaNet's and GDN's forward (best, rungs 7, 9, 10, fla; 3 interleaved rounds; both
# shapes) and DeltaNet's forward + backward against fla, with best = rung 9 at B=8.
# Carry .cudabin (bins.tar.xz: liblinattn_cuda_capi.so built at 626404d, test_cuda_saved_mut and
# test_cuda_forward_mut from the make_mutants.py tree) and .fla. Bounded to about 560 s.
set -u
OUT=${OUT:-/tmp/out}; END=560
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
L='CUDA saving forward and every saved backward rung follow forward rung 9 where best runs it bit for bit'
F='CUDA best version runs rung 9 where its state kernel takes 64 column tiles and rung 10 elsewhere bit for bit'
for m in 0 280 281 282 283; do
  LINATTN_MUTANT=$m LINATTN_LEAN_SAVED_QUICK=1 timeout $(left 40) /tmp/b/test_cuda_saved_mut "$L" > /tmp/l/mut${m}_lean.log 2>&1
  note "mutant $m, lean saved test (quick; 0 must pass) rc $?: $(res /tmp/l/mut${m}_lean.log)"
done
for m in 0 284; do
  LINATTN_MUTANT=$m timeout $(left 40) /tmp/b/test_cuda_forward_mut "$F" > /tmp/l/mut${m}_best.log 2>&1
  note "mutant $m, forward best test (0 must pass) rc $?: $(res /tmp/l/mut${m}_best.log)"
done
timeout $(left 240) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 0,7,9,10 --ops delta_rule,gated_delta_rule --rep 40 --rounds 3 > /tmp/l/fbench.log 2>&1
note "bench_forward DeltaNet, GDN, 3 rounds rc $?"
grep -E '^  rounds' /tmp/l/fbench.log >> /tmp/l/summary.log
timeout $(left 240) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops delta_rule --bwd-versions 0 --rep 50 > /tmp/l/bbench.log 2>&1
note "bench_backward DeltaNet with fla rc $?"
grep -E ' ms|kernels \(ms\)' /tmp/l/bbench.log | grep -v '^  ' >> /tmp/l/summary.log
finish
