#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the device calls waiting after session 26.
# Session 26 made rung 29 (bwd_v29_b1hi.cu: the dstates kernel's B1 on dS''s bf16 hi part) `best` and wrote rung 30
# (bwd_v30_dsw2.cu: rung 29 with two stages of w_aux and Qg in the 128-column dstates kernel, one barrier less per chunk;
# bit for bit with rung 29 by design), which has never run on a GPU. What waits:
# STEP=1 (about 300 s): every rung 30 test (properties, bit test against rung 29 at the default width and at 128
#   columns, outside range, sanitizer case under memcheck and racecheck), mutant 306 against the bit test (with
#   .cudabin/mut.tar.xz: make_mutants.py's test_cuda_backward), then DeltaNet forward + backward with fla in the same
#   process beside rungs 29 and 30, three times each (if rung 30's dstates kernel is faster, make it `best`).
# STEP=2 (bound 575 s): every test_cuda_backward case but rung 24's SM-sized reference test, with `best` = rung 29 (or
#   30): session 26 ran every case of 0620804 (best = 28) and the cases that run `best` with best = 29, not the whole
#   binary in one run.
# STEP=3: rung 24's SM-sized reference test (214 s in session 26), then every operator's forward + backward with fla
#   (GDN, KDA, GDN2; `best`; fla's Triton kernels compile in the process: allow 300 s).
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped) and, for STEP=1,
# .cudabin/mut.tar.xz, built at HEAD on this machine (a new checkout has neither: cmake --preset cuda, build, strip, xz;
# make_mutants.py for the mutants), and .fla (git archive bc3b101 fla of fla-org/flash-linear-attention). Carry
# [".cudabin", ".fla"] (under 64 MiB together).
# Usage on the device: OUT=$OUT STEP=1 bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; END=${END:-585}; STEP=${STEP:-1}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
B=/tmp/b/test_cuda_backward
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
if [ "$STEP" = 1 ]; then
  timeout $(left 200) $B -w NoTests --durations yes "CUDA v30*" > /tmp/l/v30.log 2>&1
  note "rung 30 tests rc $?: $(res /tmp/l/v30.log)"
  grep -E "FAILED|with expansion" /tmp/l/v30.log | head -20 >> /tmp/l/summary.log
  timeout $(left 60) $CS --tool memcheck $B "CUDA v30 on small cases for the sanitizers" > /tmp/l/v30_memcheck.log 2>&1
  note "memcheck rc $?: $(grep -E 'ERROR SUMMARY' /tmp/l/v30_memcheck.log | tail -1)"
  timeout $(left 90) $CS --tool racecheck $B "CUDA v30 on small cases for the sanitizers" > /tmp/l/v30_racecheck.log 2>&1
  note "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY' /tmp/l/v30_racecheck.log | tail -1)"
  if [ -f .cudabin/mut.tar.xz ]; then
    mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
    for m in 306 0; do
      if [ $m = 0 ]; then unset LINATTN_MUTANT; else export LINATTN_MUTANT=$m; fi
      timeout $(left 90) /tmp/m/test_cuda_backward -w NoTests "CUDA v30 gradients equal v29 gradients bit for bit" > /tmp/l/mut_$m.log 2>&1
      note "mutant $m rc $?: $(res /tmp/l/mut_$m.log)"
    done
    unset LINATTN_MUTANT
  fi
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 200) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 29,30,29,30,29,30 --rep 50 --json /tmp/l/bench_dn.json \
    > /tmp/l/bench_dn.log 2>&1
  note "bench_backward delta_rule 29,30 x3 with fla rc $?"
  grep -E "fla forward|saved states bf16\) v|kernels" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-200 >> /tmp/l/summary.log
elif [ "$STEP" = 2 ]; then
  timeout $(left 575) $B -w NoTests --durations yes "~CUDA v24 with its own widths*" > /tmp/l/backward_all.log 2>&1
  note "test_cuda_backward (all but rung 24's SM-sized reference test) rc $?: $(res /tmp/l/backward_all.log)"
  grep -E "FAILED|with expansion" /tmp/l/backward_all.log | head -20 >> /tmp/l/summary.log
else
  timeout $(left 250) $B -w NoTests --durations yes "CUDA v24 with its own widths*" > /tmp/l/backward_v24w.log 2>&1
  note "rung 24's SM-sized reference test rc $?: $(res /tmp/l/backward_v24w.log)"
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 320) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops gated_delta_rule,kda,gdn2 --bwd-versions 0 --rep 20 --json /tmp/l/bench_ops.json \
    > /tmp/l/bench_ops.log 2>&1
  note "bench_backward gdn, kda, gdn2 best with fla rc $?"
  grep -E "backward|saving|fla" /tmp/l/bench_ops.log | grep -v "^summary\|kernels" | cut -c1-230 >> /tmp/l/summary.log
fi
finish
