#!/usr/bin/env python3
"""optimized/cuda/bench/logs_session8/rung9_sass_trace.py SASS LINE [depth] (rung 9 against rung 8): the expression of the value stored by the STS at LINE (1-based),
each register traced back to its latest definition above it (straight-line code assumed)."""
import re, sys
L = open(sys.argv[1]).read().split("\n")
ln = int(sys.argv[2]) - 1
maxd = int(sys.argv[3]) if len(sys.argv) > 3 else 12
INS = re.compile(r"\s*/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?)\s*;")
def parse(i):
    m = INS.match(L[i])
    if not m: return None
    ops = [o.strip() for o in re.split(r",(?![^\[]*\])", m.group(3))] if m.group(3) else []
    return m.group(2), ops
def defn(reg, i):
    base = reg.lstrip("-|").split(".")[0]
    for j in range(i - 1, max(0, i - 3000), -1):
        p = parse(j)
        if not p: continue
        op, ops = p
        if not ops or op.startswith(("ST", "BRA", "BAR", "BSYNC", "BSSY", "WARPSYNC", "NOP", "EXIT")): continue
        d = ops[0]
        m = re.match(r"R(\d+)", d)
        if not m: continue
        n = int(m.group(1))
        width = 4 if op.endswith(".128") else (2 if op.endswith(".64") or op in ("DADD", "DMUL", "DFMA", "F2F.F64.F32") else 1)
        bm = re.match(r"R(\d+)", base)
        if bm and n <= int(bm.group(1)) < n + width:
            return j, op, ops[1:], int(bm.group(1)) - n
    return None
def expr(reg, i, d=0):
    neg = "-" if reg.startswith("-") else ""
    if not reg.lstrip("-").startswith("R") or reg.lstrip("-") == "RZ": return reg
    if d > maxd: return neg + "..."
    r = defn(reg, i)
    if not r: return neg + "IN"
    j, op, srcs, k = r
    if op.startswith(("LDG", "LDS", "LDC", "LDL", "S2R", "MUFU", "I2F", "F2F", "PRMT", "SHF", "IMAD", "LOP3", "MOV", "SEL", "FSEL", "IADD3", "LEA")):
        tag = op + (f"[{k}]" if k else "")
        if op.startswith("MUFU"): return neg + tag + "(" + expr(srcs[0], j, d + 1) + ")"
        if op.startswith("F2F"): return neg + tag + "(" + expr(srcs[0], j, d + 1) + ")"
        if op in ("MOV", "IMAD.MOV.U32", "IMAD.MOV"): return neg + expr(srcs[-1], j, d + 1)
        return neg + tag + f"@{j+1}"
    return neg + op + "(" + ", ".join(expr(s, j, d + 1) for s in srcs) + ")"
p = parse(ln)
print(L[ln].strip())
print(expr(p[1][-1], ln))
