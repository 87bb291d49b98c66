#!/usr/bin/env bash
# Session 9, device call 5 (the last ~300 device seconds): racecheck of backward best (rung 13: G1' and
# G2') over its bit test's cases (call 3's run stopped at 100 s); hazards are printed as each launch
# ends, so a run cut by the timeout still reports those found. Carry: .cudabin.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/b
tar -xJf .cudabin/bins.tar.xz -C /tmp/b
S0=$(date +%s)
timeout 200 compute-sanitizer --tool racecheck --error-exitcode 9 /tmp/b/test_cuda_backward 'CUDA v13 gradients equal v10 gradients bit for bit' > $OUT/racecheck_v13bit.log 2>&1
rc=$?; echo "racecheck rc $rc after $(( $(date +%s) - S0 )) s"
grep -cE "Race reported|hazard" $OUT/racecheck_v13bit.log; grep -E "SUMMARY|^All tests|^test cases|assertions" $OUT/racecheck_v13bit.log | tail -3
