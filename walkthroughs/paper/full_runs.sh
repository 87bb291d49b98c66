#!/bin/bash
# walkthroughs/paper/full_runs.sh -- build the paper walkthroughs and make their full runs on one
# many-core Linux machine, item by item in priority order (Table 2, Fig.6, Table 7, Table 6, LR
# sweep), each item within what is left of a wall-clock budget. Used for the committed results
# (walkthroughs/results/<item>/README.md gives the exact call and machine).
#
#   walkthroughs/paper/full_runs.sh OUT SECONDS [LIBCPU]
#     OUT      where each item's directory is written (OUT/table2, OUT/fig6, ...)
#     SECONDS  wall-clock budget for everything (items not started in time are skipped; an item
#              stopped by the budget keeps its completed runs: rerun to continue)
#     LIBCPU   a prebuilt liblinattn_cpu.a (optional: else the project is built with CMake)
# Environment: LINATTN_SHARED (the shared directory: data/, paper/), JOBS (runs at once,
# default nproc), STEPS2 (Table 2 steps, default 150), BUDGETS7 (Table 7, default 100,300).
set -u
OUT=$1; BUDGET=$2; LIB=${3:-}
T0=$(date +%s)
left() { echo $(( BUDGET - ($(date +%s) - T0) )); }
JOBS=${JOBS:-$(nproc)}
BIN=build/paper-bin
mkdir -p "$BIN" "$OUT"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) hardware threads; $(g++ --version | head -1)"
PROGS="table2_mixers fig6_iteration_time table7_routing table6_cler lr_sweep"
if [ -n "$LIB" ]; then
  # the programs alone, for this CPU (-march=native), against the prebuilt kernel library
  for p in $PROGS; do
    g++ -std=c++20 -O3 -DNDEBUG -march=native -fopenmp -I. walkthroughs/$p.cpp "$LIB" -o "$BIN/$p" &
  done
  wait
else
  cmake -S . -B build/paper -DCMAKE_BUILD_TYPE=Release -DLINATTN_CUDA=OFF -DLINATTN_BENCHMARKS=OFF >/dev/null
  cmake --build build/paper -j"$JOBS" --target $PROGS >/dev/null
  for p in $PROGS; do cp build/paper/walkthroughs/$p "$BIN/"; done
fi
echo "built in $(( $(date +%s) - T0 )) s"
run() {  # run ITEM SECONDS_RESERVED_AFTER CMD...
  local item=$1 reserve=$2; shift 2
  local t=$(( $(left) - reserve ))
  if [ "$t" -lt 20 ]; then echo "== $item: skipped (budget)"; return; fi
  echo "== $item (at most $t s): $*"
  local s=$(date +%s)
  timeout "$t" "$@" > "$OUT/$item.log" 2>&1
  echo "== $item: exit $? after $(( $(date +%s) - s )) s"
}
run table2 110 "$BIN/table2_mixers" --out "$OUT/table2" --jobs "$JOBS" --threads 1 --steps "${STEPS2:-150}" --timing-steps 4
run fig6 30 "$BIN/fig6_iteration_time" --out "$OUT/fig6" --threads 4 --timing-steps 4
run table7 0 "$BIN/table7_routing" --out "$OUT/table7" --jobs "$JOBS" --threads 1 --budgets "${BUDGETS7:-100,300}" --seeds 2
run table6 0 "$BIN/table6_cler" --out "$OUT/table6" --jobs "$JOBS" --threads 1 --steps 150 --seeds 2
run lr_sweep 0 "$BIN/lr_sweep" --out "$OUT/lr_sweep" --jobs "$JOBS" --threads 1 --steps 150
echo "total $(( $(date +%s) - T0 )) s"
