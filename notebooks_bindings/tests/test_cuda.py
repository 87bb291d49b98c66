"""linattn.cuda, the CUDA chunked kernels through the bindings (opt-in build LINATTN_PY_CUDA=ON).

Everywhere: available() and why_unavailable() agree, and without the kernels or a GPU every call
raises CudaUnavailable saying why. With a Hopper GPU (otherwise those tests skip): the float32
forward equals the float64 reference to 1e-5 relative RMS (packed sequences, initial states, K and
V off the tuned sizes, and the harness's random cases), bfloat16 inputs equal the reference of the
rounded inputs to 1e-2, the backward equals the reference backward to 1e-4 (the bound of
proofs_tests/test_cuda_backward.cu for float32), and bad input raises linattn.Error."""
import numpy as np
import pytest

import linattn
import linattn.cuda as lc
import linattn.testing as lt

OPS = ["delta_rule", "gated_delta_rule", "kda", "gdn2"]

gpu = pytest.mark.skipif(not lc.available(), reason=f"linattn.cuda: {lc.why_unavailable()}")


def gates_of(op, inp):
    return {n: inp[n] for n in linattn.GATES[op]}


def test_available_agrees_with_why_unavailable():
    why = lc.why_unavailable()
    assert isinstance(why, str)
    assert lc.available() == (why == "")
    if not linattn._core.cuda_built:
        assert not lc.available() and "LINATTN_PY_CUDA=ON" in why


