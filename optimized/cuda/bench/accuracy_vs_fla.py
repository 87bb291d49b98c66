#!/usr/bin/env python3
"""optimized/cuda/bench/accuracy_vs_fla.py -- how close linattn's CUDA backward and flash-linear-attention's
(fla) backward come to the exact gradients, on the same inputs, with the measure and bounds of
proofs_tests/test_cuda_backward.cu.

Why: issue 6 compares our forward + backward time with fla's. Our backward keeps more precision than
fla's in a few places (dS' as bf16 hi + lo in the dstates kernel's B1, dv_new's lo in du0, v_new's lo in
dP: RESULTS.md, "Rung 17"), because without them our own gradients left the test's bounds on small cases
with extreme gates. This program measures what fla's gradients do on such cases, so that the time
comparison can be read next to an accuracy comparison that was measured, not assumed.

The exact gradients come from a per-token float64 recurrence differentiated by torch autograd (SPEC
section 2 in the S layout; written here, independently of reference/ and of both kernels):
    S~ = a_t S_{t-1}  (a_t = exp(g_t): 1 for DeltaNet, a scalar for GDN, per key channel for KDA, GDN2)
    S_t = S~ + k_t (z_t - S~^T e_t)^T,  o_t = S_t^T (scale q_t)
with e = beta k, z = beta v (DeltaNet, GDN, KDA) or e = b (.) k, z = w (.) v (GDN2), and the loss
L = <do, o> + <dht, S_T>. Every implementation gets the same bf16 q, k, v, do and float32 gates, initial
state and dht, and the reference gets those very values in float64. The measure is the test's:
    ratio = rms(got - exact) / max(rms(exact), floor),  floor = rms of the exact dq, dk, dv together,
a non-finite element counting as an infinite error; the bounds are rung 3's (1e-2 for dq, dk, dv, dh0;
2e-2 for dg, dbeta, db, dw), which every linattn rung since rung 3 is tested against.

Cases follow the property tests' generator (proofs_tests/generators.hpp): q ~ N(0, 1), k ~ N(0, 1)
L2-normalised, v ~ N(0, 1), gates in four modes (random: log sigmoid(N(2.5, 1.5)); zero; extreme: -30 or
-1000; mixed: 0, -1000 or random, beta hitting 0 and 1; DeltaNet has no log-decay, so its random, zero and
extreme modes are one distribution and mixed differs only in beta), beta (b, w) ~ U(0, 1), the initial state
N(0, 0.25) in half the cases, do ~ N(0, 1), dht ~ N(0, 1). fla's GDN backward refuses with Triton 3.6.0
(fla #640), so GDN is run through fla's KDA with the gate repeated over the K channels (dg summed over
them), as bench_backward.py does.

Usage (on the GPU machine): python3 accuracy_vs_fla.py --lib liblinattn_cuda_capi.so --fla .fla \
    [--ops delta_rule,gated_delta_rule,kda,gdn2] [--kv 128x128,64x64] [--T 1,2,3,65,150,1024] [--seeds 3]
"""
import argparse
import json
import math
import os
import sys
import time
import traceback

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_backward import GATES, linattn_backward  # noqa: E402
from bench_forward import OP_ID, Linattn, load_fla  # noqa: E402

MODES = ["random", "zero", "extreme", "mixed"]
BOUND = {"q": 1e-2, "k": 1e-2, "v": 1e-2, "h0": 1e-2, "g": 2e-2, "beta": 2e-2, "b": 2e-2, "w": 2e-2}


