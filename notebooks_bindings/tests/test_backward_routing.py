"""The bound reference backward (checked here by central finite differences through the bound
forward, in float64) and the harness's gradient check; the bound routing operations (Eqs.27, 29)
against NumPy."""
import numpy as np
import pytest

import linattn
import linattn.testing as lt


def loss(op, inputs, do, dht):
    o, S = linattn.reference(op, **inputs)
    return float(np.sum(do * o) + np.sum(dht * S))


@pytest.mark.parametrize("op", linattn.OPS)
def test_reference_backward_equals_central_finite_differences(op):
    inp = lt.random_inputs(op, B=1, T=5, H=1, K=3, V=2, dtype=np.float64, initial_state=True,
                           cu_seqlens=[0, 2, 5], seed=13)
    for name in linattn.GATES[op]:  # keep gates inside their open domains so x +- h stays valid
        inp[name] = np.clip(inp[name], -5.0, -0.05) if name == "g" else np.clip(inp[name], 0.05, 0.95)
    cot = lt.random_cotangents(op, inp, seed=1)
    grads = linattn.reference_backward(op, **inp, **cot)
    wrt = {"q": "dq", "k": "dk", "v": "dv", "initial_state": "dh0", **{n: "d" + n for n in linattn.GATES[op]}}
    assert set(grads) == set(wrt.values())
    h = 1e-6
    for x_name, g_name in wrt.items():
        x = inp[x_name]
        fd = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            keep = x[i]
            x[i] = keep + h
            up = loss(op, inp, cot["do"], cot["dht"])
            x[i] = keep - h
            dn = loss(op, inp, cot["do"], cot["dht"])
            x[i] = keep
            fd[i] = (up - dn) / (2 * h)
        lt.assert_close(grads[g_name], fd, rtol_rms=1e-7, name=g_name)


def test_softmax_backward_equals_finite_differences(rng):
    q, k, v = (rng.standard_normal((1, 4, 2, 3)) for _ in range(3))
    do = rng.standard_normal((1, 4, 2, 3))
    g = linattn.naive_softmax_attn_backward(q, k, v, do)
    h = 1e-6
    fd = np.zeros_like(q)
    for i in np.ndindex(q.shape):
        keep = q[i]
        q[i] = keep + h
        up = np.sum(do * linattn.naive_softmax_attn(q, k, v))
        q[i] = keep - h
        dn = np.sum(do * linattn.naive_softmax_attn(q, k, v))
        q[i] = keep
        fd[i] = (up - dn) / (2 * h)
    lt.assert_close(g["dq"], fd, rtol_rms=1e-7, name="dq")


def f32_backward(op):
    return lambda **kw: linattn.reference_backward(op, **kw)


@pytest.mark.parametrize("op", ["delta_rule", "gdn2"])
def test_harness_checks_gradients_and_passes_the_float32_reference_backward(op):
    kernel = lambda **kw: linattn.reference(op, **kw)
    assert lt.check_kernel(kernel, op, backward=f32_backward(op), max_examples=15, rtol_rms=1e-4) >= 15


def test_harness_catches_a_wrong_gate_gradient():
    op = "gated_delta_rule"

    def wrong_backward(**kw):
        g = linattn.reference_backward(op, **kw)
        g["dg"] = -g["dg"]  # a sign error in the gradient of the log-decay
        return g

    kernel = lambda **kw: linattn.reference(op, **kw)
    with pytest.raises(lt.KernelMismatch, match="dg: MISMATCH") as info:
        lt.check_kernel(kernel, op, backward=wrong_backward, max_examples=50, rtol_rms=1e-4)
    c = info.value.case
    assert c.T <= 2 and c.gates != "zero"  # dg = 0 needs a state and a decay that is not 1 to show


def test_routing_kinds_and_the_routable_predecessor():
    kinds = linattn.hybrid_layer_kinds(6)
    assert kinds == ["linear", "linear", "softmax", "linear", "linear", "softmax"]
    assert linattn.routable_predecessor(kinds) == [-1, 0, 1, 1, 3, 4]
    assert linattn.pure_layer_kinds(2) == ["linear"] * 2 and linattn.dense_layer_kinds(1) == ["softmax"]
    with pytest.raises(ValueError, match="argument 'kinds' expected 'softmax' or 'linear' but got 'mlp' at layer 1"):
        linattn.routable_predecessor(["linear", "mlp"])


def test_cler_and_residual_injection_equal_numpy(rng):
    B, T, H, V, d = 2, 3, 2, 4, 5
    v, r = rng.standard_normal((B, T, H, V)), rng.standard_normal((B, T, H, V))
    assert np.allclose(linattn.cler_inject(v, r, 0.3), v + 0.3 * r, rtol=0, atol=1e-15)
    rms = r / np.sqrt(np.mean(r * r, axis=-1, keepdims=True) + 1e-6)
    assert np.allclose(linattn.cler_inject(v, r, 0.3, rho="rms_norm"), v + 0.3 * rms, rtol=0, atol=1e-14)
    assert np.allclose(linattn.rho(r, "rms_norm"), rms, rtol=0, atol=1e-14)
    h = rng.standard_normal((B, T, d))
    P = rng.standard_normal((d, H * V))
    want = h + np.einsum("dn,btn->btd", P, r.reshape(B, T, H * V))  # head-major flattening
    assert np.allclose(linattn.residual_inject(h, r, P), want, rtol=0, atol=1e-13)
    U, D = rng.standard_normal((d, 2)), rng.standard_normal((2, H * V))
    assert np.allclose(linattn.residual_inject(h, r, U=U, D=D), linattn.residual_inject(h, r, U @ D), rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="either P"):
        linattn.residual_inject(h, r, P, U=U, D=D)
    _, _, tr = linattn.reference("gated_delta_rule", **lt.random_inputs("gated_delta_rule", dtype=np.float64), return_trace=True)
    assert linattn.routed_error(tr) is tr["r"] and linattn.routed_error(tr, "written_error") is tr["written"]
