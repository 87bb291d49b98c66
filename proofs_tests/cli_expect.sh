#!/bin/sh
# proofs_tests/cli_expect.sh [--needs FILE] [--vmem KB] STATUS MESSAGE PROGRAM [ARGS...]
# Runs PROGRAM ARGS (a walkthrough or benchmark program given bad options) and passes iff it exits
# with STATUS and its output (stdout and stderr) contains MESSAGE, a fixed string. An argument
# spelled {empty} stands for the empty string (CMake drops empty list items).
#   --needs FILE  a missing FILE (the corpus; LINATTN_DATA replaces it when set) skips the test:
#                 "SKIPPED: ...", exit status 77
#   --vmem KB     run under `ulimit -v KB`, so that a too-large allocation fails as std::bad_alloc
#                 at once instead of using the machine's memory
# The ctest entries that use it are registered in walkthroughs/CMakeLists.txt ("CLI: ...").
if [ "$1" = "--needs" ]; then
  f=${LINATTN_DATA:-$2}
  [ -f "$f" ] || { echo "SKIPPED: $f not found"; exit 77; }
  shift 2
fi
if [ "$1" = "--vmem" ]; then
  ulimit -v "$2" || exit 1
  shift 2
fi
status=$1 expect=$2
shift 2
for a do
  shift
  [ "$a" = "{empty}" ] && a=
  set -- "$@" "$a"
done
out=$("$@" 2>&1 </dev/null)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq "$status" ] || { echo "FAIL: exit status $rc, expected $status"; exit 1; }
case $out in
  *"$expect"*) echo "ok: exit status $rc, output has: $expect" ;;
  *) echo "FAIL: the output lacks: $expect"; exit 1 ;;
esac
