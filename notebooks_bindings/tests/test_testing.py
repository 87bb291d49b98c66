"""linattn.testing: the comparison report, the generators' conventions, and the hypothesis harness
(it passes correct kernels, including the float32 reference, and CATCHES deliberately wrong ones:
the error computed before the decay, a transposed read, a state lost between chunks, a kernel that
changes its inputs in place, zero or doubled outputs at a small scale); tolerances by the precision
of the computation (bf16 as NumPy/ml_dtypes arrays or torch-like tensors, inputs' types)."""
import numpy as np
import pytest

import linattn
import linattn.testing as lt
from conftest import np_kernel


# ---- assert_close --------------------------------------------------------------------------

def test_assert_close_passes_equal_arrays_and_reports_the_worst_element():
    e = np.arange(24, dtype=np.float64).reshape(2, 3, 4) + 1.0
    c = lt.assert_close(e.copy(), e, rtol_rms=1e-12, name="o")
    assert c.ok and c.rel_rms == 0.0
    a = e.copy()
    a[1, 2, 3] += 0.5
    a[0, 1, 0] += 0.1
    with pytest.raises(AssertionError) as info:
        lt.assert_close(a, e, rtol_rms=1e-6, name="o")
    msg = str(info.value)
    assert "o: MISMATCH" in msg and "max |diff| = 5.000e-01 at (1, 2, 3)" in msg
    assert "(1, 2, 3): 24.5 vs 24.0" in msg and "(0, 1, 0): 5.1" in msg
    expected_rel = np.sqrt(0.5**2 + 0.1**2) / np.linalg.norm(e)
    assert lt.compare(a, e).rel_rms == pytest.approx(expected_rel, rel=1e-12)


def test_assert_close_detects_nan_inf_and_shape_mismatch():
    e = np.ones((3, 4))
    a = e.copy()
    a[2, 1] = np.nan
    a[0, 3] = np.inf
    with pytest.raises(AssertionError, match=r"1 NaN, 1 Inf; first at \(0, 3\)"):
        lt.assert_close(a, e, rtol_rms=1.0)
    with pytest.raises(AssertionError, match=r"shape mismatch: actual \(4, 3\) vs expected \(3, 4\)"):
        lt.assert_close(e.T, e)


def test_relative_rms_becomes_absolute_when_expected_is_zero_and_defaults_follow_dtype():
    z = np.zeros(4)
    assert lt.compare(np.full(4, 1e-3), z).rel_rms == pytest.approx(1e-3)
    # a (nearly) zero reference passes on the absolute floor, not on the relative error
    tiny = np.array([1e-14, 0.0, -2e-14], dtype=np.float64)
    c = lt.compare(np.zeros(3, np.float32), tiny)
    assert c.rel_rms == pytest.approx(1.0) and c.ok and "absolute floor" in c.report()
    assert not lt.compare(np.zeros(3, np.float32), tiny, atol_rms=0).ok
    assert not lt.compare(np.full(3, 1e-5, np.float32), tiny).ok
    assert lt.default_rtol_rms(np.float64) == 1e-10
    assert lt.default_rtol_rms(np.float32) == 1e-5
    assert lt.default_rtol_rms(np.float16) == 1e-2
    # a float32 array within float32 rounding passes the default; a 1e-4 error does not
    e = np.linspace(1, 2, 100)
    lt.assert_close(e.astype(np.float32), e)
    with pytest.raises(AssertionError):
        lt.assert_close((e * (1 + 1e-4)).astype(np.float32), e)


# ---- generators ----------------------------------------------------------------------------

@pytest.mark.parametrize("op", linattn.OPS)
def test_random_inputs_follow_the_conventions_of_the_field(op):
    inp = lt.random_inputs(op, B=1, T=50, H=3, K=7, V=5, cu_seqlens=3, initial_state=True,
                           gates="mixed", dtype=np.float32, seed=11)
    assert inp["q"].shape == (1, 50, 3, 7) and inp["v"].shape == (1, 50, 3, 5)
    assert all(inp[k].dtype == np.float32 and inp[k].flags.c_contiguous for k in ("q", "k", "v"))
    assert np.allclose(np.linalg.norm(inp["k"], axis=-1), 1, atol=1e-6)
    cu = inp["cu_seqlens"]
    assert cu.dtype == np.int64 and cu[0] == 0 and cu[-1] == 50 and np.all(np.diff(cu) >= 0) and len(cu) == 4
    assert inp["initial_state"].shape == (3, 3, 7, 5)
    for name in linattn.GATES[op]:
        x = inp[name]
        if name == "g":
            assert np.all(x <= 0) and np.any(x == 0) and np.any(x == -1000)
        else:
            assert np.all((0 <= x) & (x <= 1)) and np.any(x == 0) and np.any(x == 1)
    assert linattn.reference(op, **inp)[0].shape == (1, 50, 3, 5)  # the reference accepts them


