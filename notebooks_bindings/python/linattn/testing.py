"""linattn.testing -- the ground-truth harness for kernel authors.

Three layers, each usable alone:

* ``assert_close(actual, expected, rtol_rms=..., name=...)``: compare by relative RMS error
  ||actual - expected|| / ||expected|| (absolute RMS when expected is all zero) and, on failure,
  raise AssertionError with a readable report: shapes, NaN/Inf counts and where, the largest
  absolute difference and where, and the worst elements with their indices.
* Random inputs with the field's conventions: ``random_inputs(op, ...)`` gives a dict of fla-style
  keyword arguments (q, k, v, the gates of ``op``, scale, initial_state, output_final_state,
  cu_seqlens) with L2-normalised keys, log-space gates g = log(alpha) <= 0 in selectable modes
  (random, exactly 0, extreme, mixed, a uniform range), gates b/w/beta in [0, 1] (hitting 0 and
  1 exactly in mixed mode), ragged variable-length offsets and initial states.
* ``check_kernel(kernel, op, ...)``: a property check built on hypothesis. It draws shapes, gate
  modes, packed batches and initial states, calls ``kernel(**inputs)`` (fla's calling
  convention), compares every output with the float64 reference, and on failure raises
  ``KernelMismatch`` naming the smallest failing case it shrank to, with the comparison report
  and a line that reproduces the inputs. With ``backward=`` it checks the gradients too.

* ``check_call(kernel, op, inputs, backward=...)``: one case of that check on inputs you choose (e.g. a
  production shape): the reference is computed from a snapshot of the inputs taken before the call,
  and a kernel that modifies its inputs in place fails.

The reference is always computed in float64 from the (exactly widened) inputs as the kernel received
them. Tolerances follow the precision of the computation: the narrowest floating type among the
inputs as the kernel received them (bf16 and fp16 as 16-bit, whether NumPy/ml_dtypes arrays or torch
tensors), unless ``dtype=`` names it; an output stored in a narrower type adds only its rounding.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Optional, Sequence

import numpy as np

from . import _core
from ._ops import GATE_DIM, GATES, OPS, check_op, reference, reference_backward

__all__ = [
    "Comparison",
    "compare",
    "assert_close",
    "default_rtol_rms",
    "default_atol_rms",
    "GATE_MODES",
    "log_gates",
    "unit_gates",
    "l2_normalize",
    "random_cu_seqlens",
    "random_inputs",
    "reference_outputs",
    "check_outputs",
    "reference_gradients",
    "check_gradients",
    "random_cotangents",
    "check_call",
    "save_npz",
    "Case",
    "cases",
    "check_kernel",
    "KernelMismatch",
]

# --------------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------------

#: Default relative-RMS tolerance by the dtype of the output under test (vs a float64 reference).
#: float64: room for a reordering of sums; float32: the float32 reference itself stays below 3e-7
#: (T <= 256, K, V <= 32; docs/python.md), so 1e-5 leaves room for blocked sums
#: (TF32 matrix units need about 2e-3: pass rtol_rms); 16-bit outputs (fp16, bf16 read as float32
#: by the caller): 1e-2. Floats wider than 64 bits (longdouble, float128) count as float64: the reference is
#: float64. For float32 and float64 the checks raise the bound to T_max * u on long sequences (_length_rtol).
_DEFAULT_RTOL = {8: 1e-10, 4: 1e-5, 2: 1e-2}

#: Unit roundoff of the precisions whose relative bounds grow with the longest sequence T_max: rtol_rms =
#: max(table value, T_max * u) (float32 and float64 only; check_outputs, check_gradients and everything built on
#: them). Rounding exp(g) to float32 is a fixed relative bias that compounds over a sequence: the float32 per-token
#: reference of GDN at T = 2048 (g = -1e-4 everywhere, beta = 0.1, K = V = 128, L2-normalised q and k) is off by
#: 1.1e-5 on o and 1.5e-5 on the final state (1.4e-5 / 2.2e-5 with an initial state of RMS 0.5: tests/test_testing.py's
#: long_gdn_inputs), against a table value of
#: 1e-5; T_max * 2^-24 = 1.2e-4 there. T_max <= 167 keeps 1e-5 at float32. 16-bit bounds do not grow.
_UNIT_ROUNDOFF = {8: 2.0 ** -53, 4: 2.0 ** -24}

#: Default relative-RMS tolerance of gradients (check_gradients, check_call, check_kernel with a backward): float32
#: 1e-4, as the project's own float32 chunked backward needs (its sums over a chunk in another order; measured
#: 9.2e-5 on dh0 at T = 64, K = V = 1 with no decay, where the per-token float32 reference gets 1.5e-8).
_DEFAULT_RTOL_GRAD = {8: 1e-10, 4: 1e-4, 2: 1e-2}

#: Default floor of dh0, as a fraction of the case's magnitude (_floor_scale): the same as the gradients' relative
#: tolerance, i.e. rms(error) <= rtol * max(rms(wanted), magnitude), the bound proofs_tests/test_chunk_backward.cpp
#: holds the chunked CPU backward to. dh0 is the state gradient carried back through every token, a product of T
#: factors that can leave it far smaller than the values it was computed from: a correct float32 chunked backward
#: leaves dh0 errors of 2.4e-6 of the case's magnitude where dh0 has shrunk to 1.5e-4 of it (delta_rule, T = 25,
#: K = V = 1). Every other gradient keeps the outputs' floor (_DEFAULT_ATOL), which 800 random cases of the chunked
#: backward of every operator pass.
_DEFAULT_ATOL_GRAD = {8: 1e-10, 4: 1e-4, 2: 1e-2}

#: What storing an exact value in a narrower type costs, as a relative-RMS bound (round to nearest: at most
#: 2^-24, 2^-11, 2^-8 relative; about half that in RMS; with room): added when a kernel returns an output in a
#: type narrower than the one it computed in, so that the output's type cannot loosen the bound on its own.
_ROUNDING_RTOL = {"float32": 1e-6, "float16": 1e-3, "bfloat16": 5e-3}

_FLOAT_NAMES = {"float64": 8, "double": 8, "float32": 4, "float": 4, "single": 4, "bfloat16": 2, "bf16": 2,
                "float16": 2, "half": 2, "fp16": 2}


def _itemsize_of_dtype(dtype) -> int:
    """Bytes per element of a floating dtype given as a NumPy dtype, a name ('bfloat16', 'float16', ...), or a
    torch dtype (torch.bfloat16 -> 2). Anything that is not a floating type is a TypeError."""
    if dtype is None:
        raise TypeError("expected a floating dtype but got None")
    name = str(dtype).replace("torch.", "")
    if name in _FLOAT_NAMES:
        return _FLOAT_NAMES[name]
    if name.startswith("float8"):
        return 1
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt.kind != "f":
        raise TypeError(f"expected a floating type (float64, float32, float16, bfloat16) but got {name!r}")
    return min(dt.itemsize, 8)  # longdouble / float128: float64 precision (the reference is float64)


def default_rtol_rms(dtype) -> float:
    """The default relative-RMS tolerance for a computation in `dtype` (compared with float64): by its size, 8 bytes
    1e-10, 4 bytes 1e-5, 2 bytes (bf16, fp16) 1e-2; wider floats (longdouble) as float64. `dtype` may be a NumPy
    dtype, a name such as 'bfloat16', or a torch dtype. (The check_* functions raise the float32 / float64 value to
    T_max * u on long sequences; see _UNIT_ROUNDOFF.)"""
    return _DEFAULT_RTOL.get(_itemsize_of_dtype(dtype), 1e-2)


#: Default absolute floor on the RMS difference, by output dtype: about 10 roundings of an O(1)
#: value. It passes an output whose reference is (nearly) zero, e.g. the gradient of a log-decay
#: g = -30 (alpha ~ 1e-13), where a relative error is meaningless.
_DEFAULT_ATOL = {8: 1e-14, 4: 1e-6, 2: 1e-3}


def default_atol_rms(dtype) -> float:
    """The default absolute RMS floor for outputs of `dtype` (see _DEFAULT_ATOL). compare() and assert_close() apply
    it as is, in the units of the data; check_outputs, check_gradients, check_call, check_kernel and
    `python -m linattn.check` multiply it by the natural size of each output (final_state: the state's size S =
    max(rms(final_state_ref), rms(initial_state), rms_t(rms(k_t) rms(v_t))); o: max(rms(o_ref), scale *
    rms_t(||q_t||) * S); gradients: the largest RMS among the reference gradients; _output_floor_scales), so that
    scaling inputs down cannot make a wrong output pass on the floor."""
    return _DEFAULT_ATOL.get(_itemsize_of_dtype(dtype), 1e-3)


@dataclasses.dataclass
class Comparison:
    """How far `actual` is from `expected`."""

    name: str
    shape_ok: bool
    actual_shape: tuple
    expected_shape: tuple
    rel_rms: float = math.nan
    max_abs: float = math.nan
    max_abs_index: Optional[tuple] = None
    expected_rms: float = math.nan
    n_nan: int = 0
    n_inf: int = 0
    first_nonfinite: Optional[tuple] = None
    worst: list = dataclasses.field(default_factory=list)  # [(index, actual, expected, |diff|)]
    rtol_rms: float = math.nan
    abs_rms: float = math.nan  # sqrt(mean((actual - expected)^2))
    atol_rms: float = 0.0
    basis: str = ""  # what chose the tolerance, e.g. "bfloat16 inputs"
    compared: bool = True  # False: nothing to compare (an optional output the kernel did not return); ok, says so
    note: str = ""

    @property
    def ok(self) -> bool:
        if not self.compared:
            return True
        finite = self.shape_ok and self.n_nan == 0 and self.n_inf == 0
        return finite and (self.rel_rms <= self.rtol_rms or self.abs_rms <= self.atol_rms)

    @property
    def floor_pass(self) -> bool:
        """True when it passes only on the absolute floor (its relative error is above rtol_rms)."""
        return self.compared and self.ok and not (self.rel_rms <= self.rtol_rms)

    def report(self) -> str:
        """A readable multi-line account of the comparison."""
        head = f"{self.name}: "
        if not self.compared:
            return head + f"not compared ({self.note})"
        if not self.shape_ok:
            msg = head + f"shape mismatch: actual {self.actual_shape} vs expected {self.expected_shape}"
            perm = _axes_permutation(self.actual_shape, self.expected_shape)
            if perm is not None:
                msg += (f"\n  the same sizes in another order: np.transpose(actual, {perm}) has the expected shape"
                        + (" (a head-first [B, H, T, ...] layout? linattn takes fla's [B, T, H, ...])"
                           if len(perm) == 4 and perm[:3] == (0, 2, 1) else ""))
            return msg
        verdict = "ok" if self.ok else "MISMATCH"
        stats = (f"rel_rms = {self.rel_rms:.3e} (tolerance {self.rtol_rms:.1e}"
                 + (f", for {self.basis}" if self.basis else "") + "), "
                 f"max |diff| = {self.max_abs:.3e} at {self.max_abs_index}, "
                 f"rms(expected) = {self.expected_rms:.3e}, shape {self.actual_shape}")
        if self.n_nan or self.n_inf:  # say so first: the statistics below leave those elements out
            lines = [head + f"{verdict}: non-finite values in actual: {self.n_nan} NaN, {self.n_inf} Inf; first at "
                     f"{self.first_nonfinite}",
                     f"  over the finite elements only: {stats}"]
        else:
            lines = [head + f"{verdict}: {stats}"]
        if self.rel_rms > self.rtol_rms and self.abs_rms <= self.atol_rms and self.n_nan == 0 and self.n_inf == 0:
            lines.append(f"  WARNING: passes only on the absolute floor: rms(diff) = {self.abs_rms:.3e} <= {self.atol_rms:.1e} "
                         f"(its relative error is above the tolerance; expected for a (nearly) zero reference only)")
        if self.worst and not self.ok:
            lines.append("  worst elements (index: actual vs expected, |diff|):")
            for idx, a, e, d in self.worst:
                lines.append(f"    {idx}: {a!r} vs {e!r}, {d:.3e}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _axes_permutation(actual: tuple, expected: tuple):
    """A permutation p with actual[p[i]] == expected[i] for all i (the identity excluded), or None."""
    import itertools
    if len(actual) != len(expected) or sorted(actual) != sorted(expected) or len(actual) > 6:
        return None
    for p in itertools.permutations(range(len(actual))):
        if p != tuple(range(len(actual))) and all(actual[p[i]] == expected[i] for i in range(len(actual))):
            return p
    return None


def _is_torch(x) -> bool:
    return hasattr(x, "detach") and hasattr(x, "cpu")  # torch.Tensor, without importing torch


def _is_ml_float(dt: np.dtype) -> bool:
    """ml_dtypes' bfloat16 / float8 types: NumPy sees them as kind 'V'."""
    return dt.kind == "V" and (dt.name == "bfloat16" or dt.name.startswith("float8"))


