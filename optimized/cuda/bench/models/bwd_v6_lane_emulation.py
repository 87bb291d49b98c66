"""optimized/cuda/bench/models/bwd_v6_lane_emulation.py -- lane-level float64 emulation of backward
rung 6's b9_levels (bwd_v6_tc_b9.cuh) mma fragments: the ldmatrix x4 / .trans addressing of mma.cuh's
load_a, load_a_t, load_b_kn, the PTX m16n8k16 A/B/C fragment layouts, level_mask per register half,
the per-warp table and the epilogue index, in float64 (no hi + lo rounding), against the direct sums
of bwd_b9_levels_model.py. Complements bwd_v6_b9_emulation.py, which checks the tables and masks but
not the fragment layouts. Written by review7 (session 5, no GPU). Exits 1 when the worst relative
difference exceeds 1e-13. Planted breaks (MUT=1 epilogue row ^ s: 2.6e+00; MUT=2 the two halves of
load_a_t's matrix index swapped: 1.0e+00; MUT=3 mask high half = low half: 1.0e+00) each exit 1."""
import sys, os, numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bwd_b9_levels_model as M
LT, C = 72, 64
MUT = int(os.environ.get("MUT", "0"))

def ldsm_x4(mem, addr, trans):
    # addr[lane] = flat element address that lane gives; returns regs[lane][j] = (lo, hi)
    regs = np.zeros((32, 4, 2))
    for j in range(4):
        rows = [addr[8 * j + i] for i in range(8)]
        for L in range(32):
            g, t = L >> 2, L & 3
            if not trans:
                regs[L, j] = mem[rows[g] + 2 * t], mem[rows[g] + 2 * t + 1]
            else:
                regs[L, j] = mem[rows[2 * t] + g], mem[rows[2 * t + 1] + g]
    return regs

def load_a(mem, r0, c0, trans):
    if not trans:
        addr = [(r0 + (L & 15)) * LT + c0 + (L >> 4) * 8 for L in range(32)]
    else:  # load_a_t(a, s, ld, m0=r0, k0=c0)
        addr = [(c0 + (L & 7) + ((L >> 3) >> 1) * 8) * LT + r0 + ((L >> 3) & 1) * 8 for L in range(32)] if MUT != 2 else [(c0 + (L & 7) + ((L >> 3) & 1) * 8) * LT + r0 + ((L >> 3) >> 1) * 8 for L in range(32)]
    return ldsm_x4(mem, addr, trans)

def load_b_kn(mem, k0, n0):
    addr = [(k0 + (L & 7) + ((L >> 3) & 1) * 8) * LT + n0 + ((L >> 3) >> 1) * 8 for L in range(32)]
    return ldsm_x4(mem, addr, True)

def mma(acc, a, b0, b1):
    # acc[lane][4], a[lane][4][2], b0/b1[lane][2]
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for L in range(32):
        g, t = L >> 2, L & 3
        A[g, 2*t:2*t+2] = a[L, 0]; A[g+8, 2*t:2*t+2] = a[L, 1]
        A[g, 2*t+8:2*t+10] = a[L, 2]; A[g+8, 2*t+8:2*t+10] = a[L, 3]
        B[2*t:2*t+2, g] = b0[L]; B[2*t+8:2*t+10, g] = b1[L]
    D = A @ B
    for L in range(32):
        g, t = L >> 2, L & 3
        acc[L, 0:2] += D[g, 2*t:2*t+2]; acc[L, 2:4] += D[g+8, 2*t:2*t+2]

def level_mask(s):
    mask = np.zeros((32, 4, 2))
    for L in range(32):
        g, t = L >> 2, L & 3
        for x in range(4):
            r, c = g + 8 * (x & 1), 2 * t + 8 * (x >> 1)
            lo = s == 0 or ((r ^ c) & ~(s - 1)) == s
            hi = s == 0 or ((r ^ (c + 1)) & ~(s - 1)) == s
            mask[L, x] = (lo, lo if MUT == 3 else hi)
    return mask

def level_kstep(acc, A, B, m0, k0, n0, mask, trans):
    a = load_a(A, m0, k0, trans) * mask
    for half in range(2):
        b = load_b_kn(B, k0, n0 + 16 * half)
        mma(acc[:, 2 * half], a, b[:, 0], b[:, 1])
        mma(acc[:, 2 * half + 1], a, b[:, 2], b[:, 3])

def tile(x):
    m = np.zeros(64 * LT); m.reshape(64, LT)[:, :64] = x; return m

