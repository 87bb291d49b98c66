#!/usr/bin/env python3
"""optimized/cuda/bench/ptx_fpflow.py -- do two kernels do the same floating-point arithmetic in the
same order? A static check (no GPU) for changes that claim to move only addresses, loads or barriers
(e.g. backward rung 7 against rung 6, the state kernel's NS = 1 variant against NS = 2).

From one or two PTX files (`ptx_identity.py emit` makes them with a build's own flags), take the
kernel whose .entry name contains NAME_A (and the one containing NAME_B), keep the instructions that
compute or round floating-point values -- add / sub / mul / fma / neg / ex2 / rcp / div / cvt on f32
or f64, mma, ldmatrix, cvt to bf16 -- in program order, rename registers by first appearance, and
compare the two sequences. If they differ, it also compares them block by block: the kernel split at
its PTX labels, each block's sequence renamed on its own, the two multisets of blocks compared -- a
change may make the compiler lay out the same blocks in another order (backward rung 7 against rung
6 is such a case). With --addresses, [address] operands are compared too (by default replaced by
[ADDR], since the point is usually that addresses changed).

  python3 optimized/cuda/bench/ptx_fpflow.py A.ptx NAME_A [B.ptx] NAME_B [--addresses]

Exit status 0 if the sequences or the block multisets are identical, 1 if not (the first differing
position is printed).
It is conservative (operand order counts: fma(a, b, c) and fma(b, a, c) differ here, though they
round alike). It is a necessary condition for bit-identical results, not a sufficient one: it does not see
which values are loaded (a wrong address with the same arithmetic passes: the device tests catch
that). Written from helper occ6's check (session 6), which caught a swapped pair of products that a
count of operation names missed."""
import collections
import re
import sys

FP = re.compile(r"(@!?%p\d+\s+)?((?:add|sub|mul|fma|neg|ex2|div|rcp|min|max|abs|cvt)\.[\w.]*f(?:32|64)[\w.]*|mma\.[\w.]+|ldmatrix[\w.]*|cvt\.rn\.bf16x2\.f32)\s+(.*)")


def kernel(ptx, name):
    s = open(ptx).read()
    hits = [m.start() for m in re.finditer(r"\.entry\s+(\S*)", s) if name in s[m.start(): m.start() + 400].split("(")[0]]
    if len(hits) != 1:
        sys.exit(f"{ptx}: {len(hits)} .entry names contain {name!r} (need exactly one)")
    i = hits[0]
    return s[i: s.index("\n}\n", i)]


def seq(body, addresses):
    out = []
    for line in body.split("\n"):
        m = FP.match(line.strip())
        if not m:
            continue
        ops = m.group(3)
        if not addresses:
            ops = re.sub(r"\[[^\]]*\]", "[ADDR]", ops)
        out.append(m.group(2) + " " + ops)
    names = {}

    def ren(x):
        return names.setdefault(x.group(0), f"R{len(names)}")

    return [re.sub(r"%[a-z]+\d+", ren, x) for x in out]


def blocks(body, addresses):
    """The multiset of per-block sequences (split at PTX labels; registers renamed per block)."""
    out = collections.Counter()
    for b in re.split(r"\n\$L__\w+:\n", body):
        sq = seq(b, addresses)
        if sq:
            out[tuple(sq)] += 1
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    addresses = "--addresses" in sys.argv
    if len(args) == 3:
        pa, na, nb = args
        pb = pa
    elif len(args) == 4:
        pa, na, pb, nb = args
    else:
        sys.exit(__doc__)
    ka, kb = kernel(pa, na), kernel(pb, nb)
    a, b = seq(ka, addresses), seq(kb, addresses)
    print(f"{na}: {len(a)} floating-point / mma / ldmatrix instructions; {nb}: {len(b)}")
    if a == b:
        print("identical sequences (registers renamed by first appearance"
              + (", addresses compared)" if addresses else ", addresses ignored)"))
        return 0
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    print(f"sequences differ, first at position {k}:")
    for i in range(max(0, k - 2), min(k + 3, max(len(a), len(b)))):
        print(f"  {i:6d}  {a[i] if i < len(a) else '-':60.60s} | {b[i] if i < len(b) else '-'}")
    ba, bb = blocks(ka, addresses), blocks(kb, addresses)
    if ba == bb:
        print(f"block by block: the same {sum(ba.values())} blocks (multisets equal): the same arithmetic laid out in another order")
        return 0
    print(f"block by block: {sum((ba - bb).values())} blocks only in the first kernel, {sum((bb - ba).values())} only in the second")
    return 1


if __name__ == "__main__":
    sys.exit(main())
