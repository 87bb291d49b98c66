"""The operator table: which gates each sequence-level operator takes, their shapes, and a
dispatcher `reference(op, ...)` over the naive recurrent reference (used by linattn.testing and
linattn.check). Also `public`, the wrapper that gives the compiled functions short signature errors."""
import ast
import functools
import inspect
import re

import numpy as np

from . import _core

_PUBLIC = {}


def _signature(f):
    """The inspect.Signature of a pybind11 function, read from the first line of its docstring
    ("name(q: object, ..., *, scale: object = None, ...) -> tuple"); None if it does not parse."""
    m = re.match(r"\w+\((.*)\) -> ", (f.__doc__ or "").split("\n", 1)[0])
    if not m:
        return None
    parts, depth, start, text = [], 0, 0, m.group(1)
    for i, c in enumerate(text):  # split at the commas outside brackets
        if c in "[(":
            depth += 1
        elif c in "])":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    params, kind = [], inspect.Parameter.POSITIONAL_OR_KEYWORD
    for p in filter(None, (x.strip() for x in parts)):
        if p == "*":
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        name, _, default = p.partition("=")
        name = name.split(":")[0].strip()
        default = default.strip()
        try:
            default = inspect.Parameter.empty if not default else ast.literal_eval(default)
        except (ValueError, SyntaxError):
            return None
        params.append(inspect.Parameter(name, kind, default=default))
    return inspect.Signature(params)


