#!/usr/bin/env python3
"""optimized/cuda/bench/models/bwd_b9_levels_model.py -- a float64 numpy model of the backward's
per-channel B9 (KDA, GDN2) on tensor cores by levels of reference rows (issue 6), written before any
CUDA: it checks the factored form that a later rung of bwd_grads_tc would run against the direct
sums of today's float32 B9 (bwd_common.cuh, the `if (!b9_done)` blocks), in float64 and with the
device's rounding emulated. Exit 0: all checks pass; 1: a check failed (the message says which);
77: numpy missing (CTest skip).

The sums (per chunk of C = 64 rows, channel d; G_{i,d} the within-chunk cumulative log-decay,
non-increasing in i; e = beta k (KDA) or b (.) k (GDN2); q~ = scale q; dL strictly lower, dP lower
with the diagonal, rows >= Lc zero):
    de^L_{r,d}    = sum_{j<r}  dL_{r,j} k_{j,d} exp(G_{r,d} - G_{j,d})
    dq^P_{r,d}    = sum_{j<=r} dP_{r,j} k_{j,d} exp(G_{r,d} - G_{j,d})
    dk^{LP}_{r,d} = sum_{i>r}  dL_{i,r} e_{i,d} exp(G_{i,d} - G_{r,d}) + sum_{i>=r} dP_{i,r} q~_{i,d} exp(G_{i,d} - G_{r,d})

Derivation. As in the forward (v4_levels.cu), a pair i > j belongs to level s = the highest bit of
i ^ j (s = 32 .. 1); i is then a LEFT row (bit s set), j a RIGHT row (bit s clear), and for
    m_left(i) = i & ~(s - 1),   m_right(j) = (j & ~(2s - 1)) + s,   m_left(i) = m_right(j) = m,
j < m <= i and exp(G_i - G_j) = exp(G_i - G_m) exp(G_m - G_j), both factors <= 1. One float32 tile
F_s[r, d] per level and 64-channel slab holds the factor of every row: exp(G_r - G_m) for left rows,
exp(G_m - G_r) for right rows. Unlike the forward (which contracts over d, so both factors go onto
operands), B9 contracts over tokens and keeps d as the output column, so the factor of the OUTPUT
row cannot go into an operand: it multiplies the level's float32 accumulator in the epilogue.
  * de^L, dq^P (contract over j = columns of dL, dP, like the forward's L, P): output rows r are the
    LEFT rows; A = dL (dP) restricted to level-s pairs; B = X_s with X_s[j] = k_j F_s[j] on the RIGHT
    rows j (factor exp(G_m - G_j), operand side); epilogue out[r] += F_s[r] * acc (exp(G_r - G_m)).
  * dk^{LP} (contracts over i = rows of dL, dP: the transposed problem): output rows r are the
    RIGHT rows; A = dL^T, dP^T restricted to level-s pairs (ldmatrix .trans of the same tiles);
    B = X_s[i] = e_i F_s[i] and Y_s[i] = q~_i F_s[i] on the LEFT rows i (factor exp(G_i - G_m),
    operand side; scale rides in Y, since dL^T X + dP^T Y share one accumulator); epilogue
    out[r] += F_s[r] * acc (exp(G_m - G_r)). Its task table is the forward's table transposed:
    the level-s blocks (left block bi, right block bj) become (output block bj, contraction bi).
  * So ONE operand tile X_s (left rows e F, right rows k F: the forward's sE layout) serves all
    three sums, Y_s holds q~ F on left rows (right rows unused), and F_s is both operand factor and
    epilogue factor. Since X_s holds both kinds of rows, A must be exactly zero outside level s:
    the diagonal 16 x 16 blocks (levels 8, 4, 2, 1 and the diagonal) are masked per level
    ((r ^ j) in [s, 2s)) in the A fragments; the off-diagonal blocks of the table are entirely
    one level (checked below).
  * Diagonal terms, elementwise in float32: dq^P_r += dP_rr k_r, dk^{LP}_r += dP_rr q~_r.
  * Rows >= Lc: the kernel stages G = 0 there (today's sGd), which breaks monotonicity: a left row
    i >= Lc then gets exp(0 - G_m) = inf and X = 0 * inf = NaN, which the dk product carries into
    valid right rows (0 * NaN). The exponent must be clamped, F = exp(min(diff, 0)) (a no-op on
    valid rows), or G continued as G_{Lc-1} past Lc (as the forward's cumulative sum does).

Numerics (device emulation below): A = dL, dP (float32 from B7) and B = X, Y (float32 products)
split into bf16 hi + lo, three products hi.hi + hi.lo + lo.hi, float32 accumulation per 16-step.
Must NOT be rounded to bf16: F in the epilogue (float32; as a bf16 value the error is ~1e-3, shown
below), the G differences (float64 G as staged today, or float32 within-chunk; never exp(G_r) and
exp(-G_j) separately: exp(-G_j) overflows), the diagonal terms. k and q are exact in bf16 but never
operands here (only k F, e F, q~ F are, which are not exact: hi + lo, a lo-less B is shown too).

Design note for the CUDA rung (estimates; the counts are printed by this script):
  * Where: a Mid (say V6Mid, with V5Mid's batching) whose `run` keeps V4Mid's B7 and returns true for
    per-channel gates too: after B7, dL = -acc and dP = accP go into bf16 hi/lo tiles (4 tiles, as
    V4Mid's put_split does for the scalar path), then per 64-channel slab: stage G (float64, as
    sGd) once, and for each level: build F, X, Y; barrier; products + epilogue; barrier. Writes
    ws.deL, dqP, dkLP as today; the tail (B10, B11) is unchanged.
  * Per level and slab: F 64 x 64 float32 (16,384 B), X hi+lo and Y hi+lo (4 x 64 x 72 bf16,
    36,864 B); persistent: dL, dP hi+lo (36,864 B) and the G slab (64 x 64 float64, 32,768 B).
    One level per round: 122,880 B (fits kSmemMain = 165,120 with room); two levels per round
    would need 176,128 B with F stored (too much) or 143,360 B with F recomputed in the epilogue
    (twice the exp2). Proposed: one level per round, 12 rounds for K = 128, 24 barriers.
  * Task table per warp (8 warps): warp w owns output rows 16 (w & 3) .. +15 and channels
    32 (w >> 2) .. +31 of all three sums (gemm64's m0, n0), and at each level runs every
    contraction its rows need: de^L and dq^P where its rows are left, dk^{LP} (two products,
    dL^T X and dP^T Y) where they are right. Each warp does 22 k-steps of 16 per slab (printed;
    balanced: a row block's de^L / dq^P contraction blocks and its dk^{LP} ones add up to 11 for
    every block), 12 mma m16n8k16 per k-step (4 n-tiles x 3 hi/lo terms): 264 per warp and slab, 528
    for K = 128 (DeltaNet's tensor-core B9: 256); about 0.06 ms of tensor-core time for the launch
    (rung 4's 10,496 HMMA per block took ~0.16 ms).
  * exp2: 64 x 64 per level and slab (F only; reused by epilogue and operands): 49,152 per block at
    K = 128, 192 MUFU warp instructions per warp, against 532,480 (2,080 per warp) in today's
    float32 loop (65 per (r, d) at Lc = 64), 11x fewer; the float32 loop's ~12,450 FFMA and 13,400
    LDS per warp become ~530 HMMA, ~250 ldmatrix, ~580 epilogue FFMA (48 accumulator entries per
    lane, level and slab) with ~200 LDS of F, and the build (~20 instructions per (row, channel,
    level): two G reads, one exp2, products, hi/lo split and stores; ~3.8k per warp).
  * Time (very rough, against analysis_bwd_grads.md's KDA walk): the float32 B9's 9.2 ms compute
    chain becomes ~5-8k instructions per warp of independent work (~0.4-0.6 ms issue), plus its
    staging (k, q, e, G; 3.2 ms today, ~0.5 ms batched as rung 5 does): KDA's grads kernel
    25.8 -> ~14-16 ms. Not measured.

CTest: registered in optimized/cuda/CMakeLists.txt (`_models`), which the build includes only when
a CUDA compiler is found (optimized/CMakeLists.txt: `if(LINATTN_HAVE_CUDA)`): with -DLINATTN_CUDA=OFF
the models are not registered (configure only, no nvcc build, is enough to run them by CTest).
Run: python3 optimized/cuda/bench/models/bwd_b9_levels_model.py (about 1.3 s). Measured when written:
float64 levels vs direct, worst max |diff| / max |direct| 7.8e-16; emulated device, worst relative RMS
deL 5.6e-6, dqP 4.2e-6, dkLP 5.4e-6 (bound 3e-5); F rounded to bf16 1.5e-3, B without lo 1.7e-3.

Breaks (each made on a copy of this file, run, exit 1 seen, copy discarded):
  1. Wrong m for right rows ((r & ~(2s - 1)) without + s): "table: level 32 reference rows wrong"
     (every level), "KDA random: float64 levels vs direct 2.4e+00", emulated 1.5e+00.
  2. A missing level (the level loop of `levels` without s = 2): "KDA random: float64 levels vs
     direct 8.8e-01", emulated 5.1e-01 (and every gate but extreme).
  3. The transposed sum's factor on the wrong side (dk^{LP}'s epilogue multiplies by F of the
     contraction rows instead of the output rows): "KDA random: float64 levels vs direct 1.2e+00",
     "KDA extreme: ... 1.3e+01"; the zero gates (F = 1) cannot see it, as expected.
  4. No exponent clamp (rows >= Lc with G staged 0): "KDA extreme: float64 levels vs direct inf"
     (NaN in valid rows of dk^{LP}), also mixed gates; random gates (small G) do not overflow.
  5. No A mask on the diagonal blocks: "KDA random: float64 levels vs direct 3.9e+00".
"""
import sys

