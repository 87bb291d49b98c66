"""The chunked CPU kernels through the bindings: float64 equals the reference to 1e-12 for every
chunk size, packed batches and initial states; the harness passes them in float32 (the
demonstration on this project's own kernels); the per-chunk intermediates satisfy SPEC section 4."""
import numpy as np
import pytest

import linattn
import linattn.testing as lt

CHUNK_OPS = ["delta_rule", "gated_delta_rule", "kda", "gdn2"]


@pytest.mark.parametrize("op", CHUNK_OPS)
@pytest.mark.parametrize("C", [16, 32, 64])
def test_chunked_kernel_equals_the_reference_in_float64(op, C):
    inp = lt.random_inputs(op, B=1, T=100, H=2, K=5, V=7, cu_seqlens=3, initial_state=True,
                           gates="mixed", dtype=np.float64, seed=C)
    o, S = linattn.chunk(op, **inp, chunk_size=C)
    o_ref, S_ref = linattn.reference(op, **inp)
    assert o.dtype == np.float64
    lt.assert_close(o, o_ref, rtol_rms=1e-12, name="o")
    lt.assert_close(S, S_ref, rtol_rms=1e-12, name="final_state")
    o_f, S_f = linattn.fused_recurrent(op, **inp)
    lt.assert_close(o_f, o_ref, rtol_rms=1e-12, name="o (fused recurrent)")


@pytest.mark.parametrize("op", CHUNK_OPS)
def test_harness_passes_the_float32_chunked_kernels(op):
    kernel = lambda **kw: linattn.chunk(op, **kw, chunk_size=16)
    kernel.__name__ = f"chunk_{op}"
    assert lt.check_kernel(kernel, op, T=(1, 70), max_examples=25, seed=2) >= 25


@pytest.mark.parametrize("op", CHUNK_OPS)
def test_harness_passes_the_float32_fused_recurrent_kernels(op):
    kernel = lambda **kw: linattn.fused_recurrent(op, **kw)
    assert lt.check_kernel(kernel, op, max_examples=15, seed=3) >= 15


def test_chunk_intermediates_satisfy_the_ut_transform_equations():
    inp = lt.random_inputs("kda", B=1, T=40, H=1, K=4, V=3, dtype=np.float64, initial_state=True, seed=4)
    stages = linattn.chunk_intermediates("kda", inp["q"], inp["k"], inp["v"], g=inp["g"], beta=inp["beta"],
                                         initial_state=inp["initial_state"], chunk_size=16)
    assert [s["len"] for s in stages] == [16, 16, 8] and [s["t0"] for s in stages] == [0, 16, 32]
    for s in stages:
        n = s["len"]
        L, A, G, e = s["L"], s["A"], s["G"], s["e"]
        k = inp["k"][0, s["t0"]:s["t0"] + n, 0]
        assert np.allclose(A @ (np.eye(n) + L), np.eye(n), rtol=0, atol=1e-12)           # A = (I + L)^-1
        for i in range(n):
            for j in range(i):
                assert abs(L[i, j] - np.sum(e[i] * k[j] * np.exp(G[i] - G[j]))) < 1e-12   # L_ij
        assert np.allclose(s["w_aux"], A @ (e * np.exp(G)), rtol=0, atol=1e-12)
        assert np.allclose(s["u"], A @ s["u0"], rtol=0, atol=1e-12)
        assert np.allclose(s["v_new"], s["u"] - s["w_aux"] @ s["S_in"], rtol=0, atol=1e-12)
    for a, b in zip(stages, stages[1:]):
        assert np.array_equal(a["S_out"], b["S_in"])
    _, S = linattn.reference("kda", **inp)
    assert np.allclose(stages[-1]["S_out"], S[0, 0], rtol=0, atol=1e-12)


def test_chunk_size_is_checked():
    inp = lt.random_inputs("delta_rule", T=5, seed=5)
    with pytest.raises(ValueError, match="chunk_size"):
        linattn.chunk("delta_rule", **inp, chunk_size=48)
    with pytest.raises(ValueError, match="has no such kernel"):
        linattn.chunk("linear_attn", **inp)


@pytest.mark.parametrize("op", CHUNK_OPS)
def test_chunked_backward_equals_the_reference_backward_in_float64(op):
    inp = lt.random_inputs(op, B=1, T=50, H=2, K=5, V=3, cu_seqlens=2, initial_state=True,
                           gates="mixed", dtype=np.float64, seed=6)
    cot = lt.random_cotangents(op, inp, seed=7)
    got = linattn.chunk_backward(op, **inp, **cot, chunk_size=16)
    want = linattn.reference_backward(op, **inp, **cot)
    assert set(got) == set(want)
    for key in want:
        lt.assert_close(got[key], want[key], rtol_rms=1e-12, name=key)


@pytest.mark.parametrize("op", ["gated_delta_rule", "gdn2"])
def test_harness_passes_the_float32_chunked_forward_and_backward(op):
    kernel = lambda **kw: linattn.chunk(op, **kw, chunk_size=16)
    backward = lambda **kw: linattn.chunk_backward(op, **kw, chunk_size=16)
    assert lt.check_kernel(kernel, op, backward=backward, T=(1, 40), rtol_rms=1e-4, max_examples=15, seed=4) >= 15
