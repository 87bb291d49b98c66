#!/usr/bin/env bash
# optimized/cuda/bench/logs_session22/call3/run3.sh -- session 22 call 3: accuracy of linattn's `best` backward (rung 22)
# and of fla's backward against the exact float64 gradients on small heads -- the shapes where rung 15 (hi-only
# products) left rung 3's bounds (T=2 K=16 V=2; T=1 K=41 V=10: RESULTS.md, "Rung 17") -- for all four operators, one
# process per operator with its own deadline so that a slow Triton compile of one cannot starve the others; then the
# three gated operators at K=V=128 for T up to 150 (call 1 reached only DeltaNet and two GDN cases there).
# Binaries of 9407d3f (.cudabin/bins.tar.xz, carried); fla's source carried as .fla.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-470}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
A="python3 optimized/cuda/bench/accuracy_vs_fla.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla"
run_acc() {  # name, deadline, timeout, args...
  local n=$1 d=$2 t=$3; shift 3
  timeout $(left $t) $A --deadline $d --json /tmp/l/$n.json "$@" > /tmp/l/$n.log 2>&1
  note "$n rc $?: $(tail -1 /tmp/l/$n.log)"
  sed -n '/^worst ratio/,/^$/p' /tmp/l/$n.log >> /tmp/l/summary.log
  cp /tmp/l/summary.log "$OUT/"
}
run_acc small_dn   60 80 --ops delta_rule       --kv 16x2,16x16,41x10 --T 1,2,3,65 --seeds 2
run_acc small_gdn  55 75 --ops gated_delta_rule --kv 16x2,41x10,16x16 --T 1,2,3,65 --seeds 2
run_acc small_kda  55 75 --ops kda              --kv 41x10,16x2,16x16 --T 1,2,3,65 --seeds 2
run_acc small_gdn2 55 75 --ops gdn2             --kv 41x10,16x2,16x16 --T 1,2,3,65 --seeds 2
run_acc k128_gdn  30 45 --ops gated_delta_rule --kv 128x128 --T 1,65,150 --seeds 1
run_acc k128_kda  30 45 --ops kda              --kv 128x128 --T 1,65,150 --seeds 1
run_acc k128_gdn2 30 45 --ops gdn2             --kv 128x128 --T 1,65,150 --seeds 1
finish
