#!/usr/bin/env python3
"""optimized/cuda/bench/models/bwd_v4_tiles_model.py -- a float64 numpy model of the CUDA backward
rung 4's tile decomposition of B7 and B9 (bwd_v4_tc_tail.cu, V4Mid), checked here without a GPU
against the direct sums of rung 2's float32 code (bwd_common.cuh, bwd_grads_tc with NoMid).
Second part: the same tiles with every hi + lo operand rounded as on the device (bf16 round to
nearest even; hi*hi + hi*lo + lo*hi; float32 accumulation approximated by float64), to see how
much precision the split loses. Exits 1 if the float64 tiles differ from the direct sums by more
than 1e-13 relative or the emulated split loses more than 1e-4 relative RMS; 77 (skipped) without
numpy. Written by the session that wrote rung 4 (RESULTS.md, backward "Rung 4")."""
import sys
try:
    import numpy as np
except ImportError:
    print("SKIPPED: numpy not installed")
    sys.exit(77)

C = 64

from devround import bf16, split  # the device rounding (devround.py)

def mm(a, b, emulate):
    """a @ b as gemm64 does it: both operands hi + lo (when given as float), lo*lo dropped."""
    if not emulate:
        return a @ b
    ah, al = split(a)
    bh, bl = split(b)
    return (ah @ bh + ah @ bl + al @ bh).astype(np.float32).astype(np.float64)

def mm_exact_b(a, b, emulate):
    """b exact in bf16 (k, q): a as hi + lo."""
    if not emulate:
        return a @ b
    ah, al = split(a)
    return (ah @ b + al @ b).astype(np.float32).astype(np.float64)

def case(rng, Lc, K, gate, scale):
    A = np.tril(rng.standard_normal((C, C)) * 0.3, -1) + np.eye(C)
    A[Lc:] = 0
    dA = np.tril(rng.standard_normal((C, C)), -1); dA[Lc:] = 0
    dP = np.tril(rng.standard_normal((C, C))); dP[Lc:] = 0
    if gate == "none":
        G = np.zeros(C)
    elif gate == "extreme":
        G = np.cumsum(np.full(C, -1000.0))
    else:
        G = np.cumsum(-rng.random(C) * 0.5)
    G[Lc:] = 0
    beta = rng.random(C); beta[Lc:] = 0
    KP = (K + 63) // 64 * 64
    k = np.zeros((C, KP)); q = np.zeros((C, KP))
    k[:Lc, :K] = bf16(rng.standard_normal((Lc, K)))
    q[:Lc, :K] = bf16(rng.standard_normal((Lc, K)))
    return A, dA, dP, G, beta, k, q, KP

def direct(A, dA, dP, G, beta, k, q, Lc, K, scale):
    """Rung 2's loops (bwd_common.cuh, NoMid): B7 then B9 by their sums."""
    T1 = np.zeros((C, C)); dL = np.zeros((C, C))
    for i in range(C):
        for j in range(i):
            T1[i, j] = sum(dA[i, m] * A[j, m] for m in range(j + 1))
    for i in range(C):
        for j in range(i):
            dL[i, j] = -sum(A[a, i] * T1[a, j] for a in range(i, Lc))
    gam = lambda i, j: np.exp(G[i] - G[j])
    e = beta[:, None] * k
    qs = scale * q
    deL = np.zeros((C, K)); dqP = np.zeros((C, K)); dkLP = np.zeros((C, K))
    for r in range(Lc):
        for j in range(r + 1):
            kg = k[j, :K] * gam(r, j)
            dqP[r] += dP[r, j] * kg
            if j < r: deL[r] += dL[r, j] * kg
        for i in range(r, Lc):
            src = dP[i, r] * qs[i, :K]
            if i > r: src = src + dL[i, r] * e[i, :K]
            dkLP[r] += src * gam(i, r)
    return dL, deL, dqP, dkLP

def tiles(A, dA, dP, G, beta, k, q, Lc, K, KP, scale, emulate):
    """V4Mid: B7 as two 64^3 products with masks, B9 as four products per 64-channel slab."""
    i, j = np.indices((C, C))
    lower, strict = (j <= i) & (i < Lc), (j < i) & (i < Lc)
    T1 = np.where(j < i, mm(np.where(strict, dA, 0), A.T, emulate), 0)
    dL = np.where(strict, -mm(A.T, T1, emulate), 0)
    Gam = np.exp(np.minimum(G[:, None] - G[None, :], 0) * lower)  # only read where lower
    M1 = np.where(strict, dL * Gam, 0)
    M1b = beta[:, None] * M1
    M2 = np.where(lower, dP * Gam, 0)
    if emulate:
        M1, M1b, M2 = (x.astype(np.float32).astype(np.float64) for x in (M1, M1b, M2))
    deL = np.zeros((C, KP)); dqP = np.zeros((C, KP)); dkLP = np.zeros((C, KP))
    for kk in range(0, KP, 64):
        ks, qs = k[:, kk:kk + 64], q[:, kk:kk + 64]
        deL[:, kk:kk + 64] = mm_exact_b(M1, ks, emulate)
        dqP[:, kk:kk + 64] = mm_exact_b(M2, ks, emulate)
        dkLP[:, kk:kk + 64] = mm_exact_b(M1b.T, ks, emulate) + scale * mm_exact_b(M2.T, qs, emulate)
    return dL, deL[:, :K], dqP[:, :K], dkLP[:, :K]

rng = np.random.default_rng(20261130)
worst = 0.0; worst_em = {}
for Lc, K, gate in [(64, 128, "scalar"), (37, 100, "scalar"), (1, 16, "scalar"), (64, 64, "none"),
                    (65 - 1, 19, "extreme"), (23, 128, "none"), (50, 77, "extreme")]:
    scale = K ** -0.5
    A, dA, dP, G, beta, k, q, KP = case(rng, Lc, K, gate, scale)
    d = direct(A, dA, dP, G, beta, k, q, Lc, K, scale)
    t = tiles(A, dA, dP, G, beta, k, q, Lc, K, KP, scale, False)
    te = tiles(A, dA, dP, G, beta, k, q, Lc, K, KP, scale, True)
    diffs = [np.max(np.abs(x - y)) / max(np.max(np.abs(x)), 1e-300) for x, y in zip(d, t)]
    rel = [np.sqrt(np.mean((x - y) ** 2)) / max(np.sqrt(np.mean(x ** 2)), 1e-300) for x, y in zip(d, te)]
    worst = max(worst, max(diffs))
    for n, r in zip(["dL", "deL", "dqP", "dkLP"], rel): worst_em[n] = max(worst_em.get(n, 0), r)
    print(f"Lc={Lc:2d} K={K:3d} gate={gate:7s}: float64 tiles vs direct, max |diff| / max |direct|: "
          + ", ".join(f"{n} {x:.1e}" for n, x in zip(["dL", "deL", "dqP", "dkLP"], diffs))
          + " | bf16 hi+lo emulated, relative RMS: " + ", ".join(f"{x:.1e}" for x in rel))
print(f"worst float64 difference {worst:.1e}; worst emulated hi+lo relative RMS: "
      + ", ".join(f"{n} {x:.1e}" for n, x in worst_em.items()))
ok = worst < 1e-13 and max(worst_em.values()) < 1e-4
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
