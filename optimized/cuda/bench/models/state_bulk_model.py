#!/usr/bin/env python3
"""optimized/cuda/bench/models/state_bulk_model.py -- an integer model of v2_state's kBulk
(v2_tensorcore.cu, LINATTN_STATE_BULK=1), written before any GPU ran it: the chunk tiles loaded by
one cp.async.bulk per tile row, completing on one mbarrier per stage.

For K = V = 128 and for ragged K = 100, V = 200 (KP = 128, VP = 256), BV = 16, 32, 64, forward and
kBwd, on a packed batch (sequence lengths 130, 0, 64, 1: ragged chunks, an empty sequence), it replays
the byte ranges of every copy of every chunk that issue() makes, with the kernel's index math, and
checks that
  1. each copy is legal: size > 0 and a multiple of 16, source and destination 16-byte aligned
     (workspace base 256-byte aligned, as cudaMalloc's), the destination inside its stage's tile;
  2. the copies never overlap, and write exactly the shared bytes (and read exactly the global
     bytes) that the cp.async path writes (reads) -- whose zero fill (v0 + c4 >= VP) never occurs;
  3. the shared bytes the mma code reads (ldmatrix of W, Qg, Kd, P; float2 of u; gC) are all written,
     the row padding and the barrier slot never;
  4. the expect-tx total state_bulk_tx(KP, BV, kBwd) equals the bytes issued per chunk;
  5. the mbarrier protocol (init count 1; thread 0's arrive.expect_tx for chunk ci + 1 before the
     block barrier, copies after it, completing in any order and at any later time; the wait of
     chunk ci on barrier ci & 1 with parity (ci >> 1) & 1) never lets a wait pass before all of its
     chunk's bytes landed, never deadlocks, never drives the tx-count negative (random schedules).
Exits 1 on a mismatch, 77 (skipped) without numpy."""
import random
import sys
try:
    import numpy as np
except ImportError:
    print("SKIPPED: numpy not installed")
    sys.exit(77)

C, THREADS = 64, 256
ldk = lambda KP: KP + 8
vpad = lambda V: (V + 63) // 64 * 64
fails = []


def check(ok, what):
    if not ok:
        fails.append(what)
        print("FAIL:", what)