def test_gate_modes_zero_extreme_and_uniform_ranges():
    rng = np.random.default_rng(0)
    assert np.all(lt.log_gates(rng, (100,), "zero") == 0)
    assert set(np.unique(lt.log_gates(rng, (100,), "extreme"))) == {-1000.0, -30.0}
    u = lt.log_gates(rng, (1000,), "uniform", gate_range=(-5.0, -0.5))
    assert u.min() >= -5.0 and u.max() <= -0.5 and u.max() - u.min() > 4
    r = lt.log_gates(rng, (1000,), "random")
    assert np.all(r < 0) and np.all(r > -20)
    with pytest.raises(ValueError, match="gate_range"):
        lt.log_gates(rng, (3,), "uniform", gate_range=(-1.0, 0.5))
    with pytest.raises(ValueError, match="mode"):
        lt.log_gates(rng, (3,), "huge")
    cu = lt.random_cu_seqlens(rng, 10, 4, allow_empty=False)
    assert cu[0] == 0 and cu[-1] == 10 and np.all(np.diff(cu) >= 1)


def test_a_case_repr_reproduces_its_inputs():
    case = lt.Case(op="kda", B=1, T=5, H=1, K=3, V=2, gates="mixed", cu_seqlens=(0, 2, 5),
                   initial_state=True, seed=42, dtype="float32")
    again = eval("lt." + repr(case))
    a, b = case.inputs(), again.inputs()
    assert all(np.array_equal(a[k], b[k]) for k in ("q", "k", "v", "g", "beta", "initial_state", "cu_seqlens"))


# ---- the harness ---------------------------------------------------------------------------

@pytest.mark.parametrize("op", linattn.OPS)
def test_harness_passes_the_float32_reference_against_float64(op):
    kernel = lambda **kw: linattn.reference(op, **kw)
    n = lt.check_kernel(kernel, op, dtype=np.float32, max_examples=25, seed=1)
    assert n >= 25


def test_harness_passes_a_correct_independent_numpy_kernel():
    assert lt.check_kernel(np_kernel("gated_delta_rule"), "gated_delta_rule", max_examples=20) >= 20


def test_harness_catches_the_error_computed_before_the_decay_and_shrinks_it():
    with pytest.raises(lt.KernelMismatch) as info:
        lt.check_kernel(np_kernel("gated_delta_rule", bug="decay_after_error"), "gated_delta_rule",
                        max_examples=100, seed=0)
    e = info.value
    msg = str(e)
    assert "numpy_gated_delta_rule_with_decay_after_error" in msg and "smallest failing case" in msg
    assert "reproduce: inputs = linattn.testing.Case(" in msg and "MISMATCH" in msg
    # The smallest case: one head, one channel each, at most two tokens, and a decay that is not 1.
    c = e.case
    assert (c.H, c.K, c.V) == (1, 1, 1) and c.T <= 2 and c.gates != "zero"
    # ... and it really fails: the bug is a property of the kernel, not of the harness.
    inp = c.inputs()
    comps = lt.check_outputs("gated_delta_rule", inp, np_kernel("gated_delta_rule", bug="decay_after_error")(**inp))
    assert not all(x.ok for x in comps)


def test_harness_catches_a_transposed_read_when_K_equals_V():
    with pytest.raises(lt.KernelMismatch) as info:
        lt.check_kernel(np_kernel("delta_rule", bug="transposed_read"), "delta_rule", V="K",
                        max_examples=100, seed=0)
    c = info.value.case
    assert c.K == c.V == 2 and c.H == 1  # K = V = 1 cannot show a transpose; 2 is the smallest
    assert "o: MISMATCH" in str(info.value)


def test_harness_reports_a_kernel_that_raises_as_failing():
    def broken(**kw):  # correct outputs, but a transposed read S q that fails when K != V
        o, S = linattn.reference("linear_attn", **kw)
        S[0, 0] @ kw["q"][0, 0, 0]
        return o, S
    with pytest.raises(lt.KernelMismatch, match="the kernel raised ValueError") as info:
        lt.check_kernel(broken, "linear_attn", max_examples=30)
    c = info.value.case
    assert isinstance(info.value.error, ValueError) and {c.K, c.V} == {1, 2} and c.T == 1


def test_harness_requires_the_final_state():
    kernel = lambda **kw: linattn.reference("delta_rule", **kw)[0]  # o only
    with pytest.raises(lt.KernelMismatch, match="final_state: missing"):
        lt.check_kernel(kernel, "delta_rule", max_examples=5)


def test_harness_default_cases_cross_chunk_boundaries_and_catch_a_state_lost_between_chunks():
    with pytest.raises(lt.KernelMismatch) as info:
        lt.check_kernel(np_kernel("delta_rule", bug="state_lost_between_chunks"), "delta_rule", max_examples=100)
    c = info.value.case
    assert c.T == 65 and (c.H, c.K, c.V) == (1, 1, 1)  # one token past the first 64-token chunk is the least
    # ... and without the chunk-boundary draws, the old default range (T <= 40) never sees it
    assert lt.check_kernel(np_kernel("delta_rule", bug="state_lost_between_chunks"), "delta_rule",
                           max_examples=100, T=(1, 40), chunk_size=None) == 100
    with pytest.raises(ValueError, match="chunk_size"):
        lt.cases("delta_rule", chunk_size=0)


def test_about_half_the_cases_sit_at_a_chunk_boundary():
    from hypothesis import given, settings
    boundary = {m * 32 + d for m in (1, 2, 3) for d in (-1, 0, 1)}
    seen = []

    @settings(max_examples=200, database=None, deadline=None)
    @given(lt.cases("delta_rule", T=(1, 1000), chunk_size=32, varlen=False))
    def collect(case):
        seen.append(case.T)
    collect()
    share = sum(t in boundary for t in seen) / len(seen)
    assert 0.3 < share < 0.8, share  # uniform draws alone would land there about 1% of the time


