#!/usr/bin/env python3
"""optimized/cuda/bench/models/v7_layout_model.py -- the liveness check of forward rung 7's shared layout
(v7_overlap.cu, V7Smem): every array as (byte offset, bytes, first epoch, last epoch), the epochs being the
barrier intervals of the kernel (E1 loads, E2 cumsum, E3 L / P / q~, E4 A's diagonal + A's zeros + P out,
E5-E7 A's levels, E8 split + e / k~, E9 w_aux, E10 / E11 u per value tile, folded onto 10 and 11).
Two arrays that share a byte must not share an epoch (the barrier between their epochs orders the last
read of one before the first write of the other). The offsets mirror V7Smem by hand: keep them in step.
Also prints the live bytes per epoch, the total against 3 blocks per SM (228 KB, 1 KB reserved per
block), v4's total, and checks that a deliberately overlapped layout (e over sA) is reported.
Exit status 1 on any violation. Runs in well under a second."""
import sys

SM_BYTES, RESERVED = 228 * 1024, 1024


LDF = 72  # V7Smem::LDF, the float32 sL / sA row stride (65 before session 14)


def layout(KP, e_region=None):
    LDK = KP + 8
    tile, fmat, p72 = 64 * LDK * 2, 64 * LDF * 4, 64 * 72 * 2
    R = max(tile, fmat)
    sK, R1 = 0, tile
    R2 = R1 + R
    R3 = R2 + R
    sBeta = R3 + 2 * p72
    sG = sBeta + 256
    end = sG + 256
    eR = R2 if e_region is None else e_region
    arrays = [("k (sK)", sK, tile, 1, 8), ("u0 lo (sK)", sK, tile, 10, 11),
              ("q (sQ)", R1, tile, 1, 3), ("A (sA)", R1, fmat, 4, 8), ("w_aux staging (sW)", R1, tile, 9, 10),
              ("L (sL)", R2, fmat, 1, 7), ("e (sE)", eR, tile, 8, 9), ("u0 hi (sE)", eR, tile, 10, 11),
              ("P (sP)", R3, p72, 1, 4), ("scratch (sT)", R3 + p72, 8 * 16 * 9 * 4, 5, 7),
              ("A hi (sAh)", R3, p72, 8, 11), ("A lo (sAl)", R3 + p72, p72, 8, 11),
              ("beta (sBeta)", sBeta, 256, 1, 11), ("G (sG)", sG, 256, 1, 8)]
    return arrays, end


def violations(arrays, end):
    bad = []
    for i, a in enumerate(arrays):
        if a[1] + a[2] > end:
            bad.append(f"{a[0]} ends past the allocation ({a[1] + a[2]} > {end})")
        for b in arrays[i + 1:]:
            share_bytes = a[1] < b[1] + b[2] and b[1] < a[1] + a[2]
            share_epoch = not (a[4] < b[3] or b[4] < a[3])
            if share_bytes and share_epoch:
                bad.append(f"{a[0]} and {b[0]} share bytes in epochs {max(a[3], b[3])}-{min(a[4], b[4])}")
    return bad


def main():
    ok = True
    for KP in (64, 128):
        arrays, end = layout(KP)
        bad = violations(arrays, end)
        live = [sum(a[2] for a in arrays if a[3] <= e <= a[4]) for e in range(1, 12)]
        LDK = KP + 8
        v4 = 3 * 64 * LDK * 2 + 2 * 64 * 65 * 4 + 3 * 64 * 72 * 2 + 512
        print(f"KP = {KP}: {end} B, {SM_BYTES // (end + RESERVED)} blocks per SM by shared memory "
              f"(v4: {v4} B, {SM_BYTES // (v4 + RESERVED)}); live bytes per epoch E1..E11: {live}")
        for b in bad:
            print("  VIOLATION:", b)
        ok &= not bad and SM_BYTES // (end + RESERVED) >= 3
        # check of the check: e placed over sA (mutant 230's layout) must be reported
        arrays_m, end_m = layout(KP, e_region=64 * LDK * 2)
        caught = violations(arrays_m, end_m)
        print(f"  e over sA (mutant 230's layout): {len(caught)} violation(s) reported, e.g. {caught[0] if caught else None}")
        ok &= bool(caught)
    print("layout OK" if ok else "layout FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
