#!/usr/bin/env bash
# Session 16 call 1: three run-time experiments on forward rung 9 (`best` at B=8 T=4096 H=16 K=V=128) beside
# fla, interleaved rounds (knob_rounds.py): the lean state kernel on a flat grid (LINATTN_STATE_GRID=flat: a
# head's two value tiles side by side), launched as a programmatic dependent of the intra kernel
# (LINATTN_LEAN_PDL=1), and its q S product on S's hi part only (LINATTN_LEAN_QHI=1). Then each kernel alone.
# Carry .cudabin (liblinattn_cuda_capi.so with the knobs) and .fla. Bounded to 300 s.
set -u
OUT=${OUT:-/tmp/out}; END=300
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 200) python3 optimized/cuda/bench/knob_rounds.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops gated_delta_rule,delta_rule --rounds 5 --rep 100 \
  --runs "base:;flat:LINATTN_STATE_GRID=flat;pdl:LINATTN_LEAN_PDL=1;qhi:LINATTN_LEAN_QHI=1;flat+pdl:LINATTN_STATE_GRID=flat,LINATTN_LEAN_PDL=1;all:LINATTN_STATE_GRID=flat,LINATTN_LEAN_PDL=1,LINATTN_LEAN_QHI=1" \
  > /tmp/l/knobs.log 2>&1
note "knob_rounds GDN and DeltaNet at B=8 rc $?"
cat /tmp/l/knobs.log >> /tmp/l/summary.log
timeout $(left 80) python3 optimized/cuda/bench/state_knob_sweep.py --lib /tmp/b/liblinattn_cuda_capi.so --ops gated_delta_rule \
  --runs "9:;9:LINATTN_STATE_GRID=flat;9:LINATTN_LEAN_QHI=1;9:LINATTN_STATE_GRID=flat,LINATTN_LEAN_QHI=1" > /tmp/l/state_alone.log 2>&1
note "state kernel alone rc $?"
cat /tmp/l/state_alone.log >> /tmp/l/summary.log
finish