def test_a_kernel_that_changes_its_inputs_in_place_fails():
    good = np_kernel("gated_delta_rule")

    def sneaky(**kw):  # scales q and g in place, then returns the reference of the changed inputs
        kw["q"] *= 2
        kw["g"] *= 0.5
        return good(**kw)
    with pytest.raises(lt.KernelMismatch, match="modified its input 'q' in place") as info:
        lt.check_kernel(sneaky, "gated_delta_rule", max_examples=20)
    assert isinstance(info.value.error, lt.InputModified)
    inp = lt.random_inputs("gated_delta_rule", T=9, seed=3)
    with pytest.raises(lt.InputModified, match="'q'"):
        lt.check_call(sneaky, "gated_delta_rule", inp)
    # a backward that scales do in place is caught too
    fwd = lambda **kw: linattn.reference("delta_rule", **kw)

    def bwd(do, dht, **kw):
        do *= 3
        return lt.reference_gradients("delta_rule", kw, do, dht)
    inp = lt.random_inputs("delta_rule", T=7, seed=4)
    with pytest.raises(lt.InputModified, match="backward modified its input 'do'"):
        lt.check_call(fwd, "delta_rule", inp, backward=bwd)
    # and the honest kernel and backward pass through check_call, outputs then gradients
    bwd_ok = lambda do, dht, **kw: lt.reference_gradients("delta_rule", kw, do, dht)
    comps = lt.check_call(fwd, "delta_rule", inp, backward=bwd_ok)
    assert [c.name for c in comps] == ["o", "final_state", "dq", "dk", "dv", "dbeta", "dh0"] and all(c.ok for c in comps)


def test_the_floor_scales_with_the_case_so_zero_or_doubled_outputs_at_a_small_scale_fail():
    inp = lt.random_inputs("gated_delta_rule", T=12, initial_state=True, seed=9)
    inp["v"] *= 1e-6
    inp["initial_state"] *= 1e-6
    o, S = linattn.reference("gated_delta_rule", **inp)
    assert np.sqrt(np.mean(o.astype(np.float64) ** 2)) < 1e-5
    assert all(c.ok and not c.floor_pass for c in lt.check_outputs("gated_delta_rule", inp, (o, S)))
    for wrong in ((np.zeros_like(o), np.zeros_like(S)), (2 * o, 2 * S)):
        comps = lt.check_outputs("gated_delta_rule", inp, wrong)
        assert not any(c.ok for c in comps), [c.report() for c in comps]
    # the bare compare keeps its absolute floor, and says when a pass rests on it
    c = lt.compare(np.zeros_like(o), o)
    assert c.ok and c.floor_pass and "WARNING: passes only on the absolute floor" in c.report()
    # an explicit atol_rms is absolute
    assert lt.check_outputs("gated_delta_rule", inp, (np.zeros_like(o), np.zeros_like(S)), atol_rms=1.0)[0].ok


class FakeTorchTensor:
    """Just enough of torch.Tensor's interface (detach, cpu, float, numpy, dtype, element_size,
    is_floating_point) to stand for a bf16 CUDA tensor without torch."""

    def __init__(self, values, dtype="torch.bfloat16"):
        self._v = np.asarray(values, np.float32)
        self.dtype = dtype

    def detach(self):
        return self

    def cpu(self):
        return self

    def float(self):
        return FakeTorchTensor(self._v, "torch.float32")

    def numpy(self):
        if self.dtype == "torch.bfloat16":
            raise TypeError("Got unsupported ScalarType BFloat16")  # as torch does
        return self._v

    def element_size(self):
        return 2 if self.dtype == "torch.bfloat16" else 4

    def is_floating_point(self):
        return True


def bf16_round(x):
    """x rounded to bfloat16 (round to nearest even), as float32."""
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return b.astype(np.uint32).view(np.float32)


def test_tolerance_follows_the_narrowest_type_of_inputs_and_output_bf16_included():
    inp = lt.random_inputs("kda", T=30, seed=12)
    o, S = linattn.reference("kda", **inp)
    ob = bf16_round(o)
    assert 1e-4 < lt.compare(ob, o).rel_rms < 1e-2
    # a bf16 torch-like tensor is 16-bit: 1e-2, and the report says why
    c = lt.compare(FakeTorchTensor(ob), o)
    assert c.ok and c.rtol_rms == 1e-2 and "bfloat16 output" in c.report()
    assert not lt.compare(FakeTorchTensor(ob), o, dtype="float32").ok
    # bf16 widened to float32 by the caller: float32's tolerance unless dtype= says bf16
    assert not lt.compare(ob, o).ok and lt.compare(ob, o, dtype="bfloat16").ok
    # inputs in bf16, outputs float32 (fla returns its final state so): the inputs' 16-bit tolerance
    bf_inp = {k: (FakeTorchTensor(bf16_round(x)) if k in ("q", "k", "v") else x) for k, x in inp.items()}
    comps = lt.check_outputs("kda", bf_inp, (o, S))
    assert all(c.rtol_rms == 1e-2 and "input 'q'" in c.basis for c in comps)
    # a float32 computation stored as float64 is held to float32's tolerance, not float64's
    o32, S32 = (x.astype(np.float64) for x in linattn.reference("kda", **inp))
    assert all(c.ok and c.rtol_rms == 1e-5 for c in lt.check_outputs("kda", inp, (o32, S32)))
    with pytest.raises(TypeError, match="expected a floating-point array"):
        lt.compare(np.zeros(o.shape, np.int32), o)


