#!/usr/bin/env python3
"""optimized/cuda/bench/models/bwd_traffic_model.py -- global-memory traffic of the CUDA chunked
backward, ours (rung 7/8 today) and fla's (flash-linear-attention), and of the target design of
bench/analysis_bwd_plan.md, per kernel, at a given B, T, H, K, V (chunk C = 64); and the WY-side kernel
G2 of backward rungs 10 and 11 alone (DeltaNet, GDN). No GPU.

Each kernel is a list of accesses (tensor, R/W, elements per (chunk, head), dtype bytes, L2-level
count, unique count). 'L2-level' counts every pass a kernel makes over the data (what ncu's L2
sectors see); 'unique' counts each byte once (the DRAM floor if every repeat hits L2). Ours are read
off the code (bwd_common.cuh bwd_grads_tc, bwd_v4_tc_tail.cu, bwd_v6_tc_b9.cuh, bwd_v3_async.cu,
tc_common.cuh / v2_tensorcore.cu workspace); fla's off its source (.fla/fla/ops/delta_rule/chunk.py,
wy_fast.py, common/chunk_delta_h.py, common/chunk_o.py, kda/chunk_bwd.py, kda/chunk_intra.py).
Measured times are torch.profiler kernel records (bench/logs_session7/call2/profile.log; calls 1, 5, 6
of logs_session7/README.md); estimates are marked as such.

Self-checks (assert):
  1. per access, bytes per block x blocks == the whole tensor's size x count, the size taken from an
     independent table of global tensors (catches a wrong dtype or shape in a kernel's list);
  2. the workspace arrays our kernels touch == the code's formulas bwd_ws_bytes (bwd_common.cuh)
     and tc_workspace_bytes (v2_tensorcore.cu), transcribed;
  3. per design, the sum over kernels == the sum over tensors (grouped by tensor, then by kernel);
  4. at B=8 T=4096 H=16 K=V=128 our DeltaNet grads kernel's L2-level bytes are within 3% of ncu's
     L2 sectors minus its excess sectors (logs_session7/call3/grads7_dn.details.txt: 391,118,848 and
     67,567,616 sectors of 32 bytes).

Usage: python3 bwd_traffic_model.py [--B 8 --T 4096 --H 16 --K 128 --V 128] [--op dn|gdn|kda|gdn2]
       [--markdown]
"""
import argparse
import math
from collections import defaultdict

C = 64
BF, F32, F64 = 2, 4, 8
GATE = F32  # the benchmark's gates (beta, g, b, w) are float32


class Shape:
    def __init__(self, B, T, H, K, V, op):
        assert T % C == 0, "the checks assume whole chunks (T % 64 == 0)"
        self.B, self.T, self.H, self.K, self.V, self.op = B, T, H, K, V, op
        self.NT = T // C
        self.blocks = B * H * self.NT           # (chunk, head) pairs
        self.rows = B * T * H                   # (token, head) pairs
        self.KG = {"dn": 0, "gdn": 1, "kda": K, "gdn2": K}[op]   # gate width (bwd_common gate_width)
        self.KP = 64 if K <= 64 else 128        # tc_pick_kp
        self.VP = (V + 15) // 16 * 16           # vpad (tc_common): a multiple of 16 (V = 128: 128)
        self.chan = op in ("kda", "gdn2")


