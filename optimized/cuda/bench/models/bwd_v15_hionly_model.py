#!/usr/bin/env python3
"""optimized/cuda/bench/models/bwd_v15_hionly_model.py -- the accuracy of rung 15 (bwd_v15_hionly.cu:
one bf16 MMA per product, no lo operands) predicted in float64 numpy before any GPU run (issue 6).

Outcome (session 10, RESULTS.md "Rung 15"): the prediction holds for the sequences it draws (T = 150 /
200), but on the H200 rung 15's properties failed on tiny cases with extreme gates (T = 1, 2), which this
model never drew and whose failure needs the front's bf16 values to reproduce: bwd_v17_hybrid_model.py
emulates both and is the model to read. This one is kept as the record of the prediction.

Part 1, DeltaNet and GDN end to end. A float64 chunked backward of one (sequence, head) with C = 64
(optimized/cpu/chunk_backward.cpp's stages F1-F7, B1-B11), checked against central finite differences
of the recurrent loss L = <do, o> + <dht, S_T> (S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} +
beta_t k_t v_t^T, o_t = S_t^T (scale q_t)). Every product that rung 13's G1' and G2' run on tensor cores
goes through mm(X, Y) with the operands as the kernels stage them:
  G1'  dQg = do S^T, dKd = v_new dS'^T, dw_aux = -dv_new S^T, dP = do v_new^T,
       dq^P = M2 k, dk^P = scale (M2^T q) (M2 = dP (.) Gam, lower with the diagonal)
  G2'  dA = dv_new u0^T + dw_aux E^T, du0 = A^T dv_new, dE = A^T dw_aux, T1 = dA A^T,
       dL = -A^T T1, de^L = M1 k, dk^L = M1b^T k (M1 = dL (.) Gam strictly lower, M1b = Diag(beta) M1)
in three modes: 'exact' (float64), 'hilo' (rung 13: each operand float32, split hi + lo bf16,
hi.hi + hi.lo + lo.hi) and 'hi' (rung 15: each operand float32 rounded to bf16, hi.hi only); the
product's result is rounded to float32 (float32 accumulation over 16-wide k-steps adds ~1e-7, not
modelled). The front (prepare, states, dstates: S, dS', v_new, dv_new, A, E, ...) is float64 in every
mode: it is the same code in rungs 13 and 15, so its error (rung 3's bf16-level recurrences, measured
on the H200) is common to both. Printed per gradient: the added error ratio
rms(mode - exact) / max(rms(exact), floor), floor = rms of dq, dk, dv together (the test's measure,
proofs_tests/test_cuda_backward.cu), worst over cases like the tests' (K, V up to 128, gate modes
random / zero / extreme / mixed, beta in [0, 1], unit keys, T = 150 or 200 with a ragged last chunk,
initial state, dht). Predicted rung 15 ratio = sqrt(rung 13's measured worst^2 + added^2), compared
with rung 3's bounds (1e-2 dq, dk, dv, dh0; 2e-2 dg, dbeta).

KDA end to end likewise (chunk_backward_kda, per-channel log-decays): rung 8's chunk-gradient kernel,
which rung 15 runs with hi-only operands (V15Mid): the same products, and B9 by levels as
bwd_b9_levels_model.py's levels() computes it (hi + lo: its Dev; hi only: both operands rounded to bf16),
the direct float64 sums in 'exact'. GDN2 (b, w gates) is not modelled end to end: its products and B9
are KDA's with e = b (.) k, u0 = w (.) v.

Part 2, B9 for per-channel gates (KDA, GDN2) by levels alone: its outputs de^L, dq^P, dk^LP with
hi-only operands (A = dL, dP and B = X, Y = k F, e F, q~ F rounded to bf16) against the direct float64
sums, next to hi + lo.

Exit 0: the model checks pass (finite differences within 1e-6 for DeltaNet, GDN and KDA; hi + lo adds < 1e-4; every predicted
rung 15 ratio within its bound); 1: a check failed (printed); 77: numpy missing (CTest skip).
  python3 optimized/cuda/bench/models/bwd_v15_hionly_model.py"""
import os
import sys

try:
    import numpy as np
except ImportError:
    print("SKIPPED: numpy not installed")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from devround import bf16, split  # noqa: E402  the device rounding

