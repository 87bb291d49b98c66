"""python -m linattn.check -- check a kernel's outputs (from any language) against the reference.

    python -m linattn.check --op gated_delta_rule inputs.npz outputs.npz [--rtol-rms 1e-5]

inputs.npz (np.savez key names, fla's layout and argument names):
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
  softmax_attn takes q, k, v (k, v may have fewer heads, GQA), scale and an additive mask [T, T].
outputs.npz:
    o               [B, T, H, V]        required
    final_state     [N, H, K, V]        optional; compared when present

The reference runs in float64 on the inputs widened exactly to float64. Each output is compared by
relative RMS error ||out - ref|| / ||ref||; the tolerance defaults by the output's dtype
(float64 1e-10, float32 1e-5, 16-bit 1e-2), with an absolute floor on the RMS difference for
(nearly) zero references (1e-14, 1e-6, 1e-3; see linattn.testing.assert_close). Prints a report
and the verdict PASS or FAIL.
Exit status: 0 pass, 1 mismatch (values, shapes or NaN/Inf), 2 unusable input (missing or unknown
keys, or inputs the reference rejects; the message says which).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from ._ops import GATES, OPS
from .testing import compare, reference_outputs

SOFTMAX = "softmax_attn"
_COMMON_KEYS = {"q", "k", "v", "initial_state", "cu_seqlens", "scale", "use_qk_l2norm_in_kernel"}
_OUTPUT_KEYS = {"o", "final_state"}


class UsageError(Exception):
    pass


def _load(path: str, what: str) -> dict:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read {what} file {path!r}: {e}") from None


def _scalar(x, key, kind):
    a = np.asarray(x)
    if a.size != 1:
        raise UsageError(f"inputs key {key!r} expected a scalar (0-d array) but got shape {a.shape}")
    return kind(a.reshape(()).item())


def _build_call(op: str, inputs: dict) -> dict:
    gates = () if op == SOFTMAX else GATES[op]
    allowed = ({"q", "k", "v", "scale", "mask"} if op == SOFTMAX else _COMMON_KEYS | set(gates))
    unknown = sorted(set(inputs) - allowed)
    if unknown:
        raise UsageError(f"inputs has keys {unknown} that operator {op!r} does not take; allowed: {sorted(allowed)}")
    required = {"q", "k", "v"} | ({"g"} if "g" in gates else set()) | ({"b", "w"} if op == "gdn2" else set())
    missing = sorted(required - set(inputs))
    if missing:
        raise UsageError(f"inputs lacks required keys {missing} for operator {op!r}")
    call = {k: inputs[k] for k in inputs if k not in ("scale", "use_qk_l2norm_in_kernel")}
    if "scale" in inputs:
        call["scale"] = _scalar(inputs["scale"], "scale", float)
    if "use_qk_l2norm_in_kernel" in inputs:
        call["use_qk_l2norm_in_kernel"] = _scalar(inputs["use_qk_l2norm_in_kernel"], "use_qk_l2norm_in_kernel", bool)
    return call


def _describe(d: dict) -> str:
    return ", ".join(f"{k} {list(v.shape)} {v.dtype}" for k, v in d.items() if isinstance(v, np.ndarray))


def run(op: str, inputs_path: str, outputs_path: str, rtol_rms=None, out=sys.stdout) -> int:
    """The checker as a function: returns the exit status and prints to `out`."""
    from . import _core

    try:
        if op != SOFTMAX and op not in OPS:
            raise UsageError(f"unknown operator {op!r}; expected one of {', '.join(OPS + (SOFTMAX,))}")
        inputs = _load(inputs_path, "inputs")
        outputs = _load(outputs_path, "outputs")
        unknown = sorted(set(outputs) - _OUTPUT_KEYS)
        if unknown or "o" not in outputs:
            raise UsageError(f"outputs must hold 'o' and optionally 'final_state'; got keys {sorted(outputs)}")
        if op == SOFTMAX and "final_state" in outputs:
            raise UsageError("softmax_attn has no final_state; outputs must hold only 'o'")
        call = _build_call(op, inputs)
        print(f"linattn.check: operator {op}; inputs: {_describe(inputs)}", file=out)
        print(f"outputs: {_describe(outputs)}; reference: naive per-token recurrence in float64", file=out)
        try:
            if op == SOFTMAX:
                kw = {k: np.ascontiguousarray(v, dtype=np.float64) for k, v in call.items() if isinstance(v, np.ndarray)}
                want = {"o": _core.naive_softmax_attn(kw["q"], kw["k"], kw["v"], scale=call.get("scale"), mask=kw.get("mask"))}
            else:
                want = reference_outputs(op, call)
        except ValueError as e:
            raise UsageError(f"the reference rejected the inputs: {e}") from None
    except UsageError as e:
        print(f"linattn.check: error: {e}", file=out)
        print("VERDICT: ERROR (unusable input)", file=out)
        return 2
    comps = [compare(outputs[k], want[k], rtol_rms=rtol_rms, name=k) for k in ("o", "final_state") if k in outputs]
    for c in comps:
        print(c.report(), file=out)
    if "final_state" not in outputs and op != SOFTMAX:
        print("final_state: not given (not compared)", file=out)
    ok = all(c.ok for c in comps)
    print(f"VERDICT: {'PASS' if ok else 'FAIL'}", file=out)
    return 0 if ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m linattn.check",
        description="Check a kernel's outputs against the linattn reference (float64). "
        "Exit 0 pass, 1 mismatch, 2 unusable input.",
        epilog=__doc__.split("\n\n", 2)[2] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--op", required=True, help=f"operator: {', '.join(OPS + (SOFTMAX,))}")
    p.add_argument("inputs", help="inputs .npz (keys q, k, v, g, beta, b, w, initial_state, cu_seqlens, scale)")
    p.add_argument("outputs", help="outputs .npz (keys o, final_state)")
    p.add_argument("--rtol-rms", type=float, default=None,
                   help="relative RMS tolerance (default by output dtype: float64 1e-10, float32 1e-5, 16-bit 1e-2)")
    a = p.parse_args(argv)
    return run(a.op, a.inputs, a.outputs, a.rtol_rms)


if __name__ == "__main__":
    sys.exit(main())