# ------------------------------------------------------------------------------------------------
# The global tensors, sized independently of any kernel: name -> (dtype bytes, total elements).
# ------------------------------------------------------------------------------------------------
def tensors(s):
    r, K, V, st = s.rows, s.K, s.V, s.blocks * s.K * s.V
    t = {
        # inputs and outputs [B, T, H, *]
        "q": (BF, r * K), "k": (BF, r * K), "v": (BF, r * V), "do": (BF, r * V),
        "beta": (GATE, r), "g_scalar": (GATE, r), "g_chan": (GATE, r * K),
        "b_gate": (GATE, r * K), "w_gate": (GATE, r * V),
        "dq": (BF, r * K), "dk": (BF, r * K), "dv": (BF, r * V), "dbeta": (GATE, r),
        "dg_scalar": (GATE, r), "dg_chan": (GATE, r * K), "db_gate": (GATE, r * K), "dw_gate": (GATE, r * V),
        # ours: the forward's chunk-major bf16 workspace (tc_common.cuh), per (chunk, head)
        "tc.w": (BF, s.blocks * C * s.KP), "tc.qt": (BF, s.blocks * C * s.KP), "tc.kt": (BF, s.blocks * C * s.KP),
        "tc.P": (BF, s.blocks * C * C), "tc.u": (F32, s.blocks * C * s.VP), "tc.gC": (F32, s.blocks * s.KP),
        # ours: the backward's float32 workspace (bwd_common.cuh BWs), [rows, W] and [chunks, H, K, V]
        "ws.G": (F64, r * s.KG), "ws.E": (F32, r * K), "ws.Qg": (F32, r * K), "ws.Kd": (F32, r * K),
        "ws.wa": (F32, r * K), "ws.vn": (F32, r * V), "ws.dvn": (F32, r * V), "ws.P": (F32, r * C),
        "ws.A": (F32, r * C), "ws.S": (F32, st), "ws.dS": (F32, st), "ws.dQg": (F32, r * K),
        "ws.dKd": (F32, r * K), "ws.dwa": (F32, r * K), "ws.dE": (F32, r * K), "ws.deL": (F32, r * K),
        "ws.dqP": (F32, r * K), "ws.dkLP": (F32, r * K), "ws.dGc": (F32, r * K), "ws.du0": (F32, r * V),
        # target: new intermediates
        "t.dkpart": (F32, r * K), "t.dwa": (F32, r * K), "t.dGpart_chan": (F32, r * K),
        "t.dGpart_scalar": (F32, 2 * r), "t.dGlast": (F32, s.blocks * K), "t.Gf32": (F32, r * s.KG),
        "t.S16": (BF, st), "t.dS16": (BF, st), "t.vn16": (BF, r * V), "t.dvn16": (BF, r * V),
        # fla (bf16 unless noted; kda/chunk_bwd.py allocates dq, dk, dg, db, dA in float32)
        "fla.A": (BF, r * C), "fla.w": (BF, r * K), "fla.u": (BF, r * V), "fla.h": (BF, st),
        "fla.vnew": (BF, r * V), "fla.dv": (BF, r * V), "fla.dh": (BF, st), "fla.dv2": (BF, r * V),
        "fla.dw": (BF, r * K), "fla.dq": (BF, r * K), "fla.dk": (BF, r * K), "fla.dk2": (BF, r * K),
        "fla.qg": (BF, r * K), "fla.kg": (BF, r * K), "fla.gcum": (F32, r * K), "fla.gcum_last": (F32, s.blocks * K),  # its last row per chunk
        "fla.Aqk": (BF, r * C),
        "fla.dAqk": (F32, r * C), "fla.dAkk": (F32, r * C), "fla.dq32": (F32, r * K), "fla.dk32": (F32, r * K),
        "fla.dg32": (F32, r * K), "fla.db32": (F32, r), "fla.dq2": (F32, r * K), "fla.dk2_32": (F32, r * K),
        "fla.dg2": (F32, r * K), "fla.db2": (F32, r),
    }
    return t


def acc(name, rw, elems, dtype, n=1, uniq=None):
    """One access: tensor name, 'R' or 'W', elements per (chunk, head), dtype bytes, L2-level count n,
    unique count (default n)."""
    return dict(name=name, rw=rw, elems=elems, dtype=dtype, n=n, uniq=n if uniq is None else uniq)


def gate_reads(s, with_g=True):
    """beta (or GDN2's b, w) and the log-decay g, per (chunk, head)."""
    a = []
    if s.op == "gdn2":
        a += [acc("b_gate", "R", C * s.K, GATE), acc("w_gate", "R", C * s.V, GATE)]
    else:
        a += [acc("beta", "R", C, GATE)]
    if with_g and s.op == "gdn":
        a += [acc("g_scalar", "R", C, GATE)]
    if with_g and s.chan:
        a += [acc("g_chan", "R", C * s.K, GATE)]
    return a


def gate_writes(s):
    a = []
    if s.op == "gdn2":
        a += [acc("db_gate", "W", C * s.K, GATE), acc("dw_gate", "W", C * s.V, GATE)]
    else:
        a += [acc("dbeta", "W", C, GATE)]
    if s.op == "gdn":
        a += [acc("dg_scalar", "W", C, GATE)]
    if s.chan:
        a += [acc("dg_chan", "W", C * s.K, GATE)]
    return a


