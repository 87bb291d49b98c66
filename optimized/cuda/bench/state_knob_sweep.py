#!/usr/bin/env python3
"""state_knob_sweep.py -- the forward state kernel alone (LINATTN_TC_ONLY=state) under run-time knobs, in
one process: for finding which part of a state kernel is its critical path (session 12, forward rung 8).

    python3 optimized/cuda/bench/state_knob_sweep.py --lib liblinattn_cuda_capi.so \
        --runs "7:;8:;8:LINATTN_V8_SKIP=1;8:LINATTN_V8_SPLIT=1" [--ops gated_delta_rule] [--shapes 8x4096x16x128x128]

Each run is VERSION:VAR=VALUE,VAR=VALUE (empty: no knob). The environment variables are set before the
call and removed after it (the library reads them at each launch). With a skip knob the outputs are
wrong by design: this times kernels, it checks nothing. Prints one line per (shape, op, run) in ms
(median of triton.testing.do_bench).
"""
import argparse
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_forward import Linattn, make_inputs  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--ops", default="gated_delta_rule")
    ap.add_argument("--shapes", default="8x4096x16x128x128")
    ap.add_argument("--rep", type=int, default=100)
    ap.add_argument("--only", default="state", help="LINATTN_TC_ONLY value ('' times the whole forward)")
    args = ap.parse_args()
    lin = Linattn(args.lib)
    print(f"device: {torch.cuda.get_device_name(0)}; torch {torch.__version__}, triton {triton.__version__}", flush=True)
    runs = []
    for r in args.runs.split(";"):
        ver, _, kv = r.partition(":")
        env = dict(x.split("=", 1) for x in kv.split(",") if x)
        runs.append((int(ver), env))
    for shape in args.shapes.split(","):
        B, T, H, K, V = (int(s) for s in shape.split("x"))
        for op in args.ops.split(","):
            x = make_inputs(op, B, T, H, K, V, 0)
            for ver, env in runs:
                if args.only:
                    os.environ["LINATTN_TC_ONLY"] = args.only
                for k, v in env.items():
                    os.environ[k] = v
                run, o, ht = lin.prepare(op, x, K ** -0.5, ver)
                run()
                torch.cuda.synchronize()
                ms = triton.testing.do_bench(run, warmup=25, rep=args.rep, return_mode="median")
                for k in env:
                    os.environ.pop(k, None)
                os.environ.pop("LINATTN_TC_ONLY", None)
                knobs = ",".join(f"{k}={v}" for k, v in env.items()) or "-"
                print(f"{shape:>20} {op:>17} {lin.name(ver):>12} {knobs:<40} {ms:8.3f} ms", flush=True)


if __name__ == "__main__":
    main()
