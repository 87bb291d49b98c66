#!/usr/bin/env bash
# Session 9, device call 3 (binaries of 9f2b4cd: backward best = rung 13, rung 14 written by helper pchan):
# 1. rung 14's tests (logs_session9/rung14_run.sh part 1, ~60 s);
# 2. bench_backward.py --fla .fla --bwd-versions 8,13,14 (fla, linattn, SDPA in one process; saving rows);
# 3. rung 14 for KDA / GDN2 with the one-block G1 (LINATTN_BWD14_ONE_BLOCK_G1), what G1' gains;
# 4. racecheck and memcheck on rung 14's property (RC 3 cases: every operator, so rung 13's kernels for
#    DeltaNet / GDN and rung 14's for KDA / GDN2) and on rung 13's bit test.
# Carry: .cudabin .fla .tcache.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT" /tmp/all
S0=$(date +%s); el() { echo $(( $(date +%s) - S0 )); }
OUT=/tmp/o14 bash optimized/cuda/bench/logs_session9/rung14_run.sh 2>&1 | tail -20
mv /tmp/l /tmp/all/rung14; mkdir -p /tmp/l; echo "[$(el) s] rung14 part 1 done"
L=/tmp/b/liblinattn_cuda_capi.so BT=/tmp/b/test_cuda_backward
export PYTHONUNBUFFERED=1 TRITON_CACHE_DIR=/tmp/triton_cache TRITON_CACHE_AUTOTUNING=1
timeout 260 python3 optimized/cuda/bench/bench_backward.py --lib $L --fla .fla --bwd-versions 8,13,14 --rep 30 --slow-rep 5 --json /tmp/l/bbench_fla.json > /tmp/l/bbench_fla.log 2>&1
echo "[$(el) s] bench with fla rc $?"; sed -n '/^summary/,$p' /tmp/l/bbench_fla.log | grep -v "kernels"; grep kernels /tmp/l/bbench_fla.log | sort | uniq | head -30
if [ $(el) -lt 380 ]; then
  LINATTN_BWD14_ONE_BLOCK_G1=1 timeout 45 python3 optimized/cuda/bench/bench_backward.py --lib $L --bwd-versions 14 --ops kda,gdn2 --rep 30 --slow-rep 5 > /tmp/l/bbench14_oneblock.log 2>&1
  echo "[$(el) s] one-block G1 rc $?"; grep -E "backward v14 |kernels" /tmp/l/bbench14_oneblock.log
fi
P14='CUDA v14 per-channel split chunked backward equals the float64 reference backward for every operator in bfloat16'
B13='CUDA v13 gradients equal v10 gradients bit for bit'
for tool in racecheck memcheck; do for t in "$P14" "$B13"; do
  left=$(( 570 - $(el) )); [ $left -lt 15 ] && continue; [ $left -gt 100 ] && left=100
  f=/tmp/l/san_${tool}_$(echo "$t" | md5sum | cut -c1-6).log
  RC_PARAMS="seed=20261130 max_success=3" timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $BT "$t" > $f 2>&1
  echo "[$(el) s] $tool rc $? | $t | $(grep -E 'SUMMARY' $f | tail -1) | $(grep -E '^All tests|^test cases' $f | tail -1)"
done; done
mv /tmp/l /tmp/all/call3
tar -cJf $OUT/logs.tar.xz -C /tmp/all .