def public(f):
    """`f` (a function of _core) with a short TypeError when the call does not match its signature
    (an unknown keyword, a missing argument, too many positional ones) instead of pybind11's, which
    prints every argument, arrays in full. Values are checked by _core itself. One wrapper per name."""
    name = f.__name__
    if name in _PUBLIC:
        return _PUBLIC[name]
    sig = _signature(f)

    @functools.wraps(f)
    def call(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except TypeError as e:
            if "incompatible function arguments" not in str(e):
                raise
        why = "the arguments do not match its signature"
        if sig is not None:
            try:
                sig.bind(*args, **kwargs)
            except TypeError as e:
                why = str(e)
        raise TypeError(f"{name}(): {why}; expected {name}{sig if sig is not None else '(...)'}") from None

    if sig is not None:
        call.__signature__ = sig
    _PUBLIC[name] = call
    return call

#: The sequence-level operators, from the simplest up (each is a special case of the next).
OPS = ("linear_attn", "delta_rule", "gated_delta_rule", "kda", "gdn2")

#: The gate arguments of each operator, in call order.
GATES = {
    "linear_attn": (),
    "delta_rule": ("beta",),
    "gated_delta_rule": ("g", "beta"),
    "kda": ("g", "beta"),
    "gdn2": ("g", "b", "w"),
}

#: Trailing dimension of each gate: None for [B, T, H], "K" for [B, T, H, K], "V" for [B, T, H, V].
GATE_DIM = {
    ("gated_delta_rule", "g"): None,
    ("kda", "g"): "K",
    ("gdn2", "g"): "K",
    ("delta_rule", "beta"): None,
    ("gated_delta_rule", "beta"): None,
    ("kda", "beta"): None,
    ("gdn2", "b"): "K",
    ("gdn2", "w"): "V",
}

_REFERENCE = {
    "linear_attn": public(_core.naive_recurrent_linear_attn),
    "delta_rule": public(_core.naive_recurrent_delta_rule),
    "gated_delta_rule": public(_core.naive_recurrent_gated_delta_rule),
    "kda": public(_core.naive_recurrent_kda),
    "gdn2": public(_core.naive_recurrent_gdn2),
}


_CHUNK = {
    "delta_rule": public(_core.chunk_delta_rule),
    "gated_delta_rule": public(_core.chunk_gated_delta_rule),
    "kda": public(_core.chunk_kda),
    "gdn2": public(_core.chunk_gdn2),
}

_FUSED = {
    "delta_rule": public(_core.fused_recurrent_delta_rule),
    "gated_delta_rule": public(_core.fused_recurrent_gated_delta_rule),
    "kda": public(_core.fused_recurrent_kda),
    "gdn2": public(_core.fused_recurrent_gdn2),
}


def _expand_gva(who, q, k, v):
    """fla's grouped value attention (GVA): q, k [B, T, H, K] and v [B, T, HV, V] with HV a multiple of
    H, value head j reading query/key head j // (HV // H); the gates, states and outputs have HV heads.
    Returns (q, k, G): with G = HV // H > 1, q and k repeated to HV heads (np.repeat along axis 2:
    heads 0, 0, 1, 1, ... for G = 2), which makes GVA the ordinary per-head recurrence; G = 1 (no GVA,
    or shapes the compiled function will reject with its own message) returns them untouched."""
    sq, sk, sv = np.shape(q), np.shape(k), np.shape(v)
    if len(sq) != 4 or len(sk) != 4 or len(sv) != 4 or sq[2] != sk[2] or sq[2] == sv[2] or sq[2] < 1:
        return q, k, 1
    H, HV = sq[2], sv[2]
    if HV % H or HV == 0:
        raise _core.Error(f"{who}: argument 'v' expected [B, T, HV, V] with HV = H = {H} or a multiple of it (fla's "
                          f"grouped value attention, value head j reading q/k head j // (HV // H)) but got shape "
                          f"{list(sv)}")
    for name, x in (("q", q), ("k", k)):  # the repeat copies: only what the compiled functions would take as it is
        if not (isinstance(x, np.ndarray) and x.flags.c_contiguous and x.flags.aligned):
            what = type(x).__name__ if not isinstance(x, np.ndarray) else f"a non-C-contiguous array, strides {list(x.strides)}"
            raise _core.Error(f"{who}: argument '{name}' expected a C-contiguous aligned NumPy array but got {what} "
                              f"(linattn never copies silently: pass np.ascontiguousarray({name}))")
    G = HV // H
    return np.repeat(q, G, axis=2), np.repeat(k, G, axis=2), G


def _reduce_gva(grads, G):
    """dq, dk of the repeated q and k (HV heads) summed back over each group of G value heads to HV // G
    heads (the chain rule of the repeat in _expand_gva)."""
    if G == 1:
        return grads
    for key in ("dq", "dk"):
        x = grads.get(key)
        if x is not None:
            B, T, HV, K = x.shape
            grads[key] = np.ascontiguousarray(x.reshape(B, T, HV // G, G, K).sum(axis=3))
    return grads


def check_op(op):
    if op not in GATES:
        raise ValueError(f"unknown operator {op!r}; expected one of {', '.join(OPS)}")


def _call(table, who, op, q, k, v, gates, kwargs):
    check_op(op)
    if op not in table:
        raise ValueError(f"{who}: operator {op!r} has no such kernel; expected one of {', '.join(table)}")
    extra = [n for n, x in gates.items() if x is not None and n not in GATES[op]]
    if extra:
        raise ValueError(f"{who}: operator {op!r} takes gates {GATES[op]} but got {extra}")
    q, k, _ = _expand_gva(who, q, k, v)
    return table[op](q, k, v, *[gates[n] for n in GATES[op]], **kwargs)


def chunk(op, q, k, v, *, g=None, beta=None, b=None, w=None, **kwargs):
    """The chunked CPU kernel chunk_<op> (optimized/cpu; not linear_attn) with fla's keyword
    arguments plus chunk_size (16, 32, 64) and num_threads. Returns (o, final_state)."""
    return _call(_CHUNK, "chunk", op, q, k, v, {"g": g, "beta": beta, "b": b, "w": w}, kwargs)


def fused_recurrent(op, q, k, v, *, g=None, beta=None, b=None, w=None, **kwargs):
    """The token-by-token CPU kernel fused_recurrent_<op> (optimized/cpu; not linear_attn)."""
    return _call(_FUSED, "fused_recurrent", op, q, k, v, {"g": g, "beta": beta, "b": b, "w": w}, kwargs)


def reference(op, q, k, v, *, g=None, beta=None, b=None, w=None, **kwargs):
    """Run the naive recurrent reference of `op` (one of OPS) with fla's keyword arguments.

    Gates that `op` does not take must be None. Grouped value attention as in fla: v, the gates, the
    states and o may have HV = G H heads (value head j reads q/k head j // G). Returns what
    naive_recurrent_<op> returns: (o, final_state) or, with return_trace=True, (o, final_state, trace)."""
    check_op(op)
    given = {"g": g, "beta": beta, "b": b, "w": w}
    extra = [n for n, x in given.items() if x is not None and n not in GATES[op]]
    if extra:
        raise ValueError(f"reference: operator {op!r} takes gates {GATES[op]} but got {extra}")
    gates = [given[n] for n in GATES[op]]
    q, k, _ = _expand_gva("reference", q, k, v)
    return _REFERENCE[op](q, k, v, *gates, **kwargs)


_BACKWARD = {
    "linear_attn": public(_core.naive_recurrent_linear_attn_backward),
    "delta_rule": public(_core.naive_recurrent_delta_rule_backward),
    "gated_delta_rule": public(_core.naive_recurrent_gated_delta_rule_backward),
    "kda": public(_core.naive_recurrent_kda_backward),
    "gdn2": public(_core.naive_recurrent_gdn2_backward),
}


def reference_backward(op, q, k, v, *, do, dht=None, g=None, beta=None, b=None, w=None, **kwargs):
    """The reference backward of `op`: dict of gradients ('dq', 'dk', 'dv', 'dh0' and the gates'
    'dg', 'dbeta', 'db', 'dw') for dL/do = `do` and dL/d(final state) = `dht`. Keyword arguments
    as for `reference` (output_final_state and return_trace are ignored)."""
    check_op(op)
    given = {"g": g, "beta": beta, "b": b, "w": w}
    extra = [n for n, x in given.items() if x is not None and n not in GATES[op]]
    if extra:
        raise ValueError(f"reference_backward: operator {op!r} takes gates {GATES[op]} but got {extra}")
    kwargs.pop("output_final_state", None)
    kwargs.pop("return_trace", None)
    gates = [given[n] for n in GATES[op]]
    q, k, G = _expand_gva("reference_backward", q, k, v)
    return _reduce_gva(_BACKWARD[op](q, k, v, *gates, do, dht, **kwargs), G)


def routed_error(trace, which="paper_error"):
    """The error a layer routes (SPEC section 3), from the trace of a recurrence run with
    return_trace=True: 'paper_error' r = v - v_bar (Eqs.26, 28; the default) or 'written_error'
    (what the kernel writes along kappa, beta r; the authors' training code, erratum 3)."""
    key = {"paper_error": "r", "written_error": "written"}.get(which) if isinstance(which, str) else None
    if key is None:
        raise ValueError(f"routed_error: argument 'which' expected 'paper_error' or 'written_error' but got {which!r}")
    if not isinstance(trace, dict):
        raise TypeError("routed_error: argument 'trace' expected the trace dict of a run with return_trace=True "
                        f"but got an object of type {type(trace).__name__}")
    if key not in trace:
        raise ValueError(f"routed_error: argument 'trace' expected the trace dict of a run with return_trace=True "
                         f"(keys 'v_bar', 'r', 'written') but got a dict with keys {sorted(map(str, trace))}")
    return trace[key]


def chunk_backward(op, q, k, v, *, do, dht=None, g=None, beta=None, b=None, w=None, scale=None,
                   initial_state=None, cu_seqlens=None, use_qk_l2norm_in_kernel=False, copy=False,
                   chunk_size=64, num_threads=0, **ignored):
    """The chunked CPU backward of chunk_<op> (optimized/cpu; not linear_attn): the same dict of
    gradients as reference_backward. output_final_state and return_trace are accepted and ignored."""
    check_op(op)
    given = {"g": g, "beta": beta, "b": b, "w": w}
    extra = [n for n, x in given.items() if x is not None and n not in GATES[op]]
    if extra:
        raise ValueError(f"chunk_backward: operator {op!r} takes gates {GATES[op]} but got {extra}")
    unknown = sorted(set(ignored) - {"output_final_state", "return_trace"})
    if unknown:
        raise TypeError(f"chunk_backward() got unexpected keyword arguments {unknown}")
    q, k, G = _expand_gva("chunk_backward", q, k, v)
    return _reduce_gva(_core._chunk_backward(op, q, k, v, g, beta, b, w, do, dht, scale, initial_state, cu_seqlens,
                                             use_qk_l2norm_in_kernel, copy, chunk_size, num_threads), G)