# ------------------------------------------------------------------------------------------------
# Ours today (rung 7 + e1e2f97's full-width stores; rung 8 moves the same bytes).
# ------------------------------------------------------------------------------------------------
def ours_now(s):
    K, V, KP, VP, KG = s.K, s.V, s.KP, s.VP, s.KG
    nv = math.ceil(V / 64)   # BV = 64 value tiles of states / dstates (each reads the whole K side)
    nk = math.ceil(K / 64)   # grads: the K loop re-stages do, v_new, dv_new per 64-channel slab
    prep = [acc("q", "R", C * K, BF), acc("k", "R", C * K, BF), acc("v", "R", C * V, BF)] + gate_reads(s) + [
        acc("tc.w", "W", C * KP, BF), acc("tc.qt", "W", C * KP, BF), acc("tc.kt", "W", C * KP, BF),
        acc("tc.P", "W", C * C, BF), acc("tc.u", "W", C * VP, F32), acc("tc.gC", "W", KP, F32),
        acc("ws.A", "W", C * C, F32)]
    extras = [acc("q", "R", C * K, BF), acc("k", "R", C * K, BF)] + gate_reads(s) + [
        acc("ws.E", "W", C * K, F32), acc("ws.Qg", "W", C * K, F32), acc("ws.Kd", "W", C * K, F32)]
    if KG:
        extras.append(acc("ws.G", "W", C * KG, F64))
    states = [acc("tc.w", "R", C * KP, BF, nv, 1), acc("tc.kt", "R", C * KP, BF, nv, 1),
              acc("tc.u", "R", C * VP, F32), acc("tc.gC", "R", KP, F32, nv, 1),
              acc("ws.S", "W", K * V, F32), acc("ws.vn", "W", C * V, F32)]
    dstates = [acc("tc.w", "R", C * KP, BF, nv, 1), acc("tc.qt", "R", C * KP, BF, nv, 1),
               acc("tc.kt", "R", C * KP, BF, nv, 1), acc("tc.P", "R", C * C, BF, nv, 1),
               acc("do", "R", C * V, BF), acc("tc.gC", "R", KP, F32, nv, 1),
               acc("ws.dS", "W", K * V, F32), acc("ws.dvn", "W", C * V, F32)]
    grads = [
        # staging: A once; per (K slab, V slab) do, v_new, dv_new (again for every K slab), S, dS' rows
        acc("ws.A", "R", C * C, F32), acc("do", "R", C * V, BF, nk, 1), acc("ws.vn", "R", C * V, F32, nk, 1),
        acc("ws.dvn", "R", C * V, F32, nk, 1), acc("v", "R", C * V, BF), acc("ws.S", "R", K * V, F32),
        acc("ws.dS", "R", K * V, F32), acc("ws.E", "R", C * K, F32),
        # B9 slabs: k and q (per-channel gates: G too)
        acc("k", "R", C * K, BF), acc("q", "R", C * K, BF),
        # epilogues of B4, B8 and B9 (float32 [rows, K] / [rows, V]); dw_aux is stored, never read again
        acc("ws.du0", "W", C * V, F32), acc("ws.dQg", "W", C * K, F32), acc("ws.dKd", "W", C * K, F32),
        acc("ws.dwa", "W", C * K, F32), acc("ws.dE", "W", C * K, F32), acc("ws.deL", "W", C * K, F32),
        acc("ws.dqP", "W", C * K, F32), acc("ws.dkLP", "W", C * K, F32),
        # tail (a): nine float32 [rows, K] arrays, q, k; writes dq, dk and de (over deL)
        acc("ws.dE", "R", C * K, F32), acc("ws.dQg", "R", C * K, F32), acc("ws.dKd", "R", C * K, F32),
        acc("ws.deL", "R", C * K, F32), acc("ws.dqP", "R", C * K, F32), acc("ws.dkLP", "R", C * K, F32),
        acc("ws.E", "R", C * K, F32), acc("ws.Qg", "R", C * K, F32), acc("ws.Kd", "R", C * K, F32),
        acc("q", "R", C * K, BF), acc("k", "R", C * K, BF),
        acc("dq", "W", C * K, BF), acc("dk", "W", C * K, BF), acc("ws.deL", "W", C * K, F32),
        # dv pass: du0, v -> dv
        acc("ws.du0", "R", C * V, F32), acc("v", "R", C * V, BF), acc("dv", "W", C * V, BF),
        # (b) per channel: sum_i dKd Kd (run for every operator), (c) per token: dbeta
        acc("ws.dKd", "R", C * K, F32), acc("ws.Kd", "R", C * K, F32),
        acc("ws.deL", "R", C * K, F32), acc("k", "R", C * K, BF), acc("ws.du0", "R", C * V, F32),
        acc("v", "R", C * V, BF)] + gate_writes(s)
    if s.op == "gdn2":   # b in B9's slabs and the tail, w in the staging and the dv pass
        grads += [acc("b_gate", "R", C * K, GATE, 2, 1), acc("w_gate", "R", C * V, GATE, 2, 1)]
    else:
        grads += [acc("beta", "R", C, GATE)]
    if KG:   # G (float64) in B9's slabs (per channel), in the tail (a) and (b)
        grads += [acc("ws.G", "R", C * KG, F64, 2 if s.chan else 1, 1)]
    return [("prepare (tci::intra + A)", "F1-F5", prep),
            ("extras (bwd3_extras)", "F1-F2 f32/f64", extras),
            ("states (v2_state kBwd)", "F6-F7", states),
            ("dstates (bwd3_dstates)", "B1 B3", dstates),
            ("grads (bwd_grads_tc V7Mid)", "B2 B4-B11", grads)]


