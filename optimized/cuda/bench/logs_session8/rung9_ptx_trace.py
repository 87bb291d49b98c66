#!/usr/bin/env python3
"""optimized/cuda/bench/logs_session8/rung9_ptx_trace.py PTX KERNEL_SUBSTR [N] -- rung 9 against rung 8: in the kernel, find the basic blocks (split at labels) that contain
st.shared.f32 whose value comes through >= 6 float ops; print the expression of each store's value."""
import re, sys
sys.path.insert(0, '/work/main/optimized/cuda/bench')
import ptx_fpflow as F
body = F.kernel(sys.argv[1], sys.argv[2])
blocks = re.split(r"\n\$L__\w+:\n", body)
want = int(sys.argv[3]) if len(sys.argv) > 3 else 0
def parse(b):
    defs = {}
    ins = []
    for line in b.split("\n"):
        l = line.strip().rstrip(";")
        if not l or l.startswith("//") or l.startswith("."): continue
        m = re.match(r"(@!?%p\d+\s+)?(\S+)\s+(.*)", l)
        if not m: continue
        op, args = m.group(2), [a.strip() for a in re.split(r",(?![^{]*})", m.group(3))]
        ins.append((op, args))
        if op.startswith("ld."): op = op + "#" + str(sum(1 for o, _ in ins if o.startswith("ld.global")))
        if args and not op.startswith("st") and not op.startswith("bra") and not op.startswith("bar"):
            d = args[0]
            if d.startswith("{"):
                for k, r in enumerate(d.strip("{}").split(",")):
                    defs[r.strip()] = (op + f"[{k}]", args[1:])
            else:
                defs[d] = (op, args[1:])
    return defs, ins
def expr(r, defs, depth=0):
    if depth > 14: return "..."
    if r not in defs: return "IN" if r.startswith("%") else r
    op, args = defs[r]
    if op.startswith("ld.") or op.startswith("cvt.f32.bf16") or op.startswith("mov.b32") and not args[0].startswith("%f"):
        return op.split(".")[0] + "." + ".".join(op.split(".")[1:2]) + "." + op.split("#")[-1] if op.startswith("ld.") else op.split(".")[0]
    if op.startswith("mov"): return expr(args[0], defs, depth + 1)
    return op + "(" + ", ".join(expr(a, defs, depth + 1) for a in args) + ")"
n = 0
for bi, b in enumerate(blocks):
    defs, ins = parse(b)
    sts = [a for op, a in ins if op.startswith("st.shared.f32")]
    fl = sum(1 for op, a in ins if re.match(r"(fma|mul|sub|add)\.", op))
    if sts and fl >= 30:
        n += 1
        print(f"=== block {bi}: {len(sts)} st.shared.f32, {fl} float ops")
        for a in sts[:want or 1]:
            print("  ", a[0], "=", expr(a[1], defs))
