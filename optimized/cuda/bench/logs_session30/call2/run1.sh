#!/usr/bin/env bash
# optimized/cuda/bench/pending_device_run.sh -- the device calls waiting after session 27.
# Session 27 made rung 32 (bwd_v32_g1stage.cu: rung 29 with bf16 dk_part, G2' on dv_new's hi plane, G1''s bf16 outputs
# stored as whole rows) `best` and ran every rung 30, 31 and 32 test, their mutants, every test_cuda_saved case and the
# test_cuda_backward cases that run `best` (logs_session27/). Then it wrote rung 33 (bwd_v33_g2stage.cu: G2''s dv and dk
# as whole rows too, bit for bit with rung 32), which has never run on a GPU, and two review additions to the tests
# (rung 31's fixed-case check also requires dv to differ from rung 29's; the bf16-states saved test at K = 128, V = 136).
# What waits:
# STEP=1 (about 300 s): every rung 33 test, its sanitizer case under memcheck and racecheck, mutant 309 against its bit
#   test (with .cudabin/mut.tar.xz: make_mutants.py's test_cuda_backward), rung 31's fixed-case test (the review's dv
#   check), every test_cuda_saved case, then DeltaNet forward + backward with fla beside rungs 32 and 33, three times
#   each (if rung 33 is faster, make it `best`: chunk_cuda.cu, test_cuda_saved's best checks).
# STEP=2 (bound 575 s): every test_cuda_backward case but rung 24's SM-sized reference test: the three long shared
#   fixed-case tests ("exact at the tuned and the largest head sizes", "66 sequences of two heads", "K = V = 128 with 64
#   and 32 column value tiles") have not run with rungs 31-33 in kRungs.
# STEP=3: rung 24's SM-sized reference test (214 s in session 26), then every operator's forward + backward with fla
#   (GDN, KDA, GDN2 with `best`; fla's Triton kernels compile in the process on a fresh machine: allow 300 s).
# STEP=4 (about 100 s): the Python module's CUDA tests (notebooks_bindings/tests/test_cuda.py), last run in session 15:
#   backward rungs 19-33 joined its list of rungs since. Needs .cudabin/wheel.tar.xz: the cp312 wheel built on the
#   project's machine (PYENV_VERSION=3.12.1 LINATTN_PY_CUDA=ON python3.12 -m pip wheel --no-deps ./notebooks_bindings,
#   as session 15 call 7), installed with --no-deps into /tmp/pylib. Carry [".cudabin/wheel.tar.xz"] alone if the
#   others do not fit.
# Needs .cudabin/bins.tar.xz (test_cuda_backward, test_cuda_saved, liblinattn_cuda_capi.so, stripped) built at HEAD on
# this machine (a new checkout has none: cmake --preset cuda, build, strip, xz -9e) and, for STEP=1, .cudabin/mut.tar.xz
# (make_mutants.py, then its test_cuda_backward stripped), and .fla (git archive bc3b101 fla of
# fla-org/flash-linear-attention). Carry [".cudabin", ".fla"] (under 64 MiB together).
# Usage on the device: OUT=$OUT STEP=1 bash optimized/cuda/bench/pending_device_run.sh; STEP may list steps, run in
# the order 1, 2, 4, 3 (e.g. STEP=4,3 with carry [".cudabin/bins.tar.xz", ".cudabin/wheel.tar.xz", ".fla"]: about
# 560 s; the four steps fit in about 1,450 s of device time plus the machine's start).
set -u
OUT=${OUT:-/tmp/out}; END=${END:-585}; STEP=${STEP:-1}
source optimized/cuda/bench/call_lib.sh
has() { case ",$STEP," in *",$1,"*) return 0;; esac; return 1; }  # STEP may list several: 4,3
[ -f .cudabin/bins.tar.xz ] && unpack
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/l/env.log
B=/tmp/b/test_cuda_backward
CS=$(ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || which compute-sanitizer)
if has 1; then
  timeout $(left 120) $B -w NoTests --durations yes "CUDA v33*" > /tmp/l/v33.log 2>&1
  note "rung 33 tests rc $?: $(res /tmp/l/v33.log)"
  grep -E "FAILED|with expansion" /tmp/l/v33.log | head -20 >> /tmp/l/summary.log
  timeout $(left 60) $CS --tool memcheck $B "CUDA v33 on small cases for the sanitizers" > /tmp/l/v33_memcheck.log 2>&1
  note "memcheck rc $?: $(grep -E 'ERROR SUMMARY' /tmp/l/v33_memcheck.log | tail -1)"
  timeout $(left 90) $CS --tool racecheck $B "CUDA v33 on small cases for the sanitizers" > /tmp/l/v33_racecheck.log 2>&1
  note "racecheck rc $?: $(grep -E 'RACECHECK SUMMARY' /tmp/l/v33_racecheck.log | tail -1)"
  # The mutant build's test_cuda_backward: in bins.tar.xz since session 30 (mut_test_cuda_backward), else mut.tar.xz.
  if [ -f /tmp/b/mut_test_cuda_backward ]; then mkdir -p /tmp/m && cp /tmp/b/mut_test_cuda_backward /tmp/m/test_cuda_backward; fi
  if [ ! -f /tmp/m/test_cuda_backward ] && [ -f .cudabin/mut.tar.xz ]; then
    mkdir -p /tmp/m && tar -xJf .cudabin/mut.tar.xz -C /tmp/m
  fi
  if [ -f /tmp/m/test_cuda_backward ]; then
    for m in 309 0; do
      if [ $m = 0 ]; then unset LINATTN_MUTANT; else export LINATTN_MUTANT=$m; fi
      timeout $(left 60) /tmp/m/test_cuda_backward -w NoTests "CUDA v33 gradients equal v32 gradients bit for bit" > /tmp/l/mut_$m.log 2>&1
      note "mutant $m rc $?: $(res /tmp/l/mut_$m.log)"
    done
    unset LINATTN_MUTANT
  fi
  if [ -f /tmp/b/test_cuda_forward ]; then  # session 30: the host functions refuse a result that is not finite
    OV="CUDA chunked forward and backward refuse an overflowed result with an error blaming the keys and beta"
    timeout $(left 60) /tmp/b/test_cuda_forward -w NoTests --durations yes "$OV" > /tmp/l/overflow.log 2>&1
    note "host overflow test rc $?: $(res /tmp/l/overflow.log)"
    grep -E "FAILED|with expansion" /tmp/l/overflow.log | head -10 >> /tmp/l/summary.log
    LINATTN_MUTANT=310 timeout $(left 60) /tmp/b/mut310_test_cuda_forward -w NoTests "$OV" > /tmp/l/mut_310.log 2>&1
    note "mutant 310 (the host check skipped) rc $? (must fail): $(res /tmp/l/mut_310.log)"
    timeout $(left 60) /tmp/b/mut310_test_cuda_forward -w NoTests "$OV" > /tmp/l/mut_310_unset.log 2>&1
    note "mutant 310's binary without LINATTN_MUTANT rc $?: $(res /tmp/l/mut_310_unset.log)"
  fi
  timeout $(left 100) $B -w NoTests --durations yes "CUDA v31 bf16 hand-over keeps every gradient*" > /tmp/l/v31_fixed.log 2>&1
  note "rung 31's fixed-case test rc $?: $(res /tmp/l/v31_fixed.log)"
  timeout $(left 100) /tmp/b/test_cuda_saved -w NoTests --durations yes > /tmp/l/saved.log 2>&1
  note "test_cuda_saved rc $?: $(res /tmp/l/saved.log)"
  grep -E "FAILED|with expansion" /tmp/l/saved.log | head -20 >> /tmp/l/summary.log
  if [ -f /tmp/b/test_cuda_forward ]; then  # every forward case through the host functions' new result check
    timeout $(left 120) /tmp/b/test_cuda_forward -w NoTests --durations yes > /tmp/l/forward_all.log 2>&1
    note "test_cuda_forward (every case) rc $?: $(res /tmp/l/forward_all.log)"
    grep -E "FAILED|with expansion" /tmp/l/forward_all.log | head -20 >> /tmp/l/summary.log
  fi
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 200) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops delta_rule --bwd-versions 32,33,32,33,32,33 --rep 50 --json /tmp/l/bench_dn.json \
    > /tmp/l/bench_dn.log 2>&1
  note "bench_backward delta_rule 32,33 x3 with fla rc $?"
  grep -E "fla forward|saved states bf16\) v|kernels" /tmp/l/bench_dn.log | grep -v "^summary" | cut -c1-200 >> /tmp/l/summary.log
