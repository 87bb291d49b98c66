"""The bindings: every operator agrees with an independent NumPy recurrence (float64 to 1e-12),
float32 dispatch, fla keyword arguments (scale, initial_state, output_final_state, cu_seqlens,
use_qk_l2norm_in_kernel, beta=None), the trace, the no-silent-copy policy and error mapping, the
per-token steps, softmax and linear attention."""
import numpy as np
import pytest

import linattn
import linattn.testing as lt
from conftest import np_recurrent

OPS = linattn.OPS


def rel(a, b):
    return np.linalg.norm(np.asarray(a, np.float64) - b) / max(np.linalg.norm(b), 1e-300)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("packed", [False, True])
def test_every_operator_equals_the_numpy_recurrence_in_float64(op, packed):
    kw = dict(B=1, T=13, cu_seqlens=3, initial_state=True) if packed else dict(B=2, T=9, initial_state=True)
    inp = lt.random_inputs(op, H=2, K=5, V=3, dtype=np.float64, gates="mixed", seed=7, **kw)
    o, S = linattn.reference(op, **inp)
    gates = {n: inp[n] for n in linattn.GATES[op]}
    o_np, S_np = np_recurrent(op, inp["q"], inp["k"], inp["v"], initial_state=inp["initial_state"],
                              cu_seqlens=inp["cu_seqlens"], **gates)
    assert o.dtype == np.float64 and o.shape == o_np.shape and S.shape == S_np.shape
    assert rel(o, o_np) < 1e-12 and rel(S, S_np) < 1e-12


@pytest.mark.parametrize("op", OPS)
def test_float32_inputs_run_in_float32_and_agree_with_float64(op):
    inp = lt.random_inputs(op, B=2, T=20, H=2, K=6, V=4, dtype=np.float32, initial_state=True, seed=3)
    o, S = linattn.reference(op, **inp)
    assert o.dtype == np.float32 and S.dtype == np.float32
    ref = lt.reference_outputs(op, inp)
    assert 0 < rel(o, ref["o"]) < 1e-5 and rel(S, ref["final_state"]) < 1e-5


def test_scale_defaults_to_inverse_sqrt_K_and_multiplies_q():
    inp = lt.random_inputs("gated_delta_rule", T=6, K=9, V=2, dtype=np.float64, seed=1)
    o_default, _ = linattn.reference("gated_delta_rule", **inp)
    inp2 = dict(inp, scale=1 / 3.0)
    o_explicit, _ = linattn.reference("gated_delta_rule", **inp2)
    o_one, _ = linattn.reference("gated_delta_rule", **dict(inp, scale=1.0))
    assert rel(o_default, o_explicit) < 1e-15
    assert rel(o_one / 3.0, o_default) < 1e-14


def test_final_state_is_none_unless_requested_and_the_trace_is_consistent():
    inp = lt.random_inputs("kda", T=7, dtype=np.float64, initial_state=True, seed=2)
    inp["output_final_state"] = False
    o, S = linattn.reference("kda", **inp)
    assert S is None
    o2, S2, tr = linattn.reference("kda", **inp, return_trace=True)
    assert np.array_equal(o, o2) and S2 is None
    assert set(tr) == {"v_bar", "r", "written"}
    # r = v - v_bar (Eq.10/19) and written = beta r (Eq.20), per token.
    assert np.allclose(tr["r"], inp["v"] - tr["v_bar"], rtol=0, atol=1e-14)
    assert np.allclose(tr["written"], inp["beta"][..., None] * tr["r"], rtol=0, atol=1e-14)


def test_beta_none_means_ones_as_in_fla():
    inp = lt.random_inputs("delta_rule", T=5, dtype=np.float64, seed=4)
    ones = np.ones_like(inp["beta"])
    a, _ = linattn.naive_recurrent_delta_rule(inp["q"], inp["k"], inp["v"])
    b, _ = linattn.naive_recurrent_delta_rule(inp["q"], inp["k"], inp["v"], ones)
    assert np.array_equal(a, b)


def test_qk_l2norm_in_kernel_equals_normalising_outside():
    inp = lt.random_inputs("gated_delta_rule", T=6, dtype=np.float64, unit_keys=False, seed=5)
    a, _ = linattn.reference("gated_delta_rule", **dict(inp, use_qk_l2norm_in_kernel=True))
    n = lambda x: x / np.sqrt(np.sum(x * x, axis=-1, keepdims=True) + 1e-6)  # eps 1e-6 inside the root
    b, _ = linattn.reference("gated_delta_rule", **dict(inp, q=n(inp["q"]), k=n(inp["k"])))
    assert rel(a, b) < 1e-13