def _as_numpy(x) -> np.ndarray:
    """NumPy array of an array-like, widened exactly where NumPy has no such type: torch tensors (any device) in
    bf16 or float8 become float32; NumPy arrays of ml_dtypes' bfloat16 / float8 types become float32."""
    if _is_torch(x):
        x = x.detach().cpu()
        if str(x.dtype) in ("torch.bfloat16",) or str(x.dtype).startswith("torch.float8"):
            x = x.float()
        x = x.numpy()
    a = np.asarray(x)
    if _is_ml_float(a.dtype):
        a = a.astype(np.float32)  # ml_dtypes registers these casts; exact
    return a


def _float_itemsize(x) -> Optional[int]:
    """Bytes per element of x's floating type before any widening (bf16 tensor -> 2), or None if x is not floating
    (or is None)."""
    if x is None:
        return None
    if _is_torch(x):
        return int(x.element_size()) if x.is_floating_point() else None
    dt = np.dtype(x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype)
    return min(dt.itemsize, 8) if dt.kind == "f" or _is_ml_float(dt) else None  # longdouble: as float64


def _dtype_name(x) -> str:
    if _is_torch(x):
        return str(x.dtype).replace("torch.", "")
    return np.dtype(getattr(x, "dtype", np.asarray(x).dtype)).name


def _precision(arrays: dict, dtype=None):
    """(itemsize, basis) of the computation: `dtype` when given, else the narrowest floating type among `arrays`
    ({role: array}, e.g. {"input 'q'": q}); basis says which, for the report."""
    if dtype is not None:
        return _itemsize_of_dtype(dtype), f"dtype={str(dtype).replace('torch.', '')}"
    best = None
    for role, x in arrays.items():
        n = _float_itemsize(x)
        if n is not None and (best is None or n < best[0]):
            best = (n, f"{_dtype_name(x)} {role}")
    return best if best is not None else (8, "float64")


def _rounding_rtol(x) -> float:
    """The relative-RMS cost of storing exact values in x's type (0 for float64)."""
    name = _dtype_name(x)
    if name.startswith("float8"):
        return 1e-1
    return _ROUNDING_RTOL.get(name, 0.0)


def _unwrap_0d(x):
    """A 0-d integer or float array as its number (as the bindings take it); anything else as is."""
    if isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf":
        return x.item()
    return x


def _tolerance_number(fn: str, arg: str, x) -> float:
    """x as a float when it is a non-negative number (inf allowed), else a ValueError naming the argument."""
    import numbers
    x = _unwrap_0d(x)
    if isinstance(x, bool) or not isinstance(x, numbers.Real) or not float(x) >= 0:
        raise ValueError(f"{fn}: argument '{arg}' expected a non-negative number but got {x!r}")
    return float(x)


def _check_tolerances(fn: str, keys, rtol_rms, atol_rms) -> None:
    """rtol_rms / atol_rms: None, a non-negative number, or a dict of them by key, whose keys must be among `keys`
    (or None, the default for the keys not named): a misspelt key would otherwise be ignored silently."""
    for arg, value in (("rtol_rms", rtol_rms), ("atol_rms", atol_rms)):
        if value is None:
            continue
        if not isinstance(value, dict):
            _tolerance_number(fn, arg, value)
            continue
        unknown = [k for k in value if k is not None and k not in keys]
        if unknown:
            raise ValueError(f"{fn}: argument '{arg}' has keys {unknown} that are not compared here; valid keys: "
                             f"{list(keys)} (or None for the rest)")
        for k, x in value.items():
            if x is not None:
                _tolerance_number(fn, f"{arg}[{k!r}]", x)


def _valid_tolerance_keys(op: str) -> list:
    """The keys a per-key tolerance of `op` may name: its outputs and its gradients."""
    return ["o", "final_state", "dq", "dk", "dv"] + ["d" + n for n in GATES[op]] + ["dh0"]


def _exp2(m: float) -> int:
    """k with 2^k <= m < 2^(k+1) (0 for 0 or non-finite m): dividing by 2^k is exact, and brings m to [1, 2)."""
    return math.frexp(m)[1] - 1 if (m > 0 and math.isfinite(m)) else 0


def _ldexp(x: float, k: int) -> float:
    """x * 2^k, inf (not OverflowError) past the float64 range."""
    with np.errstate(over="ignore"):
        return float(np.ldexp(x, k))


def _sum_squares(x: np.ndarray):
    """(s, k) with sum(x^2) = s * 4^k, x scaled by a power of two before squaring so that the squares neither
    underflow (x ~ 1e-200) nor overflow (x ~ 1e200); exact scaling, so ordinary values give the same sums."""
    if x.size == 0:
        return 0.0, 0
    k = _exp2(float(np.max(np.abs(x))))
    y = np.ldexp(x, -k)
    return float(np.sum(y * y)), k