fi
if has 2; then
  timeout $(left 575) $B -w NoTests --durations yes "~CUDA v24 with its own widths*" > /tmp/l/backward_all.log 2>&1
  note "test_cuda_backward (all but rung 24's SM-sized reference test) rc $?: $(res /tmp/l/backward_all.log)"
  grep -E "FAILED|with expansion" /tmp/l/backward_all.log | head -20 >> /tmp/l/summary.log
fi
if has 4; then
  # The wheel's contents unzipped (what pip install --target does for a wheel without scripts): in bins.tar.xz since
  # session 30 (pylib/), else .cudabin/wheel.tar.xz's wheel is installed with pip.
  if [ -d /tmp/b/pylib/linattn ]; then
    rm -rf /tmp/pylib && cp -r /tmp/b/pylib /tmp/pylib
    note "the unzipped wheel copied to /tmp/pylib"
  else
    mkdir -p /tmp/wh && tar -xJf .cudabin/wheel.tar.xz -C /tmp/wh
    python3 -m pip install -q --no-deps --no-index --target /tmp/pylib /tmp/wh/*.whl > /tmp/l/pip.log 2>&1
    note "pip install of the wheel rc $?"
  fi
  python3 -c "import numpy, sys; print('python', sys.version.split()[0], 'numpy', numpy.__version__)" >> /tmp/l/env.log 2>&1
  PYTHONPATH=/tmp/pylib timeout $(left 300) python3 -m pytest -v -p no:cacheprovider notebooks_bindings/tests/test_cuda.py \
    > /tmp/l/test_cuda_py.log 2>&1
  note "pytest notebooks_bindings/tests/test_cuda.py rc $?: $(tail -1 /tmp/l/test_cuda_py.log)"
  grep -E "FAILED|Error" /tmp/l/test_cuda_py.log | head -20 >> /tmp/l/summary.log
fi
if has 3; then
  timeout $(left 250) $B -w NoTests --durations yes "CUDA v24 with its own widths*" > /tmp/l/backward_v24w.log 2>&1
  note "rung 24's SM-sized reference test rc $?: $(res /tmp/l/backward_v24w.log)"
  cp /tmp/l/summary.log "$OUT/"
  timeout $(left 300) python3 optimized/cuda/bench/bench_backward.py --lib /tmp/b/liblinattn_cuda_capi.so --fla .fla \
    --shapes 8x4096x16x128x128 --ops gated_delta_rule,kda,gdn2 --bwd-versions 0 --rep 20 --json /tmp/l/bench_ops.json \
    > /tmp/l/bench_ops.log 2>&1
  note "bench_backward gdn, kda, gdn2 best with fla rc $?"
  grep -E "backward|saving|fla" /tmp/l/bench_ops.log | grep -v "^summary\|kernels" | cut -c1-230 >> /tmp/l/summary.log
fi
finish