def test_ml_dtypes_bfloat16_arrays_are_16_bit():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (.ci/install-deps.sh installs it) is not installed")
    inp = lt.random_inputs("delta_rule", T=20, seed=13)
    o, S = linattn.reference("delta_rule", **inp)
    c = lt.compare(o.astype(ml_dtypes.bfloat16), o)
    assert c.ok and c.rtol_rms == 1e-2 and "bfloat16" in c.basis
    assert not lt.compare((2 * o).astype(ml_dtypes.bfloat16), o).ok


def test_cu_seqlens_must_be_integers():
    inp = lt.random_inputs("delta_rule", T=10, cu_seqlens=[0, 4, 10], seed=1)
    o, S = linattn.reference("delta_rule", **inp)
    bad = {**inp, "cu_seqlens": np.array([0, 4.9, 10])}
    with pytest.raises(ValueError, match="argument 'cu_seqlens' expected integer offsets"):
        lt.check_outputs("delta_rule", bad, (o, S))


def test_missing_optional_outputs_are_reported_as_not_compared():
    inp = lt.random_inputs("delta_rule", T=10, seed=2)
    o, S = linattn.reference("delta_rule", **inp)
    comps = lt.check_outputs("delta_rule", inp, o)
    assert [c.name for c in comps] == ["o", "final_state"] and comps[1].ok and not comps[1].compared
    assert "final_state: not compared" in comps[1].report()


def test_a_shape_mismatch_that_is_a_permutation_says_how_to_transpose():
    inp = lt.random_inputs("delta_rule", T=7, H=3, V=5, seed=3)
    o, S = linattn.reference("delta_rule", **inp)
    rep = lt.compare(np.ascontiguousarray(o.transpose(0, 2, 1, 3)), o).report()  # head-first [B, H, T, V]
    assert "np.transpose(actual, (0, 2, 1, 3))" in rep and "head-first" in rep
    rep = lt.compare(np.ascontiguousarray(S.transpose(0, 1, 3, 2)), S).report()  # S^T: [N, H, V, K]
    assert "np.transpose(actual, (0, 1, 3, 2))" in rep and "head-first" not in rep
    assert "transpose" not in lt.compare(np.zeros((1, 7, 3, 4)), o).report()  # not a permutation


def test_check_call_judges_the_precision_by_the_inputs_as_the_kernel_received_them():
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (.ci/install-deps.sh installs it) is not installed")
    widen = lambda kw: {k: (x.astype(np.float32) if isinstance(x, np.ndarray) and x.dtype == ml_dtypes.bfloat16 else x)
                        for k, x in kw.items()}

    def bf16_kernel(**kw):  # as fla: bf16 o and a float32 final state, from bf16 inputs
        o, S = linattn.reference("gated_delta_rule", **widen(kw))
        return o.astype(ml_dtypes.bfloat16), S.astype(np.float32)
    inp = lt.random_inputs("gated_delta_rule", T=70, initial_state=True, seed=21, dtype=ml_dtypes.bfloat16)
    comps = lt.check_call(bf16_kernel, "gated_delta_rule", inp)
    assert all(c.ok and c.rtol_rms == 1e-2 and "bfloat16 input" in c.basis for c in comps), [c.report() for c in comps]
    assert lt.check_kernel(bf16_kernel, "gated_delta_rule", dtype=ml_dtypes.bfloat16, max_examples=15) == 15
    f32 = widen(inp)
    # the same values as torch-like bf16 tensors
    tin = {k: (FakeTorchTensor(np.asarray(x, np.float32)) if k in ("q", "k", "v") else x) for k, x in f32.items()}
    comps = lt.check_call(lambda **kw: linattn.reference("gated_delta_rule", **f32), "gated_delta_rule", tin)
    assert all(c.rtol_rms == 1e-2 for c in comps)


def test_a_kernel_cannot_loosen_its_bound_by_returning_a_narrower_type():
    inp = lt.random_inputs("gated_delta_rule", T=30, seed=22)
    o, S = linattn.reference("gated_delta_rule", **inp)
    comps = lt.check_outputs("gated_delta_rule", inp, (o.astype(np.float16), S.astype(np.float16)))
    assert all(c.ok and c.rtol_rms == 1e-3 and "stored as float16" in c.basis for c in comps)  # rounding only
    wrong = lt.check_outputs("gated_delta_rule", inp, ((o * 1.005).astype(np.float16), S.astype(np.float16)))
    assert not wrong[0].ok  # 0.5% off: under the 16-bit 1e-2 it would pass


