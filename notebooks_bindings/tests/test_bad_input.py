"""Bad input at the public API: each error names the public function and argument, what was expected
and the value as the caller gave it (before any narrowing to the compute type); wrong types are a
short TypeError, never pybind11's listing of every argument; nothing is coerced without a word."""
import re

import math

import numpy as np
import pytest

import linattn
import linattn.testing as lt


def inputs(op="kda", dtype=np.float64, **kw):
    return lt.random_inputs(op, T=5, H=2, K=4, V=3, dtype=dtype, seed=1, **kw)


def grads_args(op="kda", dtype=np.float64):
    inp = inputs(op, dtype)
    inp.pop("output_final_state")
    return inp, np.ones(inp["v"].shape, dtype)


# 1. The backward names dL/do by its public name 'do'.

def test_backward_errors_name_do_not_do_underscore():
    inp, do = grads_args()
    q, k, v = inp["q"], inp["k"], inp["v"]
    with pytest.raises(linattn.Error, match=r"naive_softmax_attn_backward: argument 'do' expected .* but got None"):
        linattn.naive_softmax_attn_backward(q, k, v, None)
    with pytest.raises(linattn.Error, match=r"naive_softmax_attn_backward: argument 'do' expected shape"):
        linattn.naive_softmax_attn_backward(q, k, v, do[:, :-1].copy())
    with pytest.raises(linattn.Error, match=r"argument 'do' expected shape"):
        linattn.reference_backward("kda", **inp, do=do[..., :-1].copy())
    with pytest.raises(linattn.Error, match=r"chunk_backward: argument 'do' expected finite values"):
        linattn.chunk_backward("kda", **inp, do=np.full_like(do, np.nan))


# 2. Values are checked as given; a value that does not fit the compute type is refused as such.

def test_a_scale_beyond_float32_is_refused_as_given_not_as_inf():
    inp = inputs(dtype=np.float32)
    with pytest.raises(linattn.Error, match=r"argument 'scale' expected a value that fits float32.* but got 1e\+300"):
        linattn.reference("kda", **dict(inp, scale=1e300))


def test_a_value_that_underflows_float32_is_zero_there_where_zero_is_allowed():
    # a scale or decay below float32's range rounds to 0, as 0 itself is accepted (eps, where 0 is invalid, is refused)
    inp = inputs(dtype=np.float32)
    o, _ = linattn.chunk("kda", **dict(inp, scale=1e-60))
    o0, _ = linattn.chunk("kda", **dict(inp, scale=0.0))
    assert np.array_equal(o, o0)
    W = np.ones((3, 2), np.float32)
    k, v = np.array([0.6, 0.8], np.float32), np.ones(3, np.float32)
    (W_tiny, tr_tiny) = linattn.gdn_step(W, k, v, alpha=math.exp(-200), beta=0.5)  # (W_t, trace dict)
    (W_zero, tr_zero) = linattn.gdn_step(W, k, v, alpha=0.0, beta=0.5)
    assert np.array_equal(W_tiny, W_zero) and tr_tiny.keys() == tr_zero.keys()
    assert all(np.array_equal(tr_tiny[n], tr_zero[n]) for n in tr_zero)


def test_a_scale_that_fits_float64_still_runs_in_float64():
    inp = inputs(dtype=np.float64)
    o, _ = linattn.reference("kda", **dict(inp, scale=1e-60))
    assert o.dtype == np.float64 and np.all(np.isfinite(o))


def test_eps_that_underflows_float32_is_reported_as_given():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(linattn.Error, match=r"rms_normalize: argument 'eps' expected a value that fits float32.* but got 1e-60"):
        linattn.rms_normalize(x, eps=1e-60)
    with pytest.raises(linattn.Error, match=r"rms_normalize: argument 'eps' expected a finite value > 0 but got -1"):
        linattn.rms_normalize(x, eps=-1.0)


def test_copy_refuses_a_value_the_conversion_would_make_infinite():
    inp = inputs(dtype=np.float32)
    v = inp["v"].astype(np.float64)
    v[0, 1, 0, 2] = -1e300
    with pytest.raises(linattn.Error, match=r"argument 'v' expected values that fit float32 .* but got -1e\+300 at index \[0, 1, 0, 2\]"):
        linattn.reference("kda", **dict(inp, v=v), copy=True)
    with pytest.raises(linattn.Error, match=r"argument 'v' expected real values"):
        linattn.reference("kda", **dict(inp, v=inp["v"] + 1j), copy=True)


def test_cu_seqlens_beyond_int64_is_reported_as_given():
    inp = inputs(cu_seqlens=2)
    cu = np.array([0, 2**63 + 1, 5], dtype=np.uint64)
    with pytest.raises(linattn.Error, match=r"argument 'cu_seqlens' expected offsets that fit int64 but got 9223372036854775809 at index 1"):
        linattn.reference("kda", **dict(inp, cu_seqlens=cu))


