#!/usr/bin/env bash
# optimized/cuda/bench/logs_session22/call4/run4.sh -- session 22 call 4: call 3 again, narrowed. Call 3 finished no case
# at all: with an empty Triton cache, fla's first forward + backward at a new shape (its autotuning compiles every
# config of every kernel) took longer than the 45-80 s each process had. Here one process per operator has 230 s,
# DeltaNet and KDA only (the operators of rung 15's failing cases), the two failing shapes, T = 1, 2, 3, the gate
# modes that failed (extreme) and the mixed mode; every line prints its own seconds.
# Binaries of 9407d3f (.cudabin/bins.tar.xz, carried); fla's source carried as .fla.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-480}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
A="python3 optimized/cuda/bench/accuracy_vs_fla.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla"
run_acc() {  # name, deadline, timeout, args...
  local n=$1 d=$2 t=$3; shift 3
  timeout $(left $t) $A --deadline $d --json /tmp/l/$n.json "$@" > /tmp/l/$n.log 2>&1
  note "$n rc $?: $(tail -1 /tmp/l/$n.log | cut -c1-300)"
  sed -n '/^worst ratio/,/^$/p' /tmp/l/$n.log >> /tmp/l/summary.log
  cp /tmp/l/summary.log "$OUT/"
}
run_acc small_dn  190 230 --ops delta_rule --kv 16x2,41x10 --T 2,1,3 --modes extreme,mixed --seeds 3
run_acc small_kda 190 230 --ops kda        --kv 41x10,16x2 --T 1,2,3 --modes extreme,mixed --seeds 3
finish
