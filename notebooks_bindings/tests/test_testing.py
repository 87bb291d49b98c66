"""linattn.testing: the comparison report, the generators' conventions, and the hypothesis harness
(it passes correct kernels, including the float32 reference, and CATCHES deliberately wrong ones:
the error computed before the decay, and a transposed read)."""
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