try:
    import numpy as np
except ImportError:
    print("SKIPPED: numpy not installed")
    sys.exit(77)

C = 64
LEVELS = (32, 16, 8, 4, 2, 1)
DIAG = [(b, b) for b in range(4)]
# The forward's task table (v4_levels.cu): per level, the 16 x 16 blocks (left-row block bi,
# right-row block bj) that hold its pairs i > j. de^L, dq^P: output block bi, contraction bj;
# dk^{LP}: output block bj, contraction bi (the transposed problem).
TABLE = {32: [(2, 0), (2, 1), (3, 0), (3, 1)], 16: [(1, 0), (3, 2)], 8: DIAG, 4: DIAG, 2: DIAG, 1: DIAG}


def warp_steps(s, mb):
    """The CUDA kernel's per-warp schedule (bwd_v6_tc_b9.cuh, b9_levels): at level s the warps of
    16-row block mb do ("left", bj) -- de^L, dq^P of rows mb over contracted block bj -- and
    ("right", bi) -- dk^{LP} of rows mb over block bi --, in this order. The emulations
    (bwd_v6_b9_emulation.py, bwd_v6_lane_emulation.py) replay it; TABLE above is what it covers."""
    if s == 32:
        return [("left", 0), ("left", 1)] if mb >= 2 else [("right", 2), ("right", 3)]
    if s == 16:
        return [("left", mb - 1)] if mb & 1 else [("right", mb + 1)]
    return [("left", mb), ("right", mb)]


