#!/usr/bin/env bash
# optimized/cuda/bench/logs_session8/rung11_sass.sh -- static SASS counts of one kernel, no GPU (RESULTS.md
# "Rung 11"): total instructions, HMMA, barriers, global loads and stores by width, local memory.
# Usage: rung11_sass.sh OBJECT FUNCTION-PATTERN   e.g.
#   rung11_sass.sh build/g2fast/optimized/cuda/CMakeFiles/linattn_cuda.dir/bwd_v11_wyfast.cu.o bwd11_wyIf
# (cuobjdump from the CUDA toolkit on PATH; the first function whose mangled name matches is counted).
cuobjdump -sass "$1" | awk -v pat="Function : .*$2" '$0 ~ pat && !d {f = 1; next} /Function :/ {if (f) d = 1; f = 0} f' \
  | grep -oE "^\s+/\*[0-9a-f]+\*/\s+(@!?U?P[0-9T] )?[A-Z0-9_.]+" | awk '{print $NF}' \
  | awk '{n++; c[$1]++} END {printf "total %d HMMA %d BAR %d LDG.32 %d LDG.64 %d LDG.128 %d LDG.U16 %d STG.32 %d STG.64 %d STG.U16 %d LDL %d STL %d\n",
         n, c["HMMA.16816.F32.BF16"], c["BAR.SYNC.DEFER_BLOCKING"], c["LDG.E"], c["LDG.E.64"], c["LDG.E.128"], c["LDG.E.U16"],
         c["STG.E"], c["STG.E.64"], c["STG.E.U16"], c["LDL"], c["STL"]}'
