#!/usr/bin/env python3
"""optimized/cuda/bench/bench_backward.py -- forward + backward of the linattn CUDA kernels
(forward: Version best; backward: the backward ladder, through liblinattn_cuda_capi.so and ctypes)
beside flash-linear-attention's (chunk_delta_rule, chunk_gated_delta_rule, chunk_kda, chunk_gdn2
through torch.autograd) and PyTorch causal SDPA forward + backward, on the same inputs, at
B=8 T=4096 H=16 K=V=128 bf16 (float32 gates) by default.

The loss is L = <do, o> + <dht, S_T> (random do bf16, dht float32). Before timing, every linattn
gradient is compared with fla's (relative RMS). Times are medians of triton.testing.do_bench.
For backward rungs 5 and up (and 0 = best) also the saved forward (chunk_cuda.hpp, SavedForward):
rows "linattn forward (saving)" and "linattn forward (saving) + backward (saved) v{ver}", after a
check that its o and gradients equal the recompute path's (max |difference| printed; must be 0);
the same with saved states (linattn_cuda_forward_save_states: the backward skips its states kernel and
A's copy): rows "linattn forward (saving states)" and "... (saving states) + backward (saved states) v{ver}".
--env-variant NAME=VALUE (repeatable) adds, per saved-states row, the same row with that launch knob set and once
more unset (e.g. LINATTN_BWD3_VFIRST=1, session 22), after a bit-for-bit check of the gradients with and without it.
fla's source is not part of linattn: pass its checkout with --fla.

Usage: python3 bench_backward.py --lib build/cuda/optimized/cuda/liblinattn_cuda_capi.so --fla .fla
"""
import argparse
import ctypes
import json
import os
import sys
import time
import traceback

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_forward import OPS, OP_ID, Args, Linattn, bench, fla_call, load_fla, make_inputs, rel_rms  # noqa: E402


class BwdArgs(ctypes.Structure):  # mirrors LinattnBwdArgs in capi.cu
    _fields_ = [("fwd", Args), ("do_", ctypes.c_void_p), ("dht", ctypes.c_void_p),
                ("dq", ctypes.c_void_p), ("dk", ctypes.c_void_p), ("dv", ctypes.c_void_p),
                ("dg", ctypes.c_void_p), ("dbeta", ctypes.c_void_p), ("db", ctypes.c_void_p),
                ("dw", ctypes.c_void_p), ("dh0", ctypes.c_void_p)]


GATES = {"delta_rule": ["beta"], "gated_delta_rule": ["g", "beta"], "kda": ["g", "beta"], "gdn2": ["g", "b", "w"]}


