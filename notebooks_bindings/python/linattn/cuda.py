"""linattn.cuda: the CUDA chunked kernels of optimized/cuda (DeltaNet, GDN, KDA, GDN2; chunk 64;
Hopper, sm_90a) on NumPy arrays, for checking them against the reference from Python.

Only in a module built with them (an opt-in build: ``LINATTN_PY_CUDA=ON python3 -m pip install
./notebooks_bindings`` on a machine with nvcc) and run where a Hopper GPU is: ``available()`` says
whether both hold and ``why_unavailable()`` says what is missing; every kernel call raises
``CudaUnavailable`` (a RuntimeError) otherwise.

The arguments and results are those of the CPU ``linattn.chunk_<op>`` (fla's layout and keywords),
except: arrays are float32 (copy=True converts); ``dtype`` / ``gate_dtype`` = 'bfloat16' rounds the
inputs / gates to bfloat16 on the device (the tensor-core path), 'float32' keeps them; ``version``
picks a rung of the kernel ladder ('best', 'v1_simple', 'v2_tensorcore', 'v3_async', 'v4_levels',
'v5_split', 'v6_lean', 'v7_overlap', 'v8_wgmma', 'v9_lean_overlap', 'v10_pipeline'); no chunk_size (always 64), no return_trace. Each call copies the arrays to the GPU and back: this is
for correctness, not speed (optimized/cuda/bench times the kernels).
"""
from . import _core
from ._ops import GATES, check_op

__all__ = ["CudaUnavailable", "available", "why_unavailable", "chunk", "chunk_backward",
           "chunk_delta_rule", "chunk_gated_delta_rule", "chunk_kda", "chunk_gdn2"]

OPS = ("delta_rule", "gated_delta_rule", "kda", "gdn2")


class CudaUnavailable(RuntimeError):
    """The module was built without the CUDA kernels, or no usable GPU is there."""


def why_unavailable() -> str:
    """'' when the CUDA kernels can run here, else why not (not built with them; no device; a
    device of another architecture)."""
    if not getattr(_core, "cuda_built", False):
        return ("linattn was built without the CUDA kernels: reinstall on a machine with nvcc with "
                "LINATTN_PY_CUDA=ON python3 -m pip install ./notebooks_bindings")
    ok, why = _core._cuda_device_available()
    return "" if ok else f"no usable CUDA device: {why}"


def available() -> bool:
    """True when the module was built with the CUDA kernels and a device they run on is present."""
    return why_unavailable() == ""


def _require(who):
    why = why_unavailable()
    if why:
        raise CudaUnavailable(f"{who}: {why}")


def _check_gates(who, op, given):
    if op not in OPS:
        check_op(op)  # the error for an unknown name
        raise ValueError(f"{who}: the CUDA kernels implement {OPS}, not {op!r}")
    extra = [n for n, x in given.items() if x is not None and n not in GATES[op]]
    if extra:
        raise ValueError(f"{who}: operator {op!r} takes gates {GATES[op]} but got {extra}")


def chunk(op, q, k, v, *, g=None, beta=None, b=None, w=None, scale=None, initial_state=None,
          output_final_state=False, cu_seqlens=None, use_qk_l2norm_in_kernel=False, copy=False,
          dtype="float32", gate_dtype="float32", version="best"):
    """The CUDA chunked forward of `op`: (o, final_state), o float32 [B, T, H, V], final_state
    float32 [N, H, K, V] or None (output_final_state=False)."""
    who = f"linattn.cuda.chunk_{op}"
    _check_gates(who, op, {"g": g, "beta": beta, "b": b, "w": w})
    _require(who)
    return _core._cuda_chunk_forward(op, q, k, v, g, beta, b, w, scale, initial_state,
                                     output_final_state, cu_seqlens, use_qk_l2norm_in_kernel, copy,
                                     dtype, gate_dtype, version)


def chunk_delta_rule(q, k, v, beta=None, **kwargs):
    """DeltaNet (Eq.14), CUDA chunked. beta [B, T, H] (None: ones)."""
    return chunk("delta_rule", q, k, v, beta=beta, **kwargs)


def chunk_gated_delta_rule(q, k, v, g, beta=None, **kwargs):
    """Gated DeltaNet (Eqs.15-17), CUDA chunked. g [B, T, H] log-decays, beta [B, T, H]."""
    return chunk("gated_delta_rule", q, k, v, g=g, beta=beta, **kwargs)