@pytest.mark.skipif(lc.available(), reason="a usable GPU is present")
def test_without_the_kernels_or_a_gpu_every_call_says_why():
    inp = lt.random_inputs("kda", T=8, seed=0)
    with pytest.raises(lc.CudaUnavailable, match="linattn.cuda.chunk_kda: "):
        lc.chunk_kda(inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"])
    with pytest.raises(lc.CudaUnavailable, match=lc.why_unavailable()[:20]):
        lc.chunk_backward("kda", inp["q"], inp["k"], inp["v"], g=inp["g"], beta=inp["beta"],
                          do=np.ones_like(inp["v"]))
    assert issubclass(lc.CudaUnavailable, RuntimeError)


def test_wrong_gates_are_refused_before_the_device_is_asked():
    inp = lt.random_inputs("gdn2", T=4, seed=1)
    with pytest.raises(ValueError, match="takes gates"):
        lc.chunk("delta_rule", inp["q"], inp["k"], inp["v"], b=inp["b"])
    with pytest.raises(ValueError, match="not 'linear_attn'"):
        lc.chunk("linear_attn", inp["q"], inp["k"], inp["v"])


@gpu
@pytest.mark.parametrize("op", OPS)
def test_cuda_float32_forward_equals_the_reference(op):
    inp = lt.random_inputs(op, B=1, T=150, H=2, K=40, V=24, cu_seqlens=3, initial_state=True,
                           dtype=np.float32, seed=11)
    o, S = lc.chunk(op, **inp)
    o_ref, S_ref = linattn.reference(op, **{k: (x.astype(np.float64) if isinstance(x, np.ndarray)
                                                and x.dtype == np.float32 else x)
                                            for k, x in inp.items()})
    assert o.dtype == np.float32 and o.shape == inp["v"].shape
    lt.assert_close(o, o_ref, rtol_rms=1e-5, name="o")
    lt.assert_close(S, S_ref, rtol_rms=1e-5, name="final_state")


@gpu
@pytest.mark.parametrize("op", OPS)
def test_cuda_per_operator_functions_equal_chunk(op):
    inp = lt.random_inputs(op, B=2, T=70, H=1, K=64, V=64, dtype=np.float32, seed=12)
    fn = getattr(lc, f"chunk_{op}")
    o1, S1 = fn(inp["q"], inp["k"], inp["v"], *gates_of(op, inp).values(), output_final_state=True)
    o2, S2 = lc.chunk(op, inp["q"], inp["k"], inp["v"], **gates_of(op, inp), output_final_state=True)
    assert np.array_equal(o1, o2) and np.array_equal(S1, S2)
    _, S_none = fn(inp["q"], inp["k"], inp["v"], *gates_of(op, inp).values())
    assert S_none is None


@gpu
@pytest.mark.parametrize("op", OPS)
def test_harness_passes_the_cuda_float32_kernels(op):
    kernel = lambda **kw: lc.chunk(op, **kw)
    kernel.__name__ = f"linattn.cuda.chunk_{op}"
    assert lt.check_kernel(kernel, op, T=(1, 140), max_examples=10, seed=5) >= 10


def round_to_bf16(x):
    """Nearest bfloat16 (ties to even), widened back to float32: what dtype='bfloat16' does."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


@gpu
@pytest.mark.parametrize("op", OPS)
def test_cuda_bfloat16_forward_equals_the_reference_of_the_rounded_inputs(op):
    inp = lt.random_inputs(op, B=1, T=130, H=2, K=64, V=64, initial_state=True, dtype=np.float32,
                           seed=13)
    o, S = lc.chunk(op, **inp, dtype="bfloat16", gate_dtype="bfloat16")
    rounded = dict(inp)
    for name in ["q", "k", "v"] + list(linattn.GATES[op]):
        rounded[name] = round_to_bf16(inp[name]).astype(np.float64)
    rounded["initial_state"] = inp["initial_state"].astype(np.float64)
    o_ref, S_ref = linattn.reference(op, **rounded)
    lt.assert_close(o, o_ref, rtol_rms=1e-2, name="o (bfloat16)")
    lt.assert_close(S, S_ref, rtol_rms=1e-2, name="final_state (bfloat16)")


def _check_rung_on_bf16_and_rung_1_on_float32(op, version, seed, equals=None):
    # A forward rung with its own kernels for DeltaNet and GDN with bfloat16 inputs must reach the C++ call:
    # bfloat16 inputs equal the reference of the rounded inputs to 1e-2, and float32 inputs (outside its
    # range) give rung 1's outputs exactly, as 'best' does. equals: a rung whose bfloat16 outputs this rung's
    # must equal bit for bit (the rung it reproduces by design).
    inp = lt.random_inputs(op, B=1, T=130, H=2, K=64, V=48, initial_state=True, dtype=np.float32, seed=seed)
    o, S = lc.chunk(op, **inp, dtype="bfloat16", version=version)
    if equals is not None:
        o_e, S_e = lc.chunk(op, **inp, dtype="bfloat16", version=equals)
        assert np.array_equal(o, o_e) and np.array_equal(S, S_e)
    rounded = {k: (x.astype(np.float64) if isinstance(x, np.ndarray) else x) for k, x in inp.items()}
    for name in ["q", "k", "v"]:
        rounded[name] = round_to_bf16(inp[name]).astype(np.float64)
    o_ref, S_ref = linattn.reference(op, **rounded)
    lt.assert_close(o, o_ref, rtol_rms=1e-2, name=f"o ({version}, bfloat16)")
    lt.assert_close(S, S_ref, rtol_rms=1e-2, name=f"final_state ({version}, bfloat16)")
    o1, S1 = lc.chunk(op, **inp, version="v1_simple")
    o_v, S_v = lc.chunk(op, **inp, version=version)
    assert np.array_equal(o_v, o1) and np.array_equal(S_v, S1)


@gpu
@pytest.mark.parametrize("op", ["delta_rule", "gated_delta_rule"])
def test_cuda_v6_lean_forward_is_exact_and_runs_rung_1_on_float32_inputs(op):
    # version='v6_lean' (forward rung 6: its own kernels for DeltaNet and GDN with bfloat16 inputs).
    _check_rung_on_bf16_and_rung_1_on_float32(op, "v6_lean", seed=17)


@gpu
@pytest.mark.parametrize("op", ["delta_rule", "gated_delta_rule"])
def test_cuda_v7_overlap_forward_equals_v4_bit_for_bit_and_runs_rung_1_on_float32_inputs(op):
    # version='v7_overlap' (forward rung 7: v4's intra kernel with its shared arrays overlapped, bit for bit
    # with v4 by design) must reach the C++ call: bfloat16 inputs give v4's outputs exactly, and float32
    # inputs (outside its range) rung 1's, as 'best' does.
    inp = lt.random_inputs(op, B=1, T=130, H=2, K=64, V=48, initial_state=True, dtype=np.float32, seed=18)
    o4, S4 = lc.chunk(op, **inp, dtype="bfloat16", version="v4_levels")
    o7, S7 = lc.chunk(op, **inp, dtype="bfloat16", version="v7_overlap")
    assert np.array_equal(o7, o4) and np.array_equal(S7, S4)
    o1, S1 = lc.chunk(op, **inp, version="v1_simple")
    o7, S7 = lc.chunk(op, **inp, version="v7_overlap")
    assert np.array_equal(o7, o1) and np.array_equal(S7, S1)


@gpu
@pytest.mark.parametrize("op", ["delta_rule", "gated_delta_rule"])
def test_cuda_v8_wgmma_forward_matches_the_reference_and_runs_rung_1_on_float32_inputs(op):
    # version='v8_wgmma' (forward rung 8: rung 7 with the state kernel's products on wgmma; on the H200 it
    # equalled rung 7 bit for bit, which the C++ suite checks).
    _check_rung_on_bf16_and_rung_1_on_float32(op, "v8_wgmma", seed=19)


@gpu
@pytest.mark.parametrize("op", ["delta_rule", "gated_delta_rule"])
def test_cuda_v9_lean_overlap_forward_equals_v6_bit_for_bit_and_runs_rung_1_on_float32_inputs(op):
    # version='v9_lean_overlap' (forward rung 9: rung 7's intra kernel with rung 6's lean outputs and rung
    # 6's lean state kernel, rung 6 bit for bit by design) must reach the C++ call.
    _check_rung_on_bf16_and_rung_1_on_float32(op, "v9_lean_overlap", seed=21, equals="v6_lean")


@gpu
@pytest.mark.parametrize("op", ["delta_rule", "gated_delta_rule"])
def test_cuda_v10_pipeline_forward_equals_v7_bit_for_bit_in_64_token_segments(op, monkeypatch):
    # version='v10_pipeline' (forward rung 10: rung 7's kernels over segments of one sequence, the next
    # segment's intra kernel beside this one's state kernel; rung 7 bit for bit by design). 64-token segments
    # (LINATTN_V10_SEG, read at each call) make this 130-token sequence pipeline in 3 segments.
    monkeypatch.setenv("LINATTN_V10_SEG", "64")
    _check_rung_on_bf16_and_rung_1_on_float32(op, "v10_pipeline", seed=23, equals="v7_overlap")


@gpu
@pytest.mark.parametrize("op", OPS)
def test_cuda_float32_backward_equals_the_reference_backward(op):
    inp = lt.random_inputs(op, B=1, T=150, H=2, K=40, V=24, cu_seqlens=3, initial_state=True,
                           dtype=np.float32, seed=14)
    cot = lt.random_cotangents(op, inp, seed=15)
    grads = lc.chunk_backward(op, inp["q"], inp["k"], inp["v"], **gates_of(op, inp), do=cot["do"],
                              dht=cot["dht"], scale=inp["scale"], initial_state=inp["initial_state"],
                              cu_seqlens=inp["cu_seqlens"])
    assert grads["dq"].dtype == np.float32
    for c in lt.check_gradients(op, inp, grads, cot["do"], cot["dht"], rtol_rms=1e-4):
        assert c.ok, c.report()


@gpu
def test_cuda_bad_input_raises_linattn_error():
    inp = lt.random_inputs("gated_delta_rule", T=20, dtype=np.float64, seed=16)
    args = (inp["q"], inp["k"], inp["v"], inp["g"], inp["beta"])
    with pytest.raises(linattn.Error, match="float32"):
        lc.chunk_gated_delta_rule(*args)
    o, _ = lc.chunk_gated_delta_rule(*args, copy=True)  # copy=True converts to float32
    assert o.dtype == np.float32
    f32 = [a.astype(np.float32) for a in args]
    with pytest.raises(linattn.Error, match="dtype"):
        lc.chunk_gated_delta_rule(*f32, dtype="float16")
    with pytest.raises(linattn.Error, match="version"):
        lc.chunk_gated_delta_rule(*f32, version="v9")
    with pytest.raises(linattn.Error, match="'g'"):
        lc.chunk_gated_delta_rule(f32[0], f32[1], f32[2], f32[3][:, :10], f32[4])


@gpu
def test_cuda_overflow_from_unnormalised_keys_raises_linattn_error():
    # Finite inputs whose result leaves float32's range are an error, as on the CPU: with N(0, 1) keys, K = 64
    # and beta = 1, beta ||k||^2 ~ 64 > 2 and the delta rule's state grows ~63-fold per token.
    rng = np.random.default_rng(5)
    q, k, v, do = (rng.standard_normal((1, 100, 1, 64)).astype(np.float32) for _ in range(4))
    beta = np.ones((1, 100, 1), np.float32)
    for dtype in ("float32", "bfloat16"):
        with pytest.raises(linattn.Error, match=r"chunk_delta_rule: argument 'k, beta'.*but got an overflow"):
            lc.chunk_delta_rule(q, k, v, beta, dtype=dtype)
        with pytest.raises(linattn.Error, match=r"argument 'k, beta'.*but got an overflow"):
            lc.chunk_backward("delta_rule", q, k, v, beta=beta, do=do, dtype=dtype)
        o, _ = lc.chunk_delta_rule(q, k, v, beta, dtype=dtype, use_qk_l2norm_in_kernel=True)  # unit keys: runs
        assert np.isfinite(o).all()
        grads = lc.chunk_backward("delta_rule", q, k, v, beta=beta, do=do, dtype=dtype, use_qk_l2norm_in_kernel=True)
        assert all(np.isfinite(x).all() for x in grads.values() if x is not None)

@gpu
def test_cuda_backward_rungs_on_float32_inputs_run_rung_1_bit_for_bit():
    # Rungs 2-7 take bf16 inputs; on float32 inputs every one runs rung 1's kernels (chunk_cuda.hpp),
    # so version= must reach the C++ call and every name must give rung 1's gradients exactly.
    op = "kda"
    inp = lt.random_inputs(op, B=1, T=70, H=2, K=32, V=16, dtype=np.float32, seed=21)
    cot = lt.random_cotangents(op, inp, seed=22)
    run = lambda ver: lc.chunk_backward(op, inp["q"], inp["k"], inp["v"], **gates_of(op, inp),
                                        do=cot["do"], version=ver)
    want = run("bwd_v1_simple")
    for ver in ("best", "bwd_v2_tensorcore", "bwd_v3_async", "bwd_v4_tc_tail", "bwd_v5_levels_front",
                "bwd_v6_tc_b9", "bwd_v7_rowbase", "bwd_v8_wide", "bwd_v9_noextras", "bwd_v10_split",
                "bwd_v11_wyfast",
                "bwd_v12_g1slab", "bwd_v13_g1g2", "bwd_v14_pchan", "bwd_v15_hionly",
                "bwd_v16_b9one", "bwd_v17_hybrid", "bwd_v18_lean", "bwd_v19_dsbf16", "bwd_v20_dvbf16",
                "bwd_v21_duvsmem", "bwd_v22_kq8", "bwd_v23_dsone", "bwd_v24_dswide",
                "bwd_v25_g1async", "bwd_v26_wyasync",
                "bwd_v27_dvplanes", "bwd_v28_sbf16", "bwd_v29_b1hi", "bwd_v30_dsw2",
                "bwd_v31_dkbf16", "bwd_v32_g1stage", "bwd_v33_g2stage"):
        got = run(ver)
        assert sorted(got) == sorted(want)
        for name in want:
            assert np.array_equal(got[name], want[name]), (ver, name)
    with pytest.raises(linattn.Error, match="version"):
        run("v4_tc_tail")  # the forward's naming, not the backward's