def test_prefill_continuation_with_the_state_carried():
    inp = lt.random_inputs("gdn2", T=12, dtype=np.float64, initial_state=True, seed=6)
    o, S = linattn.reference("gdn2", **inp)
    t = 5
    cut = lambda x, sl: np.ascontiguousarray(x[:, sl])
    first = {k: (cut(x, slice(0, t)) if k in ("q", "k", "v", "g", "b", "w") else x) for k, x in inp.items()}
    o1, S1 = linattn.reference("gdn2", **first)
    second = {k: (cut(x, slice(t, None)) if k in ("q", "k", "v", "g", "b", "w") else x) for k, x in inp.items()}
    second["initial_state"] = S1
    o2, S2 = linattn.reference("gdn2", **second)
    assert rel(np.concatenate([o1, o2], axis=1), o) < 1e-13 and rel(S2, S) < 1e-13


def test_mismatched_dtypes_raise_valueerror_naming_both_arguments():
    inp = lt.random_inputs("gated_delta_rule", dtype=np.float64)
    inp["g"] = inp["g"].astype(np.float32)
    with pytest.raises(ValueError, match=r"arguments 'q' \(float64\) and 'g' \(float32\)"):
        linattn.reference("gated_delta_rule", **inp)
    o, _ = linattn.reference("gated_delta_rule", **inp, copy=True)  # explicit conversion allowed
    assert o.dtype == np.float64


def test_non_contiguous_or_non_float_input_raises_and_copy_true_converts():
    inp = lt.random_inputs("delta_rule", B=1, T=8, dtype=np.float64, seed=8)
    strided = np.repeat(inp["q"], 2, axis=1)[:, ::2]  # same values, not C-contiguous
    assert not strided.flags.c_contiguous and np.array_equal(strided, inp["q"])
    with pytest.raises(ValueError, match=r"argument 'q' expected a C-contiguous"):
        linattn.reference("delta_rule", **dict(inp, q=strided))
    with pytest.raises(ValueError, match=r"argument 'v' expected dtype float32 or float64"):
        linattn.reference("delta_rule", **dict(inp, v=inp["v"].astype(np.int64)))
    with pytest.raises(ValueError, match=r"argument 'k' expected a numpy.ndarray"):
        linattn.reference("delta_rule", **dict(inp, k=inp["k"].tolist()))
    with pytest.raises(ValueError, match=r"argument 'k' expected dtype float32 or float64 \(native byte order\)"):
        linattn.reference("delta_rule", **dict(inp, k=inp["k"].astype(">f8")))
    a, _ = linattn.reference("delta_rule", **inp)
    b, _ = linattn.reference("delta_rule", **dict(inp, q=strided), copy=True)
    assert np.array_equal(a, b)


def test_read_only_inputs_are_borrowed_and_outputs_outlive_them():
    inp = lt.random_inputs("linear_attn", T=4, dtype=np.float64, seed=9)
    for key in ("q", "k", "v"):
        inp[key].flags.writeable = False
    o, _ = linattn.reference("linear_attn", **inp)
    expected = o.copy()
    del inp
    assert np.array_equal(o, expected) and o.flags.c_contiguous


def test_library_errors_are_valueerrors_naming_argument_expected_and_actual():
    assert issubclass(linattn.Error, ValueError)
    inp = lt.random_inputs("gated_delta_rule", T=3, dtype=np.float64)
    inp["g"][0, 1, 0] = 0.25
    with pytest.raises(linattn.Error, match=r"naive_recurrent_gated_delta_rule: argument 'g' expected values in \(-inf, 0\] but got 0.25 at index \[0, 1, 0\]"):
        linattn.reference("gated_delta_rule", **inp)
    inp = lt.random_inputs("kda", T=3, dtype=np.float64)
    with pytest.raises(ValueError, match=r"argument 'beta' expected shape \[1, 3, 2\] but got shape \[1, 3\]"):
        linattn.reference("kda", **dict(inp, beta=np.ascontiguousarray(inp["beta"][..., 0])))
    with pytest.raises(ValueError, match=r"argument 'cu_seqlens' expected integer offsets"):
        linattn.reference("kda", **dict(inp, cu_seqlens=np.array([0.0, 3.0])))
    with pytest.raises(ValueError, match=r"argument 'cu_seqlens' expected last offset equal to the packed length T = 3"):
        linattn.reference("kda", **dict(inp, cu_seqlens=[0, 2]))
    with pytest.raises(ValueError, match=r"argument 'cu_seqlens' expected a 1-D sequence of at least 2 offsets"):
        linattn.reference("kda", **dict(inp, cu_seqlens=[0]))


