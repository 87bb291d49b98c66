#!/usr/bin/env bash
# optimized/cuda/bench/call_lib.sh -- helpers shared by the device-call scripts (logs_session*/callN/runN.sh,
# pending_device_run.sh), sourced after OUT and END are set:
#   el          seconds since the script started (S0)
#   res LOG     the last Catch2 summary line of LOG ("All tests passed (...)" or "test cases: ...")
#   left N      seconds the next step may take: at most N, and no more than is left before END
#   note TEXT   "[el s] TEXT" to the terminal and /tmp/l/summary.log
#   catch_run N LOG LABEL CMD...  CMD (a Catch2 test binary, or `env VAR=x binary ...`) for at most N s (left N),
#               its output in /tmp/l/LOG; notes "LABEL rc R: <Catch2 summary>" and copies its failed checks into
#               summary.log
#   unpack [F]  the carried binaries (F, default .cudabin/bins.tar.xz) into /tmp/b
#   finish      /tmp/l packed into $OUT/logs.tar.xz, and summary.log copied beside it
# Scripts of sessions 1-14 predate it and keep their own copies (they are exact records of what ran).
S0=${S0:-$(date +%s)}
END=${END:-560}
mkdir -p "${OUT:?set OUT}" /tmp/b /tmp/l
# A warm machine keeps /tmp between calls: start every call with an empty log folder (review19: session 18's call 5
# packed call 4's logs with its own).
rm -rf /tmp/l/* 2>/dev/null || true
el() { echo $(( $(date +%s) - S0 )); }
res() { grep -E '^All tests|^test cases' "$1" | tail -1; }
left() { local t=$(( END - $(el) )); [ $t -gt $1 ] && t=$1; [ $t -lt 1 ] && t=1; echo $t; }
note() { echo "[$(el) s] $*" | tee -a /tmp/l/summary.log; }
catch_run() {
  local n=$1 log=/tmp/l/$2 label=$3
  shift 3
  timeout "$(left "$n")" "$@" > "$log" 2>&1
  note "$label rc $?: $(res "$log")"
  grep -E "FAILED|with expansion" "$log" | head -20 >> /tmp/l/summary.log
}
unpack() { tar -xJf "${1:-.cudabin/bins.tar.xz}" -C /tmp/b; }
finish() { tar -cJf "$OUT/logs.tar.xz" -C /tmp/l . && cp /tmp/l/summary.log "$OUT/"; }
