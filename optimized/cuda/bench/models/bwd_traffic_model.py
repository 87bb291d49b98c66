#!/usr/bin/env python3
"""optimized/cuda/bench/models/bwd_traffic_model.py -- global-memory traffic of the CUDA chunked
backward, ours (rung 7/8 today) and fla's (flash-linear-attention), and of the target design of
bench/analysis_bwd_plan.md, per kernel, at a given B, T, H, K, V (chunk C = 64); and the WY-side kernel
G2 of backward rungs 10 and 11 alone (DeltaNet, GDN); and (--design r22, session 22) rung 22's DeltaNet backward with
saved states (its three kernels) beside fla's, with a check against session 21's ncu profile. No GPU.

Each kernel is a list of accesses (tensor, R/W, elements per (chunk, head), dtype bytes, L2-level
count, unique count). 'L2-level' counts every pass a kernel makes over the data (what ncu's L2
sectors see); 'unique' counts each byte once (the DRAM floor if every repeat hits L2). Ours are read
off the code (bwd_common.cuh bwd_grads_tc, bwd_v4_tc_tail.cu, bwd_v6_tc_b9.cuh, bwd_v3_async.cu,
tc_common.cuh / v2_tensorcore.cu workspace); fla's off its source (.fla/fla/ops/delta_rule/chunk.py,
wy_fast.py, common/chunk_delta_h.py, common/chunk_o.py, kda/chunk_bwd.py, kda/chunk_intra.py).
Measured times are torch.profiler kernel records (bench/logs_session7/call2/profile.log; calls 1, 5, 6
of logs_session7/README.md); estimates are marked as such.
Rung 22 (ours_r22) is read off bwd_v22_kq8.cu -> bwd_v21_duvsmem.cu (bwd_duv_split_launch) -> bwd_v10_split.cu
(bwd_split_launch) -> bwd_v3_async.cu (bwd_v3_front, bwd3_dstates<KP, BV, kDsH>), bwd_v12_g1slab.cu (bwd12_g1, kDsH
kKq8) and bwd_v11_wyfast.cu (bwd11_wy, kDuV), with the saved object's v_new, A, S (bwd_common.cuh bwd_ws, p.keep).
fla's DeltaNet lists were re-checked in session 22 against .fla (delta_rule/chunk.py, wy_fast.py, common/
chunk_delta_h.py, common/chunk_o.py): re-reads per value / key tile added at L2 level (fwd_h, bwd_dhu: q, k, w per
BV tile; dqkwg: v_new, do, dv per BK slab), dht added, wy_bwd's dk round trip counted once in the unique bytes.

Self-checks (assert):
  1. per access, bytes per block x blocks == the whole tensor's size x count, the size taken from an
     independent table of global tensors (catches a wrong dtype or shape in a kernel's list);
  2. the workspace arrays our kernels touch == the code's formulas bwd_ws_bytes (bwd_common.cuh)
     and tc_workspace_bytes (v2_tensorcore.cu), transcribed;
  3. per design, the sum over kernels == the sum over tensors (grouped by tensor, then by kernel);
  4. at B=8 T=4096 H=16 K=V=128 our DeltaNet grads kernel's L2-level bytes are within 3% of ncu's
     L2 sectors minus its excess sectors (logs_session7/call3/grads7_dn.details.txt: 391,118,848 and
     67,567,616 sectors of 32 bytes);
  5. (rung 22, DeltaNet, that shape; session 21's ncu of the same three kernels, logs_session21/call1/logs/dn21_*)
     a. per kernel, the model's L2-level loads and stores each within 0.5% of ncu's ideal global sectors (sum over the
        SASS rows of 'L2 Theoretical Sectors Global' minus '... Excessive', by access operation; re-derived from the
        .sass.csv files when they are present);
     b. per kernel, ncu's DRAM bytes (DRAM TB/s x duration) between the model's unique bytes - 4% and its L2-level
        bytes + 4%; dstates within 4% of its L2-level bytes (its two value halves run in different waves) and G1'
        within 4% of its unique bytes (its two K-slab blocks are adjacent). 4%: the ncu figures' three digits (<= 0.5%)
        plus up to one L2 (50 MB, ~3% of 1.5 GB) of dirty lines or left-over data crossing a kernel boundary.
  Also 2b: the saved object's v_new, A, S arrays == bwd_keep_bytes (bwd_common.cuh).

Usage: python3 bwd_traffic_model.py [--B 8 --T 4096 --H 16 --K 128 --V 128] [--op dn|gdn|kda|gdn2]
       [--markdown] [--design all|r22]
  --design r22: rung 22's DeltaNet backward with saved states beside fla's (per kernel and per stage), its checks
  (1, 2b, 3; 5 at the benchmark shape), DeltaNet only.
"""
import argparse
import csv
import math
import os
from collections import defaultdict
from fractions import Fraction

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
        # per (sequence, head) states of the benchmark's loss (float32 [N, H, K, V], N = B): dht read, dh0 written
        "dht": (F32, s.B * s.H * K * V), "dh0": (F32, s.B * s.H * K * V),
        # rung 22 (session 22): the saved object's v_new, A, S (KParams::keep, bwd_common.cuh keep_a_off / keep_s_off)
        # and dS' as bf16 in ws.dS's first half (rung 19's kDsH)
        "sv.vn": (F32, r * V), "sv.A": (F32, r * C), "sv.S": (F32, st), "ws16.dS": (BF, st),
    }
    return t


