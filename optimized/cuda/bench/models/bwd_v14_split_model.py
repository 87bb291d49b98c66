#!/usr/bin/env python3
"""optimized/cuda/bench/models/bwd_v14_split_model.py -- a float64 numpy check of rung 14's split of the
per-channel B9 (bwd_v14_pchan.cu), written before any GPU ran it: the P half with ONE operand tile
Z_s = [left rows: q~ F_s | right rows: k F_s] (G1' / G1: dq^P = dP Z_s on left output rows, dk^P = dP^T Z_s
on right output rows) and the L half with X_s = [left: e F_s | right: k F_s] (G2: de^L = dL X_s, dk^L =
dL^T X_s), each over rung 6's level schedule with its A masks, equal the direct sums
    de^L_r = sum_{j<r} dL_rj k_j exp(G_r - G_j),   dq^P_r = sum_{j<=r} dP_rj k_j exp(G_r - G_j),
    dk^L_r + dk^P_r = sum_{i>r} dL_ir e_i exp(G_i - G_r) + sum_{i>=r} dP_ir q~_i exp(G_i - G_r),
and the P half's level products equal rung 6's (Y_s = [q~ F | 0], X_s) on every entry: the merged tile
changes only operand rows that the masks and dP's strict lower triangle multiply by zero.
Exit 0: all checks pass; 1: a check failed; 77: numpy missing. Run: python3 <this file> (~1 s).
Measured when written: worst max |diff| / max |direct| 6.0e-16 over 4 gate kinds x Lc in {64, 37, 1};
the merged Z gives rung 6's P products exactly (np.array_equal).
Breaks tried (each on a copy, exit 1 seen): Z's left rows k F instead of q~ F (worst 1.4e+00, and Z
differs from rung 6's X, Y); Z's right rows zero (1.0e+00); no A mask on the diagonal blocks (dq^P 2.3e+00,
de^L 2.4e+00). Not registered with CTest (optimized/cuda/CMakeLists.txt's _models list is not this
rung's file to edit): run it by hand."""
import sys

try:
    import numpy as np
except ImportError:
    print("SKIPPED: numpy not installed")
    sys.exit(77)

C = 64
LEVELS = (32, 16, 8, 4, 2, 1)
DIAG = [(b, b) for b in range(4)]
TABLE = {32: [(2, 0), (2, 1), (3, 0), (3, 1)], 16: [(1, 0), (3, 2)], 8: DIAG, 4: DIAG, 2: DIAG, 1: DIAG}
failures = []


def ref_row(r, s):
    left = (r & s) != 0
    return left, np.where(left, r & ~(s - 1), (r & ~(2 * s - 1)) + s)


def level_mask(s):
    i, j = np.indices((C, C))
    x = i ^ j
    return (x >= s) & (x < 2 * s)


def half(A, B_left, B_right, G, rows_out):
    """One half's level products: A (C x C, strictly lower), operand [left rows: B_left F | right: B_right F].
    rows_out 'left': A B over the level's blocks (output rows left); 'right': A^T B (output rows right)."""
    out = np.zeros(G.shape)
    rows = np.arange(C)
    for s in LEVELS:
        left, m = ref_row(rows, s)
        diff = np.minimum(np.where(left[:, None], G - G[m], G[m] - G), 0.0)
        F = np.exp(diff)
        B = np.where(left[:, None], B_left, B_right) * F
        mask = level_mask(s)
        for bi, bj in TABLE[s]:
            lo, ro = slice(16 * bi, 16 * bi + 16), slice(16 * bj, 16 * bj + 16)
            mk = mask[lo, ro] if bi == bj else True
            if rows_out == "left":  # output block bi, contraction block bj
                out[lo] += F[lo] * (np.where(mk, A[lo, ro], 0.0) @ B[ro])
            else:  # output block bj, contraction block bi (transposed)
                out[ro] += F[ro] * (np.where(mk, A[lo, ro], 0.0).T @ B[lo])
    return out


def check(name, got, want):
    err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300)
    if not err <= 1e-13:
        failures.append(name)
        print(f"FAIL: {name}: {err:.1e}")
    return err


rng = np.random.default_rng(14)
worst = 0.0
for gate in ("random", "zero", "extreme", "mixed"):
    for Lc in (64, 37, 1):
        K = 64
        dL = np.where(np.tri(C, k=-1, dtype=bool), rng.standard_normal((C, C)), 0.0)
        dP = np.where(np.tri(C, dtype=bool), rng.standard_normal((C, C)), 0.0)
        dL[Lc:], dP[Lc:] = 0.0, 0.0
        k, qs, b = (np.zeros((C, K)) for _ in range(3))
        k[:Lc], qs[:Lc], b[:Lc] = rng.standard_normal((Lc, K)), rng.standard_normal((Lc, K)), rng.random((Lc, K))
        e = b * k
        g = {"random": -np.exp(rng.uniform(np.log(1e-3), np.log(3.0), (Lc, K))), "zero": np.zeros((Lc, K)),
             "extreme": np.full((Lc, K), -1000.0),
             "mixed": np.where(rng.random(K) < 0.5, -1000.0, -3.0 * rng.random((Lc, K)))}[gate]
        G = np.zeros((C, K))
        G[:Lc] = np.cumsum(g, axis=0)  # staged 0 past Lc, as the kernels do
        # direct sums
        r, j = np.indices((C, C))
        valid = ((j <= r) & (r < Lc))[:, :, None]
        Gam = np.where(valid, np.exp(np.where(valid, G[:, None, :] - G[None, :, :], 0.0)), 0.0)
        deL = np.einsum("rj,jd,rjd->rd", dL, k, Gam)
        dqP = np.einsum("rj,jd,rjd->rd", dP, k, Gam)
        dkL = np.einsum("ir,id,ird->rd", dL, e, Gam)
        dkP = np.einsum("ir,id,ird->rd", dP, qs, Gam)
        dPs = np.tril(dP, -1)  # the level products' dP: strictly lower (the diagonal apart)
        dg = np.diag(dP)[:, None]
        # rung 14: the P half with Z (one tile), the L half with X
        q_P = half(dPs, qs, k, G, "left") + dg * k
        k_P = half(dPs, qs, k, G, "right") + dg * qs
        e_L = half(dL, e, k, G, "left")
        k_L = half(dL, e, k, G, "right")
        # rung 6's P products: X_s (e F | k F) for dq^P, Y_s (q~ F | 0) for dk^P
        q_P6 = half(dPs, e, k, G, "left") + dg * k
        k_P6 = half(dPs, qs, np.zeros_like(k), G, "right") + dg * qs
        tag = f"{gate} Lc={Lc}"
        worst = max(worst, check(f"{tag} dq^P", q_P, dqP), check(f"{tag} dk^P", k_P, dkP),
                    check(f"{tag} de^L", e_L, deL), check(f"{tag} dk^L", k_L, dkL))
        if not (np.array_equal(q_P, q_P6) and np.array_equal(k_P, k_P6)):
            failures.append(f"{tag}: Z differs from rung 6's X, Y")
            print(f"FAIL: {tag}: the P half with Z differs from rung 6's X, Y products")
print(f"worst max |diff| / max |direct| {worst:.1e} (bound 1e-13)")
sys.exit(1 if failures else 0)
