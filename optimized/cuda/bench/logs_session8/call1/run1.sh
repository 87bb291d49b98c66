#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 7:
# what session 7 wrote and could not run (RESULTS.md, Status, "Pending on the device next session"),
# in priority order, bounded to about 560 s so it fits one `run` call (600 s). Needs
# .cudabin/bins.tar.xz built at the commit .cudabin/BUILT_AT names (rebuild as RESULTS.md "How to
# build and carry" says if the CUDA sources changed since), .fla and .tcache; carry
# `.cudabin .fla .tcache` (without .cudabin/mutants.tar.xz if the carry passes 64 MiB: the mutants
# are the second call's). Writes at most 8 files to $OUT (logs packed as logs.tar.xz).
# Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so F=/tmp/b/test_cuda_forward BT=/tmp/b/test_cuda_backward
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
one() {  # binary, tag, test name
  local n; n=$2_$(echo "$3" | md5sum | cut -c1-6)
  LINATTN_CUDA_BACKWARD_REPORT=1 timeout 90 $1 "$3" > /tmp/l/$n.log 2>&1; echo "[$(el) s] $2 | $3 | $(res /tmp/l/$n.log)"; }
# 1. Backward rung 8 (bwd_v8_wide.cu, written in session 7): its four test cases, then the shared
#    fixed cases that run every rung; then speed beside rung 7 with the per-kernel profile.
for t in 'CUDA v8 chunked backward gives rung 7 gradients bit for bit' \
         'CUDA v8 chunked backward with full-width global accesses equals the float64 reference backward for every operator in bfloat16' \
         'CUDA v8 chunked backward with full-width global accesses and bfloat16 gates equals the reference backward on the rounded gates' \
         'CUDA v8 chunked backward outside rung 3 range runs rung 2 bit for bit' \
         'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
         'CUDA chunked backward at T = 1 equals one step of the reference backward' \
         'CUDA chunked backward with ragged last chunks equals the reference for lengths around 64' \
         'CUDA chunked backward is deterministic: two runs give bitwise equal gradients'; do one $BT bwd "$t"; done
timeout 120 python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 7,8 --rep 30 --slow-rep 5 --json /tmp/l/bbench78.json > /tmp/l/bbench78.log 2>&1
echo "[$(el) s] backward speed"; grep -E "backward v[78] |kernels" /tmp/l/bbench78.log
# 2. Forward rung 6 (v6_lean.cu, written in session 7): its four test cases and two shared fixed
#    cases, then speed beside v4 and fla at both shapes (DeltaNet and GDN: the rung's range).
for t in 'CUDA v6 lean chunked forward equals the float64 reference for every operator in bfloat16' \
         'CUDA v6 lean chunked forward with bfloat16 gates equals the reference on the rounded gates' \
         'CUDA v6 lean forward outside its range equals the rung best runs there bit for bit' \
         'CUDA v6 lean forward runs its own kernels for DeltaNet and GDN in bfloat16' \
         'CUDA chunked forward with 32 and 64 column value tiles at K = 64 and 128 equals the reference' \
         'CUDA chunked forward with ragged last chunks equals the reference for lengths around 64' \
         'CUDA chunked forward of a packed batch of many short sequences equals the reference'; do one $F fwd "$t"; done
timeout 90 python3 optimized/cuda/bench/bench_forward.py --lib $L --fla .fla --ops delta_rule,gated_delta_rule --versions 4,6 --sweep-versions 4,6 --split --rep 40 --json /tmp/l/fbench46.json > /tmp/l/fbench46.log 2>&1
echo "[$(el) s] forward speed"; sed -n '/^summary/,$p' /tmp/l/fbench46.log | grep -v softmax
# 3. memcheck on the packed batches (every rung of each ladder in those tests), if time is left;
#    racecheck (the backward's takes ~130 s) belongs to the second call.
PKF='CUDA chunked forward of a packed batch of many short sequences equals the reference'
PKB='CUDA chunked backward of a packed batch of many short sequences equals the reference'
if [ $(el) -lt 480 ]; then
  timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $F "$PKF" 2>&1 | grep SUMMARY | sed "s/^/[$(el) s] forward memcheck: /"
  timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $BT "$PKB" 2>&1 | grep SUMMARY | sed "s/^/[$(el) s] backward memcheck: /"
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
# Second call (not here): every test case of both binaries (device_run.sh tests btests, BIN=/tmp/b;
# btests took 220+ s with rungs 1-7 in session 7 and more with rung 8: give it its own call, with
# racecheck on the packed batches), then the mutants: MBIN=/tmp/m BMUT_ONLY=v8 ... bmutants and
# MUT_ONLY=v6 ... mutants (RESULTS.md "Rung 8", "Forward rung 6").
