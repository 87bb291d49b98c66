#!/usr/bin/env python3
"""optimized/cuda/bench/models/bwd_v6_b9_emulation.py -- a float64 emulation of the index logic of backward
rung 6's B9 by levels (optimized/cuda/bwd_v6_tc_b9.cuh, b9_levels), written without a GPU: per 16-row
warp block mb the same if / else table of contractions (de^L, dq^P where mb's rows are left; dk^LP by
the transposed table where they are right), the diagonal-block A mask assembled from every lane's
registers exactly as level_mask builds them (mma.cuh's A layout: register x holds rows g + 8 (x & 1),
columns 2t + 8 (x >> 1) in its low half and + 1 in its high half), F built with the clamp, the
epilogue factor of the output row, the diagonal terms and the rows < Lc, channels < K written. The
products are exact float64 matrix products (the mma fragments' ldmatrix layouts are not emulated:
gemm64 uses the same load_a / load_a_t / load_b_kn calls). Compared with bwd_b9_levels_model.py's
direct sums on its cases (KDA, GDN2; random, zero, extreme, mixed gates; Lc 64, 37, 1; K 128, 100, 19).
Exit 0: worst max |diff| / max |direct| below 1e-13; 1: above; 77: numpy missing.
MUT=n (environment) plants a break: 1 level 2 skipped (as make_mutants.py's 66), 2 no clamp (68),
3 the high half of each mask register equal to the low half, 4 epilogue F of the row with bit s
flipped (67). Measured when written: MUT unset 7.8e-16; MUT=1 1.1e+00, 2 inf, 3 1.0e+00, 4 1.3e+01
(each exit 1). Run: python3 optimized/cuda/bench/models/bwd_v6_b9_emulation.py (about 1.2 s).
"""
import os
import sys

try:
    import numpy as np
except ImportError:
    print("SKIPPED: numpy not installed")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bwd_b9_levels_model as M  # noqa: E402
MUT = int(os.environ.get("MUT", "0"))
C = 64
def level_mask_lane(s):
    """16x16 keep-matrix assembled from every lane's registers as level_mask writes them."""
    keep = np.zeros((16, 16), bool)
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        for x in range(4):
            r, c = g + 8 * (x & 1), 2 * t + 8 * (x >> 1)
            lo = s == 0 or ((r ^ c) & ~(s - 1)) == s
            hi = s == 0 or ((r ^ (c + 1)) & ~(s - 1)) == s
            if MUT == 3: hi = lo
            keep[r, c], keep[r, c + 1] = lo, hi
    return keep
def kernel(dL, dP, Gst, k, e, qs, KP, Lc, K):
    L = np.where((np.arange(C)[:, None] < Lc) & np.tri(C, k=-1, dtype=bool), dL, 0.0)
    P = np.where((np.arange(C)[:, None] < Lc) & np.tri(C, k=-1, dtype=bool), dP, 0.0)
    sdg = np.where(np.arange(C) < Lc, np.diag(dP), 0.0)
    out = {n: np.full((C, KP), np.nan) for n in ("deL", "dqP", "dkLP")}
    for kk in range(0, KP, 64):
        sl = slice(kk, kk + 64)
        G = Gst[:, sl]; kS = k[:, sl]; eS = e[:, sl]; qS = qs[:, sl]
        o = {n: np.zeros((C, 64)) for n in ("deL", "dqP", "dkLP")}
        for s in (32, 16, 8, 4, 2, 1):
            if MUT == 1 and s == 2: continue
            F = np.zeros((C, 64)); X = np.zeros((C, 64)); Y = np.zeros((C, 64))
            for r in range(C):
                left = (r & s) != 0
                m = (r & ~(s - 1)) if left else ((r & ~(2 * s - 1)) + s)
                diff = G[r] - G[m] if left else G[m] - G[r]
                with np.errstate(over="ignore"):
                    F[r] = np.exp(diff if MUT == 2 else np.minimum(diff, 0.0))
                X[r] = (eS[r] if left else kS[r]) * F[r]
                Y[r] = qS[r] * F[r] if left else 0.0
            keep = level_mask_lane(s if s <= 8 else 0)
            for mb in range(4):
                ro = slice(16 * mb, 16 * mb + 16)
                aL = np.zeros((16, 64)); aP = np.zeros((16, 64)); aK = np.zeros((16, 64))
                def left_step(bj):
                    co = slice(16 * bj, 16 * bj + 16)
                    aL[:] += np.where(keep, L[ro, co], 0.0) @ X[co]
                    aP[:] += np.where(keep, P[ro, co], 0.0) @ X[co]
                def right_step(bi):
                    co = slice(16 * bi, 16 * bi + 16)
                    aK[:] += np.where(keep, L[co, ro].T, 0.0) @ X[co]
                    aK[:] += np.where(keep, P[co, ro].T, 0.0) @ Y[co]
                for side, blk in M.warp_steps(s, mb):
                    (left_step if side == "left" else right_step)(blk)
                rows = np.arange(16 * mb, 16 * mb + 16)
                if MUT == 4: rows = rows ^ s
                with np.errstate(invalid="ignore"):
                    o["deL"][ro] += F[rows] * aL; o["dqP"][ro] += F[rows] * aP; o["dkLP"][ro] += F[rows] * aK
        for r in range(Lc):
            for c in range(64):
                d = kk + c
                if d < K:
                    out["deL"][r, d] = o["deL"][r, c]
                    out["dqP"][r, d] = o["dqP"][r, c] + sdg[r] * kS[r, c]
                    out["dkLP"][r, d] = o["dkLP"][r, c] + sdg[r] * qS[r, c]
    return out["deL"], out["dqP"], out["dkLP"]
rng = np.random.default_rng(7)
worst = 0.0
for op in ("KDA", "GDN2"):
    for gate in ("random", "zero", "extreme", "mixed"):
        for Lc in (64, 37, 1):
            for K in (128, 100, 19):
                dL, dP, G, k, e, qs, KP = M.make_case(rng, Lc, K, gate, op)
                d = M.direct(dL, dP, G, k, e, qs, Lc)
                t = kernel(dL, dP, G, k, e, qs, KP, Lc, K)
                err = max(M.rel_max(x[:Lc, :K], y[:Lc, :K]) for x, y in zip(d, t))
                worst = max(worst, err)
print(f"MUT={MUT}: worst max|diff|/max|direct| over KDA/GDN2 x 4 gates x Lc {{64,37,1}} x K {{128,100,19}}: {worst:.1e}")
sys.exit(0 if worst < 1e-13 else 1)