def linattn_backward(lin, op, x, do, dht, scale, ver, saved=None):
    """Allocate the gradients and the argument block once; returns (run, grads). With `saved` (a
    ctypes.c_void_p handle of linattn_cuda_forward_save) the backward reads that saved forward."""
    lin.lib.linattn_cuda_backward.argtypes = [ctypes.POINTER(BwdArgs), ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    lin.lib.linattn_cuda_backward.restype = ctypes.c_int
    lin.lib.linattn_cuda_backward_saved.argtypes = [ctypes.POINTER(BwdArgs), ctypes.c_int, ctypes.c_void_p,
                                                    ctypes.c_char_p, ctypes.c_int]
    lin.lib.linattn_cuda_backward_saved.restype = ctypes.c_int
    q = x["q"]
    B, T, H, K = q.shape
    V = x["v"].shape[-1]
    a = BwdArgs()
    f = a.fwd
    f.op, f.dtype, f.gate_dtype = OP_ID[op], 1, 0
    f.B, f.T, f.H, f.K, f.V = B, T, H, K, V
    for n in ("q", "k", "v", "g", "beta", "b", "w"):
        setattr(f, n, x[n].data_ptr() if n in x else None)
    f.scale = scale
    f.stream = torch.cuda.current_stream().cuda_stream
    grads = {n: torch.empty_like(x[n]) for n in ["q", "k", "v"] + GATES[op]}
    grads["h0"] = torch.empty(B, H, K, V, device="cuda", dtype=torch.float32)
    a.do_, a.dht = do.data_ptr(), dht.data_ptr()
    a.dq, a.dk, a.dv = grads["q"].data_ptr(), grads["k"].data_ptr(), grads["v"].data_ptr()
    for n in ("g", "beta", "b", "w"):
        setattr(a, "d" + n, grads[n].data_ptr() if n in grads else None)
    a.dh0 = grads["h0"].data_ptr()
    ref, fn, err = ctypes.byref(a), lin.lib.linattn_cuda_backward, lin.err
    fn_saved = lin.lib.linattn_cuda_backward_saved

    def run():
        if fn(ref, ver, err, 4096) != 0:
            raise RuntimeError(err.value.decode())

    def run_saved():
        if fn_saved(ref, ver, saved, err, 4096) != 0:
            raise RuntimeError(err.value.decode())
    run = run if saved is None else run_saved
    run.args = a
    return run, grads


def linattn_forward_save(lin, op, x, scale, ver, states=False, states_bf16=False):
    """The training forward (linattn_cuda_forward_save, or with states linattn_cuda_forward_save_states, or with
    states kept as bf16 for backward rung 28 linattn_cuda_forward_save_states_bf16) with its own o, final state and
    saved handle, argument block built once; returns (run, o, ht, handle). Free the handle with
    linattn_cuda_saved_free."""
    for name in ("linattn_cuda_forward_save", "linattn_cuda_forward_save_states", "linattn_cuda_forward_save_states_bf16"):
        if not hasattr(lin.lib, name):  # a library built before session 25 has no states_bf16 entry
            continue
        getattr(lin.lib, name).argtypes = [ctypes.POINTER(Args), ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
                                           ctypes.c_char_p, ctypes.c_int]
        getattr(lin.lib, name).restype = ctypes.c_int
    lin.lib.linattn_cuda_saved_free.argtypes = [ctypes.c_void_p]
    lin.lib.linattn_cuda_saved_bytes.argtypes = [ctypes.c_void_p]
    lin.lib.linattn_cuda_saved_bytes.restype = ctypes.c_int64
    _, o, ht = lin.prepare(op, x, scale, ver)  # buffers and the argument block of forward_device
    run_plain = _
    a = run_plain.args
    handle = ctypes.c_void_p()
    if states and states_bf16 and not hasattr(lin.lib, "linattn_cuda_forward_save_states_bf16"):
        raise RuntimeError(f"{lin.lib._name}: no linattn_cuda_forward_save_states_bf16 (a library built before session 25); "
                           "backward rungs 28 to 33 and best need it for their bf16 saved states")
    fn = (lin.lib.linattn_cuda_forward_save_states_bf16 if states and states_bf16 else
          lin.lib.linattn_cuda_forward_save_states if states else lin.lib.linattn_cuda_forward_save)
    ref, err, hp = ctypes.byref(a), lin.err, ctypes.byref(handle)

    def run():
        if fn(ref, ver, hp, err, 4096) != 0:
            raise RuntimeError(err.value.decode())
    run.args = a
    return run, o, ht, handle


def max_abs_diffs(a, b):
    """{name: max |a - b|} over the shared keys (inf where exactly one side is non-finite or shapes differ)."""
    out = {}
    for n in a:
        x, y = a[n].float(), b[n].float()
        if x.shape != y.shape or not torch.equal(torch.isfinite(x), torch.isfinite(y)):
            out[n] = float("inf")
        else:
            f = torch.isfinite(x)
            out[n] = (x[f] - y[f]).abs().max().item() if f.any() else 0.0
    return out


_SAVING_TIMED = set()


ENV_VARIANTS = []  # --env-variant NAME=VALUE, for saved_rows with states


def env_variant_rows(var, s, op, label, fsb, run_s, g_s, record, timed, results):
    """The saved-states forward + backward again with environment variable NAME=VALUE set (a launch knob the
    library reads at each call), then once more without it, in the same process and on the same inputs: rows
    '<label> [NAME=VALUE]' and '<label> (again)' (NAME back as the caller had it). Before timing, the gradients with the knob against those without
    (max |difference| printed; 'NOT BIT-EQUAL' where a knob meant to keep the bits does not)."""
    name, _, value = var.partition("=")
    before = os.environ.get(name)  # restored afterwards (a value the caller exported stays in force)
    ref = {n: t.clone() for n, t in g_s.items()}
    os.environ[name] = value
    try:
        for t in g_s.values():
            t.fill_(float("nan"))
        fsb()
        torch.cuda.synchronize()
        dg = max_abs_diffs(g_s, ref)
        worst = max(dg.values())
        check = (f"{var} vs unset max |diff|: " + " ".join(f"d{n} {e:g}" for n, e in dg.items()) +
                 ("" if worst == 0 else " NOT BIT-EQUAL"))
        results.setdefault("env_variant_check", []).append({"shape": s, "op": op, "var": var, "text": check})
        record(s, op, f"{label} [{var}]", timed(fsb), check)
        os.environ["LINATTN_BWD_PROFILE"] = "1"
        run_s()
        torch.cuda.synchronize()
    except Exception:
        print(f"[{label} [{var}]] {op} failed:\n{traceback.format_exc()}", flush=True)
    finally:
        os.environ.pop("LINATTN_BWD_PROFILE", None)
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before
    record(s, op, f"{label} (again)", timed(fsb))


def saved_rows(lin, op, x, do, dht, scale, ver, s, record, timed, results, run_f, o, states=False):
    """The saved forward (chunk_cuda.hpp, SavedForward): the training forward that keeps forward rung
    4's intra outputs and A, then backward rung `ver` reading them. Before timing: its o against
    forward_device's and its gradients against the recompute backward's, both max |difference|
    (must be 0: the same kernels on the same values). Rows: 'linattn forward (saving)' alone, and
    'linattn forward (saving) + backward (saved) v{ver}'; with `states` the forward also saves the chunk
    states (rows '(saving states)', '(saved states)')."""
    handle = None
    # Backward rung 28 and up, and best (rung 33 since session 32), read the states kept as bf16 (forward_device's
    # states_bf16): the saving forward keeps them so
    s_bf16 = states and (ver >= 28 or ver == 0)
    fwd_name, bwd_name = ("saving states", "saved states") if states else ("saving", "saved")
    if s_bf16:
        fwd_name, bwd_name = "saving states bf16", "saved states bf16"
    try:
        run_fs, o_s, _, handle = linattn_forward_save(lin, op, x, scale, 4, states, s_bf16)
        run_r, g_r = linattn_backward(lin, op, x, do, dht, scale, ver)
        for t in g_r.values():
            t.fill_(float("nan"))
        run_f()
        run_r()
        run_fs()
        run_s, g_s = linattn_backward(lin, op, x, do, dht, scale, ver, saved=handle)
        for t in g_s.values():
            t.fill_(float("nan"))
        run_s()
        torch.cuda.synchronize()
        do_ = max_abs_diffs({"o": o_s}, {"o": o})["o"]
        dg = max_abs_diffs(g_s, g_r)
        worst = max([do_] + list(dg.values()))
        check = (f"saved vs recompute max |diff|: o {do_:g} " + " ".join(f"d{n} {e:g}" for n, e in dg.items()) +
                 ("" if worst == 0 else " NOT BIT-EQUAL") +
                 f"; saved {lin.lib.linattn_cuda_saved_bytes(handle) / 2**20:.1f} MiB")
        results.setdefault("saved_check", []).append({"shape": s, "op": op, "bwd_version": ver, "states": states,
                                                      "text": check})
        if (s, op, fwd_name) not in _SAVING_TIMED:  # once per shape, op and mode
            record(s, op, f"linattn forward ({fwd_name})", timed(run_fs))
            _SAVING_TIMED.add((s, op, fwd_name))

        def fsb():
            run_fs()
            run_s()
        label = f"linattn forward ({fwd_name}) + backward ({bwd_name}) v{ver}"
        record(s, op, label, timed(fsb), check)
        os.environ["LINATTN_BWD_PROFILE"] = "1"  # the saved backward's kernels (its prepare: A's copy, plus the extras kernel for rungs other than 9)
        run_s()
        torch.cuda.synchronize()
        os.environ.pop("LINATTN_BWD_PROFILE", None)
        for var in (ENV_VARIANTS if states else []):  # --env-variant: the same rows with a knob set, then unset again
            env_variant_rows(var, s, op, label, fsb, run_s, g_s, record, timed, results)
        del g_r, g_s
    except Exception:
        os.environ.pop("LINATTN_BWD_PROFILE", None)
        print(f"[linattn {bwd_name} v{ver}] {op} failed:\n{traceback.format_exc()}", flush=True)
    finally:
        if handle is not None:
            lin.lib.linattn_cuda_saved_free(handle)


def fla_kept(fns, op, xg, scale):
    """Print the memory fla's forward keeps for its backward (autograd's saved tensors beyond the inputs, o and the
    final state), to set beside linattn's 'saved N MiB': the memory side of the comparison. Never fails the run."""
    try:
        for t in xg.values():
            t.grad = None
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        o, ht = fla_call(fns, op, xg, scale)
        torch.cuda.synchronize()
        outs = sum(t.numel() * t.element_size() for t in (o, ht) if t is not None)
        kept = torch.cuda.memory_allocated() - base - outs
        print(f"[fla] {op}: its forward keeps {kept / 2**20:.1f} MiB for the backward (beyond the inputs, o and the "
              f"final state)", flush=True)
        del o, ht
    except Exception as e:  # a measurement only
        print(f"[fla] {op}: kept memory not measured ({type(e).__name__}: {e})", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--fla", default=None)
    ap.add_argument("--shapes", default="8x4096x16x128x128")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--bwd-versions", default="2,3", help="backward rungs, comma-separated (1 = bwd_v1_simple, 2 = bwd_v2_tensorcore, 3 = bwd_v3_async, 4 = bwd_v4_tc_tail, 5 = bwd_v5_levels_front, 6 = bwd_v6_tc_b9, 7 = bwd_v7_rowbase, 8 = bwd_v8_wide, 9 = bwd_v9_noextras, 10 = bwd_v10_split, 11 = bwd_v11_wyfast, 12 = bwd_v12_g1slab, 13 = bwd_v13_g1g2, 14 = bwd_v14_pchan, 15 = bwd_v15_hionly, 16 = bwd_v16_b9one, 17 = bwd_v17_hybrid, best in session 10, 18 = bwd_v18_lean, best in sessions 11-17, 19 = bwd_v19_dsbf16, best in session 18, 20 = bwd_v20_dvbf16, best in session 19, 21 = bwd_v21_duvsmem, best since session 20, 22 = bwd_v22_kq8, 23 = bwd_v23_dsone, 24 = bwd_v24_dswide, best since session 23, 25 = bwd_v25_g1async, 26 = bwd_v26_wyasync, best since session 24, 27 = bwd_v27_dvplanes, 28 = bwd_v28_sbf16: its saving forward keeps the states as bf16, best in session 25, 29 = bwd_v29_b1hi: rung 28 with dstates' B1 on the hi part of dS', best since session 26, 30 = bwd_v30_dsw2: rung 29 with two stages of w_aux and Qg in the 128-column dstates kernel, 31 = bwd_v31_dkbf16: rung 29 with bf16 dk_part and dv_new's hi plane only in G2', 32 = bwd_v32_g1stage: rung 31 with G1''s bf16 outputs stored as whole rows, best in sessions 27-31, 33 = bwd_v33_g2stage: rung 32 with G2''s dv and dk stored as whole rows, best since session 32)")
    ap.add_argument("--fwd-version", type=int, default=0, help="forward rung for fwd + bwd (0 = best)")
    ap.add_argument("--rep", type=int, default=200)
    ap.add_argument("--slow-rep", type=int, default=40, help="rep for calls slower than 20 ms")
    ap.add_argument("--env-variant", action="append", default=[], metavar="NAME=VALUE",
                    help="also time the saved-states rows with this environment variable set (repeatable)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    ENV_VARIANTS.extend(args.env_variant)

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}, triton {triton.__version__}", flush=True)
    lin = Linattn(args.lib)
    fns = load_fla(args.fla) if args.fla else {}
    rows = []
    results = {"device": dev.name, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": rows}

    def timed(fn):
        t0 = time.time()
        fn()
        torch.cuda.synchronize()
        return bench(fn, args.rep if time.time() - t0 < 0.02 else args.slow_rep)

    def record(shape, op, impl, ms, check=""):
        rows.append({"shape": shape, "op": op, "impl": impl, "ms": ms, "check": check})
        print(f"  {shape:>20} {op:>17} {impl:>34} {ms:9.3f} ms  {check}", flush=True)

    for s in args.shapes.split(","):
        B, T, H, K, V = (int(t) for t in s.split("x"))
        scale = K ** -0.5
        print(f"shape B={B} T={T} H={H} K={K} V={V}", flush=True)
        for op in args.ops.split(","):
            x = make_inputs(op, B, T, H, K, V, seed=1234)
            fla_x = x
            if op == "gdn2":  # fla's GDN2 backward needs w in bf16 (a bf16 x fp32 tl.dot fails to
                # compile otherwise): both get the same values, fla as bf16, linattn as float32
                fla_x = dict(x, w=x["w"].bfloat16())
                x["w"] = fla_x["w"].float()
            gen = torch.Generator(device="cuda").manual_seed(99)
            do = torch.randn(B, T, H, V, device="cuda", generator=gen).bfloat16()
            dht = torch.randn(B, H, K, V, device="cuda", generator=gen)
            names = ["q", "k", "v"] + GATES[op]
            ref = None
            if op in fns:
                xg = {n: t.detach().clone().requires_grad_(n in names) for n, t in fla_x.items()}

                def fla_fb():
                    for t in xg.values():
                        t.grad = None
                    o, ht = fla_call(fns, op, xg, scale)
                    torch.autograd.backward((o, ht), (do, dht))
                try:
                    fla_fb()
                    torch.cuda.synchronize()
                    ref = {n: xg[n].grad.clone() for n in names}
                    record(s, op, "fla forward", timed(lambda: fla_call(fns, op, fla_x, scale)))
                    record(s, op, "fla forward + backward", timed(fla_fb))
                    fla_kept(fns, op, xg, scale)
                except Exception:
                    print(f"[fla] {op} forward + backward failed:\n{traceback.format_exc()}", flush=True)
                    ref = None
                del xg
                if ref is None and op == "gated_delta_rule" and "kda" in fns:
                    # GDN is KDA with the scalar log-decay repeated over the K channels, and
                    # dL/dg_GDN = sum over channels of dL/dg_KDA: fla's KDA gives the reference.
                    xk = {n: t.detach().clone() for n, t in x.items()}
                    xk["g"] = x["g"][..., None].expand(B, T, H, K).contiguous()
                    for n in names:
                        xk[n].requires_grad_(True)
                    try:
                        def fla_kda_fb():
                            for t in xk.values():
                                t.grad = None
                            o, ht = fla_call(fns, "kda", xk, scale)
                            torch.autograd.backward((o, ht), (do, dht))
                        fla_kda_fb()
                        torch.cuda.synchronize()
                        ref = {n: xk[n].grad.clone() for n in names}
                        ref["g"] = ref["g"].sum(-1)
                        record(s, op, "fla KDA (repeated gate) fwd + bwd", timed(fla_kda_fb), "the reference for GDN's gradients")
                    except Exception:
                        print(f"[fla] GDN as KDA failed:\n{traceback.format_exc()}", flush=True)
                        ref = None
                    del xk
            run_f, o, ht = lin.prepare(op, x, scale, args.fwd_version)
            record(s, op, f"linattn forward {lin.name(args.fwd_version)}", timed(run_f))
            for ver in [int(v) for v in args.bwd_versions.split(",") if v]:
                try:
                    run_b, grads = linattn_backward(lin, op, x, do, dht, scale, ver)
                    for t in grads.values():
                        t.fill_(float("nan"))
                    run_b()
                    torch.cuda.synchronize()
                    bad = [n for n, t in grads.items() if not torch.isfinite(t).all()]
                    check = ("NON-FINITE: " + ",".join(bad)) if bad else ""
                    if ref is not None:
                        errs = {n: rel_rms(grads[n], ref[n]) for n in names}
                        check += " vs fla: " + " ".join(f"d{n} {e:.1e}" for n, e in errs.items())
                        if max(errs.values()) > 2e-2:
                            check += " MISMATCH"
                    results.setdefault("grad_check", []).append({"shape": s, "op": op, "bwd_version": ver, "text": check})
                    record(s, op, f"linattn backward v{ver}", timed(run_b), check)

                    def fb():
                        run_f()
                        run_b()
                    record(s, op, f"linattn forward + backward v{ver}", timed(fb))
                    # one more call with the per-kernel times printed (bwd_common.cuh, Profile)
                    os.environ["LINATTN_BWD_PROFILE"] = "1"
                    run_b()
                    torch.cuda.synchronize()
                    os.environ.pop("LINATTN_BWD_PROFILE", None)
                    del grads
                except Exception:
                    os.environ.pop("LINATTN_BWD_PROFILE", None)
                    print(f"[linattn bwd v{ver}] {op} failed:\n{traceback.format_exc()}", flush=True)
                if ver == 0 or ver >= 5:  # the rungs whose prepare is forward rung 4's intra kernel
                    saved_rows(lin, op, x, do, dht, scale, ver, s, record, timed, results, run_f, o)
                    saved_rows(lin, op, x, do, dht, scale, ver, s, record, timed, results, run_f, o, states=True)
            del x, fla_x, o, ht, ref
            torch.cuda.empty_cache()
        # Softmax attention: causal SDPA forward + backward on [B, H, T, D] views.
        g = torch.Generator(device="cuda").manual_seed(7)
        mk = lambda D: torch.randn(B, T, H, D, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2).requires_grad_(True)
        q, k, v = mk(K), mk(K), mk(V)
        do = torch.randn(B, H, T, V, device="cuda", dtype=torch.bfloat16, generator=g)
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def sd_fb():
            for t in (q, k, v):
                t.grad = None
            sdpa(q, k, v, is_causal=True).backward(do)
        with torch.no_grad():
            record(s, "softmax", "torch SDPA causal forward", timed(lambda: sdpa(q, k, v, is_causal=True)))
        record(s, "softmax", "torch SDPA causal forward + backward", timed(sd_fb))
        del q, k, v, do
        torch.cuda.empty_cache()

    print("\nsummary (ms):")
    for r in rows:
        print(f"  {r['shape']:>20} {r['op']:>17} {r['impl']:>34} {r['ms']:9.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
