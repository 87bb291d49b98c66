#!/usr/bin/env python3
"""optimized/cuda/bench/models/v5_split_model.py -- a float64 numpy model of the CUDA forward rung 5's
split (v5_split.cu): a state pass that stores the state entering each chunk (global chunk index
c_first + ci, as v2_state's kBwd mode) and v_new by token, then an output pass over the chunk table
(one (chunk, head, value tile) per block, rows past a ragged chunk's end zero-filled), against the
fused chunked loop and the naive per-token recurrence, on a packed batch with ragged chunks and an
empty sequence (KDA-style per-channel gates). Checked here without a GPU; exits 1 on a mismatch,
77 (skipped) without numpy. Written by the session that wrote rung 5 (RESULTS.md, "Rung 5")."""
import sys
try:
    import numpy as np
except ImportError:
    print("SKIPPED: numpy not installed")
    sys.exit(77)
rng = np.random.default_rng(0)
H, K, V, C = 2, 5, 7, 4
cu = [0, 3, 3, 12, 13, 22]  # packed: lengths 3, 0, 9, 1, 9 (ragged chunks, an empty sequence)
T = cu[-1]; N = len(cu) - 1
q = rng.standard_normal((T, H, K)); k = rng.standard_normal((T, H, K)); k /= np.linalg.norm(k, axis=-1, keepdims=True)
v = rng.standard_normal((T, H, V)); g = -rng.exponential(0.5, (T, H, K)); beta = rng.uniform(0, 1, (T, H))
h0 = rng.standard_normal((N, H, K, V)); scale = K ** -0.5
def naive():
    o = np.zeros((T, H, V)); ht = np.zeros((N, H, K, V))
    for n in range(N):
        for h in range(H):
            S = h0[n, h].copy()
            for t in range(cu[n], cu[n + 1]):
                S = np.exp(g[t, h])[:, None] * S
                S += np.outer(k[t, h], beta[t, h] * (v[t, h] - S.T @ k[t, h]))
                o[t, h] = scale * S.T @ q[t, h]
            ht[n, h] = S
    return o, ht
# chunk table (plan_call): chunks in sequence order, first chunk of each sequence
tok0, seq, first = [], [], []
for n in range(N):
    first.append(len(tok0))
    for t in range(cu[n], cu[n + 1], C): tok0.append(t); seq.append(n)
def intra(c, h):  # the tensor-core workspace of chunk c (zero-padded to C rows)
    t0 = tok0[c]; Lc = min(C, cu[seq[c] + 1] - t0)
    pad = lambda x: np.concatenate([x, np.zeros((C - Lc,) + x.shape[1:])])
    kk, qq, vv = pad(k[t0:t0 + Lc, h]), pad(q[t0:t0 + Lc, h]), pad(v[t0:t0 + Lc, h])
    bb, G = pad(beta[t0:t0 + Lc, h]), np.cumsum(pad(g[t0:t0 + Lc, h]), axis=0)
    D = np.exp(G[:, None, :] - G[None, :, :])  # exp(G_i - G_j) per channel
    D = np.where(np.tril(np.ones((C, C)))[:, :, None] > 0, D, 0)
    L = np.tril(bb[:, None] * np.einsum('id,jd,ijd->ij', kk, kk, D), -1)
    P = scale * np.einsum('id,jd,ijd->ij', qq, kk, D)
    A = np.linalg.inv(np.eye(C) + L)
    return dict(w=A @ (bb[:, None] * kk * np.exp(G)), u=A @ (bb[:, None] * vv), qg=scale * qq * np.exp(G),
                kd=kk * np.exp(G[-1] - G), P=P, gC=np.exp(G[-1]), t0=t0, Lc=Lc)
ws = {(c, h): intra(c, h) for c in range(len(tok0)) for h in range(H)}
def fused():
    o = np.full((T, H, V), np.nan); ht = np.zeros((N, H, K, V))
    for n in range(N):
        for h in range(H):
            S = h0[n, h].copy()
            for c in range(first[n], first[n] + len([t for t in tok0 if seq[tok0.index(t)] == n])):
                W = ws[c, h]; vn = W['u'] - W['w'] @ S
                oc = W['qg'] @ S + W['P'] @ vn
                o[W['t0']:W['t0'] + W['Lc'], h] = oc[:W['Lc']]
                S = W['gC'][:, None] * S + W['kd'].T @ vn
            ht[n, h] = S
    return o, ht
def split():
    Sws = np.full((len(tok0), H, K, V), np.nan); vnws = np.full((T, H, V), np.nan); ht = np.zeros((N, H, K, V))
    for n in range(N):  # the state pass (kBwd + kHt)
        for h in range(H):
            S = h0[n, h].copy(); nch = (cu[n + 1] - cu[n] + C - 1) // C
            for ci in range(nch):
                W = ws[first[n] + ci, h]; Sws[first[n] + ci, h] = S
                vn = W['u'] - W['w'] @ S; t0 = cu[n] + ci * C; Lc = min(C, cu[n + 1] - t0)
                vnws[t0:t0 + Lc, h] = vn[:Lc]
                S = W['gC'][:, None] * S + W['kd'].T @ vn
            ht[n, h] = S
    o = np.full((T, H, V), np.nan); nvt = 1
    for bx in range(len(tok0) * H * nvt):  # the output kernel's flattened grid
        z, ch = bx % nvt, bx // nvt; c, h = ch // H, ch % H
        W = ws[c, h]; t0, Lc = W['t0'], W['Lc']
        vn = np.zeros((C, V)); vn[:Lc] = vnws[t0:t0 + Lc, h]  # rows past Lc zero-filled
        oc = W['qg'] @ Sws[c, h] + W['P'] @ vn
        o[t0:t0 + Lc, h] = oc[:Lc]
    return o, ht
on, hn = naive(); of, hf = fused(); os_, hs = split()
rel = lambda a, b: np.sqrt(np.mean((a - b) ** 2) / np.mean(b ** 2))
print("fused vs naive: o %.1e state %.1e" % (rel(of, on), rel(hf, hn)))
print("split vs naive: o %.1e state %.1e" % (rel(os_, on), rel(hs, hn)))
print("split vs fused max |diff|: o %.1e" % np.max(np.abs(os_ - of)), "nan in split o:", np.isnan(os_).sum())
ok = rel(of, on) < 1e-13 and rel(hf, hn) < 1e-13 and rel(os_, on) < 1e-13 and rel(hs, hn) < 1e-13 \
    and np.max(np.abs(os_ - of)) < 1e-13 and np.isnan(os_).sum() == 0
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
