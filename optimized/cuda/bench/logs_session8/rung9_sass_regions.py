#!/usr/bin/env python3
"""optimized/cuda/bench/logs_session8/rung9_sass_regions.py -- static SASS instruction counts of source-line
regions of one kernel (rung 9 against rung 8): each instruction is attributed to the outermost
bwd_common.cuh line of its nvdisasm -gi line-info chain.
  cuobjdump -xelf all build/rung9/optimized/cuda/CMakeFiles/linattn_cuda.dir/bwd_v4_tc_tail.cu.o
  nvdisasm -c -gi bwd_v4_tc_tail.sm_90a.cubin > v4.gi.sass
  python3 rung9_sass_regions.py v4.gi.sass KERNEL_SUBSTRING name=FIRST-LAST ..."""
import re, sys, collections
s = open(sys.argv[1]).read()
# split functions
funcs = re.split(r"\n\s*\.text\.", s)
def region_counts(body, regions):
    cur = None
    cnt = collections.Counter(); ops = collections.defaultdict(collections.Counter)
    for line in body.split("\n"):
        if line.strip().startswith("//## File"):
            # take the outermost bwd_common.cuh line of the chain
            ls = re.findall(r'bwd_common\.cuh", line (\d+)', line)
            cur = int(ls[-1]) if ls else None
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
        if m and cur is not None:
            for name, (a, b) in regions.items():
                if a <= cur <= b:
                    cnt[name] += 1; ops[name][m.group(1)] += 1
    return cnt, ops
regions = {k: tuple(map(int, v.split("-"))) for k, v in (a.split("=") for a in sys.argv[3:])}
for f in funcs:
    name = f.split(":")[0].split("\n")[0]
    if sys.argv[2] not in name: continue
    print(name[:120])
    cnt, ops = region_counts(f, regions)
    for r in regions:
        print(f"  {r}: {cnt[r]}  ", dict(ops[r].most_common(8)))
