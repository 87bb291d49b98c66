#!/usr/bin/env bash
# Final device call of session 4 (lead): final HEAD binaries; logs to $OUT.
set -u
mkdir -p /tmp/b && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
F=/tmp/b/test_cuda_forward; BT=/tmp/b/test_cuda_backward; M=/tmp/b/mutants/test_cuda_backward
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv; } > $OUT/env.log
for v in v3 v4; do
  P="CUDA $v chunked forward equals the float64 reference for every operator in bfloat16"
  ( time RC_PARAMS="seed=20261129 max_success=30" timeout 25 $F "$P" ) > $OUT/fwdprop30_$v.log 2>&1
  echo "fwd $v property, 30 cases: $(grep -E '^All tests|^test cases' $OUT/fwdprop30_$v.log | tail -1)"
done
( time timeout 50 $F --durations yes ) > $OUT/tests.log 2>&1; echo "forward tests: $(grep -E '^All tests|^test cases' $OUT/tests.log)"
( time LINATTN_CUDA_BACKWARD_REPORT=1 timeout 110 $BT --durations yes ) > $OUT/btests.log 2>&1; echo "backward tests: $(grep -E '^All tests|^test cases' $OUT/btests.log)"
PK='CUDA chunked backward of a packed batch of many short sequences equals the reference'
T1='CUDA chunked backward at T = 1 equals one step of the reference backward'
( time timeout 30 compute-sanitizer --tool memcheck $BT "$PK" ) > $OUT/bsan_memcheck_packed.log 2>&1; echo "memcheck packed: $(grep -E 'ERROR SUMMARY' $OUT/bsan_memcheck_packed.log)"
( time timeout 20 compute-sanitizer --tool memcheck $BT "$T1" ) > $OUT/bsan_memcheck_t1.log 2>&1; echo "memcheck T1: $(grep -E 'ERROR SUMMARY' $OUT/bsan_memcheck_t1.log)"
( time timeout 45 compute-sanitizer --tool racecheck $BT "$T1" ) > $OUT/bsan_racecheck_t1.log 2>&1; echo "racecheck T1: $(grep -E 'RACECHECK SUMMARY' $OUT/bsan_racecheck_t1.log)"
DT='CUDA chunked backward is deterministic: two runs give bitwise equal gradients'
fails=0; n=0; s=$SECONDS; while [ $n -lt 10 ] && [ $((SECONDS - s)) -lt 50 ]; do timeout 20 $BT "$DT" > /dev/null 2>&1 || fails=$((fails + 1)); n=$((n + 1)); done
echo "determinism: $fails failures in $n runs" | tee $OUT/bdeterminism.log
RG='CUDA chunked backward with ragged last chunks equals the reference for lengths around 64'
W='CUDA chunked backward of 66 sequences of two heads with wide value tiles equals the reference'
for t in "$RG" "$W"; do r=$(LINATTN_MUTANT=41 timeout 30 $M "$t" 2>&1 | grep -E "^test cases|^All tests passed" | tail -1); echo "mutant 41 | $t | ${r:-no summary}"; done | tee $OUT/bmutant41.log
( time timeout 100 compute-sanitizer --tool racecheck $BT "$PK" ) > $OUT/bsan_racecheck_packed.log 2>&1; echo "racecheck packed: $(grep -E 'RACECHECK SUMMARY' $OUT/bsan_racecheck_packed.log)"
