#!/usr/bin/env python3
"""optimized/cuda/bench/sass_bwd_phases.py -- STATIC instruction counts of the backward's chunk-gradient
kernel bwdc::bwd_grads_tc<float, V4Mid> (bwd_common.cuh + bwd_v4_tc_tail.cu, rung 4, float32 gates)
per stage (B2 ... B11), from the SASS of the cubin (nvdisasm -c -gi line info), turned into per-warp
dynamic counts for DeltaNet and KDA at K = V = 128, full chunks (Lc = 64), 256 threads, with the loop
trip counts and branch factors below (read from the source; see analysis_bwd_grads.md). Also counts
"global round trips": LDGs that open a new wave of loads (no earlier load of the same loop body is
still unconsumed), i.e. how many times a warp waits on a full global-memory latency, serially, and
walks one warp through the code in order with approximate latencies (LAT below) to bound its
latency-bound time. An estimate, not a measurement: check with clock64 / ncu.

One kernel serves all operators (the operator is a runtime field of KParams), so DeltaNet and KDA
are two paths through the same SASS, picked by BRANCHES.

Usage: sass_bwd_phases.py CUBIN_OR_SASS [--lat-g=CLOCKS] [--loops]   (nvdisasm on PATH for a cubin)
  --lat-g: global-load latency of the walk (default 600); --loops: list the loops and their trips.
Tables are for the sources at commit de00030 (line numbers of bwd_common.cuh / bwd_v4_tc_tail.cu; the
kernel's SASS is identical to 6ec75e0's, where bwd_common.cuh's lines from 136 on were 4 lower) and the
instruction indices of nvdisasm 13.5 (pip nvidia cu13) on nvcc 13.0's cubin (TRIPS keys; print them with --loops).
Backward rung 5 (commits 6c8e532 .. b77b8a8) added code paths to bwd_common.cuh and bwd_v4_tc_tail.cu
that move these lines (V4Mid's PTX stayed identical): on later sources run it on a cubin built from
de00030 (git worktree), or update the tables.
"""
import collections, re, subprocess, sys

KERNEL = "bwd_grads_tcIfN"  # float32 gates (bench_backward.py: gate_dtype 0)
BC, TT = "bwd_common.cuh", "bwd_v4_tc_tail.cu"

# Stage of an instruction: the outermost frame in the kernel body (bwd_common.cuh); V4Mid (inlined
# at bwd_common.cuh:369) by its own lines.
STAGES = [  # (name, file, first, last) matched against the outermost frame / the V4Mid frame
    ("B2 setup, A hi/lo", BC, 244, 295),
    ("B4-B8 slab staging", BC, 296, 322),
    ("B4 products", BC, 323, 326),
    ("B5 B6 B8 products (kk=0)", BC, 327, 337),
    ("B4 out, dw split, E stage", BC, 338, 354),
    ("B6 B8 dw-E products, dE out", BC, 355, 365),
    ("V4 B7 (+ M2)", TT, 86, 105),
    ("V4 overlay out (KDA)", TT, 106, 114),
    ("V4 B9 tc (DN)", TT, 115, 175),
    ("B9 f32 staging (KDA)", BC, 406, 424),
    ("B9 f32 compute (KDA)", BC, 425, 443),
    ("B10 (a) per element", BC, 444, 469),
    ("B10 dv", BC, 470, 482),
    ("B10 (b) per channel", BC, 483, 493),
    ("B11 (c) per token", BC, 494, 511),
]
ORDER = [s[0] for s in STAGES] + ["other"]

