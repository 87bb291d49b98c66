"""linattn: the C++ reference of linear attention (DeltaNet, GDN, KDA, GDN2) for Python.

Sequence-level operators take NumPy arrays in flash-linear-attention's layout (q, k [B, T, H, K],
v [B, T, H, V], log-space gates, states [N, H, K, V]) and fla's keyword arguments, and return
(o, final_state). Inputs are borrowed, never silently copied: they must be C-contiguous float32 or
float64 arrays of one dtype, or the call raises ValueError (pass copy=True to allow a conversion).
Bad input raises linattn.Error, a ValueError whose message names the argument, the expected and
the actual value. See docs/python.md; the harness for kernel authors is linattn.testing and
`python -m linattn.check`.
"""
from ._core import (  # noqa: F401
    Error,
    W_to_S,
    S_to_W,
    deltanet_step,
    feature_map,
    gdn2_step,
    gdn2_step_S,
    gdn_step,
    gdn_step_decay_after_error,
    kda_step,
    linear_attention_parallel,
    linear_attention_recurrent,
    linear_attention_step,
    naive_recurrent_delta_rule,
    naive_recurrent_gated_delta_rule,
    naive_recurrent_gdn2,
    naive_recurrent_kda,
    naive_recurrent_linear_attn,
    naive_softmax_attn,
    read,
)
from ._core import (  # noqa: F401  the reference backward
    naive_recurrent_delta_rule_backward,
    naive_recurrent_gated_delta_rule_backward,
    naive_recurrent_gdn2_backward,
    naive_recurrent_kda_backward,
    naive_recurrent_linear_attn_backward,
    naive_softmax_attn_backward,
)
from ._core import (  # noqa: F401  cross-layer routing (Sec.4)
    cler_inject,
    dense_layer_kinds,
    hybrid_layer_kinds,
    pure_layer_kinds,
    residual_inject,
    rho,
    rms_normalize,
    routable_predecessor,
)
from ._core import (  # noqa: F401  optimized CPU kernels (optimized/cpu)
    chunk_delta_rule,
    chunk_gated_delta_rule,
    chunk_gdn2,
    chunk_intermediates,
    chunk_kda,
    fused_recurrent_delta_rule,
    fused_recurrent_gated_delta_rule,
    fused_recurrent_gdn2,
    fused_recurrent_kda,
)
from ._ops import OPS, GATES, chunk, chunk_backward, fused_recurrent, reference, reference_backward, routed_error  # noqa: F401
from ._ops import public as _public

# Every compiled function above, wrapped for a short TypeError on a call that does not match its
# signature (an unknown keyword, say) instead of pybind11's, which prints every argument in full.
for _name, _f in list(globals().items()):
    if type(_f).__name__ == "builtin_function_or_method" and getattr(_f, "__module__", "") == "linattn._core":
        globals()[_name] = _public(_f)
del _name, _f
from . import cuda  # noqa: F401  the CUDA kernels, in the opt-in build (linattn.cuda.available())

__version__ = "0.1.0"
