#!/usr/bin/env python3
"""optimized/cuda/bench/bench_forward.py -- times, in one process and on the same inputs, the linattn
CUDA forward kernels (every rung of the ladder, through liblinattn_cuda_capi.so and ctypes), the
flash-linear-attention Triton kernels (chunk_delta_rule, chunk_gated_delta_rule, chunk_kda,
chunk_gdn2) and PyTorch causal SDPA, at the shapes of SPEC section 8 (bf16 q, k, v; float32 gates).

Before timing, every linattn output (o and the final state) is compared with fla's on the same
inputs (relative RMS); the ceilings (device-to-device copy bandwidth, bf16 matrix-product rate) are
measured in the same run. Times are medians of triton.testing.do_bench (CUDA events, L2 flushed
between repetitions). fla's source is not part of linattn: pass its checkout with --fla.

Usage: python3 bench_forward.py --lib build/cuda/optimized/cuda/liblinattn_cuda_capi.so --fla .fla
"""
import argparse
import ctypes
import json
import math
import os
import statistics
import sys
import time
import traceback
import types

import torch
import torch.nn.functional as F
import triton

OPS = ["delta_rule", "gated_delta_rule", "kda", "gdn2"]
OP_ID = {"linear_attn": 0, "delta_rule": 1, "gated_delta_rule": 2, "kda": 3, "gdn2": 4}
C = 64


class Args(ctypes.Structure):  # mirrors LinattnArgs in capi.cu
    _fields_ = [("op", ctypes.c_int64), ("dtype", ctypes.c_int64), ("gate_dtype", ctypes.c_int64),
                ("B", ctypes.c_int64), ("T", ctypes.c_int64), ("H", ctypes.c_int64),
                ("K", ctypes.c_int64), ("V", ctypes.c_int64),
                ("q", ctypes.c_void_p), ("k", ctypes.c_void_p), ("v", ctypes.c_void_p),
                ("g", ctypes.c_void_p), ("beta", ctypes.c_void_p), ("b", ctypes.c_void_p),
                ("w", ctypes.c_void_p), ("o", ctypes.c_void_p), ("scale", ctypes.c_double),
                ("initial_state", ctypes.c_void_p), ("final_state", ctypes.c_void_p),
                ("cu_seqlens", ctypes.c_void_p), ("num_seqs", ctypes.c_int64), ("stream", ctypes.c_void_p)]


def load_fla(root):
    """Import fla's operator modules without running fla/__init__.py (which pulls in its layers,
    models and transformers): register empty parent packages that point at the source tree."""
    sys.path.insert(0, root)
    for name in ("fla", "fla.ops", "fla.modules"):
        m = types.ModuleType(name)
        m.__path__ = [os.path.join(root, *name.split("."))]
        m.__version__ = "0.0.0-linattn-bench"  # fla/utils reads fla.__version__
        sys.modules[name] = m
    fns = {}
    for op, mod, fn in [("delta_rule", "fla.ops.delta_rule", "chunk_delta_rule"),
                        ("gated_delta_rule", "fla.ops.gated_delta_rule", "chunk_gated_delta_rule"),
                        ("kda", "fla.ops.kda", "chunk_kda"),
                        ("gdn2", "fla.ops.gdn2", "chunk_gdn2")]:
        try:
            fns[op] = getattr(__import__(mod, fromlist=[fn]), fn)
        except Exception:
            print(f"[fla] import of {mod}.{fn} failed:\n{traceback.format_exc()}", flush=True)
    return fns


