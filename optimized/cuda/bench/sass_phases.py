#!/usr/bin/env python3
"""optimized/cuda/bench/sass_phases.py -- static instruction counts of the intra-chunk kernel
(tc_common.cuh's tci::intra, v4_levels.cu's V4Levels::lp) per phase, from the SASS of a cubin
built with -lineinfo, turned into per-block dynamic counts with per-thread loop trip counts taken
from the source (TRIPS below). A static estimate, not a measurement: check with clock64 / ncu.

Usage: sass_phases.py CUBIN_OR_SASS [KERNEL_SUBSTRING ...]
  CUBIN: run through `nvdisasm -c -gi` (PATH must hold nvdisasm; pip nvidia-cuda-nvdisasm has one).
  Default kernels: KP = 128, float32 gates: GDN (scalar), KDA and GDN2 (per-channel).

Its line tables (PHASES, LP_PHASES, TRIPS, BRANCHES) are those of tc_common.cuh and v4_levels.cu at
commit 4f8cbc7 (rung 4 as first written). Revisions 2 and 3 of rung 4 (c3af334, 6ec75e0) moved
those lines and replaced the build loop and phase 4's level loop, so on later sources the phase
attribution is wrong: run it on a cubin built from 4f8cbc7 (git worktree), or update the tables.
"""
import collections, re, subprocess, sys

KERNELS = {  # name: mangled-name substring (tci::intra<KP, GATE, GDN2, Tg, V4Levels>)
    "GDN": "intraILi128ELi1ELb0EfN",
    "KDA": "intraILi128ELi2ELb0EfN",
    "GDN2": "intraILi128ELi2ELb1EfN",
}

# Phases by the kernel-body line (tc_common.cuh) that an instruction is inlined into; V4Levels::lp
# (inlined at the Phase 3 call) is split by its own lines in v4_levels.cu.
PHASES = [  # (name, first line, last line) in tc_common.cuh
    ("prologue", 353, 388), ("p1 loads", 389, 436), ("p2 cumsum", 437, 464), ("p3 L,P", 465, 485),
    ("p4 A=(I+L)^-1", 486, 527), ("p5 exp, ws", 528, 565), ("w_aux", 566, 581), ("u", 582, 612)]
LP_PHASES = [("p3 lp build", 63, 92), ("p3 lp products", 93, 140)]

# Per-thread trip counts of each SASS loop, keyed by (kernel-body line, innermost file:line of the
# loop's back branch). Value: trips per entry of the loop; for nvcc's "remainder + 4x unrolled main"
# pairs (same key twice) the longer loop is the main one: (main trips, remainder trips).
# From the source, KP = 128, 256 threads: phase 1 k/q 64*16/256 = 4 items; gates 64*32/256 = 8;
# zeroing sL/sA 4160/256 = 16.25 (main 4, remainder 0.25), sP 576/256 = 2.25 (main 0.5, rem 0.25);
# lp: 3 rounds x (build 2*64*16/256 = 8 items; products 6, 8, 12 tasks over 8 warps = 26/24 per
# round and warp on average); phase 4 levels 3 x (nb*256/256 = 3, 2, 1 -> 2 per level avg) x ...;
# phase 5 64*16/256 = 4; P copy 2; w copy 4; u: VP/64 = 2 value tiles.
TRIPS = {
    ("tc_common.cuh:392", "tc_common.cuh:392"): 4,
    ("tc_common.cuh:407", "tc_common.cuh:407"): 8,
    ("tc_common.cuh:432", "tc_common.cuh:432"): (4, 0.25),
    ("tc_common.cuh:433", "tc_common.cuh:433"): (0.5, 0.25),
    ("tc_common.cuh:448", "tc_common.cuh:448"): 0.5,      # off += sTot over seg < 2: 0 or 1
    ("tc_common.cuh:483", "v4_levels.cu:65"): 3,          # rounds
    ("tc_common.cuh:483", "v4_levels.cu:67"): 8,          # build items per round
    ("tc_common.cuh:483", "v4_levels.cu:98"): 26 / 24,    # product tasks per round and warp
    ("tc_common.cuh:505", "tc_common.cuh:505"): 3,        # levels
    ("tc_common.cuh:507", "tc_common.cuh:507"): 1,        # nb*256 elements / 256 threads = nb, avg 2, see below
    ("tc_common.cuh:510", "tc_common.cuh:510"): 2,        # M = J..I-1: lev, avg 2
    ("tc_common.cuh:512", "tc_common.cuh:512"): 4,        # 16 cc unrolled by 4
    ("tc_common.cuh:516", "tc_common.cuh:516"): 2,        # nb, avg 2
    ("tc_common.cuh:520", "tc_common.cuh:520"): 4,
    ("tc_common.cuh:526", "tc_common.cuh:526"): (0, 0),   # a_out null in the forward
    ("tc_common.cuh:527", "tc_common.cuh:189"): (4, 0),   # split_a_hilo 4096/256 = 16 = 4 x 4
    ("tc_common.cuh:530", "tc_common.cuh:530"): 4,
    ("tc_common.cuh:561", "tc_common.cuh:561"): (0.5, 0), # 512/256 = 2 items
    ("tc_common.cuh:576", "tc_common.cuh:576"): (1, 0),   # 4 items
    ("tc_common.cuh:583", "tc_common.cuh:583"): 2,        # value tiles
}
# phase 4: the element loop at 507 runs nb = 3, 2, 1 times (avg 2) and the level loop 3 times:
# trips(507) = 1 with the M loop at 2 and the cc loop at 4 gives per level one element of avg
# depth; we count 507 as 2 (avg nb) below through this override.
TRIPS[("tc_common.cuh:507", "tc_common.cuh:507")] = 2

