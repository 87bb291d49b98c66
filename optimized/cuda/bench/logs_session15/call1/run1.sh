#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 14.
# Session 14 ran every kernel change it made (bench/logs_session14/). After its last device call, review15
# added two checks that have not yet run on a GPU:
#   1. the occupancy test now counts every instantiation of rung 7's intra kernel that runs (kLean, kPdlWait,
#      kA; both gate kinds and gate dtypes): "CUDA v7 overlap intra kernel fits 3 blocks per SM at KP 64 and
#      128" (cuobjdump says 68-80 registers, so it should pass);
#   2. mutant 248 (rung 4's branch of the saving forward's intra kernel without A: KDA, GDN2) must fail the two
#      saved bit tests, which pass without it (needs the make_mutants.py tree's test_cuda_saved as
#      test_cuda_saved_mut);
# then it refreshes the tables that are oldest (KDA's and GDN2's forward + backward against fla date from
# session 11): 3. every operator's forward, rungs 7, 9, 10 and fla, 3 interleaved rounds, both shapes;
# 4. KDA and GDN2 forward + backward, backward `best`, with fla. Bounded to about 560 s.
# Needs .cudabin/bins.tar.xz (test_cuda_forward, test_cuda_saved_mut, liblinattn_cuda_capi.so, stripped, built
# at HEAD) and .fla; carry `.cudabin .fla`. Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; END=560
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache; mkdir -p $TRITON_CACHE_DIR
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
timeout $(left 60) /tmp/b/test_cuda_forward "CUDA v7 overlap intra kernel fits 3 blocks per SM at KP 64 and 128" > /tmp/l/occ.log 2>&1
note "occupancy of every rung 7 intra instantiation rc $?: $(res /tmp/l/occ.log)"
S1='CUDA saving forward gives the forward output bit for bit and the saved backward gives the recompute backward gradients bit for bit'
S2='CUDA saving forward with states gives the forward output bit for bit and the saved backward without its states kernel gives the recompute gradients bit for bit'
for m in 0 248; do
  LINATTN_MUTANT=$m timeout $(left 40) /tmp/b/test_cuda_saved_mut "$S1" > /tmp/l/mut${m}_s1.log 2>&1; r1=$?
  LINATTN_MUTANT=$m timeout $(left 40) /tmp/b/test_cuda_saved_mut "$S2" > /tmp/l/mut${m}_s2.log 2>&1; r2=$?
  note "mutant $m (248 must fail): without states rc $r1 ($(res /tmp/l/mut${m}_s1.log)); with states rc $r2 ($(res /tmp/l/mut${m}_s2.log))"
done
timeout $(left 200) python3 optimized/cuda/bench/bench_forward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --versions 7,9,10 --rep 40 --rounds 3 > /tmp/l/fbench.log 2>&1
note "bench_forward every operator, 3 rounds rc $?"
grep -E '^  rounds' /tmp/l/fbench.log >> /tmp/l/summary.log
timeout $(left 330) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
  --ops kda,gdn2 --bwd-versions 0 --rep 50 > /tmp/l/bbench.log 2>&1
note "bench_backward KDA, GDN2 with fla rc $?"
grep -E ' ms|kernels \(ms\)' /tmp/l/bbench.log | grep -v '^  ' >> /tmp/l/summary.log
finish