# Per-thread trips per entry of each SASS loop, keyed by (first, last) instruction index of the loop
# for the nvdisasm output of commit de00030 (printed with --loops; check them when the source changes).
# K = V = 128, Lc = 64, 256 threads (8 warps); per-warp averages where only some warps loop.
TRIPS = {
    (131, 151): 0.25, (160, 232): 0,     # sbeta: 64 items -> warps 0, 1 one trip (remainder loop)
    (266, 271): 2, (279, 290): 0,        # sdgam: 512 items = 2 per thread (remainder loop)
    (300, 330): 16,                      # A hi/lo: 4096 / 256
    (462, 650): 16, (458, 1291): 2, (405, 2096): 2,  # staging items; vv slabs; kk slabs
    (1708, 1742): 16,                    # E hi/lo
    (2145, 2170): 0.25, (2178, 2271): 0,  # V4 sG: 64 items
    (4043, 4094): 16, (4039, 4518): 2,   # V4 B9: k, q slab items; kk slabs
    (4541, 4615): 16, (4537, 4961): 2,   # f32 B9 staging items; kk slabs
    (4622, 4955): 16,                    # f32 B9 (r, d) items: 64 * 64 / 256
    (4651, 4753): 7.75,                  # j <= r, 4x unrolled: mean floor((r + 1) / 4)
    (4871, 4902): 31.5,                  # i = r + 1 .. 63 (i = r peeled): mean 31.5
    (5010, 5198): 32,                    # B10 (a): 64 * 128 / 256
    (5238, 5311): 32,                    # dv: 64 * 128 / 256
    (5385, 6021): 0.5,                   # d < K = 128: warps 0-3 one trip
    (5421, 5596): 4, (5695, 5743): 0,    # sum over 64 tokens, 16x unrolled
    (5925, 6014): 16,                    # reverse cumsum, 4x unrolled
    (6065, 6765): 8,                     # tokens per warp: 64 / 8
    (6172, 6242): 0, (6406, 6508): 0,    # 16x unrolled d / c loops: 4 items -> the unrolled tail
    (6660, 6696): 0,                     # scalar-gate dg sum
}
# Straight-line remainder code that runs a fraction of its enclosing iterations: (first, last, factor).
REMAINDERS = [(4754, 4839, 0.5),  # f32 B9 j-loop tail: (r + 1) mod 4 in 0..3, mean 1.5 of 3 copies
              # B11 (c) d and c loops (4 items per lane): nvcc's n mod 4 prologue and 8x part skipped,
              # only its 4x part runs
              (6078, 6135, 0), (6248, 6285, 0), (6315, 6374, 0), (6514, 6565, 0)]

# Branch factors per operator, matched against any frame of an instruction's inline chain.
COMMON = [
    (BC, 307, 310, 0.5),      # u0 staging at kk == 0 only
    (BC, 327, 337, 0.5),      # B5, B6, B8 at kk == 0 only
    (BC, 467, 467, 0.0), (BC, 475, 478, 0.0),  # GDN2 branches
    (BC, 503, 509, 0.0),      # scalar-gate dg per token
]
BRANCHES = {
    "DeltaNet": COMMON + [(BC, 83, 83, 0.0), (TT, 106, 114, 0.0), (BC, 406, 443, 0.0), (BC, 489, 489, 0.0)],
    "KDA": COMMON + [(TT, 92, 95, 0.0), (TT, 115, 175, 0.0), (BC, 490, 490, 0.0)],
}
# Whole stages an operator skips (also catches hoisted helper instructions attributed to them).
STAGES_OFF = {"DeltaNet": {"V4 overlay out (KDA)", "B9 f32 staging (KDA)", "B9 f32 compute (KDA)"},
              "KDA": {"V4 B9 tc (DN)"}}

CLASSES = [("HMMA", r"^HMMA"), ("LDSM", r"^LDSM"), ("LDS", r"^LDS(\.|\s|$)"), ("STS", r"^STS(\.|\s|$)"),
           ("LDL/STL", r"^(LDL|STL)"), ("LD/ST generic", r"^(LD|ST)(\.|\s)"), ("BAR", r"^BAR\."),
           ("LDGSTS", r"^LDGSTS"), ("LDG", r"^LDG"), ("STG", r"^STG"), ("ATOM/RED", r"^(ATOM|RED)"),
           ("SHFL", r"^SHFL"), ("MUFU", r"^MUFU"), ("FFMA", r"^FFMA"), ("FP64", r"^(DADD|DMUL|DFMA|F2F\.F\d+\.F64|F2F\.F64)"),
           ("F2F/F2FP", r"^F2F")]
COLS = ["all"] + [c for c, _ in CLASSES] + ["round trips", "LDG bytes", "STG bytes", "smem wf", "latency clk"]

# H200: 132 SMs, 1.98 GHz, 4 SMSPs x 1 warp instruction / clock; 8 warps = 2 per SMSP;
# MUFU and FP64 conversions 16 lanes / clock / SM -> 8 clocks per warp instruction per SMSP.
SMS, CLOCK, BLOCKS, WARPS = 132, 1.98e9, 8 * 16 * 64, 8
# In-order latency model of ONE warp (no other warp to switch to): an instruction issues one clock
# after the previous one or when its source registers are ready; destinations become ready after
# LAT clocks (approximate Hopper figures; global loads LAT_G, an assumption: 600 clocks for HBM under
# load, L2 hits are ~250-300). Loop-carried dependencies are ignored (registers are taken as ready at
# a loop head), so this is a lower bound on a warp's latency-bound time.
LAT_G = 600
LAT = [(r"^LDG", None), (r"^(LDS|LDSM)", 30), (r"^HMMA", 32), (r"^MUFU", 18), (r"^(DADD|DMUL|DFMA)", 8),
       (r"^F2F\.F32\.F64", 12), (r"^SHFL", 24), (r"^(S2R|S2UR|LDC|ULDC)", 20), (r"^BAR", 20), (r".*", 5)]