def test_linattn_chunked_backward_passes_the_default_bounds_and_a_dropped_dh0_fails():
    op = "gated_delta_rule"
    fwd = lambda **kw: linattn.chunk(op, **kw, num_threads=1)
    bwd = lambda **kw: linattn.chunk_backward(op, **kw, num_threads=1)
    assert lt.check_kernel(fwd, op, backward=bwd, max_examples=25, seed=5) == 25

    def bwd_no_dh0(**kw):
        g = bwd(**kw)
        g["dh0"] = np.zeros_like(g["dh0"])
        return g
    with pytest.raises(lt.KernelMismatch, match="dh0: MISMATCH"):
        lt.check_kernel(fwd, op, backward=bwd_no_dh0, max_examples=25, seed=5, initial_state=True)
    # dh0, carried back through every token, can shrink far below the values it is computed from: here to 1.5e-4
    # of the case's magnitude, where the float32 chunked backward is off by 2.4e-6 of it. Its floor (1e-4 of the
    # magnitude, as proofs_tests/test_chunk_backward.cpp) passes it, and says so.
    case = lt.Case(op="delta_rule", B=1, T=25, H=1, K=1, V=1, gates="random", seed=0)
    comps = {c.name: c for c in lt.check_call(lambda **kw: linattn.chunk("delta_rule", **kw, num_threads=1),
                                              "delta_rule", case.inputs(), cotangent_seed=case.seed,
                                              backward=lambda **kw: linattn.chunk_backward("delta_rule", **kw,
                                                                                           num_threads=1))}
    assert all(c.ok for c in comps.values()) and comps["dh0"].floor_pass and comps["dh0"].rel_rms > 1e-3


def test_tolerances_per_key():
    inp = lt.random_inputs("kda", T=12, seed=23)
    o, S = linattn.reference("kda", **inp)
    off = ((o * 1.01).astype(np.float32), S)
    assert not lt.check_outputs("kda", inp, off)[0].ok
    comps = lt.check_outputs("kda", inp, off, rtol_rms={"o": 2e-2})
    assert comps[0].ok and comps[0].rtol_rms == 2e-2 and comps[1].rtol_rms == 1e-5
    assert lt.check_outputs("kda", inp, off, rtol_rms={None: 2e-2})[1].rtol_rms == 2e-2  # the default for the rest


def test_chunk_boundary_draws_only_where_the_range_holds_one():
    from hypothesis import given, settings
    seen = []

    @settings(max_examples=100, database=None, deadline=None)
    @given(lt.cases("delta_rule", T=(1, 40), chunk_size=64, varlen=False))
    def collect(case):
        seen.append(case.T)
    collect()
    assert sum(t == 40 for t in seen) < 30  # snapped draws would all collapse to 40


def test_check_kernel_also_passes_no_dht_to_the_backward():
    fwd = lambda **kw: linattn.reference("delta_rule", **kw)
    seen = []

    def bwd(do, dht, **kw):
        seen.append(dht is None)
        return lt.reference_gradients("delta_rule", kw, do, dht)
    assert lt.check_kernel(fwd, "delta_rule", backward=bwd, max_examples=20) == 20
    assert any(seen) and not all(seen)

    def bwd_needs_dht(do, dht, **kw):  # a backward that assumes a final-state gradient is always given
        return lt.reference_gradients("delta_rule", kw, do, dht * 1.0)
    with pytest.raises(lt.KernelMismatch, match="the backward raised TypeError"):
        lt.check_kernel(fwd, "delta_rule", backward=bwd_needs_dht, max_examples=20)


def test_a_kernel_that_changes_a_list_argument_fails_too():
    inp = lt.random_inputs("delta_rule", T=10, seed=26)
    inp["cu_seqlens"] = [0, 4, 10]  # a Python list, as a caller may pass it
    good = np_kernel("delta_rule")

    def shifts_offsets(**kw):
        out = good(**{**kw, "cu_seqlens": np.asarray(kw["cu_seqlens"])})
        kw["cu_seqlens"][1] = 5
        return out
    assert all(c.ok for c in lt.check_call(good, "delta_rule", inp))
    with pytest.raises(lt.InputModified, match="'cu_seqlens'"):
        lt.check_call(shifts_offsets, "delta_rule", inp)


# ---- audit fixes: missing or unknown outputs, bad arguments, extreme magnitudes, the o floor, long sequences ----

def test_a_kernel_must_return_o_and_only_known_keys():
    op = "gated_delta_rule"
    inp = lt.random_inputs(op, T=9, seed=31)
    o, S = linattn.reference(op, **inp)
    for bad in ((None, S), {"final_state": S}):
        with pytest.raises(AssertionError, match="o: missing"):
            lt.check_call(lambda **kw: bad, op, inp)
    with pytest.raises(AssertionError, match=r"keys \['out'\] that are not outputs; expected 'o'"):
        lt.check_call(lambda **kw: {"out": np.zeros_like(o), "final_state": S}, op, inp)
    bwd = lambda do, dht, **kw: {**lt.reference_gradients(op, kw, do, dht), "dw": np.zeros(3)}
    with pytest.raises(AssertionError, match=r"keys \['dw'\] that gated_delta_rule has no gradient for; expected "
                                             r"\['dq', 'dk', 'dv', 'dg', 'dbeta'\]"):
        lt.check_call(lambda **kw: linattn.reference(op, **kw), op, inp, backward=bwd)
    with pytest.raises(lt.KernelMismatch, match="o: missing"):
        lt.check_kernel(lambda **kw: {"final_state": linattn.reference(op, **kw)[1]}, op, max_examples=3)
    # a key whose value is None counts as absent (a generic kernel's unused outputs or gradients), not as unknown
    generic = lambda **kw: (lambda o, S: {"o": o, "final_state": S, "v_bar": None})(*linattn.reference(op, **kw))
    generic_bwd = lambda do, dht, **kw: {**lt.reference_gradients(op, kw, do, dht), "db": None, "dw": None}
    assert all(c.ok for c in lt.check_call(generic, op, inp, backward=generic_bwd))


