#!/usr/bin/env bash
# optimized/cuda/bench/logs_session8/saved_run.sh -- the device call for the saved forward (issue 6;
# chunk_cuda.hpp SavedForward, written in session 8 and not yet run on a GPU; RESULTS.md "Saved
# forward"): its test cases by name, memcheck on one, then bench_backward.py at rung 8 with the new
# rows. Bounded to about 250 s.
# Needs .cudabin/bins.tar.xz holding (stripped) test_cuda_saved, test_cuda_backward and
# liblinattn_cuda_capi.so built at or after the commit that added this script (build as RESULTS.md
# "How to build and carry" says, with test_cuda_saved added to the targets and to /tmp/pk), and
# .tcache; carry `.cudabin .tcache` (.fla is not used: fla's figures are session 8 call 1's).
# Optional: .cudabin/mutants.tar.xz with test_cuda_saved from the mutant tree (make_mutants.py,
# --target test_cuda_saved) adds the planted bugs 95-97 (device_run.sh stage smutants) if time is left.
# Writes one file to $OUT: saved_logs.tar.xz (a summary in summary.log inside, also printed).
# Usage on the device: bash optimized/cuda/bench/logs_session8/saved_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > /tmp/l/env.log
L=/tmp/b/liblinattn_cuda_capi.so S=/tmp/b/test_cuda_saved
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
one() {  # binary, tag, test name
  local n; n=$2_$(echo "$3" | md5sum | cut -c1-6)
  timeout 90 $1 "$3" > /tmp/l/$n.log 2>&1; echo "[$(el) s] $2 | $3 | $(res /tmp/l/$n.log)"; }
{
# 1. Every test case of test_cuda_saved (bit for bit, twice from one save, the reference property,
#    the refusals).
for t in 'CUDA saving forward gives the forward output bit for bit and the saved backward gives the recompute backward gradients bit for bit' \
         'CUDA saved backward can be run twice from one saved forward with the same gradients' \
         'CUDA saved backward after a saving forward equals the float64 reference backward within the rung 3 bounds' \
         'CUDA saved backward refuses a saved forward of another op or T or dtype or a rung 1 to 4 backward with a linattn Error naming saved' \
         'CUDA saved backward refuses an empty or moved-from SavedForward with a linattn Error naming saved' \
         'CUDA saving forward refuses a rung or a call whose intra kernel is not forward rung 4 with a linattn Error'; do
  one $S saved "$t"; done
# 2. memcheck on the case that runs both paths on every operator at K = 128, V = 64, T = 200.
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $S 'CUDA saved backward can be run twice from one saved forward with the same gradients' > /tmp/l/memcheck.log 2>&1
echo "[$(el) s] memcheck: $(grep SUMMARY /tmp/l/memcheck.log)"
# 3. Speed at B=8 T=4096 H=16 K=V=128: rung 8's rows as in call 1, plus 'linattn forward (saving)'
#    and 'linattn forward (saving) + backward (saved) v8' after the max |diff| check (must be 0).
timeout 130 python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 8 --rep 30 --slow-rep 5 --json /tmp/l/bbench_saved.json > /tmp/l/bbench_saved.log 2>&1
echo "[$(el) s] backward speed (rc $?)"
grep -E "linattn|kernels|max \|diff\||failed" /tmp/l/bbench_saved.log | grep -v "^\s*$" | cut -c1-400
# 4. The planted bugs, if their binary was carried and time is left (each must fail its tests).
if [ -f .cudabin/mutants.tar.xz ] && [ $(el) -lt 170 ]; then
  mkdir -p /tmp/m && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
  [ -f /tmp/m/test_cuda_saved ] && OUT=/tmp/l MBIN=/tmp/m timeout $(( 240 - $(el) )) bash optimized/cuda/bench/device_run.sh smutants > /dev/null 2>&1
  [ -f /tmp/l/smutants.log ] && cat /tmp/l/smutants.log
fi
echo "[$(el) s] done"
} 2>&1 | tee /tmp/l/summary.log
tar -cJf $OUT/saved_logs.tar.xz -C /tmp/l .
