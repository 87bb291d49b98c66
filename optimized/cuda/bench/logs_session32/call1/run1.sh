#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the device calls waiting after session 30 (and 31, which had none).
# Session 30 (logs_session30/) ran, on the H200: every rung 33 test (all pass), its sanitizer case under memcheck and
# racecheck (clean), mutant 309 (caught), rung 31's fixed-case test, every test_cuda_saved case (all pass), every
# test_cuda_forward case through the host functions' new result check (46 pass; the 47th, the new overflow test,
# crashed in the test itself: a Catch2 matcher composed in a lambda outlived its operands; fixed after the call), the
# Python module's CUDA tests (35 pass, the new overflow test among them), DeltaNet beside fla with rungs 32 and 33
# (rung 33 faster in each of three pairs: 2.640-2.652 ms against 2.667-2.677), and 148 of the 151 test_cuda_backward
# cases asked for before the call's time ran out.
# What waits (session 31 had no device: new loans were paused; it built the binaries for all three steps instead):
# STEP=1 (about 420 s): the fixed overflow test, mutant 310 against it, the three test_cuda_backward cases session 30
#   did not reach ("66 sequences of two heads", "K = V = 128 with 64 and 32 column value tiles", "deterministic") and
#   the bad-argument case, then rung 24's SM-sized reference test (214 s in session 26).
# STEP=3 (about 300 s): GDN, KDA and GDN2 forward + backward beside fla with `best` (fla's Triton kernels compile in the
#   process on a fresh machine), and (new in session 31, never run yet) the memory fla's forward keeps for its
#   backward, to set beside linattn's "saved N MiB" in RESULTS.md's first table.
# STEP=5 (about 330 s): every test_cuda_saved case, the test_cuda_backward cases that run `best` (as session 27's
#   call 4), and DeltaNet with fla beside `best` three times.
# Binaries: BINS (default .cudabin/bins33.tar.xz) is built with `best` = rung 33, i.e. with
#   optimized/cuda/bench/pending_best33.patch applied to the committed tree (chunk_cuda.cu's mapping and comment,
#   chunk_cuda.hpp, test_cuda_saved's best checks, bench_backward.py's help); .cudabin/BUILT_AT says at which commit.
#   If every step passes, the patch lands (`git apply`, then README.md, optimized/cuda/README.md, docs/python.md and
#   docs/derivation-backward.md by hand with the call's figures, and the patch file deleted in the same commit). If a
#   `best` check fails with rung 33, BINS=.cudabin/bins.tar.xz (session 31's build of the committed tree, `best` = rung 32) reruns a step
#   with the committed mapping.
# Both archives come from bench/make_bins.sh (test_cuda_forward, mut310_test_cuda_forward with make_mutants.py's mutant
# 310 planted, test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so; stripped; checked with xz -t). .fla (git archive bc3b101 fla of fla-org/flash-linear-attention) is
# needed for STEP=3 and STEP=5.
# Usage on the device: OUT=$OUT STEP=1 bash optimized/cuda/bench/pending_device_run.sh; STEP may list steps (1,3);
# carry .cudabin/bins33.tar.xz (and .cudabin/bins.tar.xz for the fallback) and .fla.
set -u
OUT=${OUT:-/tmp/out}; END=${END:-585}; STEP=${STEP:-1}
source optimized/cuda/bench/call_lib.sh
has() { case ",$STEP," in *",$1,"*) return 0;; esac; return 1; }  # STEP may list several: 1,3
BINS=${BINS:-.cudabin/bins33.tar.xz}
[ -f "$BINS" ] && unpack "$BINS"
echo "binaries: $BINS" > /tmp/l/summary.log
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
B=/tmp/b/test_cuda_backward
if has 1; then
  OV="CUDA chunked forward and backward refuse an overflowed result with an error blaming the keys and beta"
  catch_run 60 overflow.log "host overflow test" /tmp/b/test_cuda_forward -w NoTests --durations yes "$OV"
  catch_run 60 mut_310.log "mutant 310 (the host check skipped; must fail)" \
    env LINATTN_MUTANT=310 /tmp/b/mut310_test_cuda_forward -w NoTests "$OV"
  catch_run 60 mut_310_unset.log "mutant 310's binary without LINATTN_MUTANT" /tmp/b/mut310_test_cuda_forward -w NoTests "$OV"
  catch_run 250 backward_rest.log "the four test_cuda_backward cases session 30 did not reach" $B -w NoTests --durations yes \
    "CUDA chunked backward of 66 sequences*,CUDA chunked backward at K = V = 128*,CUDA chunked backward is deterministic*,CUDA chunked backward rejects bad arguments*"
  catch_run 250 backward_v24w.log "rung 24's SM-sized reference test" $B -w NoTests --durations yes "CUDA v24 with its own widths*"
  cp /tmp/l/summary.log "$OUT/"
fi
if has 3; then
  timeout $(left 300) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops gated_delta_rule,kda,gdn2 --bwd-versions 0 --rep 20 --json /tmp/l/bench_ops.json \
    > /tmp/l/bench_ops.log 2>&1
  note "bench_backward gdn, kda, gdn2 best with fla rc $?"
  grep -E "backward|saving|fla" /tmp/l/bench_ops.log | grep -v "^summary\|kernels" | cut -c1-230 >> /tmp/l/summary.log
fi
if has 5; then
  catch_run 120 saved.log "test_cuda_saved" /tmp/b/test_cuda_saved -w NoTests --durations yes
  # The cases that run `best` (as session 27's call 4 chose them) and the short shared fixed cases.
  catch_run 150 backward_best.log "test_cuda_backward cases that run best" $B -w NoTests --durations yes \
    "CUDA dstates kernel over 128 value columns*,CUDA v13 chunked backward equals the float64 reference backward at odd*,CUDA chunked backward is deterministic*,CUDA chunked backward at T = 1*,CUDA chunked backward rejects*,CUDA chunked backward with ragged*,CUDA chunked backward stays finite*,CUDA chunked backward of a packed batch*"
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 150) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 0,0,0 --rep 50 --json /tmp/l/bench_dn.json \
    > /tmp/l/bench_dn.log 2>&1
  note "bench_backward delta_rule best x3 with fla rc $?"
  grep -E "fla forward|saved states bf16\) v" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-200 >> /tmp/l/summary.log
fi
finish