WAVES = [(r"^LDSM", 4), (r"^(LDS|STS)\.128", 4), (r"^(LDS|STS)\.64", 2), (r"^(LDS|STS)(\.|\s|$)", 1)]


import sass_phases as _sp  # the shared SASS reader of the forward's script (disasm, function, parse)


def disasm(path):
    return _sp.disasm(path)


def function(lines):
    return _sp.function(lines, KERNEL)


def parse(f):
    """Instructions as (opcode text without predicate, [(file, line) innermost .. outermost]), labels."""
    ins, labels = _sp.parse(f)
    return [(text, loc) for _, text, loc in ins], labels


# Lines whose code the compiler hoists or rematerialises anywhere (the workspace carve-up bwd_ws at 272,
# chunk_of at 277, the row / G / k_at / e_at lambdas at 278, 379-381): such an instruction, when its
# outermost frame is one of these, belongs to the stage of the instruction before it.
HELPERS = {(BC, 276), (BC, 281), (BC, 282), (BC, 383), (BC, 384), (BC, 385)}


def stage_of(loc):
    outer = loc[-1]
    if outer in HELPERS:
        return None
    for name, f, a, b in STAGES:
        if f == TT:
            if outer == (BC, 369) and any(fr == TT and a <= ln <= b for fr, ln in loc):
                return name
        elif outer[0] == BC and a <= outer[1] <= b and outer != (BC, 369):
            return name
    return "other"


def regs(tok):
    m = re.match(r"R(\d+)(\.64|\.128)?", tok)
    if not m:
        return []
    n = int(m.group(1))
    return list(range(n, n + {".64": 2, ".128": 4}.get(m.group(2) or "", 1)))


def operands(text):
    op, _, rest = text.partition(" ")
    toks = re.findall(r"R\d+(?:\.64|\.128)?", rest)
    if re.match(r"^(ST|STS|STG|STL|RED|BAR|BRA|EXIT)", op):
        return [], [r for t in toks for r in regs(t)]
    if not toks:
        return [], []
    dst = regs(toks[0])
    w = 4 if ".128" in op else 2 if ".64" in op else 1
    if re.match(r"^(LDG|LDS|LD|LDL)", op):
        dst = list(range(dst[0], dst[0] + w))
    return dst, [r for t in toks[1:] for r in regs(t)]


def width(op):
    return 16 if ".128" in op else 8 if ".64" in op else 2 if ".U16" in op or ".S16" in op else 1 if ".U8" in op else 4