F64_BOUND = 1e-13   # float64 level form vs direct sums, max |diff| / max |direct|
EMU_BOUND = 3e-5    # emulated device (bf16 hi + lo, float32 accumulation), relative RMS

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg)


def ref_row(r, s):
    """Level s: is row r a left row, and its reference row m."""
    left = (r & s) != 0
    return left, np.where(left, r & ~(s - 1), (r & ~(2 * s - 1)) + s)


def level_mask(s):
    i, j = np.indices((C, C))
    x = i ^ j
    return (x >= s) & (x < 2 * s) & ((i & s) != 0)


# ---- 1. The table: every pair i > j in exactly one level's blocks, j < m <= i, off-diagonal blocks
# entirely of their level (so only diagonal blocks need the A mask).
def check_table():
    count = np.zeros((C, C), int)
    for s in LEVELS:
        mask = level_mask(s)
        for bi, bj in TABLE[s]:
            blk = mask[16 * bi:16 * bi + 16, 16 * bj:16 * bj + 16]
            count[16 * bi:16 * bi + 16, 16 * bj:16 * bj + 16] += blk
            if bi != bj and not blk.all():
                fail(f"table: level {s} block ({bi},{bj}) is not entirely of level {s}")
        ii, jj = np.nonzero(mask)
        li, mi = ref_row(ii, s)
        lj, mj = ref_row(jj, s)
        if not (li.all() and not lj.any() and (mi == mj).all() and (jj < mi).all() and (mi <= ii).all()):
            fail(f"table: level {s} reference rows wrong")
    i, j = np.indices((C, C))
    if not (count == (j < i)).all():
        fail(f"table: {int(np.sum(count != (j < i)))} pairs not covered exactly once")