def test_check_call_says_what_the_kernel_returned():
    op = "delta_rule"
    inp = lt.random_inputs(op, T=6, seed=32)
    o, S = linattn.reference(op, **inp)
    with pytest.raises(AssertionError, match=r"the kernel returned None; expected \(o, final_state\)"):
        lt.check_call(lambda **kw: None, op, inp)
    with pytest.raises(AssertionError, match="the kernel returned str 'abc'; expected"):
        lt.check_call(lambda **kw: "abc", op, inp)
    with pytest.raises(AssertionError) as info:
        lt.check_call(lambda **kw: (o, None), op, inp)
    msg = str(info.value)
    assert "it returned tuple (ndarray float32 [1, 6, 2, 6], None)" in msg and "shape [1, 2, 8, 6]" in msg
    with pytest.raises(AssertionError, match="the inputs pass output_final_state=False"):
        lt.check_call(lambda **kw: (o, None), op, {**inp, "output_final_state": False})
    assert all(c.ok for c in lt.check_call(lambda **kw: (o, None), op, {**inp, "output_final_state": False},
                                           require_final_state=False))


def test_wider_than_64_bit_floats_count_as_float64():
    if np.dtype(np.longdouble).itemsize <= 8:
        pytest.skip("longdouble is float64 on this platform")
    x = np.linspace(1, 2, 50)
    c = lt.compare((x * (1 + 3e-3)).astype(np.longdouble), x)
    assert c.rtol_rms == 1e-10 and not c.ok
    assert lt.default_rtol_rms("float128") == 1e-10 and lt.default_rtol_rms(np.longdouble) == 1e-10
    op = "gated_delta_rule"
    inp = lt.random_inputs(op, T=8, seed=33)
    off = lambda **kw: tuple(np.asarray(a) * (1 + 3e-3) for a in linattn.reference(op, **kw))
    assert not any(c.ok for c in lt.check_call(off, op, inp, dtype="float128"))
    wide = {k: (x.astype(np.longdouble) if isinstance(x, np.ndarray) else x) for k, x in inp.items()}
    comps = lt.check_call(lambda **kw: tuple(a * (1 + 3e-3) for a in linattn.reference(op, **inp)), op, wide)
    assert all(not c.ok and "float128 input" in c.basis for c in comps)  # float64 precision, float32 storage


def test_compare_scales_before_squaring():
    c = lt.compare(np.array([2e-200] * 2), np.array([1e-200] * 2), atol_rms=0)
    assert not c.ok and c.rel_rms == pytest.approx(1.0)
    c = lt.compare(np.array([1e200]), np.array([1e200 * (1 + 1e-12)]))
    assert c.ok and c.rel_rms == pytest.approx(1e-12, rel=1e-3)
    c = lt.compare(np.array([1.7e308, -1.7e308]), np.array([-1.7e308, 1.7e308]))
    assert not c.ok and c.rel_rms == pytest.approx(2.0) and c.expected_rms == pytest.approx(1.7e308)
    assert lt.compare(np.full(3, 3e-170), np.full(3, 1e-170)).abs_rms == pytest.approx(2e-170)


def test_generators_refuse_non_float_dtypes_float_offsets_and_unused_gate_options():
    for dt in (np.int32, np.complex64, "int8"):
        with pytest.raises(TypeError, match="argument 'dtype' expected one of float64, float32, float16, bfloat16"):
            lt.random_inputs("delta_rule", dtype=dt)
        with pytest.raises(TypeError, match="argument 'dtype'"):
            lt.check_kernel(lambda **kw: linattn.reference("delta_rule", **kw), "delta_rule", dtype=dt,
                            max_examples=3)
    with pytest.raises(ValueError, match="argument 'cu_seqlens' expected integer offsets"):
        lt.random_inputs("delta_rule", cu_seqlens=[0.5, 16])
    with pytest.raises(ValueError, match="argument 'cu_seqlens' expected None, a number of sequences"):
        lt.random_inputs("delta_rule", cu_seqlens=2.7)
    with pytest.raises(ValueError, match="argument 'gates'"):
        lt.random_inputs("delta_rule", gates="bogus")
    with pytest.raises(ValueError, match="argument 'gate_range' is used only with gates='uniform'"):
        lt.random_inputs("gated_delta_rule", gate_range=(-2.0, -1.0))
    with pytest.raises(ValueError, match="argument 'gate_modes'"):
        lt.check_kernel(lambda **kw: linattn.reference("delta_rule", **kw), "delta_rule", gate_modes=["bogus"])
    with pytest.raises(ValueError, match="argument 'gate_range'"):
        lt.cases("gated_delta_rule", gate_range=(-2.0, -1.0))  # no 'uniform' among the default modes
    assert lt.check_kernel(lambda **kw: linattn.reference("gated_delta_rule", **kw), "gated_delta_rule",
                           gate_modes=("random", "uniform"), gate_range=(-2.0, -1.0), max_examples=10) == 10


