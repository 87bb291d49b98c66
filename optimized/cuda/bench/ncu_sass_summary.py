#!/usr/bin/env python3
"""ncu_sass_summary.py -- where a kernel's instructions and stall samples go, from an Nsight Compute
source page exported as CSV on the GPU machine:

    ncu -i REPORT.ncu-rep --page source --csv --print-source sass > K.sass.csv
    python3 optimized/cuda/bench/ncu_sass_summary.py K.sass.csv [--window 64] [--top 12] [--show A:B]

Prints (1) executed instructions and warp-stall samples per opcode (the part before the first '.'),
(2) the windows of --window consecutive SASS instructions with the most executed instructions, with
their opcode mix (a window inside a hot loop shows what the loop does), (3) the single instructions
with the most stall samples, (4) with --epochs, the shares of both counts between consecutive BAR.SYNC
instructions (a kernel's barrier intervals, in SASS order; a loop with a barrier inside is one interval), and
with --show A:B the SASS lines A..B with both counts. Session 16 used --epochs on session 14's profiles of
rung 9's intra kernel (bench/logs_session16/static/). The CSV's
first line names the kernel, the second holds the column names. Session 6 used it on call 4's
profiles (bench/logs_session6/call4/ncu_text.tar.xz; RESULTS.md, "Session 6: ncu").
"""
import argparse
import collections
import csv
import sys


def load(path):
    rows = list(csv.reader(open(path, newline="")))
    if len(rows) < 3:
        sys.exit(f"{path}: expected a kernel line, a header line and SASS rows; got {len(rows)} lines")
    hdr = rows[1]
    try:
        ia, iss, iex = hdr.index("Source"), hdr.index("Warp Stall Sampling (All Samples)"), hdr.index("Instructions Executed")
    except ValueError as e:
        sys.exit(f"{path}: column missing ({e}); export with --page source --csv --print-source sass")
    out = []
    for r in rows[2:]:
        toks = r[ia].strip().split()
        op = (toks[1] if toks and toks[0].startswith("@") and len(toks) > 1 else (toks[0] if toks else "")).split(".")[0]
        out.append((r[ia].strip(), op, int(r[iex] or 0), int(r[iss] or 0)))
    return (rows[0][1] if len(rows[0]) > 1 else (rows[0][0] if rows[0] else "?")), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--window", type=int, default=64)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--show", default="")
    ap.add_argument("--epochs", action="store_true", help="shares between consecutive BAR.SYNC instructions")
    a = ap.parse_args()
    kernel, ins = load(a.csv)
    te = sum(x[2] for x in ins) or 1
    ts = sum(x[3] for x in ins) or 1
    print(f"{kernel}\n{len(ins)} SASS instructions, {te:,} warp instructions executed, {ts:,} stall samples")
    by = collections.defaultdict(lambda: [0, 0])
    for _, op, e, s in ins:
        by[op][0] += e
        by[op][1] += s
    print("\nopcode      executed  stall samples")
    for op, (e, s) in sorted(by.items(), key=lambda x: -x[1][0])[: a.top * 2]:
        print(f"{op:10s} {100 * e / te:7.1f}% {100 * s / ts:9.1f}%")
    print(f"\nhottest windows of {a.window} instructions (executed %, stall %, opcode mix by executed %)")
    wins = []
    for w0 in range(0, len(ins), a.window):
        ch = ins[w0 : w0 + a.window]
        e = sum(x[2] for x in ch)
        mix = collections.Counter()
        for _, op, ei, _ in ch:
            mix[op] += ei
        wins.append((e, sum(x[3] for x in ch), w0, mix))
    for e, s, w0, mix in sorted(wins, reverse=True)[: a.top]:
        m = ", ".join(f"{op} {100 * c // max(e, 1)}" for op, c in mix.most_common(7))
        print(f"[{w0:6d}] {100 * e / te:5.1f}% {100 * s / ts:5.1f}%  {m}")
    print("\ninstructions with the most stall samples")
    for i, (src, _, e, s) in sorted(enumerate(ins), key=lambda x: -x[1][3])[: a.top]:
        print(f"[{i:6d}] {100 * s / ts:5.1f}% of samples, executed {e:,}: {src[:80]}")
    if a.epochs:
        print("\nbarrier intervals: SASS lines, executed %, stall %")
        start = 0
        for i, (src, _, _, _) in enumerate(ins):
            if "BAR.SYNC" in src or i == len(ins) - 1:
                ch = ins[start : i + 1]
                print(f"[{start:6d}-{i:6d}] {100 * sum(x[2] for x in ch) / te:5.1f}% {100 * sum(x[3] for x in ch) / ts:5.1f}%")
                start = i + 1
    if a.show:
        lo, hi = (int(x) for x in a.show.split(":"))
        print(f"\nSASS {lo}..{hi} (executed, stall samples)")
        for i in range(max(lo, 0), min(hi, len(ins))):
            src, _, e, s = ins[i]
            print(f"{i:6d} {e:10d} {s:6d}  {src[:90]}")


if __name__ == "__main__":
    main()
