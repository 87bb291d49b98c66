#!/usr/bin/env bash
# Session 9, device call 2: rung 13 as `best` (chunk_cuda.cu) -- review9's two new cases first, then every
# backward test case, every saved-forward case, every forward case, racecheck / memcheck on rung 13
# (best) over the packed batch and review9's bit test. Binaries: .cudabin/BUILT_AT. Carry: .cudabin.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b /tmp/l
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > /tmp/l/env.log
B=/tmp/b
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
R1='CUDA v11 v12 and v13 gradients equal v10 gradients bit for bit at odd and extreme head sizes and on many short sequences'
R2='CUDA v13 chunked backward equals the float64 reference backward at odd and extreme head sizes and on many short sequences'
for t in "$R1" "$R2"; do n=r9_$(echo "$t" | md5sum | cut -c1-6)
  LINATTN_CUDA_BACKWARD_REPORT=1 timeout 60 $B/test_cuda_backward "$t" > /tmp/l/$n.log 2>&1
  echo "[$(el) s] $t | $(res /tmp/l/$n.log)" | tee -a /tmp/l/summary.log; done
LINATTN_CUDA_BACKWARD_REPORT=1 timeout 330 $B/test_cuda_backward --durations yes > /tmp/l/btests.log 2>&1
echo "[$(el) s] every backward test case (rc $?) | $(res /tmp/l/btests.log)" | tee -a /tmp/l/summary.log
timeout 90 $B/test_cuda_saved --durations yes > /tmp/l/saved.log 2>&1
echo "[$(el) s] every saved test case (rc $?) | $(res /tmp/l/saved.log)" | tee -a /tmp/l/summary.log
timeout 100 $B/test_cuda_forward --durations yes > /tmp/l/ftests.log 2>&1
echo "[$(el) s] every forward test case (rc $?) | $(res /tmp/l/ftests.log)" | tee -a /tmp/l/summary.log
PK='CUDA chunked backward of a packed batch of many short sequences equals the reference'
for tool in racecheck memcheck; do for t in "$PK" "$R1"; do
  left=$(( 575 - $(el) )); [ $left -lt 20 ] && break
  [ $left -gt 120 ] && left=120
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B/test_cuda_backward "$t" > /tmp/l/san_${tool}_$(echo "$t" | md5sum | cut -c1-6).log 2>&1
  echo "[$(el) s] $tool (rc $?) | $t | $(grep -E 'SUMMARY' /tmp/l/san_${tool}_$(echo "$t" | md5sum | cut -c1-6).log | tail -1)" | tee -a /tmp/l/summary.log
done; done
tar -cJf $OUT/logs.tar.xz -C /tmp/l .