# ------------------------------------------------------------------------------------------------
# fla, DeltaNet (delta_rule/chunk.py chunk_delta_rule_bwd) and KDA (kda/chunk_bwd.py chunk_kda_bwd).
# ------------------------------------------------------------------------------------------------
def fla(s):
    K, V = s.K, s.V
    if s.op == "dn":
        return [
            ("recompute_w_u_fwd", "F5 (w, u)", [acc("k", "R", C * K, BF), acc("v", "R", C * V, BF),
                                                acc("beta", "R", C, GATE), acc("fla.A", "R", C * C, BF),
                                                acc("fla.w", "W", C * K, BF), acc("fla.u", "W", C * V, BF)]),
            ("fwd_h (recompute)", "F6-F7 (h, v_new)", [acc("k", "R", C * K, BF), acc("fla.w", "R", C * K, BF),
                                                        acc("fla.u", "R", C * V, BF), acc("fla.h", "W", K * V, BF),
                                                        acc("fla.vnew", "W", C * V, BF)]),
            ("chunk_bwd_dv_local", "B1 (P^T do)", [acc("q", "R", C * K, BF), acc("k", "R", C * K, BF),
                                                    acc("do", "R", C * V, BF), acc("fla.dv", "W", C * V, BF)]),
            ("bwd_dhu", "B1 (+Kd dS') B3", [acc("q", "R", C * K, BF), acc("k", "R", C * K, BF),
                                            acc("fla.w", "R", C * K, BF), acc("do", "R", C * V, BF),
                                            acc("fla.dv", "R", C * V, BF), acc("fla.dh", "W", K * V, BF),
                                            acc("fla.dv2", "W", C * V, BF)]),
            ("chunk_bwd_dqkwg", "B4 B5 B9(P) B10(q)", [
                acc("fla.vnew", "R", C * V, BF), acc("do", "R", C * V, BF), acc("fla.h", "R", K * V, BF),
                acc("fla.dh", "R", K * V, BF), acc("fla.dv2", "R", C * V, BF), acc("q", "R", C * K, BF),
                acc("k", "R", C * K, BF), acc("fla.dw", "W", C * K, BF), acc("dq", "W", C * K, BF),
                acc("fla.dk", "W", C * K, BF)]),
            ("prepare_wy_repr_bwd", "B6 B7 B8 B9(L) B10(e)", [
                acc("beta", "R", C, GATE), acc("fla.A", "R", C * C, BF), acc("v", "R", C * V, BF),
                acc("fla.dv2", "R", C * V, BF), acc("k", "R", C * K, BF, 2, 1), acc("fla.dw", "R", C * K, BF),
                acc("fla.dk2", "W", C * K, BF), acc("fla.dk2", "R", C * K, BF), acc("fla.dk2", "W", C * K, BF),
                acc("dv", "W", C * V, BF), acc("dbeta", "W", C, GATE)]),
            ("4 bf16 adds (dk += dk2; 3 in the harness)", "-", [
                acc("fla.dk", "R", C * K, BF, 4), acc("fla.dk2", "R", C * K, BF, 4), acc("dk", "W", C * K, BF, 4)]),
        ]
    if s.op == "kda":
        return [
            ("recompute_w_u_fwd (kda)", "F2 F5", [acc("q", "R", C * K, BF), acc("k", "R", C * K, BF),
                                                  acc("v", "R", C * V, BF), acc("beta", "R", C, GATE),
                                                  acc("fla.A", "R", C * C, BF), acc("fla.gcum", "R", C * K, F32),
                                                  acc("fla.w", "W", C * K, BF), acc("fla.u", "W", C * V, BF),
                                                  acc("fla.qg", "W", C * K, BF), acc("fla.kg", "W", C * K, BF)]),
            ("fwd_h (recompute)", "F6-F7", [acc("fla.kg", "R", C * K, BF), acc("fla.w", "R", C * K, BF),
                                             acc("fla.u", "R", C * V, BF), acc("fla.gcum_last", "R", K, F32),
                                             acc("fla.h", "W", K * V, BF), acc("fla.vnew", "W", C * V, BF)]),
            ("bwd_dAv", "B1 (P^T do) B5", [acc("fla.vnew", "R", C * V, BF), acc("do", "R", C * V, BF),
                                           acc("fla.Aqk", "R", C * C, BF), acc("fla.dAqk", "W", C * C, F32),
                                           acc("fla.dv", "W", C * V, BF)]),
            ("bwd_dhu", "B1 B3", [acc("fla.qg", "R", C * K, BF), acc("fla.kg", "R", C * K, BF),
                                  acc("fla.w", "R", C * K, BF), acc("fla.gcum_last", "R", K, F32), acc("do", "R", C * V, BF),
                                  acc("fla.dv", "R", C * V, BF), acc("fla.dh", "W", K * V, BF),
                                  acc("fla.dv2", "W", C * V, BF)]),
            ("bwd_wy_dqkg_fused", "B2 B4 B6 B7 B8 B10 (part)", [
                acc("q", "R", C * K, BF), acc("k", "R", C * K, BF), acc("v", "R", C * V, BF),
                acc("fla.vnew", "R", C * V, BF), acc("fla.gcum", "R", C * K, F32), acc("beta", "R", C, GATE),
                acc("fla.A", "R", C * C, BF), acc("fla.h", "R", K * V, BF), acc("do", "R", C * V, BF),
                acc("fla.dh", "R", K * V, BF), acc("fla.dv2", "R", C * V, BF),
                acc("fla.dq32", "W", C * K, F32), acc("fla.dk32", "W", C * K, F32), acc("dv", "W", C * V, BF),
                acc("fla.dg32", "W", C * K, F32), acc("fla.db32", "W", C, F32), acc("fla.dAkk", "W", C * C, F32)]),
            ("bwd_intra", "B9 (L and P) B10 (rest)", [
                acc("q", "R", C * K, BF), acc("k", "R", C * K, BF), acc("fla.gcum", "R", C * K, F32),
                acc("beta", "R", C, GATE), acc("fla.dAqk", "R", C * C, F32), acc("fla.dAkk", "R", C * C, F32),
                acc("fla.dq32", "R", C * K, F32), acc("fla.dk32", "R", C * K, F32), acc("fla.db32", "R", C, F32),
                acc("fla.dg32", "R", C * K, F32), acc("fla.dq2", "W", C * K, F32), acc("fla.dk2_32", "W", C * K, F32),
                acc("fla.db2", "W", C, F32), acc("fla.dg2", "W", C * K, F32)]),
            ("chunk_local_cumsum (reverse)", "B11", [acc("fla.dg2", "R", C * K, F32), acc("dg_chan", "W", C * K, GATE)]),
        ]
    return []


