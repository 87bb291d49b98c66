#!/usr/bin/env bash
# run.sh -- the project's front door. Each command installs what is missing, builds, and runs.
#   ./run.sh main     the main job: builds and runs the walkthrough "the delta rule by hand" (that target only)
#   ./run.sh test     all tests: release build (with CUDA when nvcc exists), sanitizer build, and
#                     the Python module (pip install ./notebooks_bindings; pytest, notebooks)
#   ./run.sh build    just build the release preset
# Parallelism: LINATTN_JOBS (default: number of cores).
set -euo pipefail
cd "$(dirname "$0")"
JOBS="${LINATTN_JOBS:-$(nproc)}"

bash .ci/install-deps.sh

build() {  # build <preset> [target]: configure once, then build (everything, or one target); quiet unless it fails
  local preset="$1" target=() log
  [ $# -gt 1 ] && target=(--target "$2")
  mkdir -p build
  if [ ! -f "build/$preset/CMakeCache.txt" ]; then
    log="build/configure-$preset.log"
    cmake --preset "$preset" >"$log" 2>&1 || { cat "$log"; echo "configure of preset '$preset' failed" >&2; exit 1; }
  fi
  log="build/build-$preset.log"
  if ! cmake --build --preset "$preset" -j "$JOBS" "${target[@]}" >"$log" 2>&1; then
    cat "$log"; echo "build of preset '$preset' failed" >&2; exit 1
  fi
  grep -E "warning:" "$log" || true
}

case "${1:-main}" in
  main)
    build release delta_rule_by_hand  # the walkthrough alone: seconds, not the whole project
    ./build/release/walkthroughs/delta_rule_by_hand
    ;;
  test)
    build release
    ctest --preset release -j "$JOBS"
    build asan
    ctest --preset asan -j "$JOBS"
    bash .ci/pip-install.sh ./notebooks_bindings
    python3 -m pytest -q notebooks_bindings/tests
    ;;
  build)
    build release
    ;;
  *)
    echo "usage: ./run.sh [main|test|build]" >&2
    exit 2
    ;;
esac