def make_case(op, B, T, H, K, V, mode, init, seed):
    """Inputs on the GPU: q, k, v, do bf16; gates, h0, dht float32 (generators.hpp's distributions)."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    rn = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)
    ru = lambda *s: torch.rand(*s, generator=gen, dtype=torch.float64)
    q = rn(B, T, H, K)
    k = rn(B, T, H, K)
    k = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-300)
    v = rn(B, T, H, V)

    def log_gate(*s):
        rnd = -torch.log1p(torch.exp(-(2.5 + 1.5 * rn(*s))))
        pick = torch.randint(0, 4, s, generator=gen)
        if mode == "random":
            return rnd
        if mode == "zero":
            return torch.zeros(s, dtype=torch.float64)
        if mode == "extreme":
            return torch.where(pick % 2 == 1, torch.full(s, -30.0, dtype=torch.float64),
                               torch.full(s, -1000.0, dtype=torch.float64))
        return torch.where(pick == 0, torch.zeros(s, dtype=torch.float64),
                           torch.where(pick == 1, torch.full(s, -1000.0, dtype=torch.float64), rnd))

    def unit_gate(*s):
        u = ru(*s)
        if mode != "mixed":
            return u
        pick = torch.randint(0, 5, s, generator=gen)
        return torch.where(pick == 0, torch.zeros(s, dtype=torch.float64),
                           torch.where(pick == 1, torch.ones(s, dtype=torch.float64), u))

    x = {"q": q.bfloat16(), "k": k.bfloat16(), "v": v.bfloat16()}
    if op == "gated_delta_rule":
        x["g"] = log_gate(B, T, H).float()
    if op in ("kda", "gdn2"):
        x["g"] = log_gate(B, T, H, K).float()
    if op in ("delta_rule", "gated_delta_rule", "kda"):
        x["beta"] = unit_gate(B, T, H).float()
    if op == "gdn2":
        x["b"] = unit_gate(B, T, H, K).float()
        # fla's GDN2 backward needs w in bf16 (bench_backward.py): every implementation gets w's bf16 values
        x["w"] = unit_gate(B, T, H, V).bfloat16().float()
    x = {n: t.cuda() for n, t in x.items()}
    h0 = (0.5 * rn(B, H, K, V)).float().cuda() if init else None
    do = rn(B, T, H, V).bfloat16().cuda()
    dht = rn(B, H, K, V).float().cuda()
    return x, h0, do, dht


def exact_grads(op, x, h0, do, dht, scale):
    """Gradients of L = <do, o> + <dht, S_T> by autograd through the per-token float64 recurrence."""
    xs = {n: t.detach().double().requires_grad_(True) for n, t in x.items()}
    q, k, v = xs["q"], xs["k"], xs["v"]
    B, T, H, K = q.shape
    V = v.shape[-1]
    S0 = (h0.double() if h0 is not None else torch.zeros(B, H, K, V, dtype=torch.float64, device="cuda"))
    S0 = S0.clone().requires_grad_(True)
    S = S0
    outs = []
    for t in range(T):
        kt, vt, qt = k[:, t], v[:, t], q[:, t]  # [B, H, K] / [B, H, V]
        if op == "delta_rule":
            St = S
        elif op == "gated_delta_rule":
            St = torch.exp(xs["g"][:, t])[..., None, None] * S
        else:
            St = torch.exp(xs["g"][:, t])[..., :, None] * S  # Diag(alpha) S: rows = key channels
        if op == "gdn2":
            e, z = xs["b"][:, t] * kt, xs["w"][:, t] * vt
        else:
            bt = xs["beta"][:, t][..., None]
            e, z = bt * kt, bt * vt
        r = z - torch.einsum("bhkv,bhk->bhv", St, e)
        S = St + kt[..., :, None] * r[..., None, :]
        outs.append(torch.einsum("bhkv,bhk->bhv", S, scale * qt))
    o = torch.stack(outs, dim=1)
    loss = (o * do.double()).sum() + (S * dht.double()).sum()
    loss.backward()
    g = {n: t.grad for n, t in xs.items()}
    g["h0"] = S0.grad
    return g


def ratios(got, exact, names):
    """The test's measure per gradient (a non-finite element: an infinite error)."""
    floor = math.sqrt(sum(float((exact[n] ** 2).sum()) for n in ("q", "k", "v")) /
                      sum(exact[n].numel() for n in ("q", "k", "v")))
    out = {}
    for n in names:
        a, b = got[n].double(), exact[n]
        if a.shape != b.shape:
            raise RuntimeError(f"d{n}: shape {tuple(a.shape)}, exact {tuple(b.shape)}")
        if not torch.isfinite(a).all():
            out[n] = math.inf
            continue
        rms = lambda t: math.sqrt(float((t ** 2).mean())) if t.numel() else 0.0
        out[n] = rms(a - b) / max(rms(b), floor, 1e-300)
    return out


def fla_grads(fns, op, x, h0, do, dht, scale):
    B, T, H, K = x["q"].shape
    names = ["q", "k", "v"] + GATES[op]
    fop, xf = op, dict(x)
    if op == "gated_delta_rule":  # through fla's KDA with the gate repeated (GDN's backward refuses)
        fop = "kda"
        xf["g"] = x["g"][..., None].expand(B, T, H, K).contiguous()
    if op == "gdn2":
        xf["w"] = x["w"].bfloat16()
    xg = {n: t.detach().clone().requires_grad_(n in names) for n, t in xf.items()}
    hg = h0.detach().clone().requires_grad_(True) if h0 is not None else None
    f = fns[fop]
    args = [xg["q"], xg["k"], xg["v"]] + [xg[n] for n in (["beta"] if fop == "delta_rule" else
                                                         ["g", "beta"] if fop == "kda" else ["g", "b", "w"])]
    o, ht = f(*args, scale=scale, initial_state=hg, output_final_state=True)
    torch.autograd.backward((o, ht), (do, dht))
    torch.cuda.synchronize()
    g = {n: xg[n].grad for n in names}
    if op == "gated_delta_rule":
        g["g"] = g["g"].sum(-1)
    g["h0"] = hg.grad if hg is not None else None
    return g


