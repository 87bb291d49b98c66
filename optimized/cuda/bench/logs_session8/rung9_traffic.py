#!/usr/bin/env python3
"""optimized/cuda/bench/logs_session8/rung9_traffic.py -- rung 9's per-block global traffic from bwd_traffic_model.py's rung 7/8 lists (ours_now): the
extras kernel removed; the grads kernel without its ws.E / Qg / Kd reads, with g read and G written
(prologue, gated ops), k and G read again for E's staging. L2-level bytes (every pass counted)."""
import sys
sys.path.insert(0, "/work/main/optimized/cuda/bench/models")
import bwd_traffic_model as M
from bwd_traffic_model import acc, C, BF, F64, GATE
for op in ["dn", "gdn", "kda", "gdn2"]:
    s = M.Shape(8, 4096, 16, 128, 128, op)
    ks = dict((n, a) for n, _, a in M.ours_now(s))
    g8 = ks["grads (bwd_grads_tc V7Mid)"]
    ex8 = ks["extras (bwd3_extras)"]
    drop = {"ws.E", "ws.Qg", "ws.Kd"}
    g9 = [a for a in g8 if a["name"] not in drop]
    g9 += [acc("k", "R", C * s.K, BF)]  # E's staging (per K slab, once over K)
    if op == "gdn2":
        g9 += [acc("b_gate", "R", C * s.K, GATE)]  # b again in E's staging
    if s.KG:
        g9 += [acc("g_chan" if s.chan else "g_scalar", "R", C * s.KG, GATE), acc("ws.G", "W", C * s.KG, F64),
               acc("ws.G", "R", C * s.KG, F64)]  # prologue: g in, G out; G again for E's staging
    r8, w8 = M.kernel_bytes(s, g8); r9, w9 = M.kernel_bytes(s, g9); re, we = M.kernel_bytes(s, ex8)
    kb = lambda x: f"{x / 1024:.1f}"
    print(f"{op:5s} per block (KB): extras R {kb(re)} W {kb(we)} | grads v8 R {kb(r8)} W {kb(w8)} | grads v9 R {kb(r9)} W {kb(w9)} | "
          f"extras + grads v8 {kb(re + we + r8 + w8)} -> v9 {kb(r9 + w9)} ({(r9 + w9) / (re + we + r8 + w8) - 1:+.1%}); "
          f"whole call (MB): {(re + we + r8 + w8) * s.B * s.T // C * s.H / 1e6:.0f} -> {(r9 + w9) * s.B * s.T // C * s.H / 1e6:.0f}")