def per_seq(s, n_el):
    """Elements per (chunk, head) of a per-(sequence, head) array of n_el elements: n_el / NT, exact."""
    return Fraction(n_el, s.NT)


def acc(name, rw, elems, dtype, n=1, uniq=None, l2=None):
    """One access: tensor name, 'R' or 'W', elements per (chunk, head), dtype bytes, L2-level count n,
    unique count (default n); l2: bytes per (chunk, head) as ncu's ideal L2 sectors count them where that differs
    from elems x dtype x n (one lone 4-byte store per row fills a 32-byte sector's worth: check 5a only)."""
    return dict(name=name, rw=rw, elems=elems, dtype=dtype, n=n, uniq=n if uniq is None else uniq, l2=l2)


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
FLA_BV = 64  # fwd_h / bwd_dhu value tile: autotuned over {32, 64} (chunk_delta_h.py); the pick was not recorded


def fla(s):
    K, V = s.K, s.V
    # Re-checked in session 22 against .fla: fwd_h and bwd_dhu run one program per (BV value tile, sequence, head)
    # and each reads the whole K side (k, w; q) per tile (L2 level x NV, unique once: the tiles are adjacent,
    # i_v = pid % NV); chunk_bwd_dqkwg runs one program per (BK = 64 key slab, chunk, head), each reading v_new, do
    # and dv over all of V (x NK); prepare_wy_repr_bwd stores dk, reads it back and stores it again in the same
    # program (unique: one store); bwd_dhu reads dht (the benchmark passes it; no initial state, so no dh0).
    nv = math.ceil(V / FLA_BV)
    nk = math.ceil(K / 64)
    if s.op == "dn":
        return [
            ("recompute_w_u_fwd", "F5 (w, u)", [acc("k", "R", C * K, BF), acc("v", "R", C * V, BF),
                                                acc("beta", "R", C, GATE), acc("fla.A", "R", C * C, BF),
                                                acc("fla.w", "W", C * K, BF), acc("fla.u", "W", C * V, BF)]),
            ("fwd_h (recompute)", "F6-F7 (h, v_new)", [acc("k", "R", C * K, BF, nv, 1),
                                                        acc("fla.w", "R", C * K, BF, nv, 1),
                                                        acc("fla.u", "R", C * V, BF), acc("fla.h", "W", K * V, BF),
                                                        acc("fla.vnew", "W", C * V, BF)]),
            ("chunk_bwd_dv_local", "B1 (P^T do)", [acc("q", "R", C * K, BF), acc("k", "R", C * K, BF),
                                                    acc("do", "R", C * V, BF), acc("fla.dv", "W", C * V, BF)]),
            ("bwd_dhu", "B1 (+Kd dS') B3", [acc("q", "R", C * K, BF, nv, 1), acc("k", "R", C * K, BF, nv, 1),
                                            acc("fla.w", "R", C * K, BF, nv, 1), acc("do", "R", C * V, BF),
                                            acc("fla.dv", "R", C * V, BF), acc("dht", "R", per_seq(s, K * V), F32),
                                            acc("fla.dh", "W", K * V, BF), acc("fla.dv2", "W", C * V, BF)]),
            ("chunk_bwd_dqkwg", "B4 B5 B9(P) B10(q)", [
                acc("fla.vnew", "R", C * V, BF, nk, 1), acc("do", "R", C * V, BF, nk, 1),
                acc("fla.h", "R", K * V, BF), acc("fla.dh", "R", K * V, BF), acc("fla.dv2", "R", C * V, BF, nk, 1),
                acc("q", "R", C * K, BF), acc("k", "R", C * K, BF), acc("fla.dw", "W", C * K, BF),
                acc("dq", "W", C * K, BF), acc("fla.dk", "W", C * K, BF)]),
            ("prepare_wy_repr_bwd", "B6 B7 B8 B9(L) B10(e)", [
                acc("beta", "R", C, GATE), acc("fla.A", "R", C * C, BF), acc("v", "R", C * V, BF),
                acc("fla.dv2", "R", C * V, BF), acc("k", "R", C * K, BF, 2, 1), acc("fla.dw", "R", C * K, BF),
                acc("fla.dk2", "W", C * K, BF, 1, 0), acc("fla.dk2", "R", C * K, BF, 1, 0),
                acc("fla.dk2", "W", C * K, BF), acc("dv", "W", C * V, BF), acc("dbeta", "W", C, GATE)]),
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
# Rung 22 (`best` since session 21), DeltaNet, backward with saved states (session 22): the saving forward has left
# the tc workspace (w_aux, q~ = Qg, k~ = Kd, P, exp(G_C)) and v_new, A, S (float32, the saved object: sv.*), so the
# backward runs three kernels (bwd_v3_front skips prepare, extras and states; bwd_duv_split_launch):
#   dstates bwd3_dstates<KP, BV, kDsH> (bwd_v3_async.cu), grid (N, H, V / BV) -- the value tile is blockIdx.z, the
#           slowest index; per chunk (in reverse) cp.async of the w_aux, Qg, Kd tiles [64][KP] bf16, P [64][64] bf16,
#           exp(G_C) [KP] f32 (whole K side: once per value tile) and do's BV columns; stores dS' as bf16 by 16-byte
#           rows (ws.dS's first half) and dv_new float32 by 8-byte pairs; dht read and dh0 written once per block.
#   G1'     bwd12_g1<hi, vnlo, lean, kDsH, -, -, kKq8> (bwd_v12_g1slab.cu), grid (chunks x K/64, H): per value slab do
#           (8-byte), v_new, dv_new (16-byte float32 quads: every 64-channel block reads all of V), its 64 rows of S
#           (float32) and dS' (bf16); B9's k, q slab (16-byte octets; rung 21: 2-byte loads, same bytes); stores dw_aux
#           (float32 pairs), dk_part (float32, 4-byte), dq (bf16, 2-byte). DeltaNet: no G, no Qg / Kd, no tail k / q.
#   G2'     bwd11_wy<float, hi, kLoDu0, lean, -, kDuV> (bwd_v11_wyfast.cu), grid (chunks, H): beta (4-byte per row),
#           A (float32 quads), per value slab dv_new (float32) and v (16-byte), per K slab dw_aux (float32) and k
#           (8-byte, stage_dwa_e), then per K slab k again (16-byte, B9) and dk_part (8-byte pairs); stores dv, dk
#           (bf16 pairs) and dbeta (one 4-byte store per row). du0 stays on chip (kDuV).
# ------------------------------------------------------------------------------------------------
R22_DST = "dstates bwd3_dstates<KP,64,kDsH>"
R22_G1 = "G1' bwd12_g1 (kDsH kKq8)"
R22_G2 = "G2' bwd11_wy (kDuV)"


def ours_r22(s):
    if s.op != "dn":
        return []   # rung 22's GDN path (bf16 dv_new, float32 dS', G, dG) is not modelled here
    K, V, KP = s.K, s.V, s.KP
    bv = 64 if s.B * s.H * math.ceil(V / 64) >= 132 else 32   # dstates_bv (bwd_v3_async.cu), no knob
    nv = math.ceil(V / bv)      # dstates' value tiles: each reads the whole K side
    nk = math.ceil(K / 64)      # G1''s K-slab blocks: each reads do, v_new, dv_new over all of V
    kv = per_seq(s, K * V)
    dst = [acc("tc.w", "R", C * KP, BF, nv, 1), acc("tc.qt", "R", C * KP, BF, nv, 1),
           acc("tc.kt", "R", C * KP, BF, nv, 1), acc("tc.P", "R", C * C, BF, nv, 1),
           acc("tc.gC", "R", KP, F32, nv, 1), acc("do", "R", C * V, BF), acc("dht", "R", kv, F32),
           acc("ws16.dS", "W", K * V, BF), acc("ws.dvn", "W", C * V, F32), acc("dh0", "W", kv, F32)]
    g1 = [acc("do", "R", C * V, BF, nk, 1), acc("sv.vn", "R", C * V, F32, nk, 1),
          acc("ws.dvn", "R", C * V, F32, nk, 1), acc("sv.S", "R", K * V, F32), acc("ws16.dS", "R", K * V, BF),
          acc("k", "R", C * K, BF), acc("q", "R", C * K, BF),
          acc("ws.dwa", "W", C * K, F32), acc("ws.dkLP", "W", C * K, F32), acc("dq", "W", C * K, BF)]
    g2 = [acc("beta", "R", C, GATE), acc("sv.A", "R", C * C, F32), acc("ws.dvn", "R", C * V, F32),
          acc("v", "R", C * V, BF), acc("ws.dwa", "R", C * K, F32), acc("k", "R", C * K, BF, 2, 1),
          acc("ws.dkLP", "R", C * K, F32), acc("dv", "W", C * V, BF), acc("dk", "W", C * K, BF),
          acc("dbeta", "W", C, GATE, l2=C * 32)]
    return [(R22_DST, "B1 B3", dst), (R22_G1, "B2 B4 B5 B9(P) B10(q)", g1),
            (R22_G2, "B6-B8 B9(L) B10 B11", g2)]


FLA_ADD1 = "dk.add_ (fla's own, 1 of the 4 adds)"


def fla_r22(s):
    """fla's DeltaNet backward for the side-by-side: fla(s) with only its own dk.add_ (the other three bf16 adds of
    session 7's profile are the harness's)."""
    K = s.K
    d = [x for x in fla(s) if not x[0].startswith("4 bf16 adds")]
    return d + [(FLA_ADD1, "B10 (dk += dk2)", [acc("fla.dk", "R", C * K, BF), acc("fla.dk2", "R", C * K, BF),
                                               acc("dk", "W", C * K, BF)])]


# ------------------------------------------------------------------------------------------------
def l2_bytes(a):
    """Bytes per block as ncu's ideal L2 sectors count them (check 5a)."""
    return a["l2"] if a["l2"] is not None else block_bytes(a)


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
    # check 2b: bwd_keep_bytes (bwd_common.cuh): 4 (rows V + rows C + chunks H K V), the saved object's v_new, A, S
    model_sv = sum(t[n][0] * t[n][1] for n in t if n.startswith("sv."))
    code_sv = 4 * (s.rows * s.V + s.rows * C + s.blocks * s.K * s.V)
    assert model_sv == code_sv, (model_sv, code_sv)


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
        gb = float(r + w) * s.blocks / 1e9   # float(): per-sequence accesses count Fraction elements (per_seq)
        floor = float(ru + wu) * s.blocks / 4e12 * 1e3
        ms = meas.get(kname)
        bw = f"{gb / ms:.2f}/{(ru + wu) * s.blocks / 1e9 / ms:.2f}" if ms else "-"
        rows.append((kname, stages, float(r) / 1024, float(w) / 1024, float(ru + wu) / 1024, gb, floor, ms, bw))
        tot[0] += r + w
        tot[1] += ru + wu
        tot[2] += floor
        tot[3] += ms or 0
    if markdown:
        print("| kernel | stages | R KB/blk | W KB/blk | unique KB/blk | GB (L2-level) | floor ms @4TB/s | measured ms | TB/s L2/uniq |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for k, st, r, w, u, gb, fl, ms, bw in rows:
            print(f"| {k} | {st} | {r:.1f} | {w:.1f} | {u:.1f} | {gb:.3f} | {fl:.3f} | {ms if ms else '-'} | {bw} |")
        print(f"| **total** | | | | {float(tot[1]) / 1024:.1f} | {float(tot[0]) * s.blocks / 1e9:.3f} | {tot[2]:.3f} | "
              f"{f'{tot[3]:.3f}' if tot[3] else '-'} | |")
    else:
        print(f"{'kernel':44s} {'stages':28s} {'R KB':>7s} {'W KB':>7s} {'uniqKB':>7s} {'GB':>7s} "
              f"{'floor':>6s} {'meas':>6s} {'TB/s L2/uniq':>12s}")
        for k, st, r, w, u, gb, fl, ms, bw in rows:
            print(f"{k:44s} {st:28s} {r:7.1f} {w:7.1f} {u:7.1f} {gb:7.3f} {fl:6.3f} "
                  f"{(f'{ms:.3f}' if ms else '-'):>6s} {bw:>12s}")
        print(f"{'total':44s} {'':28s} {'':7s} {'':7s} {float(tot[1]) / 1024:7.1f} {float(tot[0]) * s.blocks / 1e9:7.3f} "
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


# ------------------------------------------------------------------------------------------------
# Rung 22 beside fla (--design r22; DeltaNet, B=8 T=4096 H=16 K=V=128 for every figure below).
# ------------------------------------------------------------------------------------------------
# Measured (ms). Ours: LINATTN_BWD_PROFILE events of "forward (saving states) + backward (saved states)" on rung 22,
# session 21 calls 1 and 2 (logs_session21/call1/summary.log, call2/summary.log). fla: session 7's torch.profiler
# (MEASURED above; session 15 call 4's profile agrees within 1%: 0.496 / 0.478 / 0.266 / 0.127); its dk.add_ is one
# of four equal-sized bf16 adds that took 0.371 together (an estimate: a quarter of them).
MEASURED_R22 = {R22_DST: (0.572, 0.602), R22_G1: (1.159, 1.169), R22_G2: (0.982, 0.987)}
FLA_ADD1_MS = 0.371 / 4
# Session 21 call 1's ncu (rung 21, plain backward, DeltaNet: the same three kernels and bytes, G1' with rung 21's
# 2-byte k / q staging; logs_session21/call1/logs/dn21_*): duration, DRAM throughput (TB/s, 'Memory Throughput' of
# the Memory Workload Analysis section = DRAM % x 4.82 TB/s), and the ideal global L2 sectors of loads and stores
# (sum over the SASS rows of the .sass.csv of 'L2 Theoretical Sectors Global' - '... Excessive'; LDGSTS counted as
# loads). ncu's excess sectors (not modelled): dstates 17.3 M (all on its cp.async loads: unexplained, the addresses
# are whole 128-byte lines; DRAM does not see them), G1' 21.0 M (dq's 2-byte and dk_part's 4-byte stores), G2' 8.8 M
# (dv / dk's 4-byte bf16-pair stores, beta's scalar loads).
NCU_S21 = {
    R22_DST: dict(stem="dn21_dstates", ms=0.56752, tbs=2.83, ld=34_034_032, st=17_039_360),
    R22_G1: dict(stem="dn21_g1", ms=1.19, tbs=2.04, ld=75_497_472, st=20_971_520),
    R22_G2: dict(stem="dn21_g2", ms=0.98726, tbs=1.56, ld=42_008_576, st=8_912_896),
}
NCU_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "logs_session21", "call1", "logs")
L2_TOL, DRAM_TOL = 0.005, 0.04   # check 5a, 5b (module header)
BENCH = (8, 4096, 16, 128, 128)


def ncu_ideal_sectors(path):
    """(load, store) ideal global L2 sectors of one ncu source-page CSV (--page source --csv --print-source sass)."""
    rows = list(csv.reader(open(path, newline="")))
    hdr = rows[1]
    i_t, i_e = hdr.index("L2 Theoretical Sectors Global"), hdr.index("L2 Theoretical Sectors Global Excessive")
    i_op = hdr.index("Access Operation")
    num = lambda x: int(x.replace(",", "")) if x.strip() else 0
    ld = st = 0
    for r in rows[2:]:
        if len(r) < len(hdr) or not num(r[i_t]):
            continue
        ideal = num(r[i_t]) - num(r[i_e])
        if r[i_op].startswith("Load"):   # "Load" and LDGSTS's "Load,Store" (global load, shared store)
            ld += ideal
        elif r[i_op] == "Store":
            st += ideal
        else:
            raise AssertionError(f"{path}: access operation {r[i_op]!r}")
    return ld, st


def check_r22_ncu(s, design):
    """Check 5 (module header) at the benchmark shape; returns {kernel: DRAM GB}."""
    dram = {}
    for kname, _, accs in design:
        n = NCU_S21[kname]
        path = os.path.join(NCU_DIR, n["stem"] + ".sass.csv")
        if os.path.exists(path):   # the transcribed sector counts, re-derived from the profile itself
            assert ncu_ideal_sectors(path) == (n["ld"], n["st"]), (path, ncu_ideal_sectors(path))
        m_ld = float(sum(l2_bytes(a) for a in accs if a["rw"] == "R")) * s.blocks
        m_st = float(sum(l2_bytes(a) for a in accs if a["rw"] == "W")) * s.blocks
        n_ld, n_st = 32 * n["ld"], 32 * n["st"]
        l2 = float(sum(kernel_bytes(s, accs))) * s.blocks
        un = float(sum(kernel_bytes(s, accs, uniq=True))) * s.blocks
        dr = n["tbs"] * 1e12 * n["ms"] * 1e-3
        dram[kname] = dr / 1e9
        print(f"check 5 {kname:34s} L2 loads model {m_ld / 1e9:.4f} / ncu {n_ld / 1e9:.4f} GB ({100 * (m_ld / n_ld - 1):+.2f}%), "
              f"stores {m_st / 1e9:.4f} / {n_st / 1e9:.4f} ({100 * (m_st / n_st - 1):+.2f}%); DRAM ncu {dr / 1e9:.3f} GB "
              f"in [unique {un / 1e9:.3f}, L2-level {l2 / 1e9:.3f}]")
        assert abs(m_ld / n_ld - 1) < L2_TOL and abs(m_st / n_st - 1) < L2_TOL, kname
        assert un * (1 - DRAM_TOL) <= dr <= l2 * (1 + DRAM_TOL), kname
        if kname == R22_DST:   # value halves in different waves: every tile read twice from DRAM
            assert abs(dr / l2 - 1) < DRAM_TOL, kname
        if kname == R22_G1:    # the two K-slab blocks of a chunk adjacent: the re-reads hit L2
            assert abs(dr / un - 1) < DRAM_TOL, kname
    return dram


def print_rows(hdr, rows, widths, markdown):
    """One table of strings: markdown, or columns of the given widths (the first left-aligned, the rest right)."""
    if markdown:
        print("| " + " | ".join(hdr) + " |")
        print("|" + " --- |" * len(hdr))
        for r in rows:
            print("| " + " | ".join(r) + " |")
        return
    for r in [hdr] + rows:
        print(" ".join(c.rjust(n) if i else c.ljust(n) for i, (c, n) in enumerate(zip(r, widths))))


def r22_side_by_side(s, ours, theirs, markdown=False):
    """Per kernel and per stage: bytes (L2-level, unique; ours also ncu's DRAM bytes), measured ms, achieved TB/s,
    the floor at 4 TB/s (unique bytes) and the time at the other side's achieved rate for the same stage."""
    bench = (s.B, s.T, s.H, s.K, s.V) == BENCH
    dram = check_r22_ncu(s, ours) if bench else {}
    fla_ms = dict(MEASURED[("fla", "dn")], **{FLA_ADD1: FLA_ADD1_MS}) if bench else {}
    ours_ms = {k: sum(v) / 2 for k, v in MEASURED_R22.items()} if bench else {}
    stages = [("S  state recurrence", [R22_DST], ["chunk_bwd_dv_local", "bwd_dhu"]),
              ("G1 state-side grads", [R22_G1], ["chunk_bwd_dqkwg"]),
              ("G2 WY-side grads", [R22_G2], ["prepare_wy_repr_bwd", FLA_ADD1]),
              ("R  recompute w u h v_new", [], ["recompute_w_u_fwd", "fwd_h (recompute)"])]
    info = {}
    for who, d in (("ours", ours), ("fla", theirs)):
        for kname, st, accs in d:
            l2 = float(sum(kernel_bytes(s, accs))) * s.blocks / 1e9
            un = float(sum(kernel_bytes(s, accs, uniq=True))) * s.blocks / 1e9
            moved = dram.get(kname, un)   # ours: ncu's DRAM bytes; fla: its unique bytes (no ncu of fla)
            ms = (ours_ms if who == "ours" else fla_ms).get(kname)
            rate_ms = NCU_S21[kname]["ms"] if kname in dram else ms   # ours: ncu's own duration with its DRAM bytes
            info[kname] = dict(who=who, st=st, l2=l2, un=un, dram=dram.get(kname), moved=moved, ms=ms,
                               tbs=moved / rate_ms if rate_ms else None)
    stage_rate = {}
    for name, ok, fk in stages:
        for side, ks in (("ours", ok), ("fla", fk)):
            if ks and all(info[k]["ms"] for k in ks):
                stage_rate[(name, side)] = sum(info[k]["moved"] for k in ks) / sum(info[k]["ms"] for k in ks)
    fmt = lambda x, f: "-" if x is None else format(x, f)
    hdr = ["kernel", "stage", "GB L2-level", "GB unique", "GB DRAM (ncu)", "ms measured", "TB/s achieved",
           "floor ms @4TB/s", "ms @ peer TB/s"]
    rows = []
    for name, ok, fk in stages:
        for side, ks in (("ours", ok), ("fla", fk)):
            peer = stage_rate.get((name, "fla" if side == "ours" else "ours"))
            for k in ks:
                x = info[k]
                ms = (f"{MEASURED_R22[k][0]:.3f}-{MEASURED_R22[k][1]:.3f}" if side == "ours" and bench else
                      fmt(x["ms"], ".3f") + ("e" if k == FLA_ADD1 and bench else ""))
                rows.append([f"{side}: {k}", name.split()[0], f"{x['l2']:.3f}", f"{x['un']:.3f}", fmt(x["dram"], ".3f"),
                             ms, fmt(x["tbs"], ".2f"), f"{x['un'] / 4:.3f}",
                             fmt(x["moved"] / peer if peer else None, ".3f")])
    print("-- rung 22 (saved states) beside fla, DeltaNet: per kernel (GB of the call; 'e': estimate; TB/s: DRAM "
          "bytes (ours, ncu) or unique bytes (fla) per ms; @peer: those bytes at the other side's rate for the stage)")
    print_rows(hdr, rows, [44, 3, 11, 9, 13, 11, 13, 15, 14], markdown)
    if not bench:
        print("  (times, ncu and the stage comparison exist for B=8 T=4096 H=16 K=V=128 only)")
        return
    print("-- per stage: gap = ours - fla; bytes part = our moved bytes at fla's rate - fla's time; rate part = the rest")
    sh = ["stage", "ours ms", "fla ms", "gap ms", "ours GB moved", "fla GB", "fla TB/s", "ours @fla TB/s", "bytes part",
          "rate part"]
    srows = []
    tot = [0.0] * 5
    for name, ok, fk in stages:
        o_ms = sum(info[k]["ms"] for k in ok)
        f_ms = sum(info[k]["ms"] for k in fk)
        o_gb = sum(info[k]["moved"] for k in ok)
        f_gb = sum(info[k]["moved"] for k in fk)
        fr = f_gb / f_ms
        at = o_gb / fr
        bp, rp = (at - f_ms, o_ms - at) if ok else (-f_ms, 0.0)
        for i, v in enumerate((o_ms, f_ms, o_ms - f_ms, bp, rp)):
            tot[i] += v
        srows.append([name, f"{o_ms:.3f}", f"{f_ms:.3f}", f"{o_ms - f_ms:+.3f}", f"{o_gb:.3f}", f"{f_gb:.3f}",
                      f"{fr:.2f}", f"{at:.3f}" if ok else "-", f"{bp:+.3f}", f"{rp:+.3f}"])
    srows.append(["total", f"{tot[0]:.3f}", f"{tot[1]:.3f}", f"{tot[2]:+.3f}", "", "", "", "", f"{tot[3]:+.3f}",
                  f"{tot[4]:+.3f}"])
    print_rows(sh, srows, [26, 8, 7, 7, 14, 7, 9, 15, 11, 10], markdown)


def main():
    ap = argparse.ArgumentParser()
    for n, d in (("B", 8), ("T", 4096), ("H", 16), ("K", 128), ("V", 128)):
        ap.add_argument(f"--{n}", type=int, default=d)
    ap.add_argument("--op", default=None, choices=["dn", "gdn", "kda", "gdn2"])
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--design", default="all", choices=["all", "r22"])
    a = ap.parse_args()
    if a.design == "r22":   # DeltaNet only
        if a.op not in (None, "dn"):
            ap.error("--design r22 models DeltaNet only (--op dn)")
        s = Shape(a.B, a.T, a.H, a.K, a.V, "dn")
        check_workspace_formulas(s)
        ours, theirs = ours_r22(s), fla_r22(s)
        tot_o, tot_f = check_design(s, ours, "dn/r22"), check_design(s, theirs, "dn/fla_r22")
        print(f"=== dn, rung 22 with saved states and fla: B={s.B} T={s.T} H={s.H} K={s.K} V={s.V} C={C}; "
              f"L2-level bytes: ours {float(tot_o) / 1e9:.3f} GB, fla {float(tot_f) / 1e9:.3f} GB")
        r22_side_by_side(s, ours, theirs, markdown=a.markdown)
        print("\nall checks passed")
        return
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
            print(f"-- {label}  (total {float(tot) / 1e9:.3f} GB)")
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
        if op == "dn":   # rung 22's design (--design r22 prints it): checks 1 and 3; 5 at the benchmark shape
            r22 = ours_r22(s)
            check_design(s, r22, "dn/r22")
            check_design(s, fla_r22(s), "dn/fla_r22")
            if (s.B, s.T, s.H, s.K, s.V) == BENCH:
                check_r22_ncu(s, r22)
    print("\nall checks passed")


if __name__ == "__main__":
    main()