# 3. Wrong types and unknown keywords: a short error naming the public function and the argument.

def test_a_non_numeric_scale_is_a_short_type_error():
    inp, do = grads_args()
    with pytest.raises(TypeError, match=r"^chunk_backward: argument 'scale' expected a real number but got 'a' \(str\)$"):
        linattn.chunk_backward("kda", **dict(inp, scale="a"), do=do)
    with pytest.raises(TypeError, match=r"^naive_recurrent_kda: argument 'scale' expected a real number but got 'a' \(str\)$"):
        linattn.reference("kda", **dict(inputs(), scale="a"))


def test_an_unknown_keyword_is_a_short_type_error_naming_the_function():
    inp = inputs()
    with pytest.raises(TypeError) as e:
        linattn.naive_recurrent_kda(**inp, bogus=1)
    msg = str(e.value)
    assert re.match(r"naive_recurrent_kda\(\): got an unexpected keyword argument 'bogus'; expected naive_recurrent_kda\(q, k, v, g", msg)
    assert len(msg) < 600 and "array(" not in msg and e.value.__suppress_context__
    with pytest.raises(TypeError, match=r"^rho\(\): missing a required argument: 'x'"):
        linattn.rho()
    with pytest.raises(TypeError, match=r"^hybrid_layer_kinds\(\): too many positional arguments"):
        linattn.hybrid_layer_kinds(3, 4)


def test_integers_out_of_range_or_not_integers_name_the_argument():
    inp, do = grads_args()
    with pytest.raises(linattn.Error, match=r"chunk_backward: argument 'num_threads' expected an integer in \[-2147483648, 2147483647\] but got 2147483648"):
        linattn.chunk_backward("kda", **inp, do=do, num_threads=2**31)
    with pytest.raises(linattn.Error, match=r"chunk_kda: argument 'num_threads' expected an integer in .* but got 2147483648"):
        linattn.chunk("kda", **inputs(), num_threads=2**31)
    with pytest.raises(TypeError, match=r"^hybrid_layer_kinds: argument 'L' expected an integer but got 2.5 \(float\)$"):
        linattn.hybrid_layer_kinds(2.5)
    with pytest.raises(TypeError, match=r"chunk_kda: argument 'chunk_size' expected an integer but got 32.0"):
        linattn.chunk("kda", **inputs(), chunk_size=32.0)


def test_numpy_scalars_are_accepted_where_python_numbers_are():
    inp = inputs()
    o, S = linattn.chunk("kda", **dict(inp, scale=np.float32(0.5), output_final_state=np.bool_(True)),
                         chunk_size=np.int64(16), num_threads=np.int32(1))
    o2, S2 = linattn.chunk("kda", **dict(inp, scale=0.5, output_final_state=True), chunk_size=16, num_threads=1)
    assert np.array_equal(o, o2) and np.array_equal(S, S2)
    assert linattn.hybrid_layer_kinds(np.int64(3)) == ["linear", "linear", "softmax"]


# 4. No silent coercion between bool and numbers.

def test_a_non_bool_flag_is_refused():
    with pytest.raises(TypeError, match=r"naive_recurrent_kda: argument 'use_qk_l2norm_in_kernel' expected a bool but got 0.5 \(float\)"):
        linattn.reference("kda", **inputs(), use_qk_l2norm_in_kernel=0.5)
    with pytest.raises(TypeError, match=r"chunk_backward: argument 'use_qk_l2norm_in_kernel' expected a bool but got 1 \(int\)"):
        inp, do = grads_args()
        linattn.chunk_backward("kda", **inp, do=do, use_qk_l2norm_in_kernel=1)
    with pytest.raises(TypeError, match=r"naive_softmax_attn: argument 'causal' expected a bool but got 'yes'"):
        inp = inputs()
        linattn.naive_softmax_attn(inp["q"], inp["k"], inp["v"], causal="yes")


def test_a_bool_is_not_a_number():
    with pytest.raises(TypeError, match=r"naive_recurrent_kda: argument 'scale' expected a real number but got True \(bool\)"):
        linattn.reference("kda", **dict(inputs(), scale=True))
    W, kap, v = np.eye(3), np.ones(3) / 3**0.5, np.ones(3)
    with pytest.raises(TypeError, match=r"deltanet_step: argument 'beta' expected a real number but got True \(bool\)"):
        linattn.deltanet_step(W, kap, v, True)
    with pytest.raises(TypeError, match=r"gdn_step: argument 'alpha' expected a real number but got False \(bool\)"):
        linattn.gdn_step(W, kap, v, False, 0.5)
    with pytest.raises(TypeError, match=r"hybrid_layer_kinds: argument 'L' expected an integer but got True \(bool\)"):
        linattn.hybrid_layer_kinds(True)
    with pytest.raises(TypeError, match=r"cler_inject: argument 'Gamma' expected a real number but got np.True_"):
        r = np.ones((1, 2, 1, 3))
        linattn.cler_inject(r, r, np.bool_(True))


