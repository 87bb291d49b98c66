#!/usr/bin/env python3
"""knob_rounds.py -- the whole forward of one rung under run-time knobs, beside fla, in interleaved rounds
(session 16): for deciding whether a knob is a gain larger than one process's drift.

    python3 optimized/cuda/bench/knob_rounds.py --lib new/liblinattn_cuda_capi.so --lib2 old/liblinattn_cuda_capi.so \
        --fla .fla --runs "new:;old@2:;new-intra:LINATTN_TC_ONLY=intra;old-intra@2:LINATTN_TC_ONLY=intra" \
        --rounds 5 [--ops gated_delta_rule,delta_rule] [--shapes 8x4096x16x128x128] [--version 0]

(session 16 calls 3-5, bench/logs_session16/; calls 1-2 timed knobs of one build that are gone since).

Each run is LABEL:VAR=VALUE,VAR=VALUE (empty: no knob); a label ending in "@2" runs the library given with --lib2
(another build of the library, loaded into the same process: an A/B of two builds on the same inputs). The variables are set before each call and removed
after it (the library reads them at each launch). Before timing, every run's o and final state are compared
with the first run's (relative RMS; 0 means the same bits; meaningless for LINATTN_TC_ONLY runs, whose outputs are
left incomplete by design) and with fla's. Each round times fla and then every
run once (triton.testing.do_bench medians, L2 flushed between repetitions); the script prints every time and
each implementation's min / median / max over the rounds.
"""
import argparse
import os
import statistics
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_forward import Linattn, fla_call, load_fla, make_inputs, rel_rms  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--lib2", default=None, help="a second build of the library, for runs labelled LABEL@2")
    ap.add_argument("--fla", default=None)
    ap.add_argument("--runs", required=True)
    ap.add_argument("--ops", default="gated_delta_rule")
    ap.add_argument("--shapes", default="8x4096x16x128x128")
    ap.add_argument("--version", type=int, default=0, help="linattn rung (0: best)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rep", type=int, default=200)
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}, triton {triton.__version__}", flush=True)
    lin = Linattn(args.lib)
    lin2 = Linattn(args.lib2) if args.lib2 else None
    fns = load_fla(args.fla) if args.fla else {}
    runs = []
    for r in args.runs.split(";"):
        label, _, kv = r.partition(":")
        runs.append((label, dict(x.split("=", 1) for x in kv.split(",") if x)))

    def with_env(env, fn):
        for k, v in env.items():
            os.environ[k] = v
        try:
            return fn()
        finally:
            for k in env:
                os.environ.pop(k, None)

    for shape in args.shapes.split(","):
        B, T, H, K, V = (int(s) for s in shape.split("x"))
        for op in args.ops.split(","):
            x = make_inputs(op, B, T, H, K, V, 0)
            scale = K ** -0.5
            impls = []  # (name, callable)
            ref = None
            if op in fns:
                fo, fht = fla_call(fns, op, x, scale)
                torch.cuda.synchronize()
                ref = (fo, fht)
                impls.append(("fla", lambda: fla_call(fns, op, x, scale)))
            first = None
            for label, env in runs:
                if label.endswith("@2") and lin2 is None:
                    sys.exit(f"run {label}: no --lib2")
                run, o, ht = (lin2 if label.endswith("@2") else lin).prepare(op, x, scale, args.version)
                with_env(env, run)
                torch.cuda.synchronize()
                o, ht = o.clone(), ht.clone()
                msg = f"{shape} {op} {label}: o finite {bool(torch.isfinite(o.float()).all())}"
                if first is not None:
                    msg += f"; against {runs[0][0]}: o {rel_rms(o, first[0]):.3e} state {rel_rms(ht, first[1]):.3e}"
                else:
                    first = (o, ht)
                if ref is not None:
                    msg += f"; against fla: o {rel_rms(o, ref[0]):.3e} state {rel_rms(ht, ref[1]):.3e}"
                print(msg, flush=True)
                impls.append((label, (lambda r=run, e=env: with_env(e, r))))
            times = {name: [] for name, _ in impls}
            for rnd in range(args.rounds):
                line = []
                for name, fn in impls:
                    ms = triton.testing.do_bench(fn, warmup=25, rep=args.rep, return_mode="median")
                    times[name].append(ms)
                    line.append(f"{name} {ms:.3f}")
                print(f"  round {rnd + 1} {shape} {op}: " + ", ".join(line), flush=True)
            for name, ts in times.items():
                s = sorted(ts)
                print(f"{shape:>20} {op:>17} {name:>10}: min {s[0]:.3f} median {statistics.median(s):.3f} max {s[-1]:.3f} ms",
                      flush=True)


if __name__ == "__main__":
    main()