def linattn_grads(lin, op, x, h0, do, dht, scale, ver):
    """linattn's gradients (dq, dk, dv, the gate gradients, dh0), through bench_backward's argument block with the
    initial state set, every output NaN-filled first (a gradient the kernel leaves unwritten then counts as an error)."""
    run, grads = linattn_backward(lin, op, x, do, dht, scale, ver)
    run.args.fwd.initial_state = h0.data_ptr() if h0 is not None else None
    for t in grads.values():
        t.fill_(float("nan"))
    run()
    torch.cuda.synchronize()
    return grads


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--fla", required=True)
    ap.add_argument("--ops", default="delta_rule,gated_delta_rule,kda,gdn2")
    ap.add_argument("--kv", default="128x128")
    ap.add_argument("--T", default="1,2,3,65,150,1024")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--B", type=int, default=2)
    ap.add_argument("--H", type=int, default=2)
    ap.add_argument("--bwd-version", type=int, default=0, help="linattn backward rung (0 = best)")
    ap.add_argument("--impls", default="linattn,fla", help="which implementations to run (fla alone isolates its faults)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--deadline", type=float, default=1e9, help="stop starting cases after this many seconds")
    args = ap.parse_args()
    t_start = time.time()
    print(f"device: {torch.cuda.get_device_name()}; torch {torch.__version__}", flush=True)
    print("command: python3 " + " ".join(sys.argv), flush=True)
    lin = Linattn(args.lib)
    fns = load_fla(args.fla)
    rows = []
    stopped = False
    dead = False
    worst = {}  # (op, mode, impl, grad) -> (ratio, case)
    for op in args.ops.split(","):
        names = ["q", "k", "v"] + GATES[op] + ["h0"]
        for kv in args.kv.split(","):
            K, V = (int(s) for s in kv.split("x"))
            scale = K ** -0.5
            for T in (int(s) for s in args.T.split(",")):
                for mode in args.modes.split(","):
                    for s in range(args.seeds):
                        if dead:
                            break
                        if time.time() - t_start > args.deadline:
                            if not stopped:
                                print("deadline reached: later cases not run", flush=True)
                            stopped = True
                            break
                        init = s % 2 == 0
                        seed = 1000003 * s + 7919 * T + 31 * K + V + 17 * MODES.index(mode) + 101 * OP_ID[op]
                        case = f"{op} K={K} V={V} T={T} gates={mode} h0={'yes' if init else 'no'} seed={seed}"
                        t_case = time.time()
                        x, h0, do, dht = make_case(op, args.B, T, args.H, K, V, mode, init, seed)
                        ex = exact_grads(op, x, h0, do, dht, scale)
                        res = {}
                        for impl in args.impls.split(","):
                            try:
                                g = (linattn_grads(lin, op, x, h0, do, dht, scale, args.bwd_version) if impl == "linattn"
                                     else fla_grads(fns, op, x, h0, do, dht, scale))
                                nm = [n for n in names if n != "h0" or (g.get("h0") is not None)]
                                res[impl] = ratios(g, ex, nm)
                            except Exception as e:  # recorded, not hidden
                                res[impl] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
                                traceback.print_exc()
                                if "illegal memory access" in str(e) or "unspecified launch failure" in str(e):
                                    dead = True  # the CUDA context is lost: no later case can run in this process
                                    break
                        line = case
                        for impl, r in res.items():
                            if "error" in r:
                                line += f" | {impl} ERROR {r['error']}"
                                continue
                            out = [n for n, e in r.items() if not e <= BOUND[n]]
                            line += f" | {impl} " + " ".join(f"d{n} {e:.1e}" for n, e in r.items())
                            line += f" OUT({','.join('d' + n for n in out)})" if out else ""
                            for n, e in r.items():
                                key = (op, mode, impl, n)
                                if key not in worst or not e <= worst[key][0]:
                                    worst[key] = (e, case)
                        line += f" | {time.time() - t_case:.1f} s"
                        print(line, flush=True)
                        if dead:
                            print(f"CUDA context lost in {case}: later cases not run in this process", flush=True)
                        rows.append({"case": case, "op": op, "K": K, "V": V, "T": T, "mode": mode, "h0": init,
                                     "seed": seed, "ratios": res})
    print("\nworst ratio per operator, gate mode, implementation and gradient (bound in brackets; "
          "OUT = above it):", flush=True)
    for op in args.ops.split(","):
        for mode in args.modes.split(","):
            for impl in ("linattn", "fla"):
                items = [(n, worst[(o, m, i, n)]) for (o, m, i, n) in list(worst) if (o, m, i) == (op, mode, impl)]
                if not items:
                    continue
                txt = " ".join(f"d{n} {e:.1e}{' OUT' if not e <= BOUND[n] else ''}" for n, (e, _) in items)
                print(f"  {op:>17} {mode:>8} {impl:>8}: {txt}", flush=True)
    nout = {impl: sum(1 for r in rows if impl in r["ratios"] and "error" not in r["ratios"][impl] and
                      any(not e <= BOUND[n] for n, e in r["ratios"][impl].items())) for impl in ("linattn", "fla")}
    nerr = {impl: sum(1 for r in rows if "error" in r["ratios"].get(impl, {})) for impl in ("linattn", "fla")}
    print(f"\ncases: {len(rows)}; with a gradient above its bound: linattn {nout['linattn']}, fla {nout['fla']}; "
          f"errors: linattn {nerr['linattn']}, fla {nerr['fla']}; {time.time() - t_start:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "bounds": BOUND}, f, indent=1)


if __name__ == "__main__":
    main()
