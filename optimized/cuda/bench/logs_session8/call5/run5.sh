#!/usr/bin/env bash
# Session 8 device call 5 (binaries of .cudabin/BUILT_AT: HEAD 4976d7c plus the tci::load_vtile fix):
# memcheck of the test that found the read past w (call 4), every forward test case (tc_common.cuh
# changed), backward cases that run every rung's prepare, the saved forward's planted bugs 95-97,
# then forward + backward beside fla and SDPA in one process (backward best = rung 8, with the
# saving forward's rows). Logs: $OUT/logs.tar.xz (and the Triton cache back).
set -u
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
mkdir -p /tmp/b /tmp/m /tmp/l && tar -xJf .cudabin/bins.tar.xz -C /tmp/b && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
mkdir -p /tmp/triton_cache && tar -xzf .tcache/triton_cache.tgz -C /tmp/triton_cache
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > /tmp/l/env.log
BIT8='CUDA v8 chunked backward gives rung 7 gradients bit for bit'
( time timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 /tmp/b/test_cuda_backward "$BIT8" ) > /tmp/l/memcheck_bit8.log 2>&1
echo "[$(el) s] memcheck $BIT8: $(grep -E 'ERROR SUMMARY|^All tests|^test cases|^real' /tmp/l/memcheck_bit8.log | tr '\n' ' ')"
( time timeout 150 /tmp/b/test_cuda_forward --durations yes ) > /tmp/l/tests.log 2>&1
echo "[$(el) s] forward tests: $(grep -E '^All tests|^test cases|^real' /tmp/l/tests.log | tr '\n' ' ')"
grep -B3 -A25 "FAILED" /tmp/l/tests.log | head -40
for t in 'CUDA v8 chunked backward with full-width global accesses equals the float64 reference backward for every operator in bfloat16' \
         'CUDA chunked backward of a packed batch of many short sequences equals the reference' \
         'CUDA chunked backward with ragged last chunks equals the reference for lengths around 64'; do
  n=bwd_$(echo "$t" | md5sum | cut -c1-6); timeout 60 /tmp/b/test_cuda_backward "$t" > /tmp/l/$n.log 2>&1
  echo "[$(el) s] bwd | $t | $(grep -E '^All tests|^test cases' /tmp/l/$n.log | tail -1)"; done
OUT=/tmp/l MBIN=/tmp/m timeout 120 bash optimized/cuda/bench/device_run.sh smutants > /dev/null 2>&1; cat /tmp/l/smutants.log
echo "[$(el) s] bench"
timeout $(( 570 - $(el) )) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla --bwd-versions 8 --rep 30 --slow-rep 5 --json /tmp/l/bbench.json > /tmp/l/bbench.log 2>&1
echo "[$(el) s] bench rc $?"; sed -n '/^summary/,$p' /tmp/l/bbench.log; grep -E "vs fla|max \|diff\||failed|refuse" /tmp/l/bbench.log | cut -c1-300 | head -20
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
