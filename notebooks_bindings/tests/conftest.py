"""Shared helpers for the Python tests: an independent NumPy implementation of every recurrence in
the kernel layout S = W^T [K, V] (SPEC sections 1-2), written from the equations, not from the C++
code, so that the bindings' plumbing (layouts, gates, offsets, states, scale) is checked against
something that could disagree."""
import numpy as np
import pytest


def np_recurrent(op, q, k, v, g=None, beta=None, b=None, w=None, scale=None, initial_state=None,
                 cu_seqlens=None, bug=None):
    """o [B, T, H, V] and final states [N, H, K, V] in float64, one token at a time, S layout:
    S~ = Diag(alpha) S (alpha = exp(g): scalar for GDN, per key channel for KDA/GDN2, 1 otherwise);
    LA: S = S~ + k v^T; DeltaNet/GDN/KDA: S = S~ + k (beta (v - S~^T k))^T (Eqs.14-20);
    GDN2: S = S~ + k (w*v - S~^T (b*k))^T (Eq.24 transposed); o_t = S_t^T (scale q_t) (Eq.8).
    bug: None, or a deliberate mistake for the harness tests: 'decay_after_error' (the error read
    from the undecayed state, then the decay: the wrong GDN of SPEC section 2) or 'transposed_read'
    (o_t = S_t (scale q_t), which type-checks only when K == V) or 'state_lost_between_chunks' (a chunked
    kernel that starts every 64-token chunk after the first from a zero state)."""
    B, T, H, K = q.shape
    V = v.shape[3]
    scale = K ** -0.5 if scale is None else scale
    seqs = ([(bb, 0, T) for bb in range(B)] if cu_seqlens is None
            else [(0, int(cu_seqlens[n]), int(cu_seqlens[n + 1])) for n in range(len(cu_seqlens) - 1)])
    o = np.zeros((B, T, H, V))
    final = np.zeros((len(seqs), H, K, V))
    for n, (bb, t0, t1) in enumerate(seqs):
        for h in range(H):
            S = np.zeros((K, V)) if initial_state is None else np.array(initial_state[n, h], dtype=np.float64)
            for t in range(t0, t1):
                if bug == "state_lost_between_chunks" and t > t0 and (t - t0) % 64 == 0:
                    S = np.zeros((K, V))
                kt, vt = k[bb, t, h].astype(np.float64), v[bb, t, h].astype(np.float64)
                v_bar_undecayed = S.T @ kt
                if op in ("gated_delta_rule",):
                    S = np.exp(g[bb, t, h]) * S
                elif op in ("kda", "gdn2"):
                    S = np.exp(g[bb, t, h])[:, None] * S
                if op == "linear_attn":
                    S = S + np.outer(kt, vt)
                elif op == "gdn2":
                    S = S + np.outer(kt, w[bb, t, h] * vt - S.T @ (b[bb, t, h] * kt))
                else:
                    bt = 1.0 if beta is None else beta[bb, t, h]
                    v_bar = v_bar_undecayed if bug == "decay_after_error" else S.T @ kt
                    S = S + np.outer(kt, bt * (vt - v_bar))
                o[bb, t, h] = (S if bug == "transposed_read" else S.T) @ (scale * q[bb, t, h])
            final[n, h] = S
    return o, final


@pytest.fixture
def rng():
    return np.random.default_rng(20261129)


def np_kernel(op, bug=None, dtype=np.float32):
    """An fla-style kernel (keyword arguments in, (o, final_state) out, arrays of `dtype`) built on
    np_recurrent, optionally with a deliberate bug."""
    def kernel(q, k, v, g=None, beta=None, b=None, w=None, scale=None, initial_state=None,
               output_final_state=False, cu_seqlens=None):
        o, S = np_recurrent(op, q, k, v, g, beta, b, w, scale, initial_state, cu_seqlens, bug)
        return o.astype(dtype), (S.astype(dtype) if output_final_state else None)
    kernel.__name__ = f"numpy_{op}" + (f"_with_{bug}" if bug else "")
    return kernel