def kernel(dL, dP, G, k, e, qs, KP, Lc, K):
    L = np.where((np.arange(C)[:, None] < Lc) & np.tri(C, k=-1, dtype=bool), dL, 0.0)
    P = np.where((np.arange(C)[:, None] < Lc) & np.tri(C, k=-1, dtype=bool), dP, 0.0)
    sdg = np.where(np.arange(C) < Lc, np.diag(dP), 0.0)
    sL, sP = tile(L), tile(P)
    out = [np.full((C, KP), np.nan) for _ in range(3)]
    for kk in range(0, KP, 64):
        Gs, kS, eS, qS = G[:, kk:kk+64], k[:, kk:kk+64], e[:, kk:kk+64], qs[:, kk:kk+64]
        o = np.zeros((8, 3, 32, 4, 4))  # warp, (De, Dq, Dk), lane, nt, e
        for s in (32, 16, 8, 4, 2, 1):
            F = np.zeros((C, 64)); X = np.zeros((C, 64)); Y = np.zeros((C, 64))
            for r in range(C):
                left = (r & s) != 0
                m = (r & ~(s - 1)) if left else ((r & ~(2 * s - 1)) + s)
                F[r] = np.exp(np.minimum(Gs[r] - Gs[m] if left else Gs[m] - Gs[r], 0.0))
                X[r] = (eS[r] if left else kS[r]) * F[r]
                Y[r] = qS[r] * F[r] if left else 0.0
            sX, sY = tile(X), tile(Y)
            mask = level_mask(s if s <= 8 else 0)
            for warp in range(8):
                mb, m0, n0 = warp & 3, 16 * (warp & 3), (warp >> 2) * 32
                aL, aP, aK = (np.zeros((32, 4, 4)) for _ in range(3))
                def left_step(bj):
                    level_kstep(aL, sL, sX, m0, 16 * bj, n0, mask, False)
                    level_kstep(aP, sP, sX, m0, 16 * bj, n0, mask, False)
                def right_step(bi):
                    level_kstep(aK, sL, sX, m0, 16 * bi, n0, mask, True)
                    level_kstep(aK, sP, sY, m0, 16 * bi, n0, mask, True)
                for side, blk in M.warp_steps(s, mb):
                    (left_step if side == "left" else right_step)(blk)
                for lane in range(32):
                    g, t = lane >> 2, lane & 3
                    for nt in range(4):
                        for ee in range(4):
                            r = m0 + g + (8 if ee >= 2 else 0)
                            if MUT == 1: r ^= s
                            f = F[r, n0 + nt * 8 + 2 * t + (ee & 1)]
                            o[warp, 0, lane, nt, ee] += f * aL[lane, nt, ee]
                            o[warp, 1, lane, nt, ee] += f * aP[lane, nt, ee]
                            o[warp, 2, lane, nt, ee] += f * aK[lane, nt, ee]
        for warp in range(8):
            m0, n0 = 16 * (warp & 3), (warp >> 2) * 32
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                for nt in range(4):
                    for ee in range(4):
                        r, c = m0 + g + (8 if ee >= 2 else 0), n0 + nt * 8 + 2 * t + (ee & 1)
                        d = kk + c
                        if r < Lc and d < K:
                            out[0][r, d] = o[warp, 0, lane, nt, ee]
                            out[1][r, d] = o[warp, 1, lane, nt, ee] + sdg[r] * kS[r, c]
                            out[2][r, d] = o[warp, 2, lane, nt, ee] + sdg[r] * qS[r, c]
    return out

rng = np.random.default_rng(11)
worst = 0.0
for op, gate, Lc, K in [("KDA", "random", 64, 100), ("GDN2", "mixed", 37, 19), ("KDA", "extreme", 1, 128),
                        ("GDN2", "random", 50, 64), ("KDA", "zero", 23, 80)]:
    dL, dP, G, k, e, qs, KP = M.make_case(rng, Lc, K, gate, op)
    d = M.direct(dL, dP, G, k, e, qs, Lc)
    t = kernel(dL, dP, G, k, e, qs, KP, Lc, K)
    err = max(M.rel_max(x[:Lc, :K], y[:Lc, :K]) for x, y in zip(d, t))
    print(op, gate, Lc, K, f"{err:.1e}")
    worst = max(worst, err)
print(f"MUT={MUT} worst {worst:.1e}")
sys.exit(0 if worst < 1e-13 else 1)
