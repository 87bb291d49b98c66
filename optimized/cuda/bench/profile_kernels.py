#!/usr/bin/env python3
"""optimized/cuda/bench/profile_kernels.py -- per-kernel GPU times of one forward (and, with
--backward, one forward + backward) of linattn's CUDA kernels and of flash-linear-attention's, in one
process on the same inputs, from torch.profiler (CUPTI kernel records; no ncu replay, so the times are
the kernels' own, back to back as in a real call).

Why: bench_forward.py / bench_backward.py time whole calls. To know *where* fla is faster (its WY
preparation, its state recurrence, its output kernel; each backward kernel) we need its kernels one
by one beside ours. Prints, per operator and implementation, each kernel's mean time per call (over
--iters calls after --warmup), its share and the total.

Usage (device): python3 profile_kernels.py --lib .../liblinattn_cuda_capi.so --fla .fla [--backward delta_rule,kda]
"""
import argparse
import collections
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_forward import OPS, Linattn, fla_call, load_fla, make_inputs  # noqa: E402
from bench_backward import linattn_backward  # noqa: E402


def kernel_times(fn, iters, warmup):
    """Mean GPU time per call of each CUDA kernel fn launches, {name: (ms, launches per call)}."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    tot = collections.defaultdict(lambda: [0.0, 0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith("Memcpy"):
            t = tot[e.name]
            t[0] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
            t[1] += 1
    return {n: (us / 1000.0 / iters, c / iters) for n, (us, c) in tot.items()}


def show(title, kt):
    total = sum(ms for ms, _ in kt.values())
    print(f"== {title}: {total:.3f} ms of kernels per call", flush=True)
    for n, (ms, c) in sorted(kt.items(), key=lambda x: -x[1][0]):
        short = n if len(n) <= 110 else n[:107] + "..."
        print(f"   {ms:8.3f} ms {100 * ms / max(total, 1e-12):5.1f}%  x{c:<4g} {short}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--fla", default=None)
    ap.add_argument("--shape", default="8x4096x16x128x128")
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--backward", default="", help="operators to profile forward + backward for too (comma separated)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args()
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}; torch {torch.__version__}; shape {args.shape}", flush=True)
    lin = Linattn(args.lib)
    fns = load_fla(args.fla) if args.fla else {}
    B, T, H, K, V = (int(t) for t in args.shape.split("x"))
    scale = K ** -0.5
    for op in args.ops.split(","):
        x = make_inputs(op, B, T, H, K, V, seed=1234)
        run, _, _ = lin.prepare(op, x, scale, 0)
        show(f"{op} linattn forward (best)", kernel_times(run, args.iters, args.warmup))
        if op in fns:
            try:
                with torch.no_grad():
                    show(f"{op} fla forward", kernel_times(lambda: fla_call(fns, op, x, scale), args.iters, args.warmup))
            except Exception as e:  # noqa: BLE001
                print(f"== {op} fla forward failed: {e}", flush=True)
        if op not in args.backward.split(","):
            continue
        do = torch.randn(B, T, H, V, device="cuda").bfloat16()
        dht = torch.randn(B, H, K, V, device="cuda")
        brun, _ = linattn_backward(lin, op, x, do, dht, scale, 0)
        show(f"{op} linattn backward (best)", kernel_times(brun, max(3, args.iters // 4), 1))
        if op in fns:
            fx = dict(x, w=x["w"].bfloat16()) if op == "gdn2" else x
            leaves = {n: t.detach().clone().requires_grad_(True) for n, t in fx.items()}

            def fb():
                o, ht = fla_call(fns, op, leaves, scale)
                torch.autograd.backward([o, ht], [do, dht])
            try:
                show(f"{op} fla forward + backward", kernel_times(fb, max(3, args.iters // 4), 2))
            except Exception as e:  # noqa: BLE001
                print(f"== {op} fla forward + backward failed: {str(e)[:300]}", flush=True)


if __name__ == "__main__":
    main()
