"""Grouped value attention (GVA), as fla's gated_delta_rule and kda take it: q, k [B, T, H, K] and v
[B, T, HV, V] with HV = G H, value head j reading q/k head j // G; the gates, the states, o and the
gradients of v and the gates have HV heads. The reference, the CPU kernels, the harness and the CLI
accept it. The mapping is checked against single-head runs of the plain reference (value head j
alone, with q/k head j // G), which share no code with the GVA path, and dq, dk against finite
differences."""
import subprocess
import sys

import numpy as np
import pytest

import linattn
import linattn.testing as lt

LINEAR = ("delta_rule", "gated_delta_rule", "kda", "gdn2")


def gva_inputs(op, G, seed, B=2, T=9, H=2, K=3, V=4, cu_seqlens=None, initial_state=True):
    return lt.random_inputs(op, B=B, T=T, H=H, K=K, V=V, HV=G * H, dtype=np.float64, cu_seqlens=cu_seqlens,
                            initial_state=initial_state, seed=seed)


def one_head(inp, op, j, G):
    """The inputs of value head j alone (H = 1): q/k head j // G, value head j of everything else."""
    h, c = j // G, np.ascontiguousarray
    d = dict(inp)
    d["q"], d["k"] = c(inp["q"][:, :, h:h + 1]), c(inp["k"][:, :, h:h + 1])
    for name in ("v",) + linattn.GATES[op]:
        d[name] = c(inp[name][:, :, j:j + 1])
    if inp.get("initial_state") is not None:
        d["initial_state"] = c(inp["initial_state"][:, j:j + 1])
    return d


@pytest.mark.parametrize("op", LINEAR)
@pytest.mark.parametrize("G", [2, 3])
@pytest.mark.parametrize("packed", [False, True])
def test_gva_reference_equals_each_value_head_run_alone_with_its_query_key_head(op, G, packed):
    inp = gva_inputs(op, G, seed=G + 10 * packed, B=1 if packed else 2, cu_seqlens=3 if packed else None)
    o, S = linattn.reference(op, **inp)
    H = inp["q"].shape[2]
    assert o.shape == inp["v"].shape and S.shape[1] == G * H
    for j in range(G * H):
        oj, Sj = linattn.reference(op, **one_head(inp, op, j, G))
        np.testing.assert_allclose(o[:, :, j:j + 1], oj, rtol=0, atol=1e-14)
        np.testing.assert_allclose(S[:, j:j + 1], Sj, rtol=0, atol=1e-14)


@pytest.mark.parametrize("op", LINEAR)
def test_gva_chunked_and_fused_cpu_kernels_equal_the_reference(op):
    inp = gva_inputs(op, 2, seed=3, T=70)
    o, S = linattn.reference(op, **inp)
    for kern in (linattn.chunk, linattn.fused_recurrent):
        ok, Sk = kern(op, **inp)
        assert lt.compare(ok, o).rel_rms < 1e-12 and lt.compare(Sk, S).rel_rms < 1e-12


def loss(op, inp, do, dht):
    o, S = linattn.reference(op, **inp)
    return float(np.sum(do * o) + np.sum(dht * S))


@pytest.mark.parametrize("op", LINEAR)
@pytest.mark.parametrize("l2norm", [False, True])
def test_gva_backward_dq_dk_equal_finite_differences_and_the_rest_the_single_head_runs(op, l2norm):
    G = 2
    inp = gva_inputs(op, G, seed=7, T=6)
    inp["use_qk_l2norm_in_kernel"] = l2norm
    cot = lt.random_cotangents(op, inp, seed=1)
    gr = linattn.reference_backward(op, do=cot["do"], dht=cot["dht"], **inp)
    assert gr["dq"].shape == inp["q"].shape and gr["dk"].shape == inp["k"].shape
    rng = np.random.default_rng(0)
    for key, grad in (("q", gr["dq"]), ("k", gr["dk"])):
        for idx in [tuple(rng.integers(0, n) for n in inp[key].shape) for _ in range(6)]:
            plus, minus = dict(inp), dict(inp)
            plus[key], minus[key] = inp[key].copy(), inp[key].copy()
            plus[key][idx] += 1e-6
            minus[key][idx] -= 1e-6
            fd = (loss(op, plus, cot["do"], cot["dht"]) - loss(op, minus, cot["do"], cot["dht"])) / 2e-6
            assert abs(grad[idx] - fd) <= 1e-6 * max(1.0, abs(fd)), (key, idx, grad[idx], fd)
    # dv, the gates' and dh0 of value head j are those of head j run alone
    for j in range(G * inp["q"].shape[2]):
        one = one_head(inp, op, j, G)
        g1 = linattn.reference_backward(op, do=np.ascontiguousarray(cot["do"][:, :, j:j + 1]),
                                        dht=np.ascontiguousarray(cot["dht"][:, j:j + 1]), **one)
        for name in ("dv",) + tuple("d" + n for n in linattn.GATES[op]):
            np.testing.assert_allclose(gr[name][:, :, j:j + 1], g1[name], rtol=0, atol=1e-13)
        np.testing.assert_allclose(gr["dh0"][:, j:j + 1], g1["dh0"], rtol=0, atol=1e-13)


@pytest.mark.parametrize("op", LINEAR)
def test_gva_chunked_backward_equals_the_reference_backward(op):
    inp = gva_inputs(op, 3, seed=4, T=40)
    cot = lt.random_cotangents(op, inp, seed=2)
    want = linattn.reference_backward(op, do=cot["do"], dht=cot["dht"], **inp)
    got = linattn.chunk_backward(op, do=cot["do"], dht=cot["dht"], **inp, chunk_size=16)
    for name, x in want.items():
        if x is not None:
            assert lt.compare(got[name], x).rel_rms < 1e-12, name


