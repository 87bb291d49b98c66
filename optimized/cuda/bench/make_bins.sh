#!/usr/bin/env bash
# optimized/cuda/bench/make_bins.sh -- build the binaries a device call carries, on the project's CPU machine (nvcc, no
# GPU): .cudabin/bins.tar.xz from the committed tree (session 31's version also built bins33.tar.xz with
# pending_best33.patch applied; the patch landed in session 32 and that branch is gone). The archive holds
# test_cuda_forward, mut310_test_cuda_forward (make_mutants.py's mutant 310 text planted in chunk_cuda.cu, restored
# afterwards), test_cuda_backward, test_cuda_saved and liblinattn_cuda_capi.so, stripped, as one xz stream, and is
# checked with xz -t and listed with tar -t before it replaces the old one (session 30's archive was truncated and
# nothing noticed). Needs build/cuda configured (cmake --preset cuda). About 8 minutes on 2 cores, most of it xz.
# Usage: bash optimized/cuda/bench/make_bins.sh   (then update .cudabin/BUILT_AT)
set -euo pipefail
cd "$(dirname "$0")/../../.."
mkdir -p .cudabin
T="test_cuda_forward test_cuda_backward test_cuda_saved linattn_cuda_capi"
plant310() {  # $1: destination of the mutant test_cuda_forward
  cp optimized/cuda/chunk_cuda.cu /tmp/chunk_cuda.cu.keep
  python3 - <<'PY'  # make_mutants.py's own text for mutant 310 (one definition of it)
import sys
sys.path.insert(0, "optimized/cuda/bench")
from make_mutants import MUTANTS
_, p, a, b, _ = next(m for m in MUTANTS if m[0] == 310)
s = open(p).read()
assert s.count(a) == 1, "mutant 310's anchor is not once in " + p
open(p, "w").write(s.replace(a, b))
PY
  cmake --build build/cuda --target test_cuda_forward -j2 > /tmp/mkbins_mut.log 2>&1
  cp build/cuda/proofs_tests/test_cuda_forward "$1"
  cp /tmp/chunk_cuda.cu.keep optimized/cuda/chunk_cuda.cu
}
pack() {  # $1: folder, $2: archive
  strip "$1"/*
  (cd "$1" && tar -cf - . | xz -T1 --lzma2=preset=9,dict=512MiB > /tmp/pack.tar.xz)
  xz -t /tmp/pack.tar.xz; tar -tJf /tmp/pack.tar.xz
  mv /tmp/pack.tar.xz "$2"
}
copy4() {
  mkdir -p "$1"
  cp build/cuda/proofs_tests/test_cuda_forward build/cuda/proofs_tests/test_cuda_backward \
     build/cuda/proofs_tests/test_cuda_saved build/cuda/optimized/cuda/liblinattn_cuda_capi.so "$1"/
}
rm -rf /tmp/bins
echo "[$(date +%T)] HEAD $(git rev-parse --short HEAD): build"
cmake --build build/cuda --target $T -j2 > /tmp/mkbins_build.log 2>&1
copy4 /tmp/bins
plant310 /tmp/bins/mut310_test_cuda_forward
pack /tmp/bins .cudabin/bins.tar.xz
echo "[$(date +%T)] rebuild HEAD (build/cuda holds the mutant test_cuda_forward until then)"
cmake --build build/cuda --target $T -j2 > /tmp/mkbins_head.log 2>&1
git status --short
ls -la .cudabin
echo "[$(date +%T)] done"