# ------------------------------------------------------------------------------------------------
# The target (analysis_bwd_plan.md section 3). variant 'safe': every intermediate in today's precision
# (float32 in global memory, hi + lo bf16 operands); 'bf16': S, dS', v_new, dv_new stored as single
# bf16 (fla's precision for h, dh, v_new, dv), the rest as 'safe'. T2a / T2b are today's kernels.
# ------------------------------------------------------------------------------------------------
def target(s, variant="safe"):
    K, V, KP, VP = s.K, s.V, s.KP, s.VP
    nv = math.ceil(V / 64)
    nk = math.ceil(K / 64)   # G1's K blocks: each reads do, v_new, dv_new (repeats are L2 hits)
    b16 = variant == "bf16"
    Sn, dSn = ("t.S16", BF) if b16 else ("ws.S", F32), ("t.dS16", BF) if b16 else ("ws.dS", F32)
    vn, dvn = ("t.vn16", BF) if b16 else ("ws.vn", F32), ("t.dvn16", BF) if b16 else ("ws.dvn", F32)
    prep = [acc("q", "R", C * K, BF), acc("k", "R", C * K, BF), acc("v", "R", C * V, BF)] + gate_reads(s) + [
        acc("tc.w", "W", C * KP, BF), acc("tc.qt", "W", C * KP, BF), acc("tc.kt", "W", C * KP, BF),
        acc("tc.P", "W", C * C, BF), acc("tc.u", "W", C * VP, F32), acc("tc.gC", "W", KP, F32),
        acc("ws.A", "W", C * C, F32)]
    if s.KG:   # G in float32 once, for G1 and G2 (instead of extras' float64 G, E, Qg, Kd)
        prep.append(acc("t.Gf32", "W", C * s.KG, F32))
    st = [acc("tc.w", "R", C * KP, BF, nv, 1), acc("tc.kt", "R", C * KP, BF, nv, 1),
          acc("tc.u", "R", C * VP, F32), acc("tc.gC", "R", KP, F32, nv, 1),
          acc(Sn[0], "W", K * V, Sn[1]), acc(vn[0], "W", C * V, vn[1])]
    dst = [acc("tc.w", "R", C * KP, BF, nv, 1), acc("tc.qt", "R", C * KP, BF, nv, 1),
           acc("tc.kt", "R", C * KP, BF, nv, 1), acc("tc.P", "R", C * C, BF, nv, 1),
           acc("do", "R", C * V, BF), acc("tc.gC", "R", KP, F32, nv, 1),
           acc(dSn[0], "W", K * V, dSn[1]), acc(dvn[0], "W", C * V, dvn[1])]
    g1 = [acc(Sn[0], "R", K * V, Sn[1]), acc(dSn[0], "R", K * V, dSn[1]), acc("do", "R", C * V, BF, nk, 1),
          acc(vn[0], "R", C * V, vn[1], nk, 1), acc(dvn[0], "R", C * V, dvn[1], nk, 1),
          acc("q", "R", C * K, BF), acc("k", "R", C * K, BF),
          acc("dq", "W", C * K, BF), acc("t.dkpart", "W", C * K, F32), acc("t.dwa", "W", C * K, F32),
          acc("t.dGlast", "W", K, F32)]
    if s.KG:
        g1.append(acc("t.Gf32", "R", C * s.KG, F32))
        g1.append(acc("t.dGpart_chan", "W", C * K, F32) if s.chan else acc("t.dGpart_scalar", "W", 2 * C, F32))
    g2 = [acc("ws.A", "R", C * C, F32), acc("t.dwa", "R", C * K, F32), acc(dvn[0], "R", C * V, dvn[1]),
          acc("k", "R", C * K, BF), acc("v", "R", C * V, BF), acc("t.dkpart", "R", C * K, F32),
          acc("t.dGlast", "R", K, F32), acc("dk", "W", C * K, BF), acc("dv", "W", C * V, BF)] + \
        gate_reads(s, with_g=False) + gate_writes(s)
    if s.KG:
        g2.append(acc("t.Gf32", "R", C * s.KG, F32))
        g2.append(acc("t.dGpart_chan", "R", C * K, F32) if s.chan else acc("t.dGpart_scalar", "R", 2 * C, F32))
    return [("T1 prepare (as today, + G f32)", "F1-F5", prep),
            ("T2a states (today's kernel)", "F6-F7", st),
            ("T2b dstates (today's kernel)", "B1 B3", dst),
            ("T3 G1 state-side grads", "B2 B4 B5 B9(P) B10(q, Kd)", g1),
            ("T4 G2 WY-side grads", "B6 B7 B8 B9(L) B10(e) B11", g2)]