def test_gva_value_heads_not_a_multiple_of_the_query_heads_are_refused_naming_v():
    inp = gva_inputs("gated_delta_rule", 2, seed=1)
    bad = dict(inp)
    bad["v"] = inp["v"][:, :, :3]
    for call in (lambda: linattn.reference("gated_delta_rule", **bad),
                 lambda: linattn.chunk("gated_delta_rule", **bad),
                 lambda: linattn.reference_backward("gated_delta_rule", do=np.zeros((2, 9, 3, 4)), **bad)):
        with pytest.raises(ValueError, match=r"argument 'v' expected \[B, T, HV, V\] with HV = H = 2 or a multiple"):
            call()
    with pytest.raises(ValueError, match="argument 'HV' expected a multiple of H = 2"):
        lt.random_inputs("kda", H=2, HV=3)
    # no silent copy of q or k for the repeat (as without GVA), and an empty v is not a group of zero heads
    with pytest.raises(linattn.Error, match=r"argument 'q' expected a C-contiguous aligned NumPy array .* list"):
        linattn.reference("gated_delta_rule", **dict(inp, q=inp["q"].tolist()))
    with pytest.raises(linattn.Error, match=r"argument 'k' expected a C-contiguous .* non-C-contiguous"):
        linattn.reference("gated_delta_rule", **dict(inp, k=np.asfortranarray(inp["k"])))
    with pytest.raises(linattn.Error, match=r"argument 'v' expected \[B, T, HV, V\]"):
        linattn.reference("gated_delta_rule", **dict(inp, v=inp["v"][:, :, :0]))


def test_gva_floors_count_each_value_head_write():
    """The default floors of final_state and dg see the key of each value head under GVA (a float32 GDN2 case whose
    final state cancels, found by a review: it failed with the floors computed on H heads and passes with q and k
    repeated by hand)."""
    op = "gdn2"
    inp = lt.random_inputs(op, B=1, T=17, H=1, HV=2, K=1, V=1, gates="mixed", seed=42)
    o, S = linattn.chunk(op, **inp)
    rep = dict(inp, q=np.repeat(inp["q"], 2, axis=2), k=np.repeat(inp["k"], 2, axis=2))
    by_hand = lt.check_outputs(op, rep, (o, S))
    assert all(c.ok for c in by_hand)
    assert all(c.ok for c in lt.check_outputs(op, inp, (o, S))), [c.report() for c in lt.check_outputs(op, inp, (o, S))]


def gva_kernel_wrong_mapping(G):
    """A kernel that maps value head j to q/k head j % H (np.tile) instead of fla's j // G."""
    def kernel(q, k, v, **kw):
        return linattn.reference(kw.pop("op"), np.tile(q, (1, 1, G, 1)), np.tile(k, (1, 1, G, 1)), v, **kw)
    return kernel


@pytest.mark.parametrize("op", ["gated_delta_rule", "kda"])
def test_check_kernel_passes_a_gva_kernel_and_catches_one_with_the_wrong_head_mapping(op):
    good = lambda **kw: linattn.chunk(op, **kw)
    n = lt.check_kernel(good, op, groups=(2, 3), H=(1, 2), T=(1, 40), max_examples=15,
                        backward=lambda **kw: linattn.chunk_backward(op, **kw))
    assert n >= 1
    wrong = gva_kernel_wrong_mapping(2)
    with pytest.raises(lt.KernelMismatch) as e:
        lt.check_kernel(lambda **kw: wrong(op=op, **kw), op, groups=2, H=2, max_examples=15)
    assert "HV=4" in str(e.value)


def test_check_cli_accepts_gva_inputs_and_gradients(tmp_path):
    op = "gated_delta_rule"
    inp = lt.random_inputs(op, B=1, T=12, H=2, HV=4, initial_state=True, seed=5)
    o, S = linattn.reference(op, **inp)
    cot = lt.random_cotangents(op, inp, seed=3)
    gr = linattn.reference_backward(op, do=cot["do"], dht=cot["dht"], **inp)
    arrays = {k: x for k, x in inp.items() if k not in ("output_final_state", "scale", "cu_seqlens") and x is not None}
    np.savez(tmp_path / "in.npz", **arrays)
    np.savez(tmp_path / "out.npz", o=o, final_state=S)
    np.savez(tmp_path / "g.npz", do=cot["do"], dht=cot["dht"], **{k: x for k, x in gr.items() if x is not None})
    p = subprocess.run([sys.executable, "-m", "linattn.check", "--op", op, str(tmp_path / "in.npz"),
                        str(tmp_path / "out.npz"), "--grads", str(tmp_path / "g.npz")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "VERDICT: PASS" in p.stdout, p.stdout + p.stderr
    wrong = dict(gr)
    wrong["dq"] = gr["dq"] * 1.01
    np.savez(tmp_path / "g.npz", do=cot["do"], dht=cot["dht"], **{k: x for k, x in wrong.items() if x is not None})
    p = subprocess.run([sys.executable, "-m", "linattn.check", "--op", op, str(tmp_path / "in.npz"),
                        "--grads", str(tmp_path / "g.npz")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "dq: MISMATCH" in p.stdout and "dv: ok" in p.stdout, p.stdout + p.stderr