C = 64
# Rung 13's worst measured error ratios over the properties (test_cuda_backward.cu's file comment: rung 3
# family on the H200, either gate dtype): dk 5.2e-3, dv 3.8e-3, dh0 3.5e-3, dq 2.0e-3, dbeta 9.1e-3, dg 3.5e-3.
MEASURED13 = {"dq": 2.0e-3, "dk": 5.2e-3, "dv": 3.8e-3, "dh0": 3.5e-3, "dbeta": 9.1e-3, "dg": 3.5e-3}
BOUND = {"dq": 1e-2, "dk": 1e-2, "dv": 1e-2, "dh0": 1e-2, "dbeta": 2e-2, "dg": 2e-2}


def f32(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


def mm(x, y, mode):
    """x @ y as a G1' / G2' product: operands are float32 values on the device."""
    if mode == "exact":
        return x @ y
    if mode == "hilo":
        xh, xl = split(x)
        yh, yl = split(y)
        return f32(xh @ yh + xh @ yl + xl @ yh)
    return f32(bf16(x) @ bf16(y))  # 'hi': rung 15


def chunk_backward(q, k, v, g, beta, h0, do, dht, scale, mode):
    """Gradients of L = <do, o> + <dht, S_T> for one (sequence, head); g = None: DeltaNet."""
    T, K = k.shape
    V = v.shape[1]
    gl = np.zeros(T) if g is None else g
    chunks = [(c0, min(c0 + C, T)) for c0 in range(0, T, C)]
    fw, S = [], h0.copy()
    for c0, c1 in chunks:  # forward (F1-F7), keeping what the backward reads
        n = c1 - c0
        G = np.cumsum(gl[c0:c1])
        low = np.tri(n, dtype=bool)  # exp(G_i - G_j) for j <= i only (never a positive exponent)
        Gam = np.where(low, np.exp(np.where(low, G[:, None] - G[None, :], 0.0)), 0.0)
        qs, kk, vv, b = scale * q[c0:c1], k[c0:c1], v[c0:c1], beta[c0:c1]
        E = (b[:, None] * kk) * np.exp(G)[:, None]
        u0 = b[:, None] * vv
        Qg = qs * np.exp(G)[:, None]
        Kd = kk * np.exp(G[-1] - G)[:, None]
        Lm = (b[:, None] * (kk @ kk.T)) * Gam * np.tri(n, k=-1)
        P = (qs @ kk.T) * Gam
        A = np.linalg.inv(np.eye(n) + Lm)
        w_aux, u = A @ E, A @ u0
        vn = u - w_aux @ S
        fw.append(dict(G=G, Gam=Gam, qs=qs, k=kk, v=vv, b=b, E=E, u0=u0, Qg=Qg, Kd=Kd, P=P, A=A, w_aux=w_aux,
                       vn=vn, S=S.copy()))
        S = np.exp(G[-1]) * S + Kd.T @ vn
    dq, dk, dv = np.zeros((T, K)), np.zeros((T, K)), np.zeros((T, V))
    dbeta, dg = np.zeros(T), np.zeros(T)
    dS = dht.copy()
    for (c0, c1), f in reversed(list(zip(chunks, fw))):
        n = c1 - c0
        G, S, A, kk, qs, b = f["G"], f["S"], f["A"], f["k"], f["qs"], f["b"]
        dO = do[c0:c1]
        gamma = np.exp(G[-1])
        dvn = f["P"].T @ dO + f["Kd"] @ dS  # B1 (front: dstates)
        # G1' (B2, B4, B5, B9's P half)
        dKd = mm(f["vn"], dS.T, mode)
        dgam = np.sum(S * dS, axis=1)
        dQg = mm(dO, S.T, mode)
        dwa = -mm(dvn, S.T, mode)
        dP = mm(dO, f["vn"].T, mode) * np.tri(n)
        M2 = dP * f["Gam"]
        dqP = mm(M2, kk, mode)
        dkP = scale * mm(M2.T, q[c0:c1], mode)  # the kernel stages q (exact in bf16), scales after
        dS_prev = gamma * dS + f["Qg"].T @ dO - f["w_aux"].T @ dvn  # B3 (front: dstates)
        # G2' (B6, B8, B7, B9's L half)
        dA = (mm(dvn, f["u0"].T, mode) + mm(dwa, f["E"].T, mode)) * np.tri(n, k=-1)
        du0 = mm(A.T, dvn, mode)
        dE = mm(A.T, dwa, mode)
        T1 = mm(dA, A.T, mode) * np.tri(n, k=-1)
        dL = -mm(A.T, T1, mode) * np.tri(n, k=-1)
        M1 = dL * f["Gam"]
        deL = mm(M1, kk, mode)
        dkL = mm((b[:, None] * M1).T, kk, mode)
        # B10, B11 (float32 epilogues on the device; float64 here)
        eG = np.exp(G)[:, None]
        de = dE * eG + deL
        dq[c0:c1] = scale * (dQg * eG + dqP)
        dk[c0:c1] = dKd * np.exp(G[-1] - G)[:, None] + dkP + dkL + b[:, None] * de
        dv[c0:c1] = b[:, None] * du0
        dbeta[c0:c1] = np.sum(de * kk, axis=1) + np.sum(du0 * f["v"], axis=1)
        if g is not None:
            dGm = dE * f["E"] + dQg * f["Qg"] - dKd * f["Kd"] + (b[:, None] * kk) * deL + qs * dqP - kk * (dkP + dkL)
            dGm[-1] += np.sum(dKd * f["Kd"], axis=0) + dgam * gamma
            dg[c0:c1] = np.cumsum(np.sum(dGm, axis=1)[::-1])[::-1]
        dS = dS_prev
    out = dict(dq=dq, dk=dk, dv=dv, dbeta=dbeta, dh0=dS)
    if g is not None:
        out["dg"] = dg
    return out


def chunk_backward_kda(q, k, v, g, beta, h0, do, dht, scale, mode):
    """KDA (per-channel log-decays g [T, K]): rung 8's chunk-gradient kernel (V15Mid for mode 'hi'):
    the same G1 / G2 products as chunk_backward, and B9 by levels (bwd_b9_levels_model.levels) with the
    device's operands: 'exact' uses the direct float64 sums, 'hilo' levels() with hi + lo, 'hi' with
    hi-only operands (HiDev)."""
    import bwd_b9_levels_model as b9
    T, K = k.shape
    V = v.shape[1]
    KP = (K + 63) // 64 * 64
    chunks = [(c0, min(c0 + C, T)) for c0 in range(0, T, C)]
    fw, S = [], h0.copy()
    for c0, c1 in chunks:
        n = c1 - c0
        G = np.cumsum(g[c0:c1], axis=0)
        low = np.tri(n, dtype=bool)[:, :, None]
        Gam3 = np.where(low, np.exp(np.where(low, G[:, None, :] - G[None, :, :], 0.0)), 0.0)
        qs, kk, vv, b = scale * q[c0:c1], k[c0:c1], v[c0:c1], beta[c0:c1]
        E = (b[:, None] * kk) * np.exp(G)
        u0 = b[:, None] * vv
        Qg = qs * np.exp(G)
        Kd = kk * np.exp(G[-1] - G)
        Lm = b[:, None] * np.einsum("id,jd,ijd->ij", kk, kk, Gam3) * np.tri(n, k=-1)
        P = np.einsum("id,jd,ijd->ij", qs, kk, Gam3)
        A = np.linalg.inv(np.eye(n) + Lm)
        w_aux, u = A @ E, A @ u0
        vn = u - w_aux @ S
        fw.append(dict(G=G, qs=qs, k=kk, v=vv, b=b, E=E, u0=u0, Qg=Qg, Kd=Kd, P=P, A=A, w_aux=w_aux, vn=vn,
                       S=S.copy()))
        S = np.exp(G[-1])[:, None] * S + Kd.T @ vn
    dq, dk, dv = np.zeros((T, K)), np.zeros((T, K)), np.zeros((T, V))
    dbeta, dg = np.zeros(T), np.zeros((T, K))
    dS = dht.copy()
    for (c0, c1), f in reversed(list(zip(chunks, fw))):
        n = c1 - c0
        G, S, A, kk, qs, b = f["G"], f["S"], f["A"], f["k"], f["qs"], f["b"]
        dO = do[c0:c1]
        gamma = np.exp(G[-1])
        dvn = f["P"].T @ dO + f["Kd"] @ dS
        dKd = mm(f["vn"], dS.T, mode)
        dgam = np.sum(S * dS, axis=1)
        dQg = mm(dO, S.T, mode)
        dwa = -mm(dvn, S.T, mode)
        dP = mm(dO, f["vn"].T, mode) * np.tri(n)
        dS_prev = gamma[:, None] * dS + f["Qg"].T @ dO - f["w_aux"].T @ dvn
        dA = (mm(dvn, f["u0"].T, mode) + mm(dwa, f["E"].T, mode)) * np.tri(n, k=-1)
        du0 = mm(A.T, dvn, mode)
        dE = mm(A.T, dwa, mode)
        T1 = mm(dA, A.T, mode) * np.tri(n, k=-1)
        dL = -mm(A.T, T1, mode) * np.tri(n, k=-1)
        # B9 per channel on 64-row, KP-column tiles as the kernel stages them (zero past n and K)
        pad = lambda x, w: np.pad(x, ((0, C - x.shape[0]), (0, w - x.shape[1])))
        args = (pad(dL, C), pad(dP, C), pad(G, KP), pad(kk, KP), pad(b[:, None] * kk, KP), pad(qs, KP))
        if mode == "exact":
            deL, dqP, dkLP = b9.direct(*args, n)
        else:
            deL, dqP, dkLP = b9.levels(*args, KP, b9.Dev(True) if mode == "hilo" else b9.HiDev(True))
        deL, dqP, dkLP = deL[:n, :K], dqP[:n, :K], dkLP[:n, :K]
        eG = np.exp(G)
        de = dE * eG + deL
        dq[c0:c1] = scale * (dQg * eG + dqP)
        dk[c0:c1] = dKd * np.exp(G[-1] - G) + dkLP + b[:, None] * de
        dv[c0:c1] = b[:, None] * du0
        dbeta[c0:c1] = np.sum(de * kk, axis=1) + np.sum(du0 * f["v"], axis=1)
        dGm = dE * f["E"] + dQg * f["Qg"] - dKd * f["Kd"] + (b[:, None] * kk) * deL + qs * dqP - kk * dkLP
        dGm[-1] += np.sum(dKd * f["Kd"], axis=0) + dgam * gamma
        dg[c0:c1] = np.cumsum(dGm[::-1], axis=0)[::-1]
        dS = dS_prev
    return dict(dq=dq, dk=dk, dv=dv, dbeta=dbeta, dh0=dS, dg=dg)


def loss(q, k, v, g, beta, h0, do, dht, scale):
    S = h0.copy()
    L = 0.0
    for t in range(k.shape[0]):
        a = 1.0 if g is None else (np.exp(g[t])[:, None] if np.ndim(g) == 2 else np.exp(g[t]))
        S = a * S
        S = S + beta[t] * np.outer(k[t], v[t] - S.T @ k[t])
        L += do[t] @ (S.T @ (scale * q[t]))
    return L + np.sum(dht * S)


def make_case(rng, T, K, V, gate, gated, chan=False):
    q = bf16(rng.standard_normal((T, K)))
    k = rng.standard_normal((T, K))
    k = bf16(k / np.linalg.norm(k, axis=1, keepdims=True))
    v = bf16(rng.standard_normal((T, V)))
    do = bf16(rng.standard_normal((T, V)))
    if gate == "mixed":
        beta = np.where(rng.random(T) < 0.2, 0.0, np.where(rng.random(T) < 0.25, 1.0, rng.random(T)))
    else:
        beta = rng.random(T)
    beta = f32(beta)
    g = None
    if gated:
        shape = (T, K) if chan else (T,)
        if gate == "zero":
            g = np.zeros(shape)
        elif gate == "extreme":
            g = np.where(rng.random(shape) < 0.5, -30.0, -1000.0)
        else:  # log(sigmoid(N(2.5, 1.5))), the generator's random gates; mixed: some extreme
            x = rng.normal(2.5, 1.5, shape)
            g = -np.log1p(np.exp(-x))
            if gate == "mixed":
                g = np.where(rng.random(shape) < 0.2, -1000.0, g)
        g = f32(g)
    h0 = f32(0.5 * rng.standard_normal((K, V)))
    dht = f32(rng.standard_normal((K, V)))
    return q, k, v, g, beta, h0, do, dht, K ** -0.5


def ratio(got, want, floor):
    if not (np.all(np.isfinite(got)) and np.all(np.isfinite(want))):
        return np.inf
    err = np.sqrt(np.mean((got - want) ** 2))
    return err / max(np.sqrt(np.mean(want ** 2)), floor, 1e-300)


def check_fd(rng, failures):
    """The float64 chunked backward equals central finite differences of the loss (both operators)."""
    worst = 0.0
    for gated, chan in ((False, False), (True, False), (True, True)):
        args = make_case(rng, 70, 8, 5, "random", gated, chan)
        grads = (chunk_backward_kda if chan else chunk_backward)(*args, "exact")
        q, k, v, g, beta, h0, do, dht, scale = args
        names = [("dq", 0), ("dk", 1), ("dv", 2), ("dbeta", 4), ("dh0", 5)] + ([("dg", 3)] if gated else [])
        for name, ai in names:
            x = args[ai]
            for idx in [tuple(rng.integers(0, s) for s in x.shape) for _ in range(4)]:
                h = 1e-6
                xp, xm = [a.copy() if isinstance(a, np.ndarray) else a for a in args], \
                         [a.copy() if isinstance(a, np.ndarray) else a for a in args]
                xp[ai][idx] += h
                xm[ai][idx] -= h
                fd = (loss(*xp) - loss(*xm)) / (2 * h)
                an = grads[name][idx]
                worst = max(worst, abs(fd - an) / max(1.0, abs(an)))
    print(f"float64 chunked backward (DeltaNet, GDN, KDA) vs finite differences (T = 70, K = 8, V = 5, 2 chunks): "
          f"worst {worst:.1e}")
    if worst > 1e-6:
        failures.append(f"finite differences {worst:.1e} > 1e-6")


def part1(failures):
    rng = np.random.default_rng(15)
    check_fd(rng, failures)
    shapes = [(150, 64, 64), (200, 128, 128), (150, 36, 20), (130, 100, 128)]
    gates = ["random", "zero", "extreme", "mixed"]
    for opname, gated in (("DeltaNet", False), ("GDN", True), ("KDA", True)):
        chan = opname == "KDA"
        fn = chunk_backward_kda if chan else chunk_backward
        worst = {m: {} for m in ("hilo", "hi")}
        for (T, K, V) in (shapes[:3] if chan else shapes):
            for gate in (gates if gated else ["random", "mixed"]):
                for rep in range(1 if chan else 2):
                    args = make_case(rng, T, K, V, gate, gated, chan)
                    want = fn(*args, "exact")
                    floor = np.sqrt(np.mean(np.concatenate([want[n].ravel() for n in ("dq", "dk", "dv")]) ** 2))
                    for m in ("hilo", "hi"):
                        got = fn(*args, m)
                        for n in want:
                            worst[m][n] = max(worst[m].get(n, 0.0), ratio(got[n], want[n], floor))
        what = "rung 8's kernel (B9 by levels)" if chan else "G1' / G2'"
        print(f"\n{opname}: added error ratio of {what} products, worst over the shapes x gate modes")
        print("  grad   hi+lo (rung 13/8) hi only (rung 15)   rung 3 family worst  predicted rung 15   bound")
        for n in worst["hi"]:
            pred = float(np.hypot(MEASURED13[n], worst["hi"][n]))
            ok = pred <= BOUND[n]
            print(f"  {n:6s} {worst['hilo'][n]:12.1e} {worst['hi'][n]:17.1e} {MEASURED13[n]:18.1e} {pred:19.1e} "
                  f"{BOUND[n]:8.0e}{'' if ok else '  EXCEEDS'}")
            if not ok:
                failures.append(f"{opname} {n}: predicted {pred:.1e} > bound {BOUND[n]:.0e}")
            if worst["hilo"][n] > 1e-4:
                failures.append(f"{opname} {n}: hi + lo adds {worst['hilo'][n]:.1e} (> 1e-4: the model is wrong)")


def part2(failures):
    import bwd_b9_levels_model as b9

    rng = np.random.default_rng(150)
    print("\nB9 per channel by levels (KDA, GDN2), relative RMS against the float64 direct sums, worst over "
          "Lc in {64, 37}, K in {128, 100}:")
    print("  op   gate     | hi+lo: deL dqP dkLP          | hi only: deL dqP dkLP")
    for op in ("KDA", "GDN2"):
        for gate in ("random", "zero", "extreme", "mixed"):
            w = {"hilo": [0.0] * 3, "hi": [0.0] * 3}
            for Lc in (64, 37):
                for K in (128, 100):
                    dL, dP, G, k, e, qs, KP = b9.make_case(rng, Lc, K, gate, op)
                    want = b9.direct(dL, dP, G, k, e, qs, Lc)
                    for name, dev in (("hilo", b9.Dev(True)), ("hi", b9.HiDev(True))):
                        got = b9.levels(dL, dP, G, k, e, qs, KP, dev)
                        for t in range(3):
                            w[name][t] = max(w[name][t], b9.rel_rms(want[t], got[t]))
            print(f"  {op:4s} {gate:8s} | " + " ".join(f"{x:.1e}" for x in w["hilo"]) + "        | " +
                  " ".join(f"{x:.1e}" for x in w["hi"]))
            if max(w["hi"]) > 1e-2:
                failures.append(f"B9 {op} {gate}: hi only {max(w['hi']):.1e} > 1e-2")


def main():
    failures = []
    part1(failures)
    part2(failures)
    if failures:
        for f in failures:
            print("FAIL: " + f)
        return 1
    print("\nPASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
