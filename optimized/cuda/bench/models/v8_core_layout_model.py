#!/usr/bin/env python3
"""optimized/cuda/bench/models/v8_core_layout_model.py -- the shared-memory layout algebra of forward rung 8
(v8_wgmma.cu), checked on the CPU: that what the kernel writes is what its wgmma descriptors describe.
A derivation check of the design: the model holds its own copies of the kernel's expressions (core_off,
the descriptor strides, the load and store index math) and does not read the .cu, so edit the two together.

wgmma reads a K-major bf16 operand without swizzle as the PTX ISA's canonical layout
((8, m), (8, 2 k)) : ((8, SBO), (1, LBO)) in elements (9.7.15.5.1.2: core matrices of 8 rows x 16 bytes;
SBO between 8-row groups, LBO between core matrices adjacent in K). Rung 8 places element (r, c) of a
64 x KP tile (w_aux, q~) or of a BV x KP tile (S^T) at core_off<PK>(r, c) = ((r / 8) PK + c / 8) 64 +
(r % 8) 8 + c % 8 and builds, for k step s, descriptors with start = tile + 128 s elements, LBO = 128
bytes, SBO = PK 128 bytes. For KP = 64 and 128, BV = 16, 32, 64 (and both column halves of the split
variant, S^T from row cb = g BV / 2) this model checks that
  1. core_off is a bijection of the tile onto [0, rows x KP) (no two elements share a slot, none lost);
  2. the canonical layout at each k step's descriptor, read element by element (row r, column kk of
     the 16-column slab), finds exactly element (r, 16 s + kk) of the tile (the A operand: rows = M;
     the B operand S^T: rows = N, so the product is sum_k A[m][k] S^T[n][k] = (A S)[m][n]);
  3. the tile loads in shared-memory order (issue(): piece idx -> core matrix idx / 8, its row idx % 8)
     write to idx x 8, equal to core_off of the (row, 8-column group) they read, and cover every
     16-byte piece once;
  4. the S^T stores of store_state_core_hilo (st fragment (row 16 sm + g8 + 8 h, column 8 (sn0 + nt) +
     2 t4 + e) of S to S^T[column][row]) hit every element of the BV x KP tile exactly once over the 8
     warps' lanes, and (bank check) each warp-wide 2-byte store instruction touches 32 distinct 2-byte
     slots in 16 distinct 4-byte words, two lanes per word (no bank conflict).
The descriptor bit fields themselves (start >> 4, LBO >> 4 at bit 16, SBO >> 4 at bit 32, layout 0) are
not modelled: the device test (bit for bit with rung 7) checks them. Exits 1 on a mismatch."""
import sys

C = 64


def core_off(PK, r, c):
    return (((r >> 3) * PK + (c >> 3)) << 6) + ((r & 7) << 3) + (c & 7)


def canonical(start, lbo_b, sbo_b, r, kk):
    """Element offset of (row r, column kk < 16) of a K-major no-swizzle operand whose descriptor starts
    at element `start` (PTX canonical layout ((8,m),(8,2k)):((8,SBO),(1,LBO)), strides in elements)."""
    lbo, sbo = lbo_b // 2, sbo_b // 2
    return start + (r % 8) * 8 + (r // 8) * sbo + (kk % 8) + (kk // 8) * lbo


def fail(msg):
    print("MISMATCH:", msg)
    sys.exit(1)


def check_tile(PK, rows, row0=0):
    KP = PK * 8
    slots = {}
    for r in range(rows):
        for c in range(KP):
            slots.setdefault(core_off(PK, r, c), []).append((r, c))
    if sorted(slots) != list(range(rows * KP)) or any(len(v) != 1 for v in slots.values()):
        fail(f"core_off is not a bijection (PK {PK}, rows {rows})")
    base = row0 // 8 * PK * 64  # sBh = sSh + (cb >> 3) * PK * 64
    for s in range(KP // 16):
        for r in range(rows - row0 if row0 else rows):
            for kk in range(16):
                off = canonical(base + 128 * s, 128, PK * 128, r, kk)
                if off != core_off(PK, row0 + r, 16 * s + kk):
                    fail(f"descriptor of k step {s} reads the wrong element at ({r}, {kk}), PK {PK}, row0 {row0}")


def check_loads(PK):
    seen = set()
    for idx in range(64 * PK):
        cm = idx >> 3
        i, d8 = (cm // PK) * 8 + (idx & 7), (cm % PK) * 8
        if idx * 8 != core_off(PK, i, d8):
            fail(f"load piece {idx} lands at {idx * 8}, not at core_off({i}, {d8})")
        seen.add((i, d8))
    if len(seen) != 64 * PK:
        fail("the loads do not cover every 16-byte piece once")


def check_state_stores(KP, BV):
    PK, MT = KP // 8, KP // 16
    NG = 8 // MT
    SNT = BV // 8 // NG
    hit = {}
    for warp in range(8):
        sm, sn0 = warp % MT, (warp // MT) * SNT
        for nt in range(SNT):
            for h in range(2):
                for e in range(2):
                    words = {}
                    for lane in range(32):
                        g8, t4 = lane >> 2, lane & 3
                        row, col = 16 * sm + g8 + 8 * h, 8 * (sn0 + nt) + 2 * t4 + e
                        off = core_off(PK, col, row)  # S^T[col][row]
                        hit[off] = hit.get(off, 0) + 1
                        words.setdefault(off // 2, set()).add(off)
                    if len(words) != 16 or any(len(v) != 2 for v in words.values()):
                        fail(f"S^T store (KP {KP}, BV {BV}, warp {warp}, nt {nt}, h {h}, e {e}): "
                             f"{len(words)} words, not 16 with two lanes each")
                    if len({w % 32 for w in words}) != len(words):
                        fail(f"S^T store (KP {KP}, BV {BV}): two words in one bank")
    if sorted(hit) != list(range(BV * KP)) or any(v != 1 for v in hit.values()):
        fail(f"S^T stores do not write every element once (KP {KP}, BV {BV})")


def main():
    n = 0
    for KP in (64, 128):
        PK = KP // 8
        check_tile(PK, 64)  # w_aux, q~ (A operand, M = 64)
        check_loads(PK)
        n += 2
        for BV in (16, 32, 64):
            check_tile(PK, BV)  # S^T (B operand, N = BV)
            check_tile(PK, BV, row0=BV // 2)  # the split variant's second half (cb = BV / 2)
            check_state_stores(KP, BV)
            n += 3
    print(f"OK: {n} checks of rung 8's core-matrix layouts (KP 64 / 128, BV 16 / 32 / 64)")


if __name__ == "__main__":
    main()