# Branches not taken (or taken by a fraction of the warps) at the benchmark shape (K = V = 128,
# float32 gates), matched against any frame of an instruction's inline chain: (file, first line,
# last line, factor on the loop-derived count).
BRANCHES = [
    ("tc_common.cuh", 398, 404, 0.0),       # phase 1: k, q element fallback (K % 8 != 0)
    ("tc_common.cuh", 417, 424, 0.0),       # phase 1: gate element fallback (bf16 gates, K % 4)
    ("tc_common.cuh", 330, 334, 0.0),       # load_vtile: V % 8 fallback
    ("tc_common.cuh", 341, 346, 0.0),       # load_vtile: GDN2 w element fallback
    ("tc_common.cuh", 489, 503, 0.25),      # phase 4: diagonal 16 x 16 inverses on warps 0, 1 only
    ("tc_common.cuh", 453, 461, 0.125),     # phase 2, scalar gates: warp 0 only
    ("tc_common.cuh", 552, 559, 1 / 32),    # phase 5: exp(G_C) of row 0 only (1 item of 32 per warp)
    # lp build: a warp's item covers rows r, r + 1 (r even): one branch for levels >= 2, both at
    # level 1 (round 2, set 1: 4 of a thread's 24 items) -> each branch (20 / 2 + 4) / 24 = 14 / 24
    ("v4_levels.cu", 77, 85, 14 / 24),
    ("v4_levels.cu", 86, 89, 14 / 24),
    ("v4_levels.cu", 115, 119, 22 / 26),    # products: the L half skipped on the 4 diagonal P tasks
]

CLASSES = [  # (name, regex on the opcode with modifiers)
    ("MUFU.EX2", r"^MUFU\.EX2"), ("MUFU other", r"^MUFU\."), ("HMMA", r"^HMMA"), ("LDSM", r"^LDSM"),
    ("LDS", r"^LDS(\.|\s|$)"), ("STS", r"^STS(\.|\s|$)"), ("LDL/STL", r"^(LDL|STL)"), ("LD/ST generic", r"^(LD|ST)\.E"), ("BAR", r"^BAR\."),
    ("LDGSTS", r"^LDGSTS"), ("LDG", r"^LDG"), ("STG", r"^STG"), ("FFMA", r"^FFMA"), ("FMUL", r"^FMUL"),
    ("FADD", r"^FADD"), ("F2F/F2FP", r"^F2F"),
]