def test_check_call_refuses_dht_without_do_and_complex_values():
    op = "delta_rule"
    inp = lt.random_inputs(op, T=6, seed=34)
    fwd = lambda **kw: linattn.reference(op, **kw)
    bwd = lambda do, dht, **kw: lt.reference_gradients(op, kw, do, dht)
    dht = lt.random_cotangents(op, inp)["dht"]
    with pytest.raises(ValueError, match="argument 'dht' was given without 'do'"):
        lt.check_call(fwd, op, inp, backward=bwd, dht=dht)
    cplx = {**inp, "q": inp["q"] + 1j}
    with pytest.raises(TypeError, match="argument 'q' expected a real float array but got dtype complex"):
        lt.check_call(fwd, op, cplx)
    with pytest.raises(TypeError, match="argument 'expected'.*complex"):
        lt.compare(np.ones(3), np.ones(3) + 1j)


def test_unknown_tolerance_keys_and_bad_arguments_are_named():
    op = "kda"
    inp = lt.random_inputs(op, T=5, seed=35)
    fwd = lambda **kw: linattn.reference(op, **kw)
    for bad in ({"oo": 1.0}, {"O": 1.0}):
        with pytest.raises(ValueError, match=r"argument 'rtol_rms' has keys .* valid keys: \['o', 'final_state'"):
            lt.check_call(fwd, op, inp, rtol_rms=bad)
    with pytest.raises(ValueError, match="argument 'atol_rms'"):
        lt.check_outputs(op, inp, fwd(**inp), atol_rms={"dw": 1.0})  # gdn2's gradient, not kda's
    assert lt.check_call(fwd, op, inp, rtol_rms={"dg": 3e-2})[0].ok  # a gradient key of kda is fine
    with pytest.raises(ValueError, match="compare: argument 'rtol_rms' expected a non-negative number but got 'x'"):
        lt.compare(np.ones(2), np.ones(2), rtol_rms="x")
    with pytest.raises(ValueError, match="random_inputs: argument 'T' expected an integer >= 0 but got -1"):
        lt.random_inputs(op, T=-1)
    with pytest.raises(ValueError, match="random_cu_seqlens: argument 'T'"):
        lt.random_cu_seqlens(np.random.default_rng(0), -3, 2)
    with pytest.raises(ValueError, match=r"random_cotangents: argument 'inputs' .* lacks \['v'\]"):
        lt.random_cotangents(op, {"q": inp["q"]})


def test_save_npz_names_bad_scale_dtype_clashes_and_unreadable_types(tmp_path):
    inp = lt.random_inputs("delta_rule", T=5, seed=36)
    with pytest.raises(ValueError, match="save_npz: argument 'scale' expected a number but got 'x'"):
        lt.save_npz(tmp_path / "a.npz", {**inp, "scale": "x"})
    lt.save_npz(tmp_path / "a.npz", inp, linattn_dtype="float16")  # explicit and alone: written as given
    assert str(np.load(tmp_path / "a.npz")["linattn_dtype"]) == "float16"
    with pytest.raises(ValueError, match="save_npz: argument 'linattn_dtype'"):
        lt.save_npz(tmp_path / "a.npz", inp, linattn_dtype="int8")
    ml_dtypes = pytest.importorskip("ml_dtypes", reason="ml_dtypes (.ci/install-deps.sh installs it) is not installed")
    bf = {k: (x.astype(ml_dtypes.bfloat16) if k in ("q", "k", "v") else x) for k, x in inp.items()}
    with pytest.raises(ValueError, match="argument 'linattn_dtype' is 'float64' but the arrays hold bfloat16"):
        lt.save_npz(tmp_path / "a.npz", bf, linattn_dtype="float64")
    with pytest.raises(TypeError, match="argument 'q' has dtype int4") as info:
        lt.save_npz(tmp_path / "a.npz", {**inp, "q": inp["q"].astype(ml_dtypes.int4)})
    assert "bfloat16?" not in str(info.value)


def test_check_kernel_refuses_its_own_bad_configuration_before_calling_the_kernel():
    calls = []

    def kernel(**kw):
        calls.append(1)
        return linattn.reference("delta_rule", **kw)
    for kw, arg in ((dict(K=0), "'K'"), (dict(H=0), "'H'"), (dict(scale=float("nan")), "'scale'"),
                    (dict(rtol_rms="x"), "'rtol_rms'"), (dict(atol_rms={"oo": 1.0}), "'atol_rms'"),
                    (dict(T=(5, 2)), "'T'")):
        with pytest.raises(ValueError, match=arg):
            lt.check_kernel(kernel, "delta_rule", max_examples=3, **kw)
    assert not calls


def test_a_nan_is_named_on_the_first_line():
    e = np.ones((2, 3))
    a = e.copy()
    a[1, 2] = np.nan
    first = lt.compare(a, e).report().splitlines()[0]
    assert first.startswith("output: MISMATCH: non-finite values in actual: 1 NaN, 0 Inf; first at (1, 2)"), first


def scaled_inputs(op, s, dtype, only_q=False, seed=40):
    """random_inputs with q (and, unless only_q, k, v and the initial state) multiplied by s, in `dtype`; no decay, so
    that the state keeps its size (~s) while o shrinks like s^2."""
    inp = lt.random_inputs(op, T=24, initial_state=True, seed=seed, dtype=np.float64, gates="zero")
    for key in (("q",) if only_q else ("q", "k", "v", "initial_state")):
        inp[key] = inp[key] * s
    return {k: (x.astype(dtype) if isinstance(x, np.ndarray) else x) for k, x in inp.items()}