def analyse(ins, labels, op_name):
    end = max(i for i, (t, _) in enumerate(ins) if t.split()[0] == "EXIT")  # after it: out-of-line shuffles
    loops = []
    for i, (text, loc) in enumerate(ins):
        m = re.search(r"BRA\s+`\((\.L_x_\d+)\)", text)
        if m and labels[m.group(1)] < i <= end:
            loops.append((labels[m.group(1)], i))
    heads = {a for a, b in loops}
    stages, st = [], STAGES[0][0]
    for text, loc in ins[:end + 1]:
        st = stage_of(loc) or st
        stages.append(st)
    weight = []
    for i, (text, loc) in enumerate(ins[:end + 1]):
        w = 0.0 if stages[i] in STAGES_OFF[op_name] else 1.0
        for a, b in loops:
            if a <= i <= b:
                w *= TRIPS.get((a, b), 1)
        for a, b, fac in REMAINDERS:
            if a <= i <= b:
                w *= fac
        for f, a, b, fac in BRANCHES[op_name]:
            if any(fr == f and a <= ln <= b for fr, ln in loc):
                w *= fac
                break
        weight.append(w)
    # global round trips: an LDG opens a wave when no load of the current wave is pending
    # (instructions this operator does not execute are skipped)
    opens, pending = set(), set()
    for i, (text, loc) in enumerate(ins[:end + 1]):
        if i in heads:
            pending = set()
        if weight[i] == 0:
            continue
        dst, src = operands(text)
        if pending & set(src):
            pending = set()
        op = text.split()[0]
        if op.startswith("LDG"):
            if not pending:
                opens.add(i)
            pending |= set(dst)
        else:
            pending -= set(dst)
    # one warp's in-order latency walk (see LAT)
    stall, ready, t = [0.0] * (end + 1), collections.defaultdict(float), 0.0
    for i, (text, loc) in enumerate(ins[:end + 1]):
        if i in heads:
            ready = collections.defaultdict(float)
            t = 0.0
        if weight[i] == 0:
            continue
        dst, src = operands(text)
        op = text.split()[0]
        at = max([t + 1] + [ready[r] for r in src])
        stall[i] = at - (t + 1)
        t = at
        lat = next(l for rx, l in LAT if re.match(rx, op))
        for r in dst:
            ready[r] = t + (LAT_G if lat is None else lat)
    dyn = collections.defaultdict(collections.Counter)
    for i, (text, loc) in enumerate(ins[:end + 1]):
        w = weight[i]
        st = stages[i]
        op = text.split()[0]
        d = dyn[st]
        d["all"] += w
        d["latency clk"] += w * (1 + stall[i])
        for name, rx in CLASSES:
            if re.match(rx, op):
                d[name] += w
                if name in ("LDS", "STS"):
                    d[f"{name}.{width(op) * 8}"] += w
                break
        if i in opens:
            d["round trips"] += w
        if op.startswith("LDG"):
            d["LDG bytes"] += w * 32 * width(op)
        if op.startswith("STG"):
            d["STG bytes"] += w * 32 * width(op)
        for rx, wf in WAVES:
            if re.match(rx, op):
                d["smem wf"] += w * wf
                break
    return dyn, loops, end


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    ins, labels = parse(function(disasm(sys.argv[1])))
    global LAT_G
    for a in sys.argv[2:]:
        if a.startswith("--lat-g="):
            LAT_G = float(a.split("=")[1])
    if "--loops" in sys.argv:
        dyn, loops, end = analyse(ins, labels, "DeltaNet")
        for a, b in loops:
            print(f"loop {a}-{b} trips {TRIPS.get((a, b), 'UNKNOWN (1)')} back {ins[b][1]}")
        return
    bps = BLOCKS / SMS
    ms = lambda clocks: clocks * bps / CLOCK * 1e3
    for op_name in BRANCHES:
        dyn, loops, end = analyse(ins, labels, op_name)
        unknown = [(a, b) for a, b in loops if (a, b) not in TRIPS]
        print(f"\n## {op_name}: dynamic warp instructions per warp (mean of 8 warps) per block"
              f" ({len(ins[:end + 1])} static instructions; loops without a trip count: {unknown or 'none'})")
        print("| stage | " + " | ".join(COLS) + " |")
        print("|" + " --- |" * (len(COLS) + 1))
        tot = collections.Counter()
        for st in ORDER:
            if st not in dyn or dyn[st]["all"] < 0.5:
                continue
            tot.update(dyn[st])
            print(f"| {st} | " + " | ".join(f"{dyn[st][c]:.0f}" for c in COLS) + " |")
        print("| total | " + " | ".join(f"{tot[c]:.0f}" for c in COLS) + " |")
        print(f"\nLDS/STS by width (per warp): " + ", ".join(f"{k} {tot[k]:.0f}" for k in sorted(tot) if k[:4] in ("LDS.", "STS.")))
        print(f"\n{op_name}: ms for 8192 blocks ({bps:.2f} blocks per SM, one at a time), bounds not latencies")
        print("| stage | issue (2 warps/SMSP) | MUFU+FP64 conv (8 clk) | smem (8 warps x wf) | HMMA (2 clk) |"
              f" round trips x {LAT_G} clk | one warp's latency walk | max of the columns |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        t = collections.Counter()
        for st in ORDER:
            d = dyn.get(st)
            if not d or d["all"] < 0.5:
                continue
            conv = d["MUFU"] + sum(v for k, v in d.items() if k == "FP64") / 2  # DADD + F2F: count the F2F half
            row = (ms(2 * d["all"]), ms(2 * 8 * conv), ms(WARPS * d["smem wf"]), ms(2 * 2 * d["HMMA"]),
                   ms(LAT_G * d["round trips"]), ms(d["latency clk"]))
            row = row + (max(row),)
            t.update(dict(zip("abcdefg", row)))
            print(f"| {st} | " + " | ".join(f"{x:.3f}" for x in row) + " |")
        print("| total | " + " | ".join(f"{t[k]:.3f}" for k in "abcdefg") + " |")
        print(f"global bytes per block (LDG {tot['LDG bytes'] * WARPS / 1024:.0f} KiB, STG {tot['STG bytes'] * WARPS / 1024:.0f} KiB"
              f" as issued; all 8192 blocks: {(tot['LDG bytes'] + tot['STG bytes']) * WARPS * BLOCKS / 1e9:.2f} GB,"
              f" {(tot['LDG bytes'] + tot['STG bytes']) * WARPS * BLOCKS / 4.0e12 * 1e3:.2f} ms at 4.0 TB/s)")


if __name__ == "__main__":
    main()