def chunk_kda(q, k, v, g, beta=None, **kwargs):
    """Kimi Delta Attention (Eqs.18-20), CUDA chunked. g [B, T, H, K] log-decays, beta [B, T, H]."""
    return chunk("kda", q, k, v, g=g, beta=beta, **kwargs)


def chunk_gdn2(q, k, v, g, b, w, **kwargs):
    """Gated DeltaNet-2 (Eqs.21-24), CUDA chunked. g [B, T, H, K], b [B, T, H, K], w [B, T, H, V]."""
    return chunk("gdn2", q, k, v, g=g, b=b, w=w, **kwargs)


def chunk_backward(op, q, k, v, *, do, dht=None, g=None, beta=None, b=None, w=None, scale=None,
                   initial_state=None, cu_seqlens=None, use_qk_l2norm_in_kernel=False, copy=False,
                   dtype="float32", gate_dtype="float32", version="best", **ignored):
    """The CUDA chunked backward of chunk_<op>: the same dict of gradients as
    linattn.reference_backward ('dq', 'dk', 'dv', 'dh0' and the gates'), float32.
    version picks a rung of the backward ladder: 'best', 'bwd_v1_simple', 'bwd_v2_tensorcore'
    (float32-accurate gate gradients and dh0 with bf16 inputs), 'bwd_v3_async', 'bwd_v4_tc_tail',
    'bwd_v5_levels_front', 'bwd_v6_tc_b9', 'bwd_v7_rowbase',
    'bwd_v8_wide' (rung 7 with full-width global accesses, the same gradients; 'best' in session 8;
    optimized/cuda/RESULTS.md), 'bwd_v9_noextras' (rung 8 without the prepare's extras kernel, the
    same gradients; slower than rung 8 for the gated operators), 'bwd_v10_split' (rung 8 with the
    chunk-gradient kernel split in two for DeltaNet and GDN, rung 8's gradients up to float32
    summation order; KDA and GDN2 run rung 8; 2.7% faster than rung 8 for DeltaNet, slower for GDN),
    'bwd_v11_wyfast' (rung 10 with a faster WY-side kernel G2; rung 10's gradients bit for bit),
    'bwd_v12_g1slab' (rung 10 with its state-side kernel retiled, 2 blocks per SM; rung 10's gradients
    bit for bit),
    'bwd_v13_g1g2' (rung 10 with both halves replaced: rung 12's G1' and rung 11's G2'; rung 10's
    gradients bit for bit; 'best' in session 9: DeltaNet and GDN 1.2-1.4x faster than rung 8, KDA
    and GDN2 run rung 8 inside it),
    'bwd_v14_pchan' (rung 13 for DeltaNet and GDN; for KDA and GDN2 rung 8's chunk-gradient kernel
    split the same way, with per-channel gates: rung 8's gradients up to float32 summation order;
    slower than rung 8 for KDA),
    'bwd_v15_hionly' (rung 13 with one bf16 MMA per product in its chunk-gradient kernels, and in
    rung 8's for KDA and GDN2: float32 operands rounded to bf16, no lo operands; bf16-level gradients
    1.1-1.17x faster than rung 13 but outside rung 3's bounds on tiny cases with extreme gates, so
    not 'best'),
    'bwd_v16_b9one' (rung 13 for DeltaNet and GDN; for KDA and GDN2 rung 14's split without B9 and one
    B9 kernel, rung 8's per-channel B9 by levels with both halves in one pass, then the rest of the
    chunk gradient: rung 8's gradients up to float32 summation order; slower than rung 8),
    'bwd_v17_hybrid' (rung 15 with the lo operand kept on the two products where rounding it to bf16
    is not safe on small cases with extreme gates: dP's v_new, du0's dv_new; in rung 15's kernels for
    every operator; within rung 3's bounds; 'best' in session 10: backward 1.09-1.16x faster than
    rung 13),
    'bwd_v18_lean' (rung 17 for DeltaNet and GDN without the prepare's E, Qg and Kd arrays: the chunk
    gradient kernels form them from q, k, beta and G by the same expressions, so rung 17's gradients
    bit for bit; KDA and GDN2 run rung 17; the one 'best' picked in sessions 11-17: DeltaNet's backward
    4.47 -> 4.16 ms, GDN's 5.37 -> 4.88 at B=8 T=4096 H=16 K=V=128),
    'bwd_v19_dsbf16' (rung 18 for DeltaNet with the state gradient dS' handed from one kernel to the
    next in bf16, the only part of it the next kernel multiplies; rung 18's gradients bit for bit;
    GDN, KDA and GDN2 run rung 18; the one 'best' picked in session 18),
    'bwd_v20_dvbf16' (rung 19 with the gradient of v_new also handed over in bf16, for GDN with V a
    multiple of 8, an even B*T*H and do, v 8-byte aligned, and for DeltaNet only with
    LINATTN_BWD20_DN=1, where it measured slower; rung 19's gradients bit for bit; KDA, GDN2,
    DeltaNet and other calls run rung 19; the one 'best' picked in session 19),
    'bwd_v21_duvsmem' (rung 20, for DeltaNet its rung 19 path, with dbeta's du0 v terms summed on
    chip instead of through a float32 workspace array: rung 20's gradients bit for bit except dbeta,
    which is summed in another float32 order; KDA, GDN2 and other calls run rung 20; the one 'best'
    picked in session 20),
    'bwd_v22_kq8' (rung 21 with one kernel's k and q tiles loaded 16 bytes at a time; rung 21's
    gradients bit for bit; the one 'best' picked in sessions 21-22),
    'bwd_v23_dsone' (rung 22 with the reverse-recurrence kernel keeping one stage of three of its
    tiles instead of two, so that two of its blocks share an SM; rung 22's gradients bit for bit by
    design; measured slower than rung 22 in session 21),
    'bwd_v24_dswide' (rung 22 with the reverse-recurrence kernel's value columns per block, up to a
    head's 128, picked for K > 64 by how many waves of blocks each width needs on the GPU; rung 22's
    gradients bit for bit; the one 'best' picked in session 23),
    'bwd_v25_g1async' (rung 24 with DeltaNet's state-side gradient kernel loading its operands
    asynchronously, a value slab ahead of its products; rung 24's gradients bit for bit by design),
    'bwd_v26_wyasync' (rung 25 with DeltaNet's WY-side gradient kernel loading its operands
    asynchronously too; rung 25's gradients bit for bit by design),
    'bwd_v27_dvplanes' (rung 26 with dv_new handed between DeltaNet's kernels as two bf16 planes;
    rung 26's gradients bit for bit by design),
    'bwd_v28_sbf16' (rung 27 with DeltaNet's chunk states kept as their bf16 hi part, the only part its
    state-side gradient kernel multiplies; rung 27's gradients bit for bit by design; 'best' in
    session 25),
    'bwd_v29_b1hi' (rung 28 with DeltaNet's reverse state recurrence multiplying the bf16 hi part of
    its float32 state gradient in one product, as fla's dhu does; not bit for bit with rung 28,
    held to the same bounds against the float64 reference; the one 'best' picks since session 26),
    'bwd_v30_dsw2' (rung 29 with that recurrence's 128-column kernel keeping two stages of its
    w_aux and Qg tiles, one barrier less per chunk; rung 29's gradients bit for bit by design),
    'bwd_v31_dkbf16' (rung 29 with DeltaNet's two gradient kernels handing over dk_part as bf16 and
    the WY-side one multiplying dv_new's bf16 part only, as fla's kernels do; not bit for bit with
    rung 29, held to the same bounds against the float64 reference),
    'bwd_v32_g1stage' (rung 31 with the state-side gradient kernel writing its bf16 outputs as whole
    rows through shared memory; rung 31's gradients bit for bit by design; the one 'best' picks since
    session 27),
    'bwd_v33_g2stage' (rung 32 with the WY-side gradient kernel writing dv and dk as whole rows too;
    rung 32's gradients bit for bit by design).
    output_final_state is accepted and ignored."""
    who = "linattn.cuda.chunk_backward"
    _check_gates(who, op, {"g": g, "beta": beta, "b": b, "w": w})
    unknown = sorted(set(ignored) - {"output_final_state"})
    if unknown:
        raise TypeError(f"chunk_backward() got unexpected keyword arguments {unknown}")
    _require(who)
    return _core._cuda_chunk_backward(op, q, k, v, g, beta, b, w, do, dht, scale, initial_state,
                                      cu_seqlens, use_qk_l2norm_in_kernel, copy, dtype, gate_dtype,
                                      version)