# ---- device rounding
from devround import bf16, split  # the device rounding (devround.py)


def f32(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


class Dev:
    """How the products, factors and epilogue are evaluated: exact float64, or emulated device."""
    def __init__(self, emulate, b_lo=True, f_bf16=False, clamp=True):
        self.emulate, self.b_lo, self.f_bf16, self.clamp = emulate, b_lo, f_bf16, clamp

    def r(self, x):  # a float32 value on the device
        return f32(x) if self.emulate else x

    def mm(self, acc, a, b):
        """acc + a @ b, one m16n8k16 chain: a, b split hi + lo (lo.lo dropped), float32 per k-step."""
        if not self.emulate:
            return acc + a @ b
        ah, al = split(a)
        bh, bl = split(b) if self.b_lo else (bf16(b), np.zeros_like(b))
        for k0 in range(0, a.shape[1], 16):
            ks = slice(k0, k0 + 16)
            acc = f32(acc + (ah[:, ks] @ bh[ks] + ah[:, ks] @ bl[ks] + al[:, ks] @ bh[ks]))
        return acc


class HiDev(Dev):
    """Rungs 15 and 17's hi-only products (bwd_v15_hionly_model.py, bwd_v17_hybrid_model.py): both
    operands float32 rounded to bf16, hi.hi only, float32 per k-step."""
    def mm(self, acc, a, b):
        ah, bh = bf16(a), bf16(b)
        for k0 in range(0, a.shape[1], 16):
            ks = slice(k0, k0 + 16)
            acc = f32(acc + ah[:, ks] @ bh[ks])
        return acc


def direct(dL, dP, G, k, e, qs, Lc):
    """The three sums as written (einsum over explicit Gam[r, j, d] = exp(G_r - G_j), j <= r < Lc)."""
    r, j = np.indices((C, C))
    valid = ((j <= r) & (r < Lc))[:, :, None]
    with np.errstate(over="ignore", invalid="ignore"):
        diff = G[:, None, :] - G[None, :, :]
        Gam = np.where(valid, np.exp(np.where(valid, diff, 0.0)), 0.0)
    deL = np.einsum("rj,jd,rjd->rd", np.tril(dL, -1), k, Gam)
    dqP = np.einsum("rj,jd,rjd->rd", dP, k, Gam)
    dkLP = np.einsum("ir,id,ird->rd", np.tril(dL, -1), e, Gam) + np.einsum("ir,id,ird->rd", dP, qs, Gam)
    return deL, dqP, dkLP


def direct_loops(dL, dP, G, k, e, qs, Lc):
    """The float32 B9's loops (bwd_common.cuh), in float64, channels as vectors."""
    deL, dqP, dkLP = (np.zeros_like(k) for _ in range(3))
    for r in range(Lc):
        for j in range(r + 1):
            kg = k[j] * np.exp(G[r] - G[j])
            dqP[r] += dP[r, j] * kg
            if j < r:
                deL[r] += dL[r, j] * kg
        for i in range(r, Lc):
            src = dP[i, r] * qs[i]
            if i > r:
                src = src + dL[i, r] * e[i]
            dkLP[r] += src * np.exp(G[i] - G[r])
    return deL, dqP, dkLP


def levels(dL, dP, Gst, k, e, qs, KP, dev):
    """The level-factored B9 as the CUDA rung would run it, per 64-channel slab and level.
    Gst: G as the kernel stages it (0 for rows >= Lc)."""
    out = {n: np.zeros((C, KP)) for n in ("deL", "dqP", "dkLP")}
    rows = np.arange(C)
    A_L, A_P = dev.r(np.tril(dL, -1)), dev.r(np.tril(dP, -1))  # level products: strictly lower
    for kk in range(0, KP, 64):
        sl = slice(kk, kk + 64)
        G = Gst[:, sl]
        for s in LEVELS:
            # Build: F (float32), X = [left: e F | right: k F], Y = [left: q~ F | right: 0]
            left, m = ref_row(rows, s)
            diff = np.where(left[:, None], G - G[m], G[m] - G)
            if dev.clamp:
                diff = np.minimum(diff, 0.0)  # rows >= Lc (G staged 0): keeps F <= 1, no inf * 0
            with np.errstate(over="ignore"):
                F = dev.r(np.exp(dev.r(diff)))
            X = dev.r(np.where(left[:, None], e[:, sl], k[:, sl]) * F)
            Y = dev.r(np.where(left[:, None], qs[:, sl], 0.0) * F)
            Fe = bf16(F) if dev.f_bf16 else F  # epilogue factor (must stay float32)
            mask = level_mask(s)
            # de^L, dq^P: output block bi (left rows), contraction over the level's blocks bj
            for bi in sorted({b for b, _ in TABLE[s]}):
                ro = slice(16 * bi, 16 * bi + 16)
                aL, aP = np.zeros((16, 64)), np.zeros((16, 64))
                for b, bj in TABLE[s]:
                    if b != bi:
                        continue
                    co = slice(16 * bj, 16 * bj + 16)
                    mk = mask[ro, co] if bi == bj else True  # A fragment mask, diagonal blocks only
                    aL = dev.mm(aL, np.where(mk, A_L[ro, co], 0.0), X[co])
                    aP = dev.mm(aP, np.where(mk, A_P[ro, co], 0.0), X[co])
                out["deL"][ro, sl] = dev.r(out["deL"][ro, sl] + Fe[ro] * aL)
                out["dqP"][ro, sl] = dev.r(out["dqP"][ro, sl] + Fe[ro] * aP)
            # dk^{LP}: output block bj (right rows), contraction over the level's blocks bi (transposed)
            for bj in sorted({b for _, b in TABLE[s]}):
                ro = slice(16 * bj, 16 * bj + 16)
                acc = np.zeros((16, 64))
                for bi, b in TABLE[s]:
                    if b != bj:
                        continue
                    co = slice(16 * bi, 16 * bi + 16)
                    mk = mask[co, ro].T if bi == bj else True
                    acc = dev.mm(acc, np.where(mk, A_L[co, ro].T, 0.0), X[co])
                    acc = dev.mm(acc, np.where(mk, A_P[co, ro].T, 0.0), Y[co])
                out["dkLP"][ro, sl] = dev.r(out["dkLP"][ro, sl] + Fe[ro] * acc)
    # Diagonal terms (exp(0) = 1), float32, elementwise
    dg = np.diag(dP)[:, None]
    out["dqP"] = dev.r(out["dqP"] + dg * k)
    out["dkLP"] = dev.r(out["dkLP"] + dg * qs)
    return out["deL"], out["dqP"], out["dkLP"]


def make_case(rng, Lc, K, gate, op):
    KP = (K + 63) // 64 * 64
    dL = np.where(np.tri(C, k=-1, dtype=bool), f32(rng.standard_normal((C, C))), 0.0)
    dP = np.where(np.tri(C, dtype=bool), f32(rng.standard_normal((C, C))), 0.0)
    dL[Lc:], dP[Lc:] = 0.0, 0.0
    k, q = np.zeros((C, KP)), np.zeros((C, KP))
    k[:Lc, :K] = bf16(rng.standard_normal((Lc, K)))
    q[:Lc, :K] = bf16(rng.standard_normal((Lc, K)))
    if gate == "zero":
        g = np.zeros((Lc, K))
    elif gate == "extreme":
        g = np.full((Lc, K), -1000.0)
    elif gate == "mixed":  # per channel: -1000, or a random log-decay in (-3, 0)
        g = np.where(rng.random(K) < 0.5, -1000.0, -3.0 * rng.random((Lc, K)))
    else:  # random per-channel log-decays over four decades
        g = -np.exp(rng.uniform(np.log(1e-3), np.log(3.0), (Lc, K)))
    g = f32(g)
    G = np.zeros((C, KP))  # staged: 0 for rows >= Lc and channels >= K, as the kernel stages it
    G[:Lc, :K] = np.cumsum(g, axis=0)
    if op == "KDA":
        beta = f32(rng.random(C))
        e = f32(beta[:, None] * k)
    else:  # GDN2: e = b (.) k, b per channel
        e = f32(f32(rng.random((C, KP))) * k)
    e[Lc:] = 0.0
    scale = K ** -0.5
    qs = f32(scale * q)
    return dL, dP, G, k, e, qs, KP


def rel_max(x, y):
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return np.inf
    return np.max(np.abs(x - y)) / max(np.max(np.abs(x)), 1e-300)


def rel_rms(x, y):
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return np.inf
    return np.sqrt(np.mean((x - y) ** 2)) / max(np.sqrt(np.mean(x ** 2)), 1e-300)


def design_counts():
    """Per-warp k-steps (warp w: rows 16 (w & 3), channels 32 (w >> 2)), mma, exp2, smem bytes."""
    ksteps = []
    for w in range(8):
        mb, n = w & 3, 0
        for s in LEVELS:
            n += 2 * sum(1 for bi, _ in TABLE[s] if bi == mb)  # de^L, dq^P: contraction blocks
            n += 2 * sum(1 for _, bj in TABLE[s] if bj == mb)  # dk^{LP}: dL^T X and dP^T Y
        ksteps.append(n)
    slabs = 2  # K = 128
    mma = max(ksteps) * 4 * 3 * slabs  # 4 n8-tiles (32 channels) x 3 hi/lo terms
    exp_new = C * 64 * len(LEVELS) * slabs
    exp_old = sum((r + 1) + (C - r) for r in range(C)) * 128
    tile = 64 * 72 * 2
    smem1 = 16384 + 4 * tile + 4 * tile + 64 * 64 * 8
    return ksteps, mma, exp_new, exp_old, smem1


def main():
    check_table()
    rng = np.random.default_rng(20261130)
    worst = {}
    worst_f64 = 0.0
    sens = {"F in bf16": 0.0, "B without lo": 0.0}
    lines = []
    for op in ("KDA", "GDN2"):
        for gate in ("random", "zero", "extreme", "mixed"):
            w64 = [0.0] * 3
            wem = [0.0] * 3
            for Lc in (64, 37, 1):
                for K in (128, 100, 19):
                    dL, dP, G, k, e, qs, KP = make_case(rng, Lc, K, gate, op)
                    d = direct(dL, dP, G, k, e, qs, Lc)
                    if gate in ("random", "mixed") and Lc == 37:
                        dl = direct_loops(dL, dP, G, k, e, qs, Lc)
                        for x, y, n in zip(d, dl, ("deL", "dqP", "dkLP")):
                            if rel_max(y, x) > 1e-14:
                                fail(f"einsum direct vs loops {op} {gate} Lc={Lc} K={K} {n}: {rel_max(y, x):.1e}")
                    t = levels(dL, dP, G, k, e, qs, KP, Dev(False))
                    if Lc < C:  # the alternative to the clamp: G continued as G_{Lc-1} past Lc
                        Gx = G.copy()
                        Gx[Lc:] = G[Lc - 1]
                        tx = levels(dL, dP, Gx, k, e, qs, KP, Dev(False, clamp=False))
                        ex = max(rel_max(x[:Lc, :K], y[:Lc, :K]) for x, y in zip(d, tx))
                        if ex > F64_BOUND:
                            fail(f"G continued past Lc without clamp {op} {gate} Lc={Lc} K={K}: {ex:.1e}")
                    te = levels(dL, dP, G, k, e, qs, KP, Dev(True))
                    for a, (x, y, z) in enumerate(zip(d, t, te)):
                        x, y, z = x[:Lc, :K], y[:Lc, :K], z[:Lc, :K]
                        w64[a] = max(w64[a], rel_max(x, y))
                        wem[a] = max(wem[a], rel_rms(x, z))
                    if gate in ("random", "mixed") and K == 128 and Lc == 64:
                        for name, dev in (("F in bf16", Dev(True, f_bf16=True)), ("B without lo", Dev(True, b_lo=False))):
                            ts = levels(dL, dP, G, k, e, qs, KP, dev)
                            sens[name] = max(sens[name], max(rel_rms(x[:Lc, :K], y[:Lc, :K]) for x, y in zip(d, ts)))
            worst_f64 = max(worst_f64, max(w64))
            for a, n in enumerate(("deL", "dqP", "dkLP")):
                worst[n] = max(worst.get(n, 0.0), wem[a])
            lines.append(f"{op:4s} {gate:7s} | " + "  ".join(f"{x:8.1e}" for x in w64) + " | "
                         + "  ".join(f"{x:8.1e}" for x in wem))
            if max(w64) > F64_BOUND:
                fail(f"{op} {gate}: float64 levels vs direct {max(w64):.1e} > {F64_BOUND:.0e}")
            if max(wem) > EMU_BOUND:
                fail(f"{op} {gate}: emulated device vs direct relative RMS {max(wem):.1e} > {EMU_BOUND:.0e}")
    print("B9 by levels vs direct sums, worst over Lc in {64, 37, 1} and K in {128, 100, 19}")
    print("op   gate    | float64 max|diff|/max|direct|: deL dqP dkLP | emulated bf16 hi+lo, rel RMS: deL dqP dkLP")
    for ln in lines:
        print(ln)
    for name, v in sens.items():
        print(f"sensitivity (must exceed the bound {EMU_BOUND:.0e}): {name}: relative RMS {v:.1e}")
        if not v > EMU_BOUND:
            fail(f"sensitivity: {name} gives {v:.1e}, not above the bound: the emulation does not discriminate")
    ksteps, mma, exp_new, exp_old, smem1 = design_counts()
    if len(set(ksteps)) != 1:
        fail(f"design: per-warp k-steps unbalanced {ksteps}")
    print(f"design (K = 128): k-steps of 16 per warp and slab {ksteps}; mma m16n8k16 per warp {mma}; "
          f"exp2 per block {exp_new} (float32 loop: {exp_old}, {exp_old / exp_new:.1f}x); "
          f"shared memory, one level per round: {smem1} B")
    print(f"worst float64 {worst_f64:.1e} (bound {F64_BOUND:.0e}); worst emulated relative RMS "
          + ", ".join(f"{n} {x:.1e}" for n, x in worst.items()) + f" (bound {EMU_BOUND:.0e})")
    if failures:
        print(f"FAIL ({len(failures)} checks)")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
