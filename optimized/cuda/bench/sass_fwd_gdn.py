#!/usr/bin/env python3
"""optimized/cuda/bench/sass_fwd_gdn.py -- STATIC instruction profile (not a measurement) of the
forward's intra kernel (tc_common.cuh tci::intra, KP = 128, float32 gates, V4Levels) per
"// ---- Phase N" block, GDN (GATE 1) against DeltaNet (GATE 0), and of the state kernel v2_state
per source line range. Counts are of SASS instructions in the binary (static), not executed ones;
loops are marked by their back branches (BRA to an earlier address). Check with clock64 / ncu.

Usage: sass_fwd_gdn.py V4_SASS V2_SASS   (files from `nvdisasm -c -gi X.sm_90a.cubin`)
Phase boundaries are read from tc_common.cuh's "// ---- Phase" comments at run time.
"""
import collections, re, sys, os

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CLASSES = [("MUFU", r"^MUFU"), ("HMMA", r"^HMMA"), ("LDSM", r"^LDSM"), ("LDS", r"^LDS(\.|\s|$)"),
           ("STS", r"^STS"), ("LDG", r"^(LDG|LD)\.E"), ("STG", r"^(STG|ST\.E)"), ("LDGSTS", r"^LDGSTS"),
           ("BAR", r"^BAR"), ("DEPBAR", r"^(DEPBAR|LDGDEPBAR)"), ("SHFL", r"^SHFL")]


from sass_phases import function as func  # the kernel's lines in nvdisasm output (shared reader)


def parse(f):
    """[(address, opcode, operands, inline chain innermost..outermost, back-branch?)]; `@!PT`
    (never-executed padding, e.g. the `@!PT LDS RZ, [RZ]` before each LDGSTS) is dropped."""
    frames, ins, labels, pend, cur = [], [], {}, None, []
    for l in f:
        m = re.match(r"^(\.L_x_\d+):", l)
        if m:
            pend = m.group(1)
        m = re.match(r'\s*//## File "(.*?)", line (\d+)(?: inlined at "(.*?)", line (\d+))?', l)
        if m:
            if not m.group(3):
                frames.append((os.path.basename(m.group(1)), int(m.group(2))))
                cur = list(frames)
                frames = []
            else:
                frames.append((os.path.basename(m.group(1)), int(m.group(2))))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][\w.]*)(.*?);", l)
        if m:
            addr = int(m.group(1), 16)
            if pend:
                labels[pend], pend = addr, None
            if (m.group(2) or "").strip() == "@!PT":
                continue
            ins.append([addr, m.group(3), m.group(4), cur, False])
    for x in ins:
        t = re.search(r"(\.L_x_\d+)", x[2]) if x[1] == "BRA" else None
        x[4] = bool(t) and labels.get(t.group(1), 1 << 62) < x[0]
    return ins


def body_line(chain, fname, lo, hi):
    for f, ln in reversed(chain):  # outermost first
        if f == fname and lo <= ln <= hi:
            return ln
    return None


def table(ins, bounds, fname, lo, hi):
    rows = collections.OrderedDict((n, collections.Counter()) for n, _ in bounds)
    for addr, op, rest, chain, back in ins:
        ln = body_line(chain, fname, lo, hi)
        name = "other"
        if ln is not None:
            for n, start in bounds:
                if ln >= start:
                    name = n
        rows.setdefault(name, collections.Counter())
        c = rows[name]
        c["all"] += 1
        for cn, pat in CLASSES:
            if re.match(pat, op):
                c[cn] += 1
        if op.startswith("MUFU") and "EX2" in op:
            c["EX2"] += 1
        if back:
            c["loops"] += 1
    return rows


def show(title, rows):
    cols = ["all", "EX2", "HMMA", "LDSM", "LDS", "STS", "LDG", "LDGSTS", "STG", "BAR", "DEPBAR", "SHFL", "loops"]
    print(f"\n{title}\n{'phase':22s}" + "".join(f"{c:>7s}" for c in cols))
    tot = collections.Counter()
    for n, c in rows.items():
        if c["all"]:
            print(f"{n:22s}" + "".join(f"{c[x]:7d}" for x in cols))
            tot.update(c)
    print(f"{'total':22s}" + "".join(f"{tot[x]:7d}" for x in cols))


def main():
    v4 = open(sys.argv[1]).read().split("\n")
    v2 = open(sys.argv[2]).read().split("\n")
    src = open(os.path.join(SRC, "tc_common.cuh")).read().split("\n")
    k0 = next(i + 1 for i, l in enumerate(src) if "void __launch_bounds__(kThreads) intra(" in l)
    k1 = next(i + 1 for i, l in enumerate(src) if i + 1 > k0 and l.startswith("}"))
    bounds = [("prologue", k0)]
    for i, l in enumerate(src[k0:k1], start=k0 + 1):
        m = re.search(r"// ---- Phase (\d)", l)
        if m:
            bounds.append((f"p{m.group(1)}", i))
        if l.strip().startswith("// w_aux = A"):
            bounds.append(("w_aux", i))
        if l.strip().startswith("// u = A u0"):
            bounds.append(("u (value tiles)", i))
    print("intra body lines", k0, k1, "phase starts", bounds)
    for name, sub in [("DeltaNet <128,0>", "intraILi128ELi0ELb0EfN"), ("GDN <128,1>", "intraILi128ELi1ELb0EfN")]:
        show(f"tci::intra {name}", table(parse(func(v4, sub)), bounds, "tc_common.cuh", k0, k1))
    s2 = open(os.path.join(SRC, "v2_tensorcore.cu")).read().split("\n")
    a = next(i + 1 for i, l in enumerate(s2) if "__global__ void __launch_bounds__(kThreads) v2_state(" in l)
    b = next(i + 1 for i, l in enumerate(s2) if i + 1 > a and l.startswith("}"))
    marks = [("prologue", a)]
    for i, l in enumerate(s2[a:b], start=a + 1):
        for key, nm in [("if (nchunks > 0) issue(0);", "issue(0)+loop head"),
                        ("// v_new = u - w_aux S", "w S, qg S (hi+lo)"),
                        ("#pragma unroll", None), ("__syncthreads();  // v_new complete", "barrier 2"),
                        ("// o += P v_new", "o += P v_new, store o"),
                        ("// S = Diag(exp(G_C))", "S decay + Kd^T v_new"),
                        ("store_state_bf16();  // read by", "store S hi/lo"),
                        ("if ((!kBwd || kHt) && p.ht)", "epilogue")]:
            if nm and l.strip().startswith(key):
                marks.append((nm, i))
        if "auto issue = [&](int ci)" in l:
            marks.append(("issue() body", i))
    # the u subtraction / v_new store sits between the mma loop and barrier 2
    for i, l in enumerate(s2[a:b], start=a + 1):
        if "const float2 u01" in l:
            marks.append(("v_new = u - wS -> sVn", i - 2))
    marks.sort(key=lambda x: x[1])
    for bv in (64, 16):
        show(f"v2_state<128, {bv}, false, false> (forward)", table(parse(func(v2, f"v2_stateILi128ELi{bv}ELb0ELb0E")), marks, "v2_tensorcore.cu", a, b))


if __name__ == "__main__":
    main()