def make_inputs(op, B, T, H, K, V, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"
    q = F.normalize(torch.randn(B, T, H, K, device=dev, generator=g), dim=-1).bfloat16()
    k = F.normalize(torch.randn(B, T, H, K, device=dev, generator=g), dim=-1).bfloat16()
    v = torch.randn(B, T, H, V, device=dev, generator=g).bfloat16()
    x = {"q": q, "k": k, "v": v}
    logsig = lambda *s: F.logsigmoid(2.5 + 1.5 * torch.randn(*s, device=dev, generator=g)).float()
    if op == "gated_delta_rule":
        x["g"] = logsig(B, T, H)
    if op in ("kda", "gdn2"):
        x["g"] = logsig(B, T, H, K)
    if op in ("delta_rule", "gated_delta_rule", "kda"):
        x["beta"] = torch.rand(B, T, H, device=dev, generator=g).float()
    if op == "gdn2":
        x["b"] = torch.rand(B, T, H, K, device=dev, generator=g).float()
        x["w"] = torch.rand(B, T, H, V, device=dev, generator=g).float()
    return x


def fla_call(fns, op, x, scale):
    f = fns[op]
    if op == "delta_rule":
        return f(x["q"], x["k"], x["v"], x["beta"], scale=scale, output_final_state=True)
    if op == "gated_delta_rule":
        return f(x["q"], x["k"], x["v"], x["g"], x["beta"], scale=scale, output_final_state=True)
    if op == "kda":
        return f(x["q"], x["k"], x["v"], x["g"], x["beta"], scale=scale, output_final_state=True)
    return f(x["q"], x["k"], x["v"], x["g"], x["b"], x["w"], scale=scale, output_final_state=True)


class Linattn:
    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.linattn_cuda_forward.argtypes = [ctypes.POINTER(Args), ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self.lib.linattn_cuda_forward.restype = ctypes.c_int
        self.lib.linattn_cuda_version_name.restype = ctypes.c_char_p
        self.err = ctypes.create_string_buffer(4096)
        self.has_v10_probe = hasattr(self.lib, "linattn_cuda_v10_last")  # libraries since session 17

    def v10_last(self):
        """(segments, cluster size) of the last forward call's rung 10 (0, 0: it did not pipeline); None for a
        library built before session 17."""
        if not self.has_v10_probe:
            return None
        cl = ctypes.c_int(0)
        segs = self.lib.linattn_cuda_v10_last(ctypes.byref(cl))
        return segs, cl.value

    def name(self, ver):
        return self.lib.linattn_cuda_version_name(ver).decode()

    def prepare(self, op, x, scale, ver):
        """Allocate o and the final state and build the argument block once; returns (fn, o, ht)."""
        q = x["q"]
        B, T, H, K = q.shape
        V = x["v"].shape[-1]
        o = torch.empty(B, T, H, V, device="cuda", dtype=q.dtype)
        ht = torch.empty(B, H, K, V, device="cuda", dtype=torch.float32)
        a = Args()
        a.op, a.dtype, a.gate_dtype = OP_ID[op], 1, 0
        a.B, a.T, a.H, a.K, a.V = B, T, H, K, V
        for n in ("q", "k", "v", "g", "beta", "b", "w"):
            setattr(a, n, x[n].data_ptr() if n in x else None)
        a.o, a.final_state, a.scale = o.data_ptr(), ht.data_ptr(), scale
        a.stream = torch.cuda.current_stream().cuda_stream
        ref = ctypes.byref(a)
        f, err = self.lib.linattn_cuda_forward, self.err

        def run():
            if f(ref, ver, err, 4096) != 0:
                raise RuntimeError(err.value.decode())
        run.args = a  # keep alive
        return run, o, ht


def rel_rms(a, b):
    a, b = a.float(), b.float()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def bench(fn, rep_ms):
    return triton.testing.do_bench(fn, warmup=max(10, rep_ms // 4), rep=rep_ms, return_mode="median")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--fla", default=None)
    ap.add_argument("--versions", default="1,2", help="linattn rungs to time (comma separated): 1 v1_simple, "
                    "2 v2_tensorcore, 3 v3_async, 4 v4_levels, 5 v5_split, 6 v6_lean (DeltaNet / GDN without q~, k~), "
                    "7 v7_overlap (DeltaNet / GDN: v4 with the intra kernel's shared arrays overlapped, 3 blocks per SM), "
                    "8 v8_wgmma (v7 with the state kernel's w_aux S and q~ S on wgmma), "
                    "9 v9_lean_overlap (DeltaNet / GDN: v7's intra kernel with v6's lean outputs, v6's lean state kernel), "
                    "10 v10_pipeline (one long sequence: v7's kernels over segments, intra beside state; else v9 / v7)")
    ap.add_argument("--shapes", default="8x4096x16x128x128,1x32768x16x128x128")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--rep", type=int, default=200, help="do_bench rep in ms")
    ap.add_argument("--slow-rep", type=int, default=30, help="rep for rungs slower than 20 ms")
    ap.add_argument("--json", default=None)
    ap.add_argument("--split", action="store_true", help="also time --sweep-versions with only the intra (or only the state, or for v5 only the output) kernel")
    ap.add_argument("--sweep-versions", default="3", help="rungs that --bv-sweep and --split apply to")
    ap.add_argument("--bv-sweep", default="", help="also time v2+ with LINATTN_V2_BV set to each of these (e.g. 16,32,64)")
    ap.add_argument("--rounds", type=int, default=1, help="time fla and each plain rung this many times in all, "
                    "interleaved (fla, v_a, v_b, fla, v_a, ...), and print each one's min / median / max: "
                    "a difference smaller than the spread of one process's rounds is not a difference")
    args = ap.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}, triton {triton.__version__}", flush=True)
    lin = Linattn(args.lib)
    fns = load_fla(args.fla) if args.fla else {}
    versions = [int(s) for s in args.versions.split(",") if s]
    results = {"device": dev.name, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": []}

    # Ceilings, measured here and now.
    nbytes = 4 << 30
    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    t = bench(lambda: dst.copy_(src), 200)
    bw = 2 * nbytes / (t * 1e-3)
    del src, dst
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    t = bench(lambda: a @ b, 200)
    mm = 2 * n ** 3 / (t * 1e-3)
    del a, b
    torch.cuda.empty_cache()
    results["copy_bandwidth_GBps"] = bw / 1e9
    results["bf16_matmul_TFLOPs"] = mm / 1e12
    print(f"ceilings: device-to-device copy {bw / 1e12:.2f} TB/s (read + write), bf16 matmul 8192^3 {mm / 1e12:.0f} TFLOP/s", flush=True)

    rows = []

    def record(shape, op, impl, ms, flops, nbytes, check=""):
        B, T, H, K, V = shape
        th = B * T * H / (ms * 1e-3)
        row = {"shape": "x".join(map(str, shape)), "op": op, "impl": impl, "ms": ms,
               "Gtokheads_per_s": th / 1e9, "TFLOPs": flops / (ms * 1e-3) / 1e12,
               "GBps": nbytes / (ms * 1e-3) / 1e9, "check": check}
        row["pct_matmul"] = 100 * row["TFLOPs"] * 1e12 / mm
        row["pct_bw"] = 100 * row["GBps"] * 1e9 / bw
        rows.append(row)
        print(f"  {row['shape']:>20} {op:>17} {impl:>16} {ms:9.3f} ms {row['Gtokheads_per_s']:7.3f} Gth/s "
              f"{row['TFLOPs']:7.1f} TFLOP/s ({row['pct_matmul']:4.1f}%) {row['GBps']:7.0f} GB/s ({row['pct_bw']:4.1f}%) {check}", flush=True)

    for s in args.shapes.split(","):
        shape = tuple(int(x) for x in s.split("x"))
        B, T, H, K, V = shape
        scale = K ** -0.5
        print(f"shape B={B} T={T} H={H} K={K} V={V}", flush=True)
        # Nominal chunked-form FLOPs (SPEC section 8): 6 d^2 + 8 C d + C^2/3 per token and head.
        d = K
        lin_flops = B * T * H * (6 * d * d + 8 * C * d + C * C / 3)
        for op in args.ops.split(","):
            x = make_inputs(op, B, T, H, K, V, seed=1234)
            io = sum(t.numel() * t.element_size() for t in x.values())
            io += B * T * H * V * 2 + B * H * K * V * 4  # o (bf16) and the final state (f32)
            ref_o = ref_h = None
            outs = {}  # impl -> (o, final state), for the accuracy table against v1 (float32 arithmetic)
            timed = []  # (impl, callable, first time) of fla and the plain rungs, for --rounds
            if op in fns:
                try:
                    ref_o, ref_h = fla_call(fns, op, x, scale)
                    torch.cuda.synchronize()
                    outs["fla"] = (ref_o, ref_h)
                    ms = bench(lambda: fla_call(fns, op, x, scale), args.rep)
                    record(shape, op, "fla", ms, lin_flops, io)
                    timed.append(("fla", lambda: fla_call(fns, op, x, scale), ms))
                except Exception:
                    print(f"[fla] {op} failed:\n{traceback.format_exc()}", flush=True)
                    ref_o = ref_h = None
            runs = [(ver, None) for ver in versions]
            sweep = [int(x) for x in args.sweep_versions.split(",") if x]
            runs += [(ver, bv) for ver in sweep for bv in args.bv_sweep.split(",") if bv]
            if 5 in versions:  # v5 with its state / output split forced on (LINATTN_V5_SPLIT=1)
                runs += [(5, "forced")]
            if args.split:
                # v5's kernels alone only with its split forced: unforced, v5 may run v4's kernels
                # (recorded under v5's name) or launch no output kernel at all.
                runs += [(ver, only) for ver in sweep if ver != 5 for only in ("intra", "state")]
                runs += [(5, ("forced", only)) for only in ("intra", "state", "output") if 5 in sweep]
            for ver, bv in runs:
                forced = bv == "forced" or isinstance(bv, tuple)
                if isinstance(bv, tuple):
                    bv = bv[1]
                elif bv == "forced":
                    bv = None
                only = bv if bv in ("intra", "state", "output") else None
                bv = None if only else bv
                name = (lin.name(ver) + (" forced split" if forced else "") + (f" BV={bv}" if bv else "")
                        + (f" {only} kernel only" if only else ""))
                if forced:
                    os.environ["LINATTN_V5_SPLIT"] = "1"
                else:
                    os.environ.pop("LINATTN_V5_SPLIT", None)
                if bv:
                    os.environ["LINATTN_V2_BV"] = bv
                else:
                    os.environ.pop("LINATTN_V2_BV", None)
                if only:
                    os.environ["LINATTN_TC_ONLY"] = only
                else:
                    os.environ.pop("LINATTN_TC_ONLY", None)
                try:
                    run, o, ht = lin.prepare(op, x, scale, ver)
                    o.fill_(float("nan")), ht.fill_(float("nan"))
                    run()
                    torch.cuda.synchronize()
                    check = ""
                    bad = not (torch.isfinite(o).all() and torch.isfinite(ht).all())
                    if ref_o is not None:
                        eo, eh = rel_rms(o, ref_o), rel_rms(ht, ref_h)
                        check = f"vs fla: o {eo:.1e} state {eh:.1e}"
                        bad = bad or eo > 2e-2 or eh > 2e-2
                    if only:
                        check = "(partial: one kernel, output not checked)"
                    elif bad:
                        check += " MISMATCH (or non-finite)"
                    probe = lin.v10_last()
                    if probe and probe[0] > 0:  # rung 10 pipelined this call: say how (session 17)
                        check += f"; rung 10: {probe[0]} segments, state clusters of {probe[1]}"
                    if not bv and not only:
                        outs[name] = (o.clone(), ht.clone())
                    t0 = time.time()
                    run()
                    torch.cuda.synchronize()
                    rep = args.rep if time.time() - t0 < 0.02 else args.slow_rep
                    ms = bench(run, rep)
                    record(shape, op, "linattn " + name, ms, lin_flops, io, check)
                    if not bv and not only and not forced:
                        timed.append(("linattn " + name, run, ms))
                except Exception:
                    print(f"[linattn {name}] {op} failed:\n{traceback.format_exc()}", flush=True)
            os.environ.pop("LINATTN_V2_BV", None)
            os.environ.pop("LINATTN_TC_ONLY", None)
            os.environ.pop("LINATTN_V5_SPLIT", None)
            if args.rounds > 1 and len(timed) > 1:
                # Interleaved rounds: a drift of the clock or of the memory system over the process's life
                # touches every implementation alike, instead of whichever ran last.
                times = {impl: [ms] for impl, _, ms in timed}
                for _ in range(args.rounds - 1):
                    for impl, fn, _ in timed:
                        times[impl].append(bench(fn, args.rep))
                for impl, ts in times.items():
                    ts = sorted(ts)
                    print(f"  rounds {s:>20} {op:>17} {impl:>24}: min {ts[0]:.3f} median {statistics.median(ts):.3f} max {ts[-1]:.3f} ms "
                          f"over {len(ts)}", flush=True)
                    results.setdefault("rounds", []).append({"shape": s, "op": op, "impl": impl, "ms": ts})
            if "v1_simple" in outs:  # v1 computes in float32 from the same bf16 inputs
                r_o, r_h = outs["v1_simple"]
                acc = "  ".join(f"{k}: o {rel_rms(a, r_o):.1e} state {rel_rms(b, r_h):.1e}" for k, (a, b) in outs.items() if k != "v1_simple")
                print(f"  accuracy vs linattn v1 (float32 arithmetic), {op}: {acc}", flush=True)
                results.setdefault("accuracy", []).append({"shape": s, "op": op, "text": acc})
            del outs
            del x
            torch.cuda.empty_cache()
        # Softmax attention baseline: causal SDPA on the same q, k, v shapes ([B, H, T, D] views).
        g = torch.Generator(device="cuda").manual_seed(7)
        q = torch.randn(B, T, H, K, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
        k = torch.randn(B, T, H, K, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
        v = torch.randn(B, T, H, V, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
        sd_flops = 2 * B * H * T * T * (K + V) / 2  # causal: half of QK^T and PV
        ms = bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), args.rep)
        record(shape, "softmax", "torch SDPA causal", ms, sd_flops, 2 * (2 * q.numel() + 2 * v.numel()))
        del q, k, v
        torch.cuda.empty_cache()

    results["rows"] = rows
    print("\nsummary (ms):")
    shapes = sorted({r["shape"] for r in rows}, key=lambda s: -int(s.split("x")[0]))
    impls = []
    for r in rows:
        if r["impl"] not in impls:
            impls.append(r["impl"])
    for s in shapes:
        print(f"  {s}")
        for op in OPS + ["softmax"]:
            cells = []
            for impl in impls:
                m = [r for r in rows if r["shape"] == s and r["op"] == op and r["impl"] == impl]
                if m:
                    cells.append(f"{impl}={m[0]['ms']:.3f}")
            if cells:
                print(f"    {op:>17}: " + "  ".join(cells))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
