#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the first device call of the session after session 6:
# what session 6 wrote and could not run (RESULTS.md, Status, "Still pending on the device"), in
# priority order, bounded to about 560 s so it fits one `run` call (600 s). Needs .cudabin/bins.tar.xz
# built at the commit in .cudabin/BUILT_AT (rebuild as RESULTS.md "How to build and carry" says if
# the CUDA sources changed since) and .fla, .tcache; carry `.cudabin .fla .tcache`. Writes at most
# 8 files to $OUT (logs packed as logs.tar.xz). Usage on the device: bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && [ -f .tcache/triton_cache.tgz ] && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $OUT/env.log
L=/tmp/b/liblinattn_cuda_capi.so F=/tmp/b/test_cuda_forward BT=/tmp/b/test_cuda_backward
PK='CUDA chunked forward of a packed batch of many short sequences equals the reference'
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
# 1. Backward rung 7: its four test cases, then speed beside rung 6 (all four operators, no fla).
for t in 'CUDA v7 chunked backward gives rung 6 gradients bit for bit' \
         'CUDA v7 chunked backward with per-block row bases equals the float64 reference backward for every operator in bfloat16' \
         'CUDA v7 chunked backward with per-block row bases and bfloat16 gates equals the reference backward on the rounded gates' \
         'CUDA v7 chunked backward outside rung 3 range runs rung 2 bit for bit'; do
  timeout 60 $BT "$t" > /tmp/l/v7_$(echo "$t" | md5sum | cut -c1-6).log 2>&1; echo "rung 7 | $t | $(res /tmp/l/v7_$(echo "$t" | md5sum | cut -c1-6).log)"; done
timeout 120 python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 6,7 --rep 30 --slow-rep 5 --json /tmp/l/bbench67.json > /tmp/l/bbench67.log 2>&1
grep -E "backward v[67] |kernels" /tmp/l/bbench67.log
# 2. Forward state kernel, two blocks per SM (LINATTN_STATE_OCC2=1; most test cases pick 16 value
#    columns, where it does not apply: LINATTN_V2_BV=64 forces the width it replaces).
LINATTN_STATE_OCC2=1 LINATTN_V2_BV=64 timeout 60 $F > /tmp/l/fwd_occ2.log 2>&1; echo "forward tests, OCC2 + BV 64: $(res /tmp/l/fwd_occ2.log)"
LINATTN_STATE_OCC2=1 LINATTN_V2_BV=64 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $F "$PK" 2>&1 | grep SUMMARY | sed 's/^/OCC2 racecheck: /'
# 3. Forward state kernel, bulk copies (LINATTN_STATE_BULK=1).
LINATTN_STATE_BULK=1 timeout 60 $F > /tmp/l/fwd_bulk.log 2>&1; echo "forward tests, BULK: $(res /tmp/l/fwd_bulk.log)"
LINATTN_STATE_BULK=1 timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $F "$PK" 2>&1 | grep SUMMARY | sed 's/^/BULK racecheck: /'
LINATTN_STATE_BULK=1 timeout 60 compute-sanitizer --tool synccheck --error-exitcode 9 $F "$PK" 2>&1 | grep SUMMARY | sed 's/^/BULK synccheck: /'
# 4. Forward speed beside fla: default, OCC2, BULK (one process each).
for k in base:X=1 occ2:LINATTN_STATE_OCC2=1 bulk:LINATTN_STATE_BULK=1; do
  tag=${k%%:*}; env ${k#*:} timeout 80 python3 optimized/cuda/bench/bench_forward.py --lib $L --fla .fla --versions 4 --sweep-versions 4 --split --rep 40 --json /tmp/l/bench_$tag.json > /tmp/l/bench_$tag.log 2>&1
  echo "== forward, $tag"; sed -n '/^summary/,$p' /tmp/l/bench_$tag.log | grep -v softmax | grep -E "v4 |fla"; done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
