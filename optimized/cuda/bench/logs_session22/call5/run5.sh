#!/usr/bin/env bash
# optimized/cuda/bench/logs_session22/call5/run5.sh -- session 22 call 5: (1) is call 4's illegal memory access at K=41
# fla's own? fla's backward alone (--impls fla, no linattn call in the process), DeltaNet K=41 V=10 T=2, with
# CUDA_LAUNCH_BLOCKING=1 so that the failing kernel is named; (2) KDA at K=16 V=2 (rung 15's failing KDA shape that fla
# can take; call 4's KDA process finished no case in 230 s), with Triton's autotuning printed so that where the time
# goes is on record. Binaries of 9407d3f (.cudabin/bins.tar.xz, carried); fla's source carried as .fla.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-470}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
A="python3 optimized/cuda/bench/accuracy_vs_fla.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla"
CUDA_LAUNCH_BLOCKING=1 timeout $(left 100) $A --impls fla --ops delta_rule --kv 41x10 --T 2 --modes extreme --seeds 1 \
  > /tmp/l/fla_k41.log 2>&1
note "fla alone, DeltaNet K=41 V=10 T=2 rc $?: $(grep -E '^delta_rule|^cases' /tmp/l/fla_k41.log | cut -c1-300 | tr '\n' ' ')"
grep -nE 'File ".*fla/|Error|error' /tmp/l/fla_k41.log | head -20 >> /tmp/l/summary.log
cp /tmp/l/summary.log "$OUT/"
TRITON_PRINT_AUTOTUNING=1 timeout $(left 380) $A --ops kda --kv 16x2 --T 2,1,3 --modes extreme,mixed --seeds 2 \
  --deadline 320 --json /tmp/l/small_kda.json > /tmp/l/small_kda.log 2>&1
note "KDA K=16 V=2 rc $?: $(tail -1 /tmp/l/small_kda.log | cut -c1-300)"
sed -n '/^worst ratio/,/^$/p' /tmp/l/small_kda.log >> /tmp/l/summary.log
grep -c '^Triton autotuning' /tmp/l/small_kda.log | sed 's/^/autotuned kernels: /' >> /tmp/l/summary.log
finish
