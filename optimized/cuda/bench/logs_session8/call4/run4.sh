#!/usr/bin/env bash
# Session 8 device call 4 (binaries of .cudabin/BUILT_AT: rung 9 and the saved forward): first what
# call 3's memcheck found (18 errors in the v8-vs-v7 bit test of the mutant tree at LINATTN_MUTANT=0):
# the same test under memcheck with the real binary, errors printed; then test_cuda_saved's six test
# cases and memcheck on one; then logs_session8/rung9_run.sh (rung 9's tests, the shared fixed
# cases, bench_backward.py 8,9 with the saved rows, memcheck packed). Logs: $OUT/logs.tar.xz.
set -u
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
mkdir -p /tmp/b /tmp/l4 && tar -xJf .cudabin/bins.tar.xz -C /tmp/b
BIT8='CUDA v8 chunked backward gives rung 7 gradients bit for bit'
timeout 100 compute-sanitizer --tool memcheck --print-limit 6 /tmp/b/test_cuda_backward "$BIT8" > /tmp/l4/memcheck_bit8.log 2>&1
echo "[$(el) s] memcheck $BIT8: $(grep -E 'ERROR SUMMARY|^All tests|^test cases' /tmp/l4/memcheck_bit8.log | tr '\n' ' ')"
grep -m1 -A14 "Invalid\|Error:" /tmp/l4/memcheck_bit8.log | cut -c1-200
S=/tmp/b/test_cuda_saved
for t in 'CUDA saving forward gives the forward output bit for bit and the saved backward gives the recompute backward gradients bit for bit' \
         'CUDA saved backward can be run twice from one saved forward with the same gradients' \
         'CUDA saved backward after a saving forward equals the float64 reference backward within the rung 3 bounds' \
         'CUDA saved backward refuses a saved forward of another op or T or dtype or a rung 1 to 4 backward with a linattn Error naming saved' \
         'CUDA saved backward refuses an empty or moved-from SavedForward with a linattn Error naming saved' \
         'CUDA saving forward refuses a rung or a call whose intra kernel is not forward rung 4 with a linattn Error'; do
  n=saved_$(echo "$t" | md5sum | cut -c1-6)
  timeout 80 $S "$t" > /tmp/l4/$n.log 2>&1; echo "[$(el) s] saved | $t | $(grep -E '^All tests|^test cases' /tmp/l4/$n.log | tail -1)"
  grep -B2 -A12 "FAILED" /tmp/l4/$n.log | head -30
done
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $S 'CUDA saved backward can be run twice from one saved forward with the same gradients' > /tmp/l4/memcheck_saved.log 2>&1
echo "[$(el) s] saved memcheck: $(grep SUMMARY /tmp/l4/memcheck_saved.log)"
OUT=/tmp/o9 bash optimized/cuda/bench/logs_session8/rung9_run.sh 2>&1 | tail -40
grep -A40 "^summary" /tmp/l/bbench89.log | head -60
echo "[$(el) s] end"
cp -r /tmp/l /tmp/l4/rung9 && tar -cJf $OUT/logs.tar.xz -C /tmp/l4 .