# ------------------------------------------------------------------------------------------------
# Rungs 10 and 11's WY-side kernel G2 alone (DeltaNet, GDN), read off bwd10_wy (bwd_v10_split.cu) and
# bwd11_wy (bwd_v11_wyfast.cu). A value the block writes and reads back has its read counted with
# unique count 0 (an L2 hit at best). RESULTS.md "Rung 11".
# ------------------------------------------------------------------------------------------------
def wy_g2(s, rung):
    if s.chan:
        return []   # KDA, GDN2 run rung 8 inside rungs 10 and 11
    K, V, gdn = s.K, s.V, s.op == "gdn"
    a = [acc("ws.A", "R", C * C, F32), acc("ws.dvn", "R", C * V, F32), acc("v", "R", C * V, BF, 2, 1),
         acc("ws.dwa", "R", C * K, F32), acc("ws.E", "R", C * K, F32, 2 if gdn else 1, 1),
         acc("ws.dkLP", "R", C * K, F32), acc("ws.du0", "W", C * V, F32), acc("ws.du0", "R", C * V, F32, 1, 0),
         acc("dv", "W", C * V, BF), acc("dk", "W", C * K, BF)] + gate_reads(s, with_g=False) + gate_writes(s)
    if gdn:
        a += [acc("ws.dGc", "R", C * K, F32), acc("ws.G", "R", C * s.KG, F64)]
    if rung == 10:   # k: the slab, dbeta's loop and (GDN) B10's epilogue; dE and de round trips
        a += [acc("k", "R", C * K, BF, 3 if gdn else 2, 1),
              acc("ws.dE", "W", C * K, F32), acc("ws.dE", "R", C * K, F32, 1, 0),
              acc("ws.deL", "W", C * K, F32), acc("ws.deL", "R", C * K, F32, 1, 0)]
        return [("G2 rung 10 (bwd10_wy)", "B6-B8 B9(L) B10 B11", a)]
    a += [acc("k", "R", C * K, BF)]   # rung 11: k once (the slab); dE and de on chip
    return [("G2' rung 11 (bwd11_wy)", "B6-B8 B9(L) B10 B11", a)]


# ------------------------------------------------------------------------------------------------
def block_bytes(a, uniq=False):
    return a["elems"] * a["dtype"] * (a["uniq"] if uniq else a["n"])


def kernel_bytes(s, accs, uniq=False):
    r = sum(block_bytes(a, uniq) for a in accs if a["rw"] == "R")
    w = sum(block_bytes(a, uniq) for a in accs if a["rw"] == "W")
    return r, w


def check_design(s, design, label):
    """Checks 1 and 3: per access against the tensor table; the total two ways."""
    t = tensors(s)
    by_tensor = defaultdict(int)
    total_a = 0
    for kname, _, accs in design:
        for a in accs:
            dt, n_el = t[a["name"]]
            assert dt == a["dtype"], f"{label}/{kname}: {a['name']} dtype {a['dtype']} != tensor's {dt}"
            per_block_total = block_bytes(a) * s.blocks
            whole = dt * n_el * a["n"]
            assert per_block_total == whole, f"{label}/{kname}: {a['name']} {per_block_total} != {whole}"
            by_tensor[a["name"]] += whole
            total_a += per_block_total
    total_k = sum(sum(kernel_bytes(s, accs)) for _, _, accs in design) * s.blocks
    assert total_a == total_k == sum(by_tensor.values()), label
    return total_k


def check_workspace_formulas(s):
    """Check 2: the arrays of our model's workspaces against the code's formulas."""
    t = tensors(s)
    bws = [n for n in t if n.startswith("ws.")]
    model_bwd = sum(t[n][0] * t[n][1] for n in bws)
    # bwd_common.cuh bwd_ws_bytes: 8 rows KG + 4 (rows (12 K + 3 V + 2 C) + 2 st)
    code_bwd = 8 * s.rows * s.KG + 4 * (s.rows * (12 * s.K + 3 * s.V + 2 * C) + 2 * s.blocks * s.K * s.V)
    assert model_bwd == code_bwd, (model_bwd, code_bwd)
    tcs = [n for n in t if n.startswith("tc.")]
    model_tc = sum(t[n][0] * t[n][1] for n in tcs)
    # v2_tensorcore.cu tc_workspace_bytes: blocks (3 64 KP 2 + 64 64 2 + 64 vpad(V) 4 + KP 4) + 256
    code_tc = s.blocks * (3 * 64 * s.KP * 2 + 64 * 64 * 2 + 64 * s.VP * 4 + s.KP * 4)
    assert model_tc == code_tc, (model_tc, code_tc)


