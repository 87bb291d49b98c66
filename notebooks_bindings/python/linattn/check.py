"""python -m linattn.check -- check a kernel's outputs and gradients (from any language) against the reference.

    python -m linattn.check --op gated_delta_rule inputs.npz outputs.npz [--rtol-rms R|KEY=R] [--atol-rms A] [--dtype D]
    python -m linattn.check --op gated_delta_rule inputs.npz [outputs.npz] --grads grads.npz

inputs.npz (np.savez key names, fla's layout and argument names; linattn.testing.save_npz writes it):
    q, k            [B, T, H, K]        required
    v               [B, T, H, V]        required
    g               log-space decays g = log(alpha) <= 0: [B, T, H] (gated_delta_rule),
                    [B, T, H, K] (kda, gdn2); required by those operators
    beta            [B, T, H] in [0, 1] (delta_rule, gated_delta_rule, kda; default: ones)
    b               [B, T, H, K] in [0, 1] (gdn2, required)
    w               [B, T, H, V] in [0, 1] (gdn2, required)
    initial_state   [N, H, K, V] (optional; zeros when absent)
    cu_seqlens      [N + 1] integer offsets of packed sequences, B = 1 (optional)
    scale           0-d array (optional; default K**-0.5)
    use_qk_l2norm_in_kernel   0-d bool (optional; default False)
    output_final_state        ignored (the reference always returns the final state)
  Grouped value attention (fla's GVA): v, the gates and initial_state may have HV = G H heads (value head j
  reads q/k head j // G); then o, final_state, do, dht, dv, the gates' gradients and dh0 have HV heads too.
  softmax_attn takes q, k, v (k, v may have fewer heads, GQA), scale and an additive mask [T, T].
outputs.npz:
    o               [B, T, H, V]        required
    final_state     [N, H, K, V]        optional; compared when present
grads.npz (--grads; the gradients of sum(do * o) + sum(dht * final_state)):
    do              [B, T, H, V]        required
    dht             [N, H, K, V]        optional (no final-state term when absent)
    dq, dk, dv, and the gates' dg, dbeta (delta_rule, gated_delta_rule, kda) or db, dw (gdn2): required
    dh0             [N, H, K, V]        optional; compared when present
Any file may also hold linattn_dtype, a 0-d string such as 'bfloat16' (save_npz writes it when it widens bf16).

bf16: NumPy has no bfloat16, so save bf16 arrays widened to float32 (exact; save_npz does this) and pass
--dtype bfloat16 (or keep save_npz's linattn_dtype key), else the float32 tolerance applies.

The reference runs in float64 on the inputs widened exactly to float64. Each array is compared by
relative RMS error ||out - ref|| / ||ref||; the tolerance defaults by the narrowest float type among
the inputs (and do, dht), or --dtype: float64 1e-10, float32 1e-5 (gradients 1e-4), 16-bit 1e-2, plus
the rounding of an array stored in a narrower type; float32 and float64 bounds are at least T_max * u
(T_max the longest sequence, u = 2^-24 or 2^-53); --rtol-rms R or KEY=R overrides it (KEY: an output or
gradient of the operator). An absolute floor on the RMS difference serves (nearly) zero references:
1e-14, 1e-6, 1e-3 times each output's natural size (final_state: the state's size S = max(rms(final_state),
rms(initial_state), rms_t(rms(k_t) rms(v_t))); o: max(rms(o), scale * rms_t(||q_t||) * S); gradients: the
largest RMS among the reference gradients, dg at least the RMS of |q dq| + |k dk|, dh0 1e-4 of it in
float32), or --atol-rms (absolute). linattn.testing's docstrings and docs/python.md say why. Prints
a report and the verdict PASS or FAIL.
Exit status: 0 pass, 1 mismatch (values, shapes or NaN/Inf), 2 unusable input (a file that cannot be
read, missing or unknown keys, non-float arrays, types NumPy cannot read, or inputs the reference rejects;
the message says which).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from ._ops import GATES, OPS
from .testing import (_compare_set, _itemsize_of_dtype, _valid_tolerance_keys, check_gradients, check_outputs,
                      reference_gradients, reference_outputs)

SOFTMAX = "softmax_attn"
_DTYPE_KEY = "linattn_dtype"
_COMMON_KEYS = {"q", "k", "v", "initial_state", "cu_seqlens", "scale", "use_qk_l2norm_in_kernel"}
_OUTPUT_KEYS = {"o", "final_state"}


class UsageError(Exception):
    pass


def _load(path: str, what: str) -> dict:
    def unreadable(e):
        reason = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        return UsageError(f"cannot read {what} file {path!r}: {reason}")
    try:
        z = np.load(path, allow_pickle=False)
    except ValueError as e:
        raise UsageError(f"cannot read {what} file {path!r}: {e}") from None
    except Exception as e:  # empty (EOFError), truncated or not a zip (BadZipFile), unreadable (OSError), ...
        raise unreadable(e) from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise UsageError(f"{what} file {path!r} is a single array (.npy), not an .npz of named arrays; save it with "
                         f"np.savez(path, o=..., ...) or linattn.testing.save_npz")
    d = {}
    with z:
        for k in z.files:
            try:
                a = z[k]
            except ValueError as e:
                if "pickle" not in str(e):
                    raise unreadable(e) from None
                raise UsageError(f"{what} key {k!r} holds a Python object (None, or a list of arrays?), which is not "
                                 f"read without pickle; leave the key out or save an array "
                                 f"(linattn.testing.save_npz drops None entries)") from None
            except Exception as e:  # a damaged member (bad CRC-32, truncated data)
                raise unreadable(e) from None
            if not isinstance(a, np.ndarray):  # np.load returns the raw bytes of a member that is not .npy
                raise UsageError(f"cannot read {what} file {path!r}: its member {k!r} is not a .npy array (save the "
                                 f"file with np.savez or linattn.testing.save_npz)")
            if a.dtype.kind == "V":
                hint = ("bfloat16 saved through ml_dtypes or torch?); save it widened to float32 (exact; "
                        "linattn.testing.save_npz does this) and pass --dtype bfloat16" if a.dtype.itemsize == 2 else
                        "a type NumPy cannot read back, e.g. ml_dtypes' int4 or float8); save float arrays "
                        "(float64, float32, float16; bf16 and float8 widened to float32 by "
                        "linattn.testing.save_npz)")
                raise UsageError(f"{what} key {k!r} has dtype {a.dtype} (raw {a.dtype.itemsize}-byte values: {hint}")
            if a.dtype.kind not in "fiub" and not (k == _DTYPE_KEY and a.dtype.kind == "U"):
                raise UsageError(f"{what} key {k!r} has dtype {a.dtype}; expected a float array (integers for cu_seqlens)")
            d[k] = a
    return d


def _file_dtype(*files):
    """The linattn_dtype key of the given loaded files (the narrowest if several), or None."""
    for f in files:
        if _DTYPE_KEY in f and f[_DTYPE_KEY].size != 1:
            raise UsageError(f"{_DTYPE_KEY} expected one type name but got {f[_DTYPE_KEY].tolist()}")
    names = [str(f[_DTYPE_KEY].reshape(())) for f in files if _DTYPE_KEY in f]
    if not names:
        return None
    try:
        return min(names, key=_itemsize_of_dtype)
    except TypeError as e:
        raise UsageError(f"{_DTYPE_KEY} {names} is not a floating type name: {e}") from None


def _scalar(x, key, kind):
    a = np.asarray(x)
    if a.size != 1:
        raise UsageError(f"inputs key {key!r} expected a scalar (0-d array) but got shape {a.shape}")
    return kind(a.reshape(()).item())


def _build_call(op: str, inputs: dict) -> dict:
    gates = () if op == SOFTMAX else GATES[op]
    allowed = ({"q", "k", "v", "scale", "mask"} if op == SOFTMAX else _COMMON_KEYS | set(gates))
    unknown = sorted(set(inputs) - allowed - {"output_final_state", _DTYPE_KEY})
    if unknown:
        raise UsageError(f"inputs has keys {unknown} that operator {op!r} does not take; allowed: {sorted(allowed)}")
    required = {"q", "k", "v"} | ({"g"} if "g" in gates else set()) | ({"b", "w"} if op == "gdn2" else set())
    missing = sorted(required - set(inputs))
    if missing:
        raise UsageError(f"inputs lacks required keys {missing} for operator {op!r}")
    for k in sorted(set(inputs) & ({"q", "k", "v", "initial_state", "mask"} | set(gates))):
        if inputs[k].dtype.kind != "f":
            raise UsageError(f"inputs key {k!r} expected a float array but got dtype {inputs[k].dtype}; save it as "
                             f"float32 or float64 (it is not converted)")
    call = {k: inputs[k] for k in inputs if k not in ("scale", "use_qk_l2norm_in_kernel", "output_final_state",
                                                      _DTYPE_KEY)}
    if "scale" in inputs:
        call["scale"] = _scalar(inputs["scale"], "scale", float)
    if "use_qk_l2norm_in_kernel" in inputs:
        call["use_qk_l2norm_in_kernel"] = _scalar(inputs["use_qk_l2norm_in_kernel"], "use_qk_l2norm_in_kernel", bool)
    return call


def _describe(d: dict) -> str:
    return ", ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in d.items() if isinstance(v, np.ndarray))


def run(op: str, inputs_path: str, outputs_path=None, rtol_rms=None, out=sys.stdout, *, atol_rms=None,
        dtype=None, grads_path=None) -> int:
    """The checker as a function: returns the exit status and prints to `out`."""
    from . import _core

    try:
        if op != SOFTMAX and op not in OPS:
            raise UsageError(f"unknown operator {op!r}; expected one of {', '.join(OPS + (SOFTMAX,))}")
        if outputs_path is None and grads_path is None:
            raise UsageError("nothing to check: give an outputs .npz, --grads GRADS.npz, or both")
        if grads_path is not None and op == SOFTMAX:
            raise UsageError("--grads is for the linear-attention operators; softmax_attn has no reference backward here")
        inputs = _load(inputs_path, "inputs")
        outputs = _load(outputs_path, "outputs") if outputs_path is not None else None
        grads = _load(grads_path, "grads") if grads_path is not None else None
        if outputs is not None:
            keys = set(outputs) - {_DTYPE_KEY}
            unknown = sorted(keys - _OUTPUT_KEYS)
            if unknown or "o" not in keys:
                raise UsageError(f"outputs must hold 'o' and optionally 'final_state'; got keys {sorted(keys)}")
            if op == SOFTMAX and "final_state" in keys:
                raise UsageError("softmax_attn has no final_state; outputs must hold only 'o'")
        if grads is not None:
            allowed = {"do", "dht", "dq", "dk", "dv", "dh0"} | {"d" + n for n in GATES[op]}
            keys = set(grads) - {_DTYPE_KEY}
            if sorted(keys - allowed) or "do" not in keys:
                raise UsageError(f"grads must hold 'do', optionally 'dht' and 'dh0', and the gradients "
                                 f"{['dq', 'dk', 'dv'] + ['d' + n for n in GATES[op]]}; got keys {sorted(keys)}"
                                 + (f" ({sorted(keys - allowed)} not taken by {op!r})" if keys - allowed else ""))
            for k in ("do", "dht"):
                if k in grads and grads[k].dtype.kind != "f":
                    raise UsageError(f"grads key {k!r} expected a float array (the upstream gradient) but got dtype "
                                     f"{grads[k].dtype}")
        call = _build_call(op, inputs)
        valid = ["o"] if op == SOFTMAX else _valid_tolerance_keys(op)
        for flag, value in (("--rtol-rms", rtol_rms), ("--atol-rms", atol_rms)):
            unknown = sorted(k for k in value if k is not None and k not in valid) if isinstance(value, dict) else []
            if unknown:
                raise UsageError(f"{flag} names keys {unknown} that are not compared for {op!r}; valid keys: {valid}")
        if dtype is None:
            dtype = _file_dtype(*[f for f in (inputs, outputs, grads) if f is not None])
        if dtype is not None:
            try:
                _itemsize_of_dtype(dtype)
            except TypeError as e:
                raise UsageError(f"--dtype {dtype!r} is not a floating type name (float64, float32, float16, bfloat16): {e}") from None
        print(f"linattn.check: operator {op}; inputs: {_describe(inputs)}", file=out)
        if outputs is not None:
            print(f"outputs: {_describe(outputs)}; reference: naive per-token recurrence in float64", file=out)
        if grads is not None:
            print(f"grads: {_describe(grads)}; reference: the reference backward in float64", file=out)
        try:
            if op == SOFTMAX:
                kw = {k: np.ascontiguousarray(v, dtype=np.float64) for k, v in call.items() if isinstance(v, np.ndarray)}
                want = {"o": _core.naive_softmax_attn(kw["q"], kw["k"], kw["v"], scale=call.get("scale"), mask=kw.get("mask"))}
            elif outputs is not None:
                want = reference_outputs(op, call)
            if grads is not None:
                wantg = reference_gradients(op, call, grads["do"], grads.get("dht"))
        except ValueError as e:
            raise UsageError(f"the reference rejected the inputs: {e}") from None
        comps = []
        try:
            if outputs is not None:
                if op == SOFTMAX:
                    comps += _compare_set({"o": outputs["o"]}, want, ("o",), (), call, {}, rtol_rms, atol_rms, dtype)
                else:
                    comps += check_outputs(op, call, {k: outputs[k] for k in _OUTPUT_KEYS if k in outputs},
                                           rtol_rms=rtol_rms, atol_rms=atol_rms, dtype=dtype, _want=want)
            if grads is not None:
                g = {k: x for k, x in grads.items() if k not in ("do", "dht", _DTYPE_KEY)}
                comps += check_gradients(op, call, g, grads["do"], grads.get("dht"), rtol_rms=rtol_rms,
                                         atol_rms=atol_rms, dtype=dtype, _want=wantg)
        except (AssertionError, TypeError, ValueError) as e:  # a required gradient missing, a non-float array
            raise UsageError(str(e)) from None
    except UsageError as e:
        print(f"linattn.check: error: {e}", file=out)
        print("VERDICT: ERROR (unusable input)", file=out)
        return 2
    for c in comps:
        print(c.report(), file=out)
    ok = all(c.ok for c in comps)
    print(f"VERDICT: {'PASS' if ok else 'FAIL'}", file=out)
    return 0 if ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m linattn.check",
        description="Check a kernel's outputs and gradients against the linattn reference (float64). "
        "Exit 0 pass, 1 mismatch, 2 unusable input.",
        epilog=__doc__.split("\n\n", 2)[2] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--op", required=True, help=f"operator: {', '.join(OPS + (SOFTMAX,))}")
    p.add_argument("inputs", help="inputs .npz (keys q, k, v, g, beta, b, w, initial_state, cu_seqlens, scale)")
    p.add_argument("outputs", nargs="?", default=None, help="outputs .npz (keys o, final_state)")
    p.add_argument("--grads", default=None, metavar="GRADS.npz",
                   help="gradients .npz (keys do, dht, dq, dk, dv, the gates' dg / dbeta / db / dw, dh0)")
    p.add_argument("--rtol-rms", action="append", default=None, metavar="R|KEY=R",
                   help="relative RMS tolerance, for every array (R) or one (KEY=R, e.g. dg=3e-2); repeatable "
                   "(default by the inputs' type: float64 1e-10, float32 1e-5 (gradients 1e-4), 16-bit 1e-2)")
    p.add_argument("--atol-rms", action="append", default=None, metavar="A|KEY=A",
                   help="absolute floor on rms(diff), for every array or one (KEY=A); repeatable (default: 1e-14 / "
                   "1e-6 / 1e-3 by type, times the array's own reference RMS, or for dg the RMS of |q dq| + |k dk|)")
    p.add_argument("--dtype", default=None,
                   help="the type the kernel computed in, e.g. bfloat16 for bf16 results saved widened to float32 "
                   "(picks the default tolerance and floor)")
    a = p.parse_args(argv)
    try:
        rtol, atol = _per_key_option(a.rtol_rms, "--rtol-rms"), _per_key_option(a.atol_rms, "--atol-rms")
    except UsageError as e:
        print(f"linattn.check: error: {e}")
        print("VERDICT: ERROR (unusable input)")
        return 2
    return run(a.op, a.inputs, a.outputs, rtol, atol_rms=atol, dtype=a.dtype, grads_path=a.grads)


def _per_key_option(values, flag):
    """--rtol-rms / --atol-rms values ('1e-2' or 'dg=3e-2', repeatable) as None, a number, or a dict by key (a
    plain number sets the default for keys not named, under the key None)."""
    if not values:
        return None
    out = {}
    for v in values:
        key, _, num = v.rpartition("=")
        try:
            x = float(num)
        except ValueError:
            raise UsageError(f"{flag} expected a number or KEY=number but got {v!r}") from None
        if not (x >= 0 and x == x):
            raise UsageError(f"{flag} expected a non-negative number but got {v!r}")
        out[key or None] = x
    if list(out) == [None]:
        return out[None]
    return out


if __name__ == "__main__":
    sys.exit(main())