@pytest.mark.parametrize("op", ["linear_attn", "gated_delta_rule"])
@pytest.mark.parametrize("s, dtype, only_q", [(1e-7, "float32", False), (1e-4, "bfloat16", False),
                                              (1e-4, "float16", False), (1e-6, "float32", True)])
def test_the_o_floor_follows_the_natural_size_of_o(op, s, dtype, only_q):
    # the floor once scaled with max(rms(o), rms(final_state)): o = 0 and 2 o passed all of these
    if dtype == "bfloat16":
        dtype = pytest.importorskip("ml_dtypes", reason="ml_dtypes is not installed").bfloat16
    inp = scaled_inputs(op, s, dtype, only_q)
    exact = {k: (x.astype(np.float64) if isinstance(x, np.ndarray) else x) for k, x in inp.items()}
    o, S = linattn.reference(op, **exact)
    assert all(c.ok for c in lt.check_call(lambda **kw: (o, S), op, inp))
    for wrong in (np.zeros_like(o), 2 * o):
        comps = {c.name: c for c in lt.check_call(lambda **kw: (wrong, S), op, inp)}
        assert not comps["o"].ok and comps["final_state"].ok, comps["o"].report()


def test_the_state_floor_reads_k_as_the_kernel_does_under_use_qk_l2norm():
    # the write term rms(k_t) rms(v_t) of the state's size uses unit keys when the kernel normalises them: with raw
    # keys 1e7 too large it lifted the floor above the state, and an all-zero final state passed
    op = "gated_delta_rule"
    inp = lt.random_inputs(op, T=24, seed=3, gates="zero")
    inp["k"] = inp["k"] * 1e7
    inp["use_qk_l2norm_in_kernel"] = True
    o, S = linattn.reference(op, **inp)
    assert all(c.ok for c in lt.check_call(lambda **kw: (o, S), op, inp))
    comps = {c.name: c for c in lt.check_call(lambda **kw: (o, np.zeros_like(S)), op, inp)}
    assert not comps["final_state"].ok, comps["final_state"].report()


def long_gdn_inputs(initial_state):
    """T = 2048, g = -1e-4 everywhere, beta = 0.1, K = V = 128, L2-normalised q and k, float32."""
    rng = np.random.default_rng(0)
    T, K, V = 2048, 128, 128
    inp = {"q": lt.l2_normalize(rng.standard_normal((1, T, 1, K))).astype(np.float32),
           "k": lt.l2_normalize(rng.standard_normal((1, T, 1, K))).astype(np.float32),
           "v": rng.standard_normal((1, T, 1, V)).astype(np.float32),
           "g": np.full((1, T, 1), -1e-4, np.float32), "beta": np.full((1, T, 1), 0.1, np.float32),
           "output_final_state": True}
    inp["initial_state"] = (0.5 * rng.standard_normal((1, 1, K, V))).astype(np.float32) if initial_state else None
    return inp


@pytest.mark.parametrize("initial_state", [False, True])
def test_float32_bounds_grow_with_the_longest_sequence(initial_state):
    op = "gated_delta_rule"
    inp = long_gdn_inputs(initial_state)
    per_token = lambda **kw: linattn.naive_recurrent_gated_delta_rule(**kw)  # correct, float32, one token at a time
    comps = lt.check_call(per_token, op, inp)
    assert all(c.ok for c in comps), [c.report() for c in comps]
    assert max(c.rel_rms for c in comps) > 1e-5  # above the table value: it failed before T_max * u
    assert all(c.rtol_rms == pytest.approx(2048 * 2.0 ** -24) and "T_max = 2048" in c.basis for c in comps)
    wrong = lambda **kw: (lambda o, S: (o * np.float32(1 + 1e-3), S))(*per_token(**kw))
    assert not lt.check_call(wrong, op, inp)[0].ok
    # packed: the longest sequence counts, not the total length; 167 tokens keep 1e-5
    short = lt.random_inputs(op, T=300, cu_seqlens=[0, 167, 300], seed=1)
    assert all(c.rtol_rms == 1e-5 for c in lt.check_outputs(op, short, linattn.reference(op, **short)))
    # 16-bit bounds do not grow
    assert lt.check_outputs(op, inp, per_token(**inp), dtype="bfloat16")[0].rtol_rms == 1e-2


@pytest.mark.parametrize("op", ["delta_rule", "gated_delta_rule", "kda", "gdn2"])
def test_linattn_chunked_kernels_pass_200_cases_under_the_new_floors_and_bounds(op):
    fwd = lambda **kw: linattn.chunk(op, **kw, num_threads=1)
    bwd = lambda **kw: linattn.chunk_backward(op, **kw, num_threads=1)
    assert lt.check_kernel(fwd, op, backward=bwd, max_examples=200, seed=5) == 200


def test_zero_dimensional_arrays_count_as_numbers_for_scale_and_tolerances():
    # as in the bindings: np.array(0.3) is a number (it was refused as "not a number")
    assert lt.random_inputs("delta_rule", T=5, scale=np.array(0.3))["scale"] == 0.3
    assert lt.compare(np.ones(3), np.ones(3) * (1 + 1e-4), rtol_rms=np.array(1e-3)).ok
    assert not lt.compare(np.ones(3), np.ones(3) * (1 + 1e-2), rtol_rms=np.array(1e-3), atol_rms=np.array(0.0)).ok