# Measured (ms): logs_session7/call2/profile.log (ours rung 6 in that process, fla), call1 (rung 7
# grads), calls 5-6 (states / dstates after e1e2f97). None: not measured.
MEASURED = {
    ("ours", "dn"): {"prepare (tci::intra + A)": 0.492, "extras (bwd3_extras)": 0.431,
                     "states (v2_state kBwd)": 0.490, "dstates (bwd3_dstates)": 0.643,
                     "grads (bwd_grads_tc V7Mid)": 7.228},
    ("ours", "gdn"): {"grads (bwd_grads_tc V7Mid)": 7.400},
    ("ours", "kda"): {"prepare (tci::intra + A)": 1.311, "extras (bwd3_extras)": 1.281,
                      "states (v2_state kBwd)": 0.490, "dstates (bwd3_dstates)": 0.643,
                      "grads (bwd_grads_tc V7Mid)": 9.881},
    ("ours", "gdn2"): {"grads (bwd_grads_tc V7Mid)": 10.125},
    ("r10", "dn"): {"G2 rung 10 (bwd10_wy)": 2.097},   # session 8 call 6 (logs_session8/call6)
    ("r10", "gdn"): {"G2 rung 10 (bwd10_wy)": 2.622},
    ("fla", "dn"): {"recompute_w_u_fwd": 0.154, "fwd_h (recompute)": 0.212, "chunk_bwd_dv_local": 0.127,
                    "bwd_dhu": 0.267, "chunk_bwd_dqkwg": 0.473, "prepare_wy_repr_bwd": 0.493,
                    "4 bf16 adds (dk += dk2; 3 in the harness)": 0.371},
}

# Estimates for the target (ms) at B=8 T=4096 H=16 K=V=128: the target kernel's UNIQUE bytes over
# the range of DRAM bandwidth (unique bytes / measured time) that the closest measured kernels reach
# (printed in the tables' 'TB/s uniq' column); T1 keeps today's measured prepare. Estimates, not
# measurements.
ACHIEVED_TBS = {
    # kept as they are: today's measured time; where the variant moves fewer bytes, between today's
    # time scaled by the unique-byte ratio (if the time were all traffic) and today's time
    "T1 prepare (as today, + G f32)": ("prepare (tci::intra + A)", "prepare (tci::intra + A)"),
    "T2a states (today's kernel)": ("states (v2_state kBwd)", "states (v2_state kBwd)"),
    "T2b dstates (today's kernel)": ("dstates (bwd3_dstates)", "dstates (bwd3_dstates)"),
    # new kernels: unique bytes over fla's measured range for the same two halves
    "T3 G1 state-side grads": (2.3, 3.4),               # fla prepare_wy_repr_bwd 2.32 .. chunk_bwd_dqkwg 3.41
    "T4 G2 WY-side grads": (2.3, 3.4),
}
# Per-channel gates (KDA, GDN2): B9 by levels costs instructions, not bytes. Measured: rung 7's grads
# kernel takes 9.881 ms for KDA against 7.228 for DeltaNet (+2.65 ms, call 1); the target's share of
# that is assumed between 1.0 ms (the DeltaNet part speeds up ~4x with 2 blocks per SM and 1/2 the
# bytes; the extra B9 work ~2.6x) and the whole 2.65 ms (no gain on it).
EXTRA_MS = {"kda": (1.0, 2.65), "gdn2": (1.0, 2.65)}


