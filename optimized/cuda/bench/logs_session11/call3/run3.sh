#!/usr/bin/env bash
# Session 11 call 3 (carry .cudabin .fla; bins.tar.xz built with forward best = rung 7, mutants.tar.xz the
# make_mutants.py tree of 57141bc: .cudabin/BUILT_AT). (1) KDA and GDN2 forward + backward against fla in
# one process, rung 17, with the "(saving)" and "(saving states)" rows; (2) every forward test case with
# best = rung 7; (3) the saved-states mutants 220-224 (device_run.sh smutants' lines for them) and rung 7's
# mutants 230-232 on its bit test. rc 1 for a mutant is a catch, 0 a survivor, 124 a timeout.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l /tmp/m
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b; tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > /tmp/l/env.log
L=/tmp/b/liblinattn_cuda_capi.so
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
timeout 330 python3 optimized/cuda/bench/bench_backward.py --lib $L --fla .fla --ops kda,gdn2 --bwd-versions 17 --json /tmp/l/bbench_kg.json > /tmp/l/bbench_kg.log 2>&1; rc=$?
echo "[$(el) s] backward bench (KDA, GDN2) rc $rc" | tee -a /tmp/l/summary.log
timeout $(( 470 - $(el) )) /tmp/b/test_cuda_forward > /tmp/l/fwd_all.log 2>&1; rc=$?
echo "[$(el) s] every forward test case (best = 7) rc $rc: $(res /tmp/l/fwd_all.log)" | tee -a /tmp/l/summary.log
SD='CUDA saving forward with states gives the forward output bit for bit and the saved backward without its states kernel gives the recompute gradients bit for bit'
SB='CUDA saving forward with states stores every state and v_new at value tiles of 16 and 32 and 64 columns'
SH='CUDA saved backward with states refuses another initial state and without states accepts it'
BIT='CUDA v7 overlap forward equals v4 bit for bit for DeltaNet and GDN'
mut() { local bin=$1 n=$2 t=$3 f=/tmp/l/mut_$2_$(echo "$3" | md5sum | cut -c1-6).log rc
  LINATTN_MUTANT=$n RC_PARAMS="seed=20261130 max_success=30" timeout 40 /tmp/m/$bin "$t" > $f 2>&1; rc=$?
  echo "[$(el) s] mutant $n rc $rc | $t | $(res $f)" | tee -a /tmp/l/summary.log; }
for n in 230 231 232 0; do mut test_cuda_forward $n "$BIT"; done
for n in 220 221 222 223 0; do mut test_cuda_saved $n "$SD"; done
mut test_cuda_saved 220 "$SB"; mut test_cuda_saved 221 "$SB"; mut test_cuda_saved 0 "$SB"
mut test_cuda_saved 224 "$SH"; mut test_cuda_saved 0 "$SH"
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log /tmp/l/bbench_kg.log $OUT/