def compare(actual, expected, *, rtol_rms: Optional[float] = None, atol_rms: Optional[float] = None,
            name: str = "output", n_worst: int = 5, dtype=None) -> Comparison:
    """Compare by relative RMS error (float64 arithmetic). See assert_close."""
    if _float_itemsize(actual) is None:
        raise TypeError(f"{name}: expected a floating-point array (float64, float32, float16, bfloat16) but got dtype "
                        f"{_dtype_name(actual)}")
    if rtol_rms is not None:
        _tolerance_number("compare", "rtol_rms", rtol_rms)
    if atol_rms is not None:
        _tolerance_number("compare", "atol_rms", atol_rms)
    size, basis = _precision({"output": actual}, dtype)
    a = _as_numpy(actual)
    e = _as_numpy(expected)
    if not (e.dtype.kind in "fiu" or _is_ml_float(e.dtype)):
        raise TypeError(f"{name}: argument 'expected' expected a real array (float or integer) but got dtype {e.dtype}"
                        + ("; complex values are not compared (compare the real and imaginary parts separately)"
                           if e.dtype.kind == "c" else ""))
    tol = _DEFAULT_RTOL.get(size, 1e-2) if rtol_rms is None else float(rtol_rms)
    atol = _DEFAULT_ATOL.get(size, 1e-3) if atol_rms is None else float(atol_rms)
    c = Comparison(name=name, shape_ok=a.shape == e.shape, actual_shape=a.shape, expected_shape=e.shape,
                   rtol_rms=tol, atol_rms=atol,
                   basis=basis if rtol_rms is None else "rtol_rms given")
    if not c.shape_ok:
        return c
    a64 = a.astype(np.float64)
    e64 = e.astype(np.float64)
    nan = np.isnan(a64)
    inf = np.isinf(a64)
    c.n_nan, c.n_inf = int(nan.sum()), int(inf.sum())
    bad = nan | inf
    if bad.any():
        c.first_nonfinite = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), a.shape))
    finite = ~bad
    # Sums of squares scaled by powers of two (exact): no underflow at 1e-200, no overflow at 1e200. The
    # difference is taken of the scaled values, so that it cannot overflow either.
    ks = _exp2(max(float(np.max(np.abs(np.where(finite, a64, 0.0)), initial=0.0)),
                   float(np.max(np.abs(np.where(np.isfinite(e64), e64, 0.0)), initial=0.0))))
    dscaled = np.where(finite, np.ldexp(a64, -ks) - np.ldexp(e64, -ks), 0.0)
    with np.errstate(over="ignore"):
        diff = np.ldexp(dscaled, ks)
    num, kn = _sum_squares(dscaled)
    kn += ks
    den, kd = _sum_squares(np.where(finite, e64, 0.0))
    n = max(a.size, 1)
    s_all, k_all = _sum_squares(e64)
    c.expected_rms = _ldexp(math.sqrt(s_all / n), k_all)
    c.abs_rms = _ldexp(math.sqrt(num / n), kn)
    c.rel_rms = _ldexp(math.sqrt(num / den), kn - kd) if den > 0 else c.abs_rms
    if a.size:
        ad = np.abs(diff)
        flat = int(np.argmax(ad))
        c.max_abs = float(ad.reshape(-1)[flat])
        c.max_abs_index = tuple(int(i) for i in np.unravel_index(flat, a.shape))
        k = min(n_worst, a.size)
        order = np.argsort(-ad.reshape(-1), kind="stable")[:k]
        for f in order:
            idx = tuple(int(i) for i in np.unravel_index(int(f), a.shape))
            c.worst.append((idx, a64.reshape(-1)[f].item(), e64.reshape(-1)[f].item(), float(ad.reshape(-1)[f])))
    else:
        c.max_abs = 0.0
    return c


def assert_close(actual, expected, rtol_rms: Optional[float] = None, name: str = "output", n_worst: int = 5,
                 atol_rms: Optional[float] = None, dtype=None) -> Comparison:
    """Assert ||actual - expected|| / ||expected|| <= rtol_rms (absolute RMS when expected is 0),
    or, for a (nearly) zero reference, rms(actual - expected) <= atol_rms (an absolute floor).

    Shapes must match exactly and `actual` must be floating and finite. The defaults follow the
    precision of the computation: `dtype` when given (e.g. 'bfloat16' for bf16 results you widened
    to float32 yourself), else the dtype of `actual` (a bf16 torch tensor or ml_dtypes array counts
    as 16-bit): rtol_rms (default_rtol_rms) 1e-10 float64, 1e-5 float32, 1e-2 16-bit; atol_rms
    (default_atol_rms) 1e-14, 1e-6, 1e-3, an absolute floor in the units of the data (pass
    atol_rms=0 for a purely relative test; a pass on the floor alone is flagged in the report).
    Returns the Comparison on success; raises AssertionError with its report otherwise."""
    c = compare(actual, expected, rtol_rms=rtol_rms, atol_rms=atol_rms, name=name, n_worst=n_worst, dtype=dtype)
    if not c.ok:
        raise AssertionError(c.report())
    return c


# --------------------------------------------------------------------------------------------
# Random inputs with the field's conventions
# --------------------------------------------------------------------------------------------

#: Gate modes (as in proofs_tests/generators.hpp): "random" g = log(sigmoid(N(2.5, 1.5)));
#: "zero" g = 0 exactly (no decay); "extreme" g in {-30, -1000} (decay to ~0 in one token);
#: "mixed" a mixture of 0, -1000 and random, with b, w, beta hitting 0 and 1 exactly;
#: "uniform" g uniform in gate_range = (low, high), low <= high <= 0.
GATE_MODES = ("random", "zero", "extreme", "mixed", "uniform")


def log_gates(rng: np.random.Generator, shape, mode: str = "random", gate_range=None, dtype=np.float64) -> np.ndarray:
    """Log-space decays g = log(alpha) <= 0 of `shape` under `mode` (see GATE_MODES)."""
    shape = tuple(shape)
    rnd = lambda: -np.log1p(np.exp(-rng.normal(2.5, 1.5, size=shape)))  # log(sigmoid(x))
    if mode == "random":
        g = rnd()
    elif mode == "zero":
        g = np.zeros(shape)
    elif mode == "extreme":
        g = np.where(rng.integers(0, 2, size=shape) == 1, -30.0, -1000.0)
    elif mode == "mixed":
        pick = rng.integers(0, 4, size=shape)
        g = np.where(pick == 0, 0.0, np.where(pick == 1, -1000.0, rnd()))
    elif mode == "uniform":
        if gate_range is None:
            raise ValueError("log_gates: mode 'uniform' needs gate_range=(low, high) with low <= high <= 0")
        if np.ndim(gate_range) != 1 or np.size(gate_range) != 2:
            raise ValueError(f"log_gates: argument 'gate_range' expected (low, high) but got {gate_range!r}")
        lo, hi = map(float, gate_range)
        if not (lo <= hi <= 0.0) or not math.isfinite(lo):
            raise ValueError(f"log_gates: argument 'gate_range' expected finite low <= high <= 0 but got {gate_range}")
        g = rng.uniform(lo, hi, size=shape)
    else:
        raise ValueError(f"log_gates: argument 'mode' expected one of {GATE_MODES} but got {mode!r}")
    return np.ascontiguousarray(np.minimum(g, 0.0), dtype=dtype)


def unit_gates(rng: np.random.Generator, shape, mode: str = "random", dtype=np.float64) -> np.ndarray:
    """Gates in [0, 1] (beta, b, w): uniform; in "mixed" mode 0 and 1 exactly one time in five each."""
    shape = tuple(shape)
    x = rng.uniform(0.0, 1.0, size=shape)
    if mode == "mixed":
        pick = rng.integers(0, 5, size=shape)
        x = np.where(pick == 0, 0.0, np.where(pick == 1, 1.0, x))
    return np.ascontiguousarray(x, dtype=dtype)


