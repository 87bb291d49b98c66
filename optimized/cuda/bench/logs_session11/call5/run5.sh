#!/usr/bin/env bash
# Session 11 call 5 (carry .cudabin; bins.tar.xz and mutants.tar.xz built with backward rung 18,
# bwd_v18_lean.cu: .cudabin/BUILT_AT). Rung 18 for the first time:
#   1. its bit test against rung 17, both properties, outside range;
#   2. the saved tests that cover every saved rung (18 is one now): recompute vs saved, with states;
#   3. bench_backward.py --bwd-versions 17,18 (no fla; every operator; the saving rows and the profiles);
#   4. memcheck and racecheck on rung 18's bf16 property (3 RapidCheck cases, 60 s each at most);
#   5. mutants 240-244 on the bit test (rc 1 a catch) and mutant 0.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l /tmp/m
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
[ -f .cudabin/mutants.tar.xz ] && tar -xJf .cudabin/mutants.tar.xz -C /tmp/m
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > /tmp/l/env.log
END=470
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
one() { local f=/tmp/l/$2_$(echo "$4" | md5sum | cut -c1-6).log rc
  timeout $(left $3) $1 "$4" > $f 2>&1; rc=$?
  echo "[$(el) s] $2 | $4 | rc $rc | $(res $f)" | tee -a /tmp/l/summary.log; }
BB=/tmp/b/test_cuda_backward ST=/tmp/b/test_cuda_saved
B18='CUDA v18 gradients equal v17 gradients bit for bit'
one $BB bwd 90 "$B18"
one $BB bwd 40 'CUDA v18 lean chunked backward equals the float64 reference backward for every operator in bfloat16'
one $BB bwd 40 'CUDA v18 lean chunked backward with bfloat16 gates equals the reference backward on the rounded gates'
one $BB bwd 20 'CUDA v18 lean chunked backward outside rung 3 range runs rung 2 bit for bit'
one $ST saved 40 'CUDA saving forward gives the forward output bit for bit and the saved backward gives the recompute backward gradients bit for bit'
one $ST saved 30 'CUDA saving forward with states gives the forward output bit for bit and the saved backward without its states kernel gives the recompute gradients bit for bit'
one $ST saved 20 'CUDA saved backward refuses every backward rung outside saved_bwd_versions and rung 5 with LINATTN_BWD5_V3_FRONT'
timeout $(left 100) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --bwd-versions 17,18 --rep 50 --slow-rep 5 --json /tmp/l/bbench18.json > /tmp/l/bbench18.log 2>&1; rc=$?
echo "[$(el) s] backward speed rc $rc" | tee -a /tmp/l/summary.log
grep -E "backward|saving|kernels" /tmp/l/bbench18.log | grep -v "^summary" | tee -a /tmp/l/summary.log
for tool in memcheck racecheck; do
  RC_PARAMS="seed=20261130 max_success=3" timeout $(left 60) compute-sanitizer --tool $tool --error-exitcode 9 $BB 'CUDA v18 lean chunked backward equals the float64 reference backward for every operator in bfloat16' > /tmp/l/san_$tool.log 2>&1; rc=$?
  echo "[$(el) s] $tool (v18 property) rc $rc: $(grep -E 'SUMMARY' /tmp/l/san_$tool.log | tail -1) $(res /tmp/l/san_$tool.log)" | tee -a /tmp/l/summary.log
done
if [ -f /tmp/m/test_cuda_backward ]; then
  END=$(( $(el) + 80 ))
  for n in 240 241 242 243 244 0; do
    LINATTN_MUTANT=$n timeout $(left 40) /tmp/m/test_cuda_backward "$B18" > /tmp/l/mut$n.log 2>&1; rc=$?
    echo "[$(el) s] mutant $n rc $rc (1: caught) | $(res /tmp/l/mut$n.log)" | tee -a /tmp/l/summary.log
  done
fi
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
cp /tmp/l/summary.log /tmp/l/bbench18.log $OUT/