def smem_layout(KP, BV, NS=2, bulk=True):  # StateSmem
    LDK, LDV, LDU = ldk(KP), BV + 8, BV + 4
    tileK = 64 * LDK * 2
    L = {"LDK": LDK, "LDV": LDV, "LDU": LDU, "tileK": tileK, "sW": 0}
    L["sQg"] = L["sW"] + NS * tileK
    L["sKd"] = L["sQg"] + NS * tileK
    L["sP"] = L["sKd"] + NS * tileK
    L["sU"] = L["sP"] + NS * 64 * 72 * 2
    L["sgC"] = L["sU"] + NS * 64 * LDU * 4
    L["sSh"] = L["sgC"] + NS * KP * 4
    L["sSl"] = L["sSh"] + KP * LDV * 2
    L["sVn"] = L["sSl"] + KP * LDV * 2
    L["sBar"] = L["sVn"] + 64 * LDV * 2
    L["bytes"] = L["sBar"] + ((NS * 8 + 15) // 16 * 16 if bulk else 0)
    return L


def ws_layout(blocks, KP, V):  # v2_ws, byte offsets from the workspace base
    w = 0
    qg = w + blocks * C * KP * 2
    kd = qg + blocks * C * KP * 2
    P = kd + blocks * C * KP * 2
    u = P + blocks * C * C * 2
    gC = u + blocks * C * vpad(V) * 4
    return {"w": w, "qg": qg, "kd": kd, "P": P, "u": u, "gC": gC}


def state_bulk_tx(KP, BV, bwd):
    return 64 * ((2 if bwd else 3) * KP * 2 + (0 if bwd else 128) + BV * 4) + KP * 4


def bulk_copies(L, W, KP, BV, bwd, V, cw, stg, v0, NS=2):
    """issue() with kBulk: (dst, src, size) in bytes for copy j = 0 .. 64 NR, as the kernel decodes j."""
    VP = vpad(V)
    NR = 3 if bwd else 5
    tileKs = W["qg"] - W["w"]
    dW = L["sW"] + stg * L["tileK"]
    dP = L["sP"] + stg * 64 * 72 * 2
    dU = L["sU"] + stg * 64 * L["LDU"] * 4
    dG = L["sgC"] + stg * KP * 4
    out = []
    for j in range(64 * NR + 1):
        t, i = j >> 6, j & 63
        if t == NR:
            out.append((dG, W["gC"] + cw * KP * 4, KP * 4))
        elif t == NR - 1:
            out.append((dU + i * L["LDU"] * 4, W["u"] + ((cw * 64 + i) * VP + v0) * 4, BV * 4))
        elif not bwd and t == 3:
            out.append((dP + i * 72 * 2, W["P"] + (cw * 64 + i) * 64 * 2, 128))
        else:
            tt = 2 * t if bwd else t
            out.append((dW + i * L["LDK"] * 2 + tt * NS * L["tileK"], W["w"] + tt * tileKs + (cw * 64 + i) * KP * 2,
                        KP * 2))
    return out


def cpasync_copies(L, W, KP, BV, bwd, V, cw, stg, v0, NS=2):
    """The default issue(): 16-byte cp.async (cp_async_wqk_tiles, cp_async_p_tile, the u loop,
    cp_async_gc) as (dst, src, src_bytes) with src_bytes 0 meaning zero fill."""
    VP, LDK, LDU = vpad(V), L["LDK"], L["LDU"]
    dW = L["sW"] + stg * L["tileK"]
    dQ = L["sQg"] + stg * L["tileK"]
    dK = L["sKd"] + stg * L["tileK"]
    dP = L["sP"] + stg * 64 * 72 * 2
    dU = L["sU"] + stg * 64 * LDU * 4
    dG = L["sgC"] + stg * KP * 4
    out = []
    PK = KP // 8
    for idx in range(64 * PK):
        i, d8 = idx // PK, (idx % PK) * 8
        src = ((cw * 64 + i) * KP + d8) * 2
        out.append((dW + (i * LDK + d8) * 2, W["w"] + src, 16))
        if not bwd:
            out.append((dQ + (i * LDK + d8) * 2, W["qg"] + src, 16))
        out.append((dK + (i * LDK + d8) * 2, W["kd"] + src, 16))
    if not bwd:
        for idx in range(64 * 8):
            i, j8 = idx >> 3, (idx & 7) * 8
            out.append((dP + (i * 72 + j8) * 2, W["P"] + ((cw * 64 + i) * 64 + j8) * 2, 16))
    for idx in range(64 * (BV // 4)):
        i, c4 = idx // (BV // 4), (idx % (BV // 4)) * 4
        out.append((dU + (i * LDU + c4) * 4, W["u"] + ((cw * 64 + i) * VP + v0 + c4) * 4, 16 if v0 + c4 < VP else 0))
    for idx in range(KP // 4):
        out.append((dG + idx * 16, W["gC"] + (cw * KP + idx * 4) * 4, 16))
    return out


def mma_reads(L, KP, BV, bwd, stg):
    """Shared bytes of stage stg read by the chunk loop (ldmatrix rows of 16 bytes, float2 of u, gC)."""
    LDK, LDU, tileK = L["LDK"], L["LDU"], L["tileK"]
    sW = L["sW"] + stg * tileK
    sQg = L["sQg"] + stg * tileK
    sKd = L["sKd"] + stg * tileK
    sP = L["sP"] + stg * 64 * 72 * 2
    sU = L["sU"] + stg * 64 * LDU * 4
    sgC = L["sgC"] + stg * KP * 4
    rd = set()
    rows16 = lambda base: set(range(base, base + 16))
    MT, ONT = KP // 16, BV // 16
    for warp in range(8):
        wm, sm = warp & 3, warp % MT
        wn0 = (warp >> 2) * ONT
        for lane in range(32):
            mi, rr, g8, t4 = lane >> 3, lane & 7, lane >> 2, lane & 3
            for k0 in range(0, KP, 16):  # load_a of W and Qg
                r, c = 16 * wm + (lane & 15), k0 + (lane >> 4) * 8
                rd |= rows16(sW + (r * LDK + c) * 2)
                if not bwd:
                    rd |= rows16(sQg + (r * LDK + c) * 2)
            for k0 in range(0, 64, 16):  # load_a_t of Kd; load_a of P (lower triangle)
                r, c = k0 + rr + (mi >> 1) * 8, 16 * sm + (mi & 1) * 8
                rd |= rows16(sKd + (r * LDK + c) * 2)
                if not bwd and k0 <= 16 * wm:
                    r, c = 16 * wm + (lane & 15), k0 + (lane >> 4) * 8
                    rd |= rows16(sP + (r * 72 + c) * 2)
            for nt in range(ONT):  # u: float2 at rows i, i + 8 (o's n-tiles wn0 ..)
                i, col = 16 * wm + g8, 8 * (wn0 + nt) + 2 * t4
                for ii in (i, i + 8):
                    rd |= set(range(sU + (ii * LDU + col) * 4, sU + (ii * LDU + col) * 4 + 8))
            for r in (16 * sm + g8, 16 * sm + g8 + 8):  # state_frag_decay's gC
                rd |= set(range(sgC + r * 4, sgC + r * 4 + 4))
    return rd


def bytes_of(copies, use_dst):
    s = set()
    for dst, src, n in copies:
        a = dst if use_dst else src
        s |= set(range(a, a + n))
    return s


def case(K, V, BV, bwd, H=2, lens=(130, 0, 64, 1)):
    KP = 64 if K <= 64 else 128
    VP = vpad(V)
    L = smem_layout(KP, BV)
    check(L["bytes"] <= 227 * 1024, f"smem {L['bytes']} over 227 KB (KP {KP} BV {BV})")
    check(L["sBar"] % 16 == 0 and L["bytes"] == smem_layout(KP, BV, bulk=False)["bytes"] + 16,
          "barrier slot: 16-byte aligned, 16 bytes, default size unchanged")
    chunks = [(len_ + C - 1) // C for len_ in lens]
    num_chunks = sum(chunks)
    W = ws_layout(num_chunks * H, KP, V)
    nvt = (V + BV - 1) // BV
    c_first = np.concatenate([[0], np.cumsum(chunks)[:-1]])
    tx = state_bulk_tx(KP, BV, bwd)
    tag = f"K {K} V {V} BV {BV} {'bwd' if bwd else 'fwd'}"
    padding = set()
    for stg in range(2):
        for name in ("sW", "sQg", "sKd"):
            if bwd and name == "sQg":
                continue
            for i in range(64):
                a = L[name] + stg * L["tileK"] + (i * L["LDK"] + KP) * 2
                padding |= set(range(a, a + 16))
        for i in range(64):
            a = L["sP"] + stg * 64 * 72 * 2 + (i * 72 + 64) * 2
            padding |= set(range(a, a + 16))
            a = L["sU"] + stg * 64 * L["LDU"] * 4 + (i * L["LDU"] + BV) * 4
            padding |= set(range(a, a + 16))
    bar = set(range(L["sBar"], L["sBar"] + 16))
    for stg in range(2):
        reads = mma_reads(L, KP, BV, bwd, stg)
        for n, nc in enumerate(chunks):
            for h in range(H):
                for vt in sorted({0, nvt - 1}):  # the first and the last value tile
                    v0 = vt * BV
                    for ci in range(nc):
                        if ci % 2 != stg:
                            continue
                        cw = (int(c_first[n]) + ci) * H + h
                        bl = bulk_copies(L, W, KP, BV, bwd, V, cw, stg, v0)
                        cp = cpasync_copies(L, W, KP, BV, bwd, V, cw, stg, v0)
                        # 1. legality
                        for dst, src, nb in bl:
                            if not (nb > 0 and nb % 16 == 0 and dst % 16 == 0 and src % 16 == 0):
                                check(False, f"{tag}: illegal copy {dst} {src} {nb}")
                                return
                        # 2. no overlap; same bytes as cp.async; cp.async never zero-fills
                        dsts = sum(nb for _, _, nb in bl)
                        wr = bytes_of(bl, True)
                        check(len(wr) == dsts, f"{tag}: bulk copies overlap")
                        check(all(nb == 16 for _, _, nb in cp), f"{tag}: cp.async zero fill reached (v0 {v0})")
                        check(wr == bytes_of(cp, True), f"{tag}: bulk and cp.async write different shared bytes")
                        check(bytes_of(bl, False) == bytes_of(cp, False), f"{tag}: different global bytes read")
                        # 3. reads covered; padding and barrier untouched
                        check(reads <= wr, f"{tag}: mma reads {len(reads - wr)} unwritten bytes")
                        check(not (wr & padding) and not (wr & bar), f"{tag}: copy into padding or barrier")
                        check(not (reads & padding), f"{tag}: mma reads row padding")
                        # 4. expect-tx
                        check(dsts == tx, f"{tag}: issued {dsts} bytes, expect-tx {tx}")
                        if fails:
                            return
    print(f"ok {tag}: {64 * (3 if bwd else 5) + 1} copies, {tx} bytes per chunk, smem {L['bytes']} B")


def protocol(nchunks, trials, seed):
    """Event model of the two mbarriers (PTX ISA: a phase completes when its pending arrivals and its
    tx-count are both 0; try_wait.parity(p) is true once the phase of parity p has completed, i.e.
    while the current phase's parity differs from p)."""
    rnd = random.Random(seed)
    for _ in range(trials):
        pend = [1, 1]      # pending arrivals of the current phase (init count 1)
        tx = [0, 0]
        phase = [0, 0]     # completed phases
        landed = {}        # chunk -> bytes landed
        inflight = []      # (chunk, stage, bytes)
        NB = 4             # copies per chunk (bytes 1 each here; only the counting matters)

        def complete_one():
            k = rnd.randrange(len(inflight))
            c, s, b = inflight.pop(k)
            tx[s] -= b
            check(tx[s] >= 0, f"tx-count negative: a copy of chunk {c} landed before its bytes were expected")
            landed[c] = landed.get(c, 0) + b
            if pend[s] == 0 and tx[s] == 0:
                phase[s] += 1; pend[s] = 1

        def arrive_expect(s, b):
            tx[s] += b; pend[s] -= 1
            if pend[s] == 0 and tx[s] == 0:
                phase[s] += 1; pend[s] = 1

        def try_wait(s, parity):
            return (phase[s] & 1) != parity  # current phase parity != parity

        def issue(c):
            for _ in range(NB):
                inflight.append((c, c % 2, 1))
                if rnd.random() < 0.5 and inflight:
                    complete_one()

        if nchunks > 0:
            arrive_expect(0, NB)   # thread 0, before __syncthreads
            issue(0)               # after it
        for ci in range(nchunks):
            s = ci % 2
            spins = 0
            while not try_wait(s, (ci >> 1) & 1):
                if not inflight:
                    check(False, f"deadlock waiting for chunk {ci}")
                    return
                complete_one(); spins += 1
            check(landed.get(ci, 0) == NB, f"wait of chunk {ci} passed with {landed.get(ci, 0)} of {NB} copies")
            check(phase[s] == (ci >> 1) + 1, f"chunk {ci}: barrier {s} at phase {phase[s]}")
            if ci + 1 < nchunks:
                arrive_expect((ci + 1) % 2, NB)  # thread 0, before the block barrier
                issue(ci + 1)                    # every thread, after it
            while inflight and rnd.random() < 0.3:
                complete_one()
            if fails:
                return
    print(f"ok mbarrier protocol: {trials} random schedules of {nchunks} chunks")


for K, V in ((128, 128), (100, 200), (64, 64)):
    for BV in (16, 32, 64):
        for bwd in (False, True):
            case(K, V, BV, bwd)
            if fails:
                sys.exit(1)
for n in (0, 1, 2, 3, 7):
    protocol(n, 200, n)
if fails:
    sys.exit(1)
print("all checks passed")