def l2_normalize(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """x / ||x|| along `axis` (zero vectors stay zero), computed in float64."""
    x64 = np.asarray(x, dtype=np.float64)
    n = np.sqrt(np.sum(x64 * x64, axis=axis, keepdims=True))
    return np.where(n > 0, x64 / np.where(n > 0, n, 1.0), 0.0).astype(np.asarray(x).dtype)


def _int_arg(fn: str, name: str, x, low: int) -> int:
    """x as an int when it is an integer >= low (not a bool, not a float), else a ValueError naming the argument."""
    import numbers
    if isinstance(x, bool) or not isinstance(x, numbers.Integral) or int(x) < low:
        raise ValueError(f"{fn}: argument '{name}' expected an integer >= {low} but got {x!r}")
    return int(x)


#: The types random_inputs and check_kernel draw inputs in.
_HARNESS_DTYPES = ("float64", "float32", "float16", "bfloat16")


def _harness_dtype(fn: str, dtype) -> np.dtype:
    """np.dtype(dtype) when it is float64, float32, float16 or ml_dtypes' bfloat16, else a TypeError: other types
    (integers, complex) would make trivial cases that pass."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt is None or dt.name not in _HARNESS_DTYPES:
        raise TypeError(f"{fn}: argument 'dtype' expected one of float64, float32, float16, bfloat16 (ml_dtypes) but "
                        f"got {dtype!r}")
    return dt


def _scale_arg(fn: str, scale) -> Optional[float]:
    import numbers
    if scale is None:
        return None
    scale = _unwrap_0d(scale)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real) or not math.isfinite(float(scale)):
        raise ValueError(f"{fn}: argument 'scale' expected None or a finite number but got {scale!r}")
    return scale


def random_cu_seqlens(rng: np.random.Generator, T: int, n_seqs: int, allow_empty: bool = True) -> np.ndarray:
    """Ragged offsets [0, t_1, ..., T] of `n_seqs` packed sequences (int64, fla's cu_seqlens)."""
    T = _int_arg("random_cu_seqlens", "T", T, 0)
    if isinstance(n_seqs, bool) or not isinstance(n_seqs, (int, np.integer)):
        raise ValueError(f"random_cu_seqlens: argument 'n_seqs' expected an integer >= 1 but got {n_seqs!r}")
    if n_seqs < 1:
        raise ValueError(f"random_cu_seqlens: argument 'n_seqs' expected >= 1 but got {n_seqs}")
    if not allow_empty and T < n_seqs:
        raise ValueError(f"random_cu_seqlens: T = {T} cannot hold {n_seqs} non-empty sequences")
    if allow_empty:
        cuts = np.sort(rng.integers(0, T + 1, size=n_seqs - 1))
    else:
        cuts = np.sort(rng.choice(np.arange(1, T), size=n_seqs - 1, replace=False)) if n_seqs > 1 else np.array([], int)
    return np.concatenate([[0], cuts, [T]]).astype(np.int64)


def random_inputs(
    op: str,
    *,
    B: int = 1,
    T: int = 16,
    H: int = 2,
    K: int = 8,
    V: int = 6,
    dtype=np.float32,
    gates: str = "random",
    gate_range=None,
    unit_keys: bool = True,
    cu_seqlens=None,
    initial_state: bool = False,
    scale: Optional[float] = None,
    seed: int = 0,
    HV: Optional[int] = None,
) -> dict:
    """Random fla-style keyword arguments for `op` (one of linattn.OPS).

    Returns {'q', 'k', 'v', <gates of op>, 'scale', 'initial_state', 'output_final_state': True,
    'cu_seqlens'}: q, k [B, T, H, K] (k L2-normalised per head unless unit_keys=False), v [B, T, H, V],
    gates by GATE_DIM, initial_state [N, H, K, V] or None. cu_seqlens: None, an int (that many
    ragged sequences packed into B = 1) or explicit integer offsets [0, ..., T]. Arrays are C-contiguous `dtype`
    (float64, float32, float16 or ml_dtypes.bfloat16). gates: one of GATE_MODES; gate_range only with
    gates="uniform", for an operator with a log-decay g. HV (default H): value heads, a multiple of H, for fla's
    grouped value attention: v, the gates and initial_state then have HV heads, q and k keep H."""
    check_op(op)
    fn = "random_inputs"
    B, T = _int_arg(fn, "B", B, 1), _int_arg(fn, "T", T, 0)
    H, K, V = _int_arg(fn, "H", H, 1), _int_arg(fn, "K", K, 1), _int_arg(fn, "V", V, 1)
    HV = H if HV is None else _int_arg(fn, "HV", HV, 1)
    if HV % H:
        raise ValueError(f"{fn}: argument 'HV' expected a multiple of H = {H} (grouped value attention) but got {HV}")
    dt = _harness_dtype(fn, dtype)
    _scale_arg(fn, scale)
    if gates not in GATE_MODES:
        raise ValueError(f"{fn}: argument 'gates' expected one of {GATE_MODES} but got {gates!r}")
    if gate_range is not None and (gates != "uniform" or "g" not in GATES[op]):
        raise ValueError(f"{fn}: argument 'gate_range' is used only with gates='uniform' for an operator with a "
                         f"log-decay g, but got gates={gates!r} for {op!r}; leave gate_range out")
    rng = np.random.default_rng(seed)
    if cu_seqlens is not None:
        if B != 1:
            raise ValueError(f"{fn}: packed sequences (cu_seqlens) need B = 1 but got B = {B}")
        if np.ndim(cu_seqlens) == 0:
            if isinstance(cu_seqlens, (bool, np.bool_)) or not isinstance(cu_seqlens, (int, np.integer)):
                raise ValueError(f"{fn}: argument 'cu_seqlens' expected None, a number of sequences (an integer) "
                                 f"or integer offsets but got {cu_seqlens!r}")
            cu = random_cu_seqlens(rng, T, int(cu_seqlens))
        else:
            cu = np.asarray(cu_seqlens)
            if cu.dtype.kind not in "iu" or cu.ndim != 1 or len(cu) < 2 or cu[0] != 0 or cu[-1] != T \
                    or np.any(np.diff(cu) < 0):
                raise ValueError(f"{fn}: argument 'cu_seqlens' expected integer offsets [0, ..., T = {T}], "
                                 f"non-decreasing, but got {cu.tolist()} (dtype {cu.dtype})")
            cu = cu.astype(np.int64)
        N = len(cu) - 1
    else:
        cu, N = None, B
    q = rng.standard_normal((B, T, H, K))
    k = rng.standard_normal((B, T, H, K))
    if unit_keys:
        k = l2_normalize(k)
    v = rng.standard_normal((B, T, HV, V))
    out = {"q": q.astype(dt), "k": k.astype(dt), "v": v.astype(dt)}
    for name in GATES[op]:
        last = GATE_DIM[(op, name)]
        shape = (B, T, HV) + ((K,) if last == "K" else (V,) if last == "V" else ())
        if name == "g":
            out[name] = log_gates(rng, shape, gates, gate_range, dt)
        else:
            out[name] = unit_gates(rng, shape, gates, dt)
    out["scale"] = scale
    out["initial_state"] = (0.5 * rng.standard_normal((N, HV, K, V))).astype(dt) if initial_state else None
    out["output_final_state"] = True
    out["cu_seqlens"] = cu
    return out


# --------------------------------------------------------------------------------------------
# Comparing a kernel's outputs with the reference
# --------------------------------------------------------------------------------------------

_ARRAY_KEYS = ("q", "k", "v", "g", "beta", "b", "w", "initial_state")


def _widened(fn: str, inputs: dict, drop=()) -> dict:
    """`inputs` with every array widened exactly to float64 (cu_seqlens to int64; floats there are an error)."""
    kw = {k: x for k, x in inputs.items() if k not in drop}
    for key in _ARRAY_KEYS:
        if kw.get(key) is not None:
            a = _as_numpy(kw[key])
            if a.dtype.kind not in "fiu":  # complex would lose its imaginary part; bool, str, object mean nothing
                raise TypeError(f"{fn}: argument '{key}' expected a real float array but got dtype {a.dtype}")
            kw[key] = np.ascontiguousarray(a, dtype=np.float64)
    if kw.get("cu_seqlens") is not None:
        cu = _as_numpy(kw["cu_seqlens"])
        if cu.dtype.kind not in "iu":
            raise ValueError(f"{fn}: argument 'cu_seqlens' expected integer offsets (int32 or int64) but got dtype "
                             f"{cu.dtype}: {cu.tolist()[:8]}")
        kw["cu_seqlens"] = cu.astype(np.int64)
    return kw


def reference_outputs(op: str, inputs: dict) -> dict:
    """The float64 reference outputs {'o', 'final_state'} for fla-style `inputs` (float arrays are
    widened to float64 exactly; other keys pass through)."""
    kw = _widened("reference_outputs", inputs)
    kw["output_final_state"] = True
    o, final_state = reference(op, **kw)
    return {"o": o, "final_state": final_state}


def _describe_value(x) -> str:
    """A short account of a returned value for messages: 'None', "str 'abc'", 'ndarray float32 [1, 20, 2, 6]',
    a tuple or dict of those."""
    if x is None:
        return "None"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{k!r}: {_describe_value(v)}" for k, v in x.items()) + "}"
    if isinstance(x, (tuple, list)):
        inner = ", ".join(_describe_value(v) for v in x[:4]) + (", ..." if len(x) > 4 else "")
        return f"{type(x).__name__} ({inner})"
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return f"{type(x).__name__} {_dtype_name(x)} {list(x.shape)}"
    r = repr(x)
    return f"{type(x).__name__} {r[:40] + '...' if len(r) > 40 else r}"


_EXPECTED_OUTPUTS = "(o, final_state), o alone (an array), or a dict with 'o' and optionally 'final_state'"


def _split_outputs(out) -> dict:
    """A kernel's return value as {'o', 'final_state'}: (o, final_state), o alone, or a dict. A value of None counts
    as absent; a dict with other keys, and anything that is not one of these forms, is an AssertionError."""
    if isinstance(out, dict):
        unknown = [k for k in out if k not in ("o", "final_state") and out[k] is not None]  # None: absent
        if unknown:
            raise AssertionError(f"the kernel returned keys {unknown} that are not outputs; expected 'o' and "
                                 f"optionally 'final_state' (it returned {_describe_value(out)})")
        return {k: out[k] for k in ("o", "final_state") if out.get(k) is not None}
    if isinstance(out, (tuple, list)):
        if len(out) < 1:
            raise AssertionError(f"the kernel returned an empty {type(out).__name__}; expected {_EXPECTED_OUTPUTS}")
        d = {"o": out[0]} if out[0] is not None else {}
        if len(out) > 1 and out[1] is not None:
            d["final_state"] = out[1]
        return d
    if out is None or isinstance(out, (str, bytes)) or not hasattr(out, "shape"):
        raise AssertionError(f"the kernel returned {_describe_value(out)}; expected {_EXPECTED_OUTPUTS}")
    return {"o": out}


def _rms(x) -> float:
    x = np.asarray(x, dtype=np.float64)
    if not x.size:
        return 0.0
    s, k = _sum_squares(x)
    return _ldexp(math.sqrt(s / x.size), k)


def _per_key(value, key):
    """value[key] if value is a dict (else its entry under None, the default for keys not named; else None),
    otherwise value itself."""
    return value.get(key, value.get(None)) if isinstance(value, dict) else value


def _longest_sequence(inputs: dict) -> int:
    """T_max: the longest sequence of `inputs` (cu_seqlens aware; the 'T' of q [B, T, H, K] otherwise)."""
    cu = inputs.get("cu_seqlens")
    if cu is not None:
        cu = np.asarray(_as_numpy(cu)).astype(np.int64)
        return int(np.max(np.diff(cu))) if cu.size > 1 else 0
    shape = _as_numpy(inputs["q"]).shape
    return int(shape[1]) if len(shape) == 4 else 0


def _to_value_heads(x: np.ndarray, hv: int) -> np.ndarray:
    """x [B, T, H, ...] repeated to hv heads along axis 2 (head h to heads h G .. h G + G - 1, G = hv // H) when hv
    is a larger multiple of H, as grouped value attention reads q/k head j // G for value head j; else x itself."""
    H = x.shape[2] if x.ndim >= 3 else 0
    return np.repeat(x, hv // H, axis=2) if 0 < H < hv and hv % H == 0 else x


def _output_floor_scales(inputs: dict, want: dict) -> dict:
    """The sizes the default floors of o and final_state scale with, each its output's natural size, so that
    scaling inputs down cannot make zero or doubled outputs pass on the floor:
    final_state: the state's size S = max(rms(final_state_ref), rms(initial_state), rms_t(rms(k_t) * rms(v_t)));
    o: max(rms(o_ref), scale * rms_t(||q_t||_2) * S), the size of o_t = scale q_t^T S_t (rms_t over all tokens and
    heads; ||q_t|| over K, 1 for a nonzero q under use_qk_l2norm_in_kernel, which reads k_t as a unit row too, so
    rms(k_t) = 1/sqrt(K) there: raw keys 1e7 too large cannot lift the floor). With every input scaled by s, o
    shrinks like s^2 but the state like s: a floor on the larger of the two would pass o = 0 at s = 1e-7 in
    float32. The last term of S, the RMS of one write k_t v_t^T, is there because a final state can cancel to far
    below the states it was computed through: linattn's float32 chunked GDN leaves an error of 2.3e-7 on a final
    state of RMS 1.8e-2 (T = 6, K = V = 1, no initial state; writes of RMS 0.4), 1.3e-5 of it."""
    h0 = inputs.get("initial_state")
    k = np.asarray(_as_numpy(inputs["k"]), np.float64)
    v = np.asarray(_as_numpy(inputs["v"]), np.float64)
    writes = 0.0
    if v.ndim == 4:
        k = _to_value_heads(k, v.shape[2])  # grouped value attention: value head j writes with key head j // G
    if k.size and v.size and k.shape[:3] == v.shape[:3]:
        ek, ev = _exp2(float(np.max(np.abs(k)))), _exp2(float(np.max(np.abs(v))))
        rk = np.sqrt(np.mean(np.ldexp(k, -ek) ** 2, axis=-1))  # rms(k_t) / 2^ek
        if inputs.get("use_qk_l2norm_in_kernel"):  # k as the kernel reads it: unit rows, rms 1/sqrt(K)
            rk = np.ldexp((rk > 0) / np.sqrt(k.shape[-1]), -ek)
        rv = np.sqrt(np.mean(np.ldexp(v, -ev) ** 2, axis=-1))
        writes = _ldexp(_rms(rk * rv), ek + ev)
    state = max(_rms(want["final_state"]), 0.0 if h0 is None else _rms(_as_numpy(h0)), writes)
    q = np.asarray(_as_numpy(inputs["q"]), np.float64)
    k_q = _exp2(float(np.max(np.abs(q), initial=0.0)))
    qs = np.ldexp(q, -k_q)
    qn = np.ldexp(np.sqrt(np.sum(qs * qs, axis=-1)), k_q)  # ||q_t||, scaled against overflow
    if inputs.get("use_qk_l2norm_in_kernel"):
        qn = (qn > 0).astype(np.float64)
    scale = inputs.get("scale")
    scale = q.shape[-1] ** -0.5 if scale is None else abs(float(scale))
    return {"o": max(_rms(want["o"]), scale * _rms(qn) * state), "final_state": state}


def _floor_scale(key: str, want: dict, inputs: dict, magnitude: float) -> float:
    """The size that the default floor of `key` scales with: the case's magnitude (the largest RMS among the
    reference arrays compared together), because a kernel's rounding is relative to the largest values it works
    with, not to a small result of them (dh0 after many decays, a final state that decayed, a gradient formed by
    cancellation). For dg, at least the size of the terms it is summed from, |q * dq| + |k * dk| (summed over K for a
    scalar gate), where a chunked kernel's rounding lives when g is very negative (alpha ~ 1e-13 at g = -30)."""
    if key == "dg" and all(x is not None for x in (inputs.get("q"), inputs.get("k"), want.get("dq"), want.get("dk"))):
        q = np.asarray(_as_numpy(inputs["q"]), np.float64)
        k = np.asarray(_as_numpy(inputs["k"]), np.float64)
        terms = np.abs(q * want["dq"]) + np.abs(k * want["dk"])
        if np.ndim(want["dg"]) >= 3:
            terms = _to_value_heads(terms, np.shape(want["dg"])[2])  # grouped value attention
        if np.ndim(want["dg"]) == 3:  # scalar gate [B, T, H]
            terms = terms.sum(axis=-1)
        if terms.shape == np.shape(want["dg"]):
            return max(_rms(terms), magnitude)
    return magnitude


def _compare_set(got: dict, want: dict, keys, optional, inputs: dict, extra_basis: dict, rtol_rms, atol_rms,
                 dtype, grads: bool = False, basis_inputs: Optional[dict] = None, floor_scales: Optional[dict] = None,
                 t_max: Optional[int] = None) -> list:
    """Compare got[k] with want[k] for each of `keys` (a missing optional key gives a 'not compared' entry; a missing
    required key is an AssertionError).

    Tolerance (rtol_rms: a number, or a dict by key): the default of the computation's precision, which is `dtype`
    when given, else the narrowest float type among the inputs (basis_inputs: the arrays as the kernel received
    them, for their types) and extra_basis (do, dht); for gradients the gradient table (float32 1e-4). An output
    stored in a narrower type than that adds its rounding (_ROUNDING_RTOL), so a kernel cannot loosen its own
    bound by returning float16. t_max (the longest sequence; None: off): at float32 and float64 precision the
    default is at least t_max * u (_UNIT_ROUNDOFF). Floor (atol_rms: a number or dict, absolute): by default
    default_atol_rms of the precision times floor_scales[key] when given, else _floor_scale(key): a key much smaller
    than that is held to a looser relative bound that way, and a pass on the floor alone is flagged in its report
    (Comparison.floor_pass)."""
    src = basis_inputs if basis_inputs is not None else inputs
    basis_in = {f"input '{k}'": src[k] for k in _ARRAY_KEYS if src.get(k) is not None}
    basis_in.update(extra_basis)
    size, basis = _precision(basis_in, dtype)
    table = _DEFAULT_RTOL_GRAD if grads else _DEFAULT_RTOL
    magnitude = max((_rms(want[k]) for k in keys if k in got and got[k] is not None), default=0.0)
    out = []
    for k in keys:
        if k not in got or got[k] is None:
            if k not in optional:
                raise AssertionError(f"{k}: missing {k!r} from what the kernel returned (keys {sorted(got)}); "
                                     f"expected {k!r} of shape {list(np.shape(want[k]))}")
            out.append(Comparison(name=k, shape_ok=True, actual_shape=(), expected_shape=np.shape(want[k]),
                                  compared=False, note="the kernel did not return it"))
            continue
        rt, at = _per_key(rtol_rms, k), _per_key(atol_rms, k)
        n_out = _float_itemsize(got[k])  # None (not floating): compare() below raises the TypeError naming k
        b = basis
        if rt is None:
            rt = table.get(size, 1e-2)
            if t_max and size in _UNIT_ROUNDOFF and t_max * _UNIT_ROUNDOFF[size] > rt:
                rt = t_max * _UNIT_ROUNDOFF[size]
                b = f"{basis}, T_max = {t_max}"
            if n_out is not None and n_out < size and _rounding_rtol(got[k]) > rt:
                rt = _rounding_rtol(got[k])
                b = f"{b}, stored as {_dtype_name(got[k])}"
        else:
            b = "rtol_rms given"
        if at is None:
            floor_table = _DEFAULT_ATOL_GRAD if grads and k == "dh0" else _DEFAULT_ATOL
            scale = floor_scales[k] if floor_scales and k in floor_scales else _floor_scale(k, want, inputs, magnitude)
            at = floor_table.get(size, 1e-3) * scale
        c = compare(got[k], want[k], rtol_rms=rt, atol_rms=at, name=k)
        c.basis = b
        out.append(c)
    return out


def check_outputs(op: str, inputs: dict, outputs, *, rtol_rms=None, atol_rms=None,
                  require_final_state: bool = False, dtype=None, _want: Optional[dict] = None,
                  _basis_inputs: Optional[dict] = None) -> list:
    """Compare a kernel's outputs for `inputs` with the reference; returns [Comparison] for 'o' and 'final_state'
    (a 'not compared' entry when final_state is missing and not required). `outputs`: (o, final_state), o alone,
    or {'o', 'final_state'}.

    `inputs` must be the arrays as the kernel received them: if the kernel may modify its arguments in place,
    pass a copy taken before the call, or use check_call, which does that and fails such a kernel.
    A missing 'o', or a dict with keys other than 'o' and 'final_state', is an AssertionError saying what came.
    Tolerance (rtol_rms: a number, or a dict by key such as {'final_state': 2e-2}; keys o, final_state and the
    gradients'): by default that of the narrowest float type among the inputs (or `dtype`), at float32 / float64
    at least T_max * u (T_max the longest sequence; _UNIT_ROUNDOFF), plus the rounding of an output stored in a
    narrower type; floor (atol_rms, absolute; number or dict): by default default_atol_rms of that type times each
    output's natural size (_output_floor_scales: final_state's is the state's size S = max(rms(final_state_ref),
    rms(initial_state), rms_t(rms(k_t) rms(v_t))), o's max(rms(o_ref), scale * rms_t(||q_t||) * S)), so that zero
    or scaled outputs fail however small the inputs are scaled."""
    check_op(op)
    _check_tolerances("check_outputs", _valid_tolerance_keys(op), rtol_rms, atol_rms)
    got = _split_outputs(outputs)
    want = _want if _want is not None else reference_outputs(op, inputs)
    if "o" not in got:
        raise AssertionError(f"o: missing from the kernel's outputs: it returned {_describe_value(outputs)}; expected "
                             f"o of shape {list(np.shape(want['o']))} ({_EXPECTED_OUTPUTS})")
    if require_final_state and "final_state" not in got:
        ofs = inputs.get("output_final_state")
        msg = (f"final_state: missing from the kernel's outputs: it returned {_describe_value(outputs)}; expected a "
               f"final state of shape {list(np.shape(want['final_state']))} (require_final_state=True)")
        if ofs is not None and not ofs:
            msg += ("; the inputs pass output_final_state=False, under which a kernel may rightly leave it out: pass "
                    "output_final_state=True or require_final_state=False")
        raise AssertionError(msg)
    return _compare_set(got, want, ("o", "final_state"), ("final_state",), inputs, {}, rtol_rms, atol_rms, dtype,
                        basis_inputs=_basis_inputs, floor_scales=_output_floor_scales(inputs, want),
                        t_max=_longest_sequence(inputs))


def random_cotangents(op: str, inputs: dict, seed: int = 0) -> dict:
    """Random upstream gradients for a backward check: {'do' [B, T, HV, V], 'dht' [N, HV, K, V]} (HV: v's heads),
    standard normal, in the dtype of v (bf16 v: float32)."""
    check_op(op)
    missing = [k for k in ("q", "v") if not isinstance(inputs, dict) or inputs.get(k) is None]
    if missing:
        raise ValueError(f"random_cotangents: argument 'inputs' expected fla-style inputs with 'q' and 'v' (their "
                         f"shapes give do's and dht's) but lacks {missing}")
    rng = np.random.default_rng(seed)
    q, v = _as_numpy(inputs["q"]), _as_numpy(inputs["v"])
    B, T, H, K = q.shape
    cu = inputs.get("cu_seqlens")
    N = B if cu is None else len(cu) - 1
    return {"do": rng.standard_normal(v.shape).astype(v.dtype),
            "dht": rng.standard_normal((N, v.shape[2], K, v.shape[3])).astype(v.dtype)}


def reference_gradients(op: str, inputs: dict, do, dht=None) -> dict:
    """The float64 reference gradients (dict: 'dq', 'dk', 'dv', 'dh0' and the gates' 'dg',
    'dbeta', 'db', 'dw') of the loss sum(do * o) + sum(dht * final_state) for fla-style `inputs`."""
    kw = _widened("reference_gradients", inputs, drop=("output_final_state",))
    f64 = lambda x: None if x is None else np.ascontiguousarray(_as_numpy(x), dtype=np.float64)
    return reference_backward(op, do=f64(do), dht=f64(dht), **kw)


def check_gradients(op: str, inputs: dict, grads: dict, do, dht=None, *, rtol_rms=None, atol_rms=None,
                    dtype=None, _want: Optional[dict] = None, _basis_inputs: Optional[dict] = None,
                    _basis_cot: Optional[dict] = None) -> list:
    """Compare a kernel's gradients (a dict with keys as in reference_gradients) with the reference;
    returns [Comparison]. dq, dk, dv and the gradient of every gate of `op` are required; dh0 is
    compared when given (else a 'not compared' entry); any other key is an AssertionError naming it. Tolerance as
    check_outputs, with the gradient table (float32 1e-4, at least T_max * u; do's and dht's types count too);
    floor: the precision's default times the largest RMS among the reference gradients, dh0's with the gradient
    table, and dg's scaled by the terms it is summed from, |q dq| + |k dk| (where a chunked kernel's rounding
    lives when g is very negative)."""
    check_op(op)
    _check_tolerances("check_gradients", _valid_tolerance_keys(op), rtol_rms, atol_rms)
    if not isinstance(grads, dict):
        raise TypeError(f"check_gradients: argument 'grads' expected a dict of gradients but got "
                        f"{_describe_value(grads)}")
    want = _want if _want is not None else reference_gradients(op, inputs, do, dht)
    required = ["dq", "dk", "dv"] + ["d" + n for n in GATES[op]]
    unknown = [k for k in grads if k not in required + ["dh0"] and grads[k] is not None]  # None: absent
    if unknown:
        raise AssertionError(f"gradients: the backward returned keys {unknown} that {op} has no gradient for; "
                             f"expected {required} and optionally 'dh0'")
    missing = [k for k in required if k not in grads or grads[k] is None]
    if missing:
        raise AssertionError(f"gradients: missing {missing} from the kernel's backward (keys {sorted(grads)})")
    cot = _basis_cot if _basis_cot is not None else {"do": do, "dht": dht}
    extra = {f"cotangent '{k}'": x for k, x in cot.items() if x is not None}
    return _compare_set(grads, want, required + ["dh0"], ("dh0",), inputs, extra, rtol_rms, atol_rms, dtype,
                        grads=True, basis_inputs=_basis_inputs, t_max=_longest_sequence(inputs))


class InputModified(AssertionError):
    """A kernel (or its backward) changed one of its input arrays in place."""


def _snapshot(d: dict) -> dict:
    """Copies of the entries of d: arrays and torch tensors as NumPy arrays (widened exactly where needed), lists and
    the like as deep copies."""
    import copy
    snap = {}
    for k, x in d.items():
        if x is None or isinstance(x, (bool, int, float, str)):
            continue
        snap[k] = np.array(_as_numpy(x), copy=True) if (isinstance(x, np.ndarray) or _is_torch(x)) else copy.deepcopy(x)
    return snap


def _check_unmodified(d: dict, snap: dict, who: str):
    for k, before in snap.items():
        if not isinstance(before, np.ndarray):
            if d[k] != before:
                raise InputModified(f"{who} modified its input {k!r} in place; a kernel must not change its arguments")
            continue
        after = _as_numpy(d[k])
        if after.shape != before.shape or not np.array_equal(after, before, equal_nan=True):
            diff = "shape changed" if after.shape != before.shape else \
                f"max |change| {float(np.nanmax(np.abs(after.astype(np.float64) - before.astype(np.float64)))):.3e}"
            raise InputModified(f"{who} modified its input {k!r} in place ({diff}); a kernel must not change its "
                                f"arguments (the reference was computed from a copy taken before the call)")


def check_call(kernel: Callable[..., Any], op: str, inputs: dict, *, backward: Optional[Callable[..., Any]] = None,
               do=None, dht=None, cotangent_seed: int = 0, rtol_rms=None, atol_rms=None, dtype=None,
               require_final_state: bool = True, with_dht: bool = True) -> list:
    """Call `kernel(**inputs)` (and `backward(**inputs, do=..., dht=...)`) once and compare with the reference.

    The reference outputs (and gradients) are computed from copies of the inputs taken before the call; if the
    kernel or its backward changes any input array in place, InputModified (an AssertionError) is raised naming
    it. Exceptions of the kernel propagate. do, dht: the upstream gradients (default: random_cotangents with
    `cotangent_seed`; with_dht=False passes dht=None, a loss without the final state's term). dht without do is
    refused (ValueError): a given dht is never replaced by random cotangents; pass both, do alone (no final-state
    term), or neither. A kernel that returns no 'o', or keys that are not outputs (or a backward that returns keys
    that are not gradients of `op`), fails with an AssertionError saying what it returned.
    Returns [Comparison] for the outputs, then the gradients; each has .ok and .report()."""
    check_op(op)
    _check_tolerances("check_call", _valid_tolerance_keys(op), rtol_rms, atol_rms)
    if dtype is not None:
        try:
            _itemsize_of_dtype(dtype)
        except TypeError as e:
            raise TypeError(f"check_call: argument 'dtype' {e}") from None
    if backward is not None and do is None and dht is not None:
        raise ValueError("check_call: argument 'dht' was given without 'do'; pass both (or do alone for a loss "
                         "without the final-state term, or neither for random cotangents): a given dht is not "
                         "replaced by random ones")
    snap = _snapshot(inputs)
    pristine = {k: snap.get(k, x) for k, x in inputs.items()}
    want = reference_outputs(op, pristine)
    out = kernel(**inputs)
    _check_unmodified(inputs, snap, "the kernel")
    comps = check_outputs(op, pristine, out, rtol_rms=rtol_rms, atol_rms=atol_rms,
                          require_final_state=require_final_state, dtype=dtype, _want=want, _basis_inputs=inputs)
    if backward is not None:
        if do is None:
            cot = random_cotangents(op, pristine, seed=cotangent_seed)
            do, dht = cot["do"], (cot["dht"] if with_dht else None)
            if _is_torch(inputs["v"]):  # as the kernel's own tensors: v's dtype and device
                do = inputs["v"].new_tensor(do)
                dht = None if dht is None else inputs["v"].new_tensor(dht)
        cot_in = {"do": do, "dht": dht}
        cot_snap = _snapshot(cot_in)
        wantg = reference_gradients(op, pristine, cot_snap["do"], cot_snap.get("dht"))
        grads = backward(**inputs, **cot_in)
        _check_unmodified(inputs, snap, "the backward")
        _check_unmodified(cot_in, cot_snap, "the backward")
        if not isinstance(grads, dict):
            raise TypeError(f"the backward returned {type(grads).__name__}; expected a dict of gradients "
                            f"('dq', 'dk', 'dv', the gates' 'dg', 'dbeta', 'db', 'dw', optionally 'dh0')")
        comps += check_gradients(op, pristine, grads, cot_snap["do"], cot_snap.get("dht"), rtol_rms=rtol_rms,
                                 atol_rms=atol_rms, dtype=dtype, _want=wantg, _basis_inputs=inputs, _basis_cot=cot_in)
    return comps


def save_npz(path, inputs: Optional[dict] = None, **arrays) -> None:
    """Write fla-style `inputs` (and/or named arrays: o, final_state, do, dq, ...) to an .npz that
    `python -m linattn.check` reads: None entries and output_final_state are dropped, scale becomes a 0-d array,
    torch tensors become NumPy, and bf16 / float8 arrays are widened exactly to float32 with their type recorded
    under the key 'linattn_dtype' (the checker then applies that type's tolerance). An explicit linattn_dtype is
    written as given (a floating type name) and must agree with the one the arrays imply, if any."""
    import numbers
    d = {}
    narrow = None
    given = None
    for k, x in {**(inputs or {}), **arrays}.items():
        if x is None or k == "output_final_state":
            continue
        if k == "linattn_dtype":
            given = str(np.asarray(x).reshape(()) if np.size(x) == 1 else x)
            try:
                _itemsize_of_dtype(given)
            except TypeError as e:
                raise ValueError(f"save_npz: argument 'linattn_dtype' {e}") from None
            continue
        if k == "scale":
            if isinstance(x, bool) or not isinstance(x, (numbers.Real, np.ndarray)) or np.size(x) != 1:
                raise ValueError(f"save_npz: argument 'scale' expected a number but got {x!r}")
            try:
                d[k] = np.array(float(np.asarray(x).reshape(())))
            except (TypeError, ValueError):
                raise ValueError(f"save_npz: argument 'scale' expected a number but got {x!r}") from None
            continue
        n = _float_itemsize(x)
        a = _as_numpy(x)
        if a.dtype.kind == "V":  # an ml_dtypes type that is not a float (int4, ...): NumPy cannot read it back
            raise TypeError(f"save_npz: argument {k!r} has dtype {a.dtype}, which NumPy cannot read back; save float "
                            f"arrays (float64, float32, float16, bfloat16) and integer cu_seqlens")
        if n is not None and n < a.dtype.itemsize and (narrow is None or n < narrow[0]):
            narrow = (n, _dtype_name(x))
        d[k] = a
    if given is not None and narrow is not None and given != narrow[1]:
        raise ValueError(f"save_npz: argument 'linattn_dtype' is {given!r} but the arrays hold {narrow[1]} (widened "
                         f"to float32 here), which would be recorded as linattn_dtype={narrow[1]!r}; make them agree "
                         f"or leave linattn_dtype out")
    if given is not None or narrow is not None:
        d["linattn_dtype"] = np.array(given if given is not None else narrow[1])
    np.savez(path, **d)


# --------------------------------------------------------------------------------------------
# The property-check harness (hypothesis)
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Case:
    """The structure of one random case; `inputs()` fills it deterministically from `seed`.
    Its repr is a valid Python expression (reproduce a failure with Case(...).inputs())."""

    op: str
    B: int
    T: int
    H: int
    K: int
    V: int
    gates: str = "random"
    cu_seqlens: Optional[tuple] = None
    initial_state: bool = False
    seed: int = 0
    dtype: str = "float32"
    scale: Optional[float] = None
    gate_range: Optional[tuple] = None
    HV: Optional[int] = None  #: value heads (grouped value attention); None: H

    def inputs(self) -> dict:
        return random_inputs(
            self.op, B=self.B, T=self.T, H=self.H, K=self.K, V=self.V, dtype=np.dtype(self.dtype),
            gates=self.gates, gate_range=self.gate_range if self.gates == "uniform" else None,
            cu_seqlens=None if self.cu_seqlens is None else np.asarray(self.cu_seqlens, np.int64),
            initial_state=self.initial_state, scale=self.scale, seed=self.seed, HV=self.HV)


class KernelMismatch(AssertionError):
    """A kernel disagreed with the reference. `.case` is the smallest failing case found,
    `.comparisons` the comparisons on it (or `.error` the exception the kernel raised)."""

    def __init__(self, message, case=None, comparisons=None, error=None):
        super().__init__(message)
        self.case, self.comparisons, self.error = case, comparisons or [], error


#: The least value of each dimension (T = 0, an empty sequence, is allowed).
_DIM_MIN = {"B": 1, "T": 0, "H": 1, "K": 1, "V": 1, "groups": 1}


def _dim_strategy(st, spec, name):
    low = _DIM_MIN[name]
    is_int = lambda x: isinstance(x, (int, np.integer)) and not isinstance(x, bool)
    if is_int(spec):
        if spec < low:
            raise ValueError(f"cases: argument '{name}' expected an integer >= {low} but got {spec!r}")
        return st.just(int(spec))
    if isinstance(spec, tuple) and len(spec) == 2:
        if not (is_int(spec[0]) and is_int(spec[1]) and low <= spec[0] <= spec[1]):
            raise ValueError(f"cases: argument '{name}' expected a range (low, high) of integers with {low} <= low <= "
                             f"high but got {spec!r}")
        return st.integers(int(spec[0]), int(spec[1]))
    if hasattr(spec, "example") or hasattr(spec, "map"):  # a hypothesis strategy
        return spec
    raise ValueError(f"cases: argument '{name}' expected an int, a (low, high) tuple or a strategy but got {spec!r}")


def cases(op: str, *, B=(1, 2), T=(1, 160), H=(1, 2), K=(1, 9), V=(1, 9), gate_modes: Sequence[str] = ("random", "zero", "extreme", "mixed"),
          varlen: bool = True, initial_state: bool = True, dtype=np.float32, scale=None, gate_range=None,
          chunk_size: Optional[int] = 64, groups=1):
    """A hypothesis strategy of Case for `op`. Each dimension is an int, a (low, high) range or a
    strategy; V="K" draws V equal to K (for kernels that need K == V). Packed variable-length batches (B = 1, up to 4 ragged sequences, empty ones
    included) are drawn one time in four when varlen=True; initial states half the time.
    chunk_size (a chunked kernel's chunk length; None: off): when T is a range, half the cases draw T at a chunk
    boundary, m * chunk_size + {-1, 0, 1} for m = 1..3 (clipped to the range), where a state carried wrongly from
    one chunk to the next shows; the default T range (1, 160) spans two boundaries of 64-token chunks. Kernels with
    a minimum head size (e.g. K >= 16) pass K=(16, 64) and the like. groups (int, range or strategy; default 1):
    value heads per q/k head, for a kernel with fla's grouped value attention (HV = groups * H value heads)."""
    import hypothesis.strategies as st

    check_op(op)
    dt = _harness_dtype("cases", dtype).name
    _scale_arg("cases", scale)
    if chunk_size is not None and (not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1):
        raise ValueError(f"cases: argument 'chunk_size' expected a positive int or None but got {chunk_size!r}")
    gate_modes = tuple(gate_modes) if not isinstance(gate_modes, str) else (gate_modes,)
    bad = [m for m in gate_modes if m not in GATE_MODES]
    if not gate_modes or bad:
        raise ValueError(f"cases: argument 'gate_modes' expected a non-empty list of {GATE_MODES} but got "
                         f"{list(gate_modes)}")
    if "uniform" in gate_modes and "g" in GATES[op]:
        if gate_range is None:
            raise ValueError("cases: gate mode 'uniform' needs gate_range=(low, high) with low <= high <= 0")
        log_gates(np.random.default_rng(0), (1,), "uniform", gate_range)  # raises naming 'gate_range' if unusable
    if gate_range is not None and ("uniform" not in gate_modes or "g" not in GATES[op]):
        raise ValueError(f"cases: argument 'gate_range' is used only with the gate mode 'uniform' for an operator "
                         f"with a log-decay g, but got gate_modes={list(gate_modes)} for {op!r}")
    dims = {name: _dim_strategy(st, spec, name)
            for name, spec in (("B", B), ("T", T), ("H", H), ("K", K), ("groups", groups))}
    if not (isinstance(V, str) and V == "K"):
        dims["V"] = _dim_strategy(st, V, "V")

    # Snap to chunk boundaries only where the T range holds one (else every snapped draw would collapse to an end).
    snap_to_chunks = (isinstance(T, tuple) and len(T) == 2 and chunk_size is not None
                      and any(int(T[0]) <= m * chunk_size + d <= int(T[1]) for m in (1, 2, 3) for d in (-1, 0, 1)))

    @st.composite
    def draw_case(draw):
        t = draw(dims["T"])
        if snap_to_chunks and draw(st.booleans()):
            # move t to the nearest of chunk_size, 2 chunk_size, 3 chunk_size, then -1, 0 or +1 (drawn after t, so
            # that shrinking this choice to False gives the plain small t back)
            m = min(max(int(round(t / chunk_size)), 1), 3)
            t = min(max(m * chunk_size + draw(st.sampled_from((0, 1, -1))), int(T[0])), int(T[1]))
        h = draw(dims["H"])
        grp = draw(dims["groups"])
        kd = draw(dims["K"])
        vd = kd if "V" not in dims else draw(dims["V"])
        mode = draw(st.sampled_from(gate_modes))
        init = draw(st.booleans()) if initial_state else False
        seed = draw(st.integers(0, 2**32 - 1))
        packed = varlen and draw(st.sampled_from((False, False, False, True)))
        cu, b = None, None
        if packed:
            n = draw(st.integers(1, 4))
            cuts = sorted(draw(st.lists(st.integers(0, t), min_size=n - 1, max_size=n - 1)))
            cu, b = tuple([0] + cuts + [t]), 1
        else:
            b = draw(dims["B"])
        return Case(op=op, B=b, T=t, H=h, K=kd, V=vd, gates=mode, cu_seqlens=cu, initial_state=init,
                    seed=seed, dtype=dt, scale=scale, gate_range=gate_range, HV=None if grp == 1 else grp * h)

    return draw_case()


def check_kernel(
    kernel: Callable[..., Any],
    op: str,
    *,
    dtype=np.float32,
    rtol_rms=None,
    atol_rms=None,
    max_examples: int = 50,
    seed: int = 0,
    name: Optional[str] = None,
    backward: Optional[Callable[..., Any]] = None,
    **case_options,
) -> int:
    """Property-check `kernel` against the reference of `op` over random cases (hypothesis).

    `kernel(**inputs)` is called with fla's keyword arguments (q, k, v, the gates of `op`, scale,
    initial_state, output_final_state=True, cu_seqlens), NumPy arrays of `dtype`, and returns
    (o, final_state), o alone, or a dict. Every output is compared with the float64 reference by
    relative RMS (rtol_rms: a number or a dict by key; default by the inputs' type `dtype`, see check_outputs and
    check_gradients; atol_rms: the absolute floor, default as there); final_state is required. `dtype` may be
    np.float64, np.float32, np.float16 or ml_dtypes.bfloat16. A kernel that raises, or that modifies an input in place, counts
    as failing. `case_options` go to `cases()` (B, T, H, K, V, gate_modes, varlen, initial_state, scale,
    gate_range, chunk_size, groups: value heads per q/k head for fla's grouped value attention). Deterministic for a given `seed`. For a torch kernel, wrap it:
    ``lambda **kw: my_kernel(**{k: torch.as_tensor(x).cuda() if isinstance(x, np.ndarray) else x for k, x in kw.items()})``.

    backward (optional): `backward(**inputs, do=..., dht=...)` returns a dict of gradients of the
    loss sum(do * o) + sum(dht * final_state) ('dq', 'dk', 'dv', the gates' 'dg', 'dbeta', 'db',
    'dw', and optionally 'dh0'); every one is compared with the reference backward too. Cases with an odd
    seed pass dht=None (no final-state term), as fla's backward gets when the forward kept no final state.

    Returns the number of cases checked; raises KernelMismatch naming the smallest failing case."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hyp_seed

    label = name or getattr(kernel, "__name__", repr(kernel))
    # the configuration first, so that a bad one is a ValueError naming the argument, not the kernel's fault
    check_op(op)
    _harness_dtype("check_kernel", dtype)
    _check_tolerances("check_kernel", _valid_tolerance_keys(op), rtol_rms, atol_rms)
    _int_arg("check_kernel", "max_examples", max_examples, 1)
    strategy = cases(op, dtype=dtype, **case_options)
    state = {"n": 0, "last": None}

    @hyp_seed(seed)
    @settings(max_examples=max_examples, deadline=None, database=None, report_multiple_bugs=False,
              suppress_health_check=[getattr(HealthCheck, h) for h in ("too_slow", "data_too_large", "large_base_example") if hasattr(HealthCheck, h)],
              print_blob=False,
              phases=(Phase.explicit, Phase.generate, Phase.shrink))
    @given(strategy)
    def prop(case: Case):
        state["n"] += 1
        inputs = case.inputs()
        failure = None
        try:
            comps = check_call(_marked(kernel, "kernel"), op, inputs,
                               backward=None if backward is None else _marked(backward, "backward"),
                               cotangent_seed=case.seed, rtol_rms=rtol_rms, atol_rms=atol_rms,
                               require_final_state=True, with_dht=case.seed % 2 == 0)
            if not all(c.ok for c in comps):
                failure = KernelMismatch("\n".join(c.report() for c in comps), case, comps)
        except _Raised as r:  # the kernel or the backward crashed
            e = r.error
            failure = KernelMismatch(f"the {r.who} raised {type(e).__name__}: {e}", case, error=e)
        except InputModified as e:
            failure = KernelMismatch(str(e), case, error=e)
        except (AssertionError, ValueError, TypeError) as e:  # missing or unusable outputs or gradients
            failure = KernelMismatch(f"unusable outputs: {e}", case, error=e)
        if failure is not None:
            state["last"] = failure
            raise failure

    try:
        prop()
    except KernelMismatch:
        f = state["last"]
        raise KernelMismatch(
            f"kernel {label} disagrees with the linattn reference ({op}, {np.dtype(dtype).name} inputs);\n"
            f"smallest failing case: {f.case!r}\n"
            f"reproduce: {'import ml_dtypes; ' if f.case.dtype == 'bfloat16' else ''}"
            f"inputs = linattn.testing.{f.case!r}.inputs()\n{f}",
            f.case, f.comparisons, f.error) from None
    return state["n"]


class _Raised(Exception):
    """An exception raised inside the kernel (who = 'kernel') or its backward, carried out of check_call."""

    def __init__(self, who, error):
        super().__init__(who)
        self.who, self.error = who, error


def _marked(fn, who):
    def call(**kw):
        try:
            return fn(**kw)
        except Exception as e:
            raise _Raised(who, e) from e
    return call
