#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the device calls waiting after session 27.
# Session 27 made rung 32 (bwd_v32_g1stage.cu: rung 29 with bf16 dk_part, G2' on dv_new's hi plane, G1''s bf16 outputs
# stored as whole rows) `best` and ran every rung 30, 31 and 32 test, their mutants, every test_cuda_saved case and the
# test_cuda_backward cases that run `best` (logs_session27/). What waits:
# STEP=1 (bound 575 s): every test_cuda_backward case but rung 24's SM-sized reference test, with `best` = rung 32 and
#   rungs 31 and 32 in kRungs: the three long shared fixed-case tests ("exact at the tuned and the largest head sizes",
#   "66 sequences of two heads", "K = V = 128 with 64 and 32 column value tiles") have not run with them.
# STEP=2: rung 24's SM-sized reference test (214 s in session 26), then every operator's forward + backward with fla
#   (GDN, KDA, GDN2 with `best`; fla's Triton kernels compile in the process on a fresh machine: allow 300 s), and
#   DeltaNet with `best` beside rung 29 (bound 150 s).
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped) built at HEAD on
# this machine (a new checkout has none: cmake --preset cuda, build, strip, xz -9e), and .fla (git archive bc3b101 fla of
# fla-org/flash-linear-attention). Carry [".cudabin", ".fla"] (under 64 MiB together).
# Usage on the device: OUT=$OUT STEP=1 bash optimized/cuda/bench/pending_device_run.sh
set -u
OUT=${OUT:-/tmp/out}; END=${END:-585}; STEP=${STEP:-1}
source optimized/cuda/bench/call_lib.sh
unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
B=/tmp/b/test_cuda_backward
if [ "$STEP" = 1 ]; then
  timeout $(left 575) $B -w NoTests --durations yes "~CUDA v24 with its own widths*" > /tmp/l/backward_all.log 2>&1
  note "test_cuda_backward (all but rung 24's SM-sized reference test) rc $?: $(res /tmp/l/backward_all.log)"
  grep -E "FAILED|with expansion" /tmp/l/backward_all.log | head -20 >> /tmp/l/summary.log
else
  timeout $(left 250) $B -w NoTests --durations yes "CUDA v24 with its own widths*" > /tmp/l/backward_v24w.log 2>&1
  note "rung 24's SM-sized reference test rc $?: $(res /tmp/l/backward_v24w.log)"
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 300) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops gated_delta_rule,kda,gdn2 --bwd-versions 0 --rep 20 --json /tmp/l/bench_ops.json \
    > /tmp/l/bench_ops.log 2>&1
  note "bench_backward gdn, kda, gdn2 best with fla rc $?"
  grep -E "backward|saving|fla" /tmp/l/bench_ops.log | grep -v "^summary\|kernels" | cut -c1-230 >> /tmp/l/summary.log
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 150) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 0,29,0 --rep 50 --json /tmp/l/bench_dn.json \
    > /tmp/l/bench_dn.log 2>&1
  note "bench_backward delta_rule best,29,best with fla rc $?"
  grep -E "fla forward|saved states bf16\) v|kernels" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-200 >> /tmp/l/summary.log
fi
finish