def test_deltanet_worked_example_prediction_2_target_5_beta_half_gives_3_5():
    W = np.array([[2.0]])
    W_new, tr = linattn.deltanet_step(W, np.array([1.0]), np.array([5.0]), 0.5)
    assert W_new[0, 0] == 3.5 and W[0, 0] == 2.0  # the input W is not modified
    assert tr["v_bar"][0] == 2.0 and tr["r"][0] == 3.0 and tr["written"][0] == 1.5


def test_gdn_step_differs_from_error_before_decay_whenever_alpha_below_one(rng):
    W = rng.standard_normal((3, 4))
    kappa, v = rng.standard_normal(4), rng.standard_normal(3)
    for alpha in (1.0, 0.5):
        a, _ = linattn.gdn_step(W, kappa, v, alpha, 0.7)
        b, _ = linattn.gdn_step_decay_after_error(W, kappa, v, alpha, 0.7)
        assert (np.abs(a - b).max() == 0) == (alpha == 1.0)


def test_steps_in_float32_and_the_W_S_layouts(rng):
    d_v, d_phi = 3, 5
    W = rng.standard_normal((d_v, d_phi))
    kappa, v = rng.standard_normal(d_phi), rng.standard_normal(d_v)
    a, bvec, wvec = rng.uniform(size=d_phi), rng.uniform(size=d_phi), rng.uniform(size=d_v)
    W_new, _ = linattn.gdn2_step(W, kappa, v, a, bvec, wvec)
    S_new = linattn.gdn2_step_S(linattn.W_to_S(W), kappa, v, a, bvec, wvec)
    assert np.array_equal(linattn.S_to_W(linattn.W_to_S(W)), W)
    assert rel(linattn.W_to_S(W_new), S_new) < 1e-14
    W32, _ = linattn.gdn2_step(*(x.astype(np.float32) for x in (W, kappa, v, a, bvec, wvec)))
    assert W32.dtype == np.float32 and rel(W32, W_new) < 1e-6
    # KDA with alpha_vec = alpha 1 is GDN (Eqs.18-20 vs 15-17)
    k1, _ = linattn.kda_step(W, kappa, v, np.full(d_phi, 0.6), 0.3)
    g1, _ = linattn.gdn_step(W, kappa, v, 0.6, 0.3)
    assert rel(k1, g1) < 1e-15
    with pytest.raises(ValueError, match="kda_step: argument 'alpha_vec' expected length 5 but got length 4"):
        linattn.kda_step(W, kappa, v, np.full(4, 0.6), 0.3)
    assert rel(linattn.read(W, kappa), W @ kappa) < 1e-15


def test_softmax_attention_equals_numpy_with_gqa(rng):
    B, T, H, Hkv, K, V = 2, 6, 4, 2, 3, 5
    q, k, v = rng.standard_normal((B, T, H, K)), rng.standard_normal((B, T, Hkv, K)), rng.standard_normal((B, T, Hkv, V))
    o = linattn.naive_softmax_attn(q, k, v)
    want = np.zeros((B, T, H, V))
    for bb in range(B):
        for h in range(H):
            hk = h // (H // Hkv)
            s = q[bb, :, h] @ k[bb, :, hk].T / np.sqrt(K) + np.triu(np.full((T, T), -np.inf), 1)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            want[bb, :, h] = (p / p.sum(axis=1, keepdims=True)) @ v[bb, :, hk]
    assert rel(o, want) < 1e-13


def test_linear_attention_recurrent_equals_parallel_for_each_feature_map(rng):
    q, k, v = rng.standard_normal((7, 4)), rng.standard_normal((7, 4)), rng.standard_normal((7, 3))
    for phi in ("identity", "l2norm", "elu+1", "relu"):
        for normalize in (False, True):
            a = linattn.linear_attention_recurrent(q, k, v, phi=phi, normalize=normalize)
            b = linattn.linear_attention_parallel(q, k, v, phi=phi, normalize=normalize)
            assert a.shape == (7, 3) and rel(a, b) < 1e-12
    assert np.array_equal(linattn.feature_map("relu", np.array([-1.0, 2.0])), [0.0, 2.0])
    with pytest.raises(ValueError, match="argument 'phi' expected one of"):
        linattn.feature_map("tanh", np.array([1.0]))