# Machine model (H200 = GH100, 132 SMs at the 1.98 GHz boost clock; 4 SM sub-partitions (SMSP) per
# SM, each issuing one warp instruction per clock; MUFU.EX2 16 lanes per clock per SM = 8 clocks per
# warp instruction per SMSP (CUDA C++ Programming Guide, arithmetic instruction throughput, cc 9.0);
# shared memory 128 bytes per clock per SM = one wavefront per clock; HMMA m16n8k16 (2,048 FMA)
# taken as 2 clocks of an SMSP's tensor core (mma.sync at about half of the 1,024 dense bf16 FMA
# per clock per SMSP that wgmma reaches).
SMS, CLOCK, BLOCKS, WARPS = 132, 1.98e9, 8 * 16 * 64, 8
# shared-memory wavefronts per warp instruction: 16-byte accesses 4 (quarter-warps), 8 bytes 2,
# ldmatrix x4 4; ld8f (two 16-byte loads at a 32-byte lane stride, two rows per warp: each bank hit
# by 8 distinct addresses) 8, or 4 where the warp reads one row; 4 bytes and less 1 (the addressing of phase 4 and the cumsum is conflict-free or
# broadcast)
WAVES = [(r"^LDSM", 4), (r"^(LDS|STS|ST\.E|LD\.E)\.128", 4), (r"^(LDS|STS)\.64", 2), (r"^(LDS|STS)(\.|\s|$)", 1)]


def disasm(path):
    if path.endswith(".sass") or path.endswith(".txt"):
        return open(path).read().split("\n")
    return subprocess.run(["nvdisasm", "-c", "-gi", path], check=True, capture_output=True,
                          text=True).stdout.split("\n")


def function(lines, sub):
    start = None
    for i, l in enumerate(lines):
        if start is None and re.match(r"^_Z\S*" + re.escape(sub) + r"\S*:$", l):
            start = i
        elif start is not None and (l.startswith("//-----") or l.startswith(".section")):
            return lines[start:i]
    if start is None:
        sys.exit(f"kernel {sub} not found")
    return lines[start:]


def parse(f):
    """Instructions as (opcode, predicate-free text, [(file, line) innermost .. outermost]), labels."""
    loc, pending, labels, ins = None, [], {}, []
    for l in f:
        m = re.match(r'\s*//## File "(.*?)", line (\d+)(?: inlined at "(.*?)", line (\d+))?', l)
        if m:
            pending.append((m.group(1).split("/")[-1], int(m.group(2))))
            continue
        m = re.match(r"(\.L_x_\d+):", l)
        if m:
            labels[m.group(1)] = len(ins)
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", l)
        if m:
            if pending:
                loc, pending = pending, []
            text = re.sub(r"^@!?U?P\w+\s+", "", m.group(2))
            ins.append((text.split()[0], text, loc))
    return ins, labels


def phase_of(loc):
    outer = loc[-1]
    for name, a, b in PHASES:
        if outer[0] == "tc_common.cuh" and a <= outer[1] <= b:
            if name == "p3 L,P":
                for f, ln in loc:
                    if f == "v4_levels.cu":
                        for lname, la, lb in LP_PHASES:
                            if la <= ln <= lb:
                                return lname
                        return "p3 lp other"
            return name
    return "other"


def loops(ins, labels):
    out = []
    for i, (op, text, loc) in enumerate(ins):
        m = re.search(r"BRA\s+`\((\.L_x_\d+)\)", text)
        if m and labels[m.group(1)] < i:
            j = labels[m.group(1)]
            key = (f"{loc[-1][0]}:{loc[-1][1]}", f"{loc[0][0]}:{loc[0][1]}")
            out.append((j, i, key))
    # main / remainder: of two disjoint loops with one key the longer is the main one
    weight = []
    for j, i, key in out:
        t = TRIPS.get(key)
        if t is None:
            t = 1  # unknown (e.g. a convergence branch): counted once
        if isinstance(t, tuple):
            same = [(b - a) for a, b, k in out if k == key and not (a <= j and i <= b and (a, b) != (j, i))
                    and not (j <= a and b <= i and (a, b) != (j, i))]
            t = t[0] if (i - j) == max(same) else t[1]
        weight.append((j, i, key, t))
    return weight