# 5. chunk_intermediates refuses a gate the operator does not take, as chunk() does.

def test_chunk_intermediates_refuses_a_gate_the_operator_does_not_take():
    inp = inputs("delta_rule")
    x = np.zeros(inp["beta"].shape)
    with pytest.raises(linattn.Error, match=r"chunk_intermediates: argument 'g' expected None \(operator 'delta_rule' takes the gate beta\)"):
        linattn.chunk_intermediates("delta_rule", inp["q"], inp["k"], inp["v"], beta=inp["beta"], g=x)
    with pytest.raises(ValueError, match=r"operator 'delta_rule' takes gates \('beta',\) but got \['g'\]"):
        linattn.chunk("delta_rule", inp["q"], inp["k"], inp["v"], beta=inp["beta"], g=x)
    assert linattn.chunk_intermediates("delta_rule", inp["q"], inp["k"], inp["v"], beta=inp["beta"])


# 6. Clear messages naming the argument.

def test_routed_error_names_its_argument():
    with pytest.raises(ValueError, match=r"routed_error: argument 'trace' expected the trace dict .* but got a dict with keys \[\]"):
        linattn.routed_error({})
    with pytest.raises(TypeError, match=r"routed_error: argument 'trace' expected the trace dict .* but got an object of type list"):
        linattn.routed_error([])
    with pytest.raises(ValueError, match=r"routed_error: argument 'which' expected 'paper_error' or 'written_error'"):
        linattn.routed_error({"r": 1}, which=["r"])


@pytest.mark.parametrize("fn", ["hybrid_layer_kinds", "pure_layer_kinds", "dense_layer_kinds"])
def test_a_huge_layer_count_names_L(fn):
    with pytest.raises(linattn.Error, match=fn + r": argument 'L' expected an integer in \[.*, 1048576\] but got 4611686018427387904"):
        getattr(linattn, fn)(2**62)
    with pytest.raises(linattn.Error, match=fn + r": argument 'L' expected an integer in .* but got 100000000000000000000"):
        getattr(linattn, fn)(10**20)
    assert len(getattr(linattn, fn)(2**20)) == 2**20


def test_routable_predecessor_kinds_must_be_names():
    assert linattn.routable_predecessor(("linear", "softmax", "linear")) == [-1, 0, 0]
    with pytest.raises(TypeError, match=r"routable_predecessor: argument 'kinds' expected 'softmax' or 'linear' at layer 1 but got 3 \(int\)"):
        linattn.routable_predecessor(["linear", 3])
    with pytest.raises(TypeError, match=r"routable_predecessor: argument 'kinds' expected a sequence"):
        linattn.routable_predecessor("linear")


# 7. Names as the caller knows them.

def test_rho_names_kind_and_cler_inject_names_rho():
    x = np.ones((1, 2, 1, 3))
    with pytest.raises(linattn.Error, match=r"^rho: argument 'kind' expected 'identity' or 'rms_norm' but got 'bogus'$"):
        linattn.rho(x, kind="bogus")
    with pytest.raises(linattn.Error, match=r"^cler_inject: argument 'rho' expected 'identity' or 'rms_norm' but got 'bogus'$"):
        linattn.cler_inject(x, x, 0.5, rho="bogus")
    with pytest.raises(linattn.Error, match=r"^rho: argument 'eps' expected a finite value > 0 but got 0$"):
        linattn.rho(x, "rms_norm", eps=0.0)


def test_W_to_S_names_itself():
    with pytest.raises(linattn.Error, match=r"^W_to_S: argument 'M' expected a 2-D tensor but got 1-D shape \[3\]$"):
        linattn.W_to_S(np.ones(3))
    with pytest.raises(linattn.Error, match=r"^S_to_W: argument 'M' expected a 2-D tensor"):
        linattn.S_to_W(np.ones((1, 2, 3)))


def test_a_0d_array_is_not_called_empty():
    with pytest.raises(linattn.Error, match=r"^rms_normalize: argument 'x' expected an array of rank >= 1 but got a 0-D array$"):
        linattn.rms_normalize(np.array(1.0))
    with pytest.raises(linattn.Error, match=r"^rho: argument 'x' expected an array of rank >= 1 but got a 0-D array$"):
        linattn.rho(np.array(1.0), "rms_norm")


def test_empty_cu_seqlens_says_it_is_empty():
    inp = inputs()
    with pytest.raises(linattn.Error, match=r"argument 'cu_seqlens' expected a 1-D sequence of at least 2 offsets \[0, \.\.\., T\] but got an empty sequence"):
        linattn.reference("kda", **dict(inp, cu_seqlens=[]))