def table(s, design, who, uniq_col=True, markdown=False):
    rows = []
    meas = MEASURED.get((who, s.op), {})
    tot = [0, 0, 0, 0.0]
    for kname, stages, accs in design:
        r, w = kernel_bytes(s, accs)
        ru, wu = kernel_bytes(s, accs, uniq=True)
        gb = (r + w) * s.blocks / 1e9
        floor = (ru + wu) * s.blocks / 4e12 * 1e3
        ms = meas.get(kname)
        bw = f"{gb / ms:.2f}/{(ru + wu) * s.blocks / 1e9 / ms:.2f}" if ms else "-"
        rows.append((kname, stages, r / 1024, w / 1024, (ru + wu) / 1024, gb, floor, ms, bw))
        tot[0] += r + w
        tot[1] += ru + wu
        tot[2] += floor
        tot[3] += ms or 0
    if markdown:
        print("| kernel | stages | R KB/blk | W KB/blk | unique KB/blk | GB (L2-level) | floor ms @4TB/s | measured ms | TB/s L2/uniq |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for k, st, r, w, u, gb, fl, ms, bw in rows:
            print(f"| {k} | {st} | {r:.1f} | {w:.1f} | {u:.1f} | {gb:.3f} | {fl:.3f} | {ms if ms else '-'} | {bw} |")
        print(f"| **total** | | | | {tot[1] / 1024:.1f} | {tot[0] * s.blocks / 1e9:.3f} | {tot[2]:.3f} | "
              f"{f'{tot[3]:.3f}' if tot[3] else '-'} | |")
    else:
        print(f"{'kernel':44s} {'stages':28s} {'R KB':>7s} {'W KB':>7s} {'uniqKB':>7s} {'GB':>7s} "
              f"{'floor':>6s} {'meas':>6s} {'TB/s L2/uniq':>12s}")
        for k, st, r, w, u, gb, fl, ms, bw in rows:
            print(f"{k:44s} {st:28s} {r:7.1f} {w:7.1f} {u:7.1f} {gb:7.3f} {fl:6.3f} "
                  f"{(f'{ms:.3f}' if ms else '-'):>6s} {bw:>12s}")
        print(f"{'total':44s} {'':28s} {'':7s} {'':7s} {tot[1] / 1024:7.1f} {tot[0] * s.blocks / 1e9:7.3f} "
              f"{tot[2]:6.3f} {(f'{tot[3]:.3f}' if tot[3] else '-'):>6s}")
    return tot


def estimate(s, design, now):
    """The target's time range (ms): kept kernels from their measured time (scaled by the unique-byte
    ratio at best), new kernels as unique bytes over ACHIEVED_TBS, plus EXTRA_MS."""
    lo = hi = 0.0
    parts = []
    meas = MEASURED[("ours", s.op)]
    now_b = {k: sum(kernel_bytes(s, a, uniq=True)) for k, _, a in now}
    for kname, _, accs in design:
        basis = ACHIEVED_TBS[kname]
        ub = sum(kernel_bytes(s, accs, uniq=True))
        if isinstance(basis[0], str):
            t0 = meas[basis[0]]
            a, b = t0 * min(1.0, ub / now_b[basis[0]]), t0
        else:
            gb = ub * s.blocks / 1e9
            a, b = gb / basis[1], gb / basis[0]
        lo, hi = lo + a, hi + b
        parts.append(f"{kname.split()[0]} {a:.2f}-{b:.2f}")
    if s.op in EXTRA_MS:
        a, b = EXTRA_MS[s.op]
        lo, hi = lo + a, hi + b
        parts.append(f"per-channel B9 {a:.2f}-{b:.2f}")
    print("  ESTIMATE (ms): " + ", ".join(parts) + f"; total {lo:.2f}-{hi:.2f}")
    return lo, hi


def main():
    ap = argparse.ArgumentParser()
    for n, d in (("B", 8), ("T", 4096), ("H", 16), ("K", 128), ("V", 128)):
        ap.add_argument(f"--{n}", type=int, default=d)
    ap.add_argument("--op", default=None, choices=["dn", "gdn", "kda", "gdn2"])
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    ops = [a.op] if a.op else ["dn", "gdn", "kda", "gdn2"]
    for op in ops:
        s = Shape(a.B, a.T, a.H, a.K, a.V, op)
        check_workspace_formulas(s)
        designs = [("ours today (rung 7/8)", "ours", ours_now(s)), ("fla", "fla", fla(s)),
                   ("target, safe precision", "target", target(s, "safe")),
                   ("target, bf16 S dS' v_new dv_new", "target", target(s, "bf16")),
                   ("rung 10's G2 alone", "r10", wy_g2(s, 10)), ("rung 11's G2' alone", "r11", wy_g2(s, 11))]
        print(f"\n=== {op}: B={s.B} T={s.T} H={s.H} K={s.K} V={s.V} C={C}: {s.blocks} (chunk, head) blocks; "
              f"bytes per block; GB = L2-level bytes of the call; floor = unique bytes at 4 TB/s")
        for label, who, d in designs:
            if not d:
                continue
            tot = check_design(s, d, f"{op}/{label}")
            print(f"-- {label}  (total {tot / 1e9:.3f} GB)")
            table(s, d, who, markdown=a.markdown)
            if who == "target" and op in ("dn", "kda") and (s.B, s.T, s.H, s.K, s.V) == (8, 4096, 16, 128, 128):
                estimate(s, d, designs[0][2])
        if op == "dn" and (s.B, s.T, s.H, s.K, s.V) == (8, 4096, 16, 128, 128):
            # check 4: the grads kernel against ncu (call 3)
            g = [acc for kn, _, acc in ours_now(s) if kn.startswith("grads")][0]
            model = sum(kernel_bytes(s, g)) * s.blocks
            ncu = (391_118_848 - 67_567_616) * 32
            print(f"check 4: grads kernel model {model / 1e9:.3f} GB (L2-level) vs ncu L2 sectors less excess "
                  f"{ncu / 1e9:.3f} GB: {100 * (model / ncu - 1):+.1f}%")
            assert abs(model / ncu - 1) < 0.03
    print("\nall checks passed")


if __name__ == "__main__":
    main()