def analyse(lines, sub):
    ins, labels = parse(function(lines, sub))
    lw = loops(ins, labels)
    stat = collections.defaultdict(collections.Counter)
    dyn = collections.defaultdict(collections.Counter)
    for i, (op, text, loc) in enumerate(ins):
        w = 1.0
        for j, k, key, t in lw:
            if j <= i <= k:
                w *= t
        for f, a, b, fac in BRANCHES:
            if any(fr == f and a <= ln <= b for fr, ln in loc):
                w *= fac
                break
        ph = phase_of(loc)
        cls = "other"
        for name, rx in CLASSES:
            if re.match(rx, text):
                cls = name
                break
        for c in (cls, "all"):
            stat[ph][c] += 1
            dyn[ph][c] += w
        for rx, wf in WAVES:
            if re.match(rx, text):
                if wf == 4 and text.startswith("LDS.128") and any(fr == "tc_common.cuh" and ln in (307, 308) for fr, ln in loc):
                    # ld8f: 8, except where both half-warps read one row (lp's G_m, phase 5's G_C):
                    # 16 distinct addresses at a 32-byte stride, each bank 4 times
                    # (lp's G_r and G_m loads both carry line 74 in nvcc 13.0's line table, so
                    # lp's G_m is counted at 8: up to 0.05 ms too much smem for the build)
                    shared_row = any(f in (("v4_levels.cu", 75), ("tc_common.cuh", 537)) for f in loc)
                    wf = 4 if shared_row else 8
                dyn[ph]["smem wavefronts"] += w * wf
                break
        if cls in ("LDS", "STS"):
            width = text.split()[0].split(".")
            wd = next((x for x in width[1:] if x in ("U8", "S8", "U16", "S16", "64", "128")), "32")
            stat[ph][f"{cls}.{wd}"] += 1
            dyn[ph][f"{cls}.{wd}"] += w
    return stat, dyn, lw


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    lines = disasm(sys.argv[1])
    names = sys.argv[2:] or list(KERNELS)
    cols = ["all", "MUFU.EX2", "HMMA", "LDSM", "LDS", "STS", "LDL/STL", "LD/ST generic", "BAR", "LDGSTS", "LDG", "STG",
            "FFMA", "FMUL", "FADD", "F2F/F2FP"]
    for name in names:
        sub = KERNELS.get(name, name)
        stat, dyn, lw = analyse(lines, sub)
        print(f"\n## {name} ({sub}); per thread-slot of one block: static / dynamic warp instructions per warp")
        print("| phase | " + " | ".join(cols) + " |")
        print("|" + " --- |" * (len(cols) + 1))
        tot_s, tot_d = collections.Counter(), collections.Counter()
        order = [p[0] for p in PHASES[:3]] + [p[0] for p in LP_PHASES] + ["p3 lp other", "p3 L,P"] + \
                [p[0] for p in PHASES[4:]] + ["other"]
        for ph in order:
            if ph not in stat:
                continue
            tot_s.update(stat[ph]), tot_d.update(dyn[ph])
            print(f"| {ph} | " + " | ".join(f"{stat[ph][c]} / {dyn[ph][c]:.0f}" for c in cols) + " |")
        print("| total | " + " | ".join(f"{tot_s[c]} / {tot_d[c]:.0f}" for c in cols) + " |")
        bps = BLOCKS / SMS  # blocks per SM, one after another (time per block, not latency)
        ms = lambda clocks: clocks * bps / CLOCK * 1e3
        print("\nestimated ms for 8192 blocks (throughput bounds, not latency): issue = 2 warps per SMSP x "
              "dynamic instructions; MUFU = 2 x 8 clocks x EX2; smem = 8 warps x wavefronts; HMMA = 2 x 2 clocks")
        print("| phase | issue | MUFU | smem | HMMA |\n| --- | --- | --- | --- | --- |")
        tot = collections.Counter()
        for ph in order:
            if ph not in dyn:
                continue
            d = dyn[ph]
            row = (ms(2 * d["all"]), ms(16 * d["MUFU.EX2"]), ms(WARPS * d["smem wavefronts"]), ms(4 * d["HMMA"]))
            tot.update(dict(zip("abcd", row)))
            print(f"| {ph} | " + " | ".join(f"{x:.3f}" for x in row) + " |")
        print("| total | " + " | ".join(f"{tot[k]:.3f}" for k in "abcd") + " |")
        widths = sorted(k for k in tot_s if k.startswith(("LDS.", "STS.")))
        print("widths (static / dynamic): " + ", ".join(f"{k} {tot_s[k]} / {tot_d[k]:.0f}" for k in widths))
        print("loops: " + "; ".join(f"{k[0]}<-{k[1]} len {b - a + 1} x{t:g}" for a, b, k, t in lw))


if __name__ == "__main__":
    main()
