#!/usr/bin/env python3
"""optimized/cuda/bench/make_mutants.py -- break the CUDA kernels on purpose, to watch the tests fail.

Copies the source tree to DEST (default /tmp/linattn_mutants), plants every mutation below behind a
run-time switch (environment variable LINATTN_MUTANT=<n>, read by forward_device), and configures a
build there; the committed sources are never touched. Build with
  cmake --build DEST/build --target test_cuda_forward test_cuda_backward -j2
and run the test binary with LINATTN_MUTANT=n: each mutant must make the named tests fail, and
LINATTN_MUTANT unset must pass (device_run.sh's 'mutants' stage does this on the GPU machine).
"""
import os
import shutil
import subprocess
import sys

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
DEST = sys.argv[1] if len(sys.argv) > 1 else "/tmp/linattn_mutants"

# (number, file, original text, mutated text, what it breaks)
MUTANTS = [
    (1, "optimized/cuda/v1_simple.cu",
     "float acc = sgl[d] * sS[idx];",
     "float acc = (p.mutant == 1 ? 1.f : sgl[d]) * sS[idx];",
     "v1: the state update forgets the decay Diag(exp(G_C))"),
    (2, "optimized/cuda/v1_simple.cu",
     "      if (c >= nv) continue;",
     "      if (c >= nv || (p.mutant == 2 && i == Lc - 1)) continue;",
     "v1: the last row of every chunk is never written (o keeps its NaN poison)"),
    (3, "optimized/cuda/v2_tensorcore.cu",
     "state_frag_load(st, p.h0, sbase,",
     "state_frag_load(st, p.mutant == 3 ? nullptr : p.h0, sbase,",
     "v2: the initial state is ignored"),
    (4, "optimized/cuda/v2_tensorcore.cu",
     "      sP[i * 72 + j] = __float2bfloat16(scale * psum);",
     "      if (p.mutant != 4 || j < i) sP[i * 72 + j] = __float2bfloat16(scale * psum);",
     "v2, per-channel gates: the diagonal of the intra-chunk read P is dropped (token i misses its own write)"),
    (5, "optimized/cuda/chunk_cuda.cu",
     "      for (int t = pl.cu[n]; t < pl.cu[n + 1]; t += kChunk) pl.tok0.push_back(t), pl.seq.push_back(n);",
     "      for (int t = pl.cu[n]; t < pl.cu[n + 1]; t += kChunk) pl.tok0.push_back(t), pl.seq.push_back(mutant == 5 && n > 0 ? n - 1 : n);",
     "packed batches: a chunk is attributed to the previous sequence (wrong chunk length)"),
    (6, "optimized/cuda/v2_tensorcore.cu",
     "    __syncthreads();  // v_new complete in sVn; every read of sSh / sSl done",
     "    if (p.mutant != 6) __syncthreads();  // v_new complete in sVn; every read of sSh / sSl done",
     "v2: a barrier is removed (a race between writing v_new and reading it)"),
    (7, "optimized/cuda/v2_tensorcore.cu",
     "      const float ex = j <= i ? exp2f(Gs(i) - Gs(j)) : 0.f;",
     "      const float ex = j <= i ? exp2f(p.mutant == 7 ? 0.f : Gs(i) - Gs(j)) : 0.f;",
     "v2, scalar gates: the intra-chunk decay exp(G_i - G_j) is forgotten"),
    (8, "optimized/cuda/tc_common.cuh",
     "        cp_async16(sG + i * KP + d4, in ? gf + row(i) * K + d4 : gf, in ? 16 : 0);",
     "        cp_async16(sG + i * KP + d4, in ? gf + row(i) * K + d4 : gf, (in || p.mutant == 8) ? 16 : 0);",
     "v3 and v4 (their shared intra kernel), per-channel gates: log-decays past the end of a ragged chunk are not zero-filled, so G_C is wrong"),
    # Rung 4 of the forward (v4_levels.cu: L and P of per-channel gates by levels of reference rows).
    (31, "optimized/cuda/v4_levels.cu",
     "const int m = left ? (r & ~(s - 1)) : ((r & ~(2 * s - 1)) + s);",
     "const int m = left ? (r & ~(s - 1)) : ((r & ~(2 * s - 1)) + s - (p.mutant == 31 ? 1 : 0));",
     "v4: the right rows' factor exp(G_m - G_r) is taken at row m - 1 instead of the reference row m"),
    (32, "optimized/cuda/v4_levels.cu",
     "            } else if (x >= s && x < 2 * s && (i & s)) {  // (i, j) belongs to level s",
     "            } else if (x >= s && x < 2 * s && (i & s) && !(p.mutant == 32 && s == 1)) {  // (i, j) belongs to level s",
     "v4: the last level (s = 1: pairs (2a + 1, 2a), the smallest sub-triangles) is never written"),
    (33, "optimized/cuda/v4_levels.cu",
     "      __syncthreads();\n      // Products:",
     "      if (p.mutant != 33) __syncthreads();\n      // Products:",
     "v4: the barrier between building a level's operand tiles and their products is removed (a race)"),
    (34, "optimized/cuda/v4_levels.cu",
     "              if (x == 0) t.sP[i * 72 + j]",
     "              if (x == 0 && p.mutant != 34) t.sP[i * 72 + j]",
     "v4: P's diagonal q_i . k_i is dropped (token i misses its own write)"),
    (35, "optimized/cuda/v4_levels.cu",
     "x >= s && x < 2 * s && (i & s)",
     "x >= s && (p.mutant == 35 ? x <= 2 * s : x < 2 * s) && (i & s)",
     "v4: a level also overwrites pairs of the level above it (membership test off by one)"),
    (36, "optimized/cuda/v4_levels.cu",
     "fk[e] = (left && GDN2 ? ek[e] : kv[e]) * f;",
     "fk[e] = (left && GDN2 && p.mutant != 36 ? ek[e] : kv[e]) * f;",
     "v4, GDN2: the erase gate b is left out of L (left rows k instead of b . k)"),
    (37, "optimized/cuda/v4_levels.cu",
     "        for (int k0 = 0; k0 < KP; k0 += 16) {\n          unsigned ak[4], aq[4], b[4];",
     "        for (int k0 = 0; k0 < KP - (p.mutant == 37 ? 16 : 0); k0 += 16) {\n          unsigned ak[4], aq[4], b[4];",
     "v4: the products stop 16 channels short (only K > KP - 16, e.g. K = 128, shows it)"),
    (38, "optimized/cuda/tc_common.cuh",
     "        for (int M = J; M < I; ++M) {\n          unsigned ah[4], al[4], bh[2], bl[2];",
     "        for (int M = J; M < I - (p.mutant == 38 && lev > 1 ? 1 : 0); ++M) {\n          unsigned ah[4], al[4], bh[2], bl[2];",
     "v4 (revision 3): phase 4's tensor-core T = sum_M L_IM A_MJ stops one block short at levels 2 and 3"),
    # The backward (bwd_v1_simple.cu); test_cuda_backward must catch each.
    (11, "optimized/cuda/bwd_v1_simple.cu",
     "      float acc = sgl[d] * sdS[idx];",
     "      float acc = (p.mutant == 11 ? 1.f : sgl[d]) * sdS[idx];",
     "bwd: the state gradient forgets the decay Diag(gamma) (B3)"),
    (12, "optimized/cuda/bwd_v1_simple.cu",
     "      if (i == Lc - 1) dG += kdk + sdgam[d] * expf(float(Gl));",
     "      if (i == Lc - 1) dG += kdk + (p.mutant == 12 ? 0.f : sdgam[d]) * expf(float(Gl));",
     "bwd: dG_last forgets the dgamma gamma term (B10; only dg changes)"),
    (13, "optimized/cuda/bwd_v1_simple.cu",
     "      for (int m = 0; m <= j; ++m) acc += sdA[i * LD + m] * sA[j * LD + m];",
     "      for (int m = 0; m < j + (p.mutant == 13 ? 0 : 1); ++m) acc += sdA[i * LD + m] * sA[j * LD + m];",
     "bwd: T1 = dA A^T misses its last term (B7, off by one)"),
    (14, "optimized/cuda/bwd_v1_simple.cu",
     "  for (int i = tid; i < Lc; i += nt) {\n    if (!p.gdn2) {",
     "  for (int i = tid; i < Lc - (p.mutant == 14 ? 1 : 0); i += nt) {\n    if (!p.gdn2) {",
     "bwd: dbeta and the scalar dg of the last token of every chunk are never written (NaN poison stays)"),
    (15, "optimized/cuda/bwd_v1_simple.cu",
     "    __syncthreads();\n    // B3:",
     "    if (p.mutant != 15) __syncthreads();\n    // B3:",
     "bwd: the barrier between writing dv_new and reading it is removed (a race)"),
    (16, "optimized/cuda/bwd_v1_simple.cu",
     "      st(dq + x, p.scale * (ws.dQg[x] * eg + ws.dqP[x]));",
     "      st(dq + x, (p.mutant == 16 ? 1.f : p.scale) * (ws.dQg[x] * eg + ws.dqP[x]));",
     "bwd: dq forgets the factor scale"),
    # Rung 2 of the backward (bwd_v2_tensorcore.cu).
    (21, "optimized/cuda/bwd_common.cuh",
     "        gemm64<false, false>(accA, sdvnh, sdvnl, su0h, su0l, m0, n0);",
     "        if (p.mutant != 21) gemm64<false, false>(accA, sdvnh, sdvnl, su0h, su0l, m0, n0);",
     "bwd v2 (and v4: the products are shared in bwd_common.cuh): dA loses its term dv_new u0^T (B6, a dropped product)"),
    (22, "optimized/cuda/bwd_common.cuh",
     "        const bool in = i < Lc && cc < V;\n        sdo[i * LT + c] = in ?",
     "        const bool in = i < Lc && cc < V - (p.mutant == 22 ? 1 : 0);\n        sdo[i * LT + c] = in ?",
     "bwd v2 (and v4): the staged do, v_new, dv_new, u0 tiles stop one value column short (off by one at the tile edge)"),
    (23, "optimized/cuda/bwd_common.cuh",
     "      __syncthreads();\n      // B4:",
     "      if (p.mutant != 23) __syncthreads();\n      // B4:",
     "bwd v2 (and v4): the barrier between staging a slab and its products is removed (a race)"),
    (24, "optimized/cuda/bwd_common.cuh",
     "      gemm64<false, false>(accQ, sdo, nullptr, sSh, sSl, m0, n0);",
     "      gemm64<false, false>(accQ, sdo, nullptr, sSh, p.mutant == 24 ? nullptr : sSl, m0, n0);",
     "bwd v2 (and v4): dQg = do S^T with S rounded to bf16 (its lo part dropped): a precision bug"),
    # Rung 5 of the backward (bwd_v5_levels_front.cu: rung 4 with the levels prepare; its grads
    # kernel's stagings load in batches, bwd_common.cuh Mid::kBatchLoads).
    (56, "optimized/cuda/bwd_common.cuh",
     "            const int idx = tid + (t0 + b) * kThreads, i = idx >> 6, cc = vv + (idx & 63), d = kk + i;",
     "            const int idx = tid + (t0 + (p.mutant == 56 && b == 3 ? 2 : b)) * kThreads, i = idx >> 6, cc = vv + (idx & 63), d = kk + i;",
     "bwd v5: the batched slab staging loads item 2's values for item 3 of each batch"),
    (57, "optimized/cuda/bwd_common.cuh",
     "e[t] = (i < Lc && kk + d < K) ? ws.E[row(i) * K + kk + d] : 0.f;",
     "e[t] = (i < Lc && kk + d < K - (p.mutant == 57 ? 1 : 0)) ? ws.E[row(i) * K + kk + d] : 0.f;",
     "bwd v5: the batched E staging drops the last channel (off by one at the tile edge)"),
    (58, "optimized/cuda/bwd_common.cuh",
     "          dkk += src * expf(float(sGd[i * 64 + dd] - Gr));",
     "          dkk += src * expf(float(sGd[i * 64 + dd] - Gr)) * (p.mutant == 58 && i == r + 1 ? 0.f : 1.f);",
     "bwd v5, per-channel gates: the unrolled B9 drops the pair (r + 1, r) from dk^{L,P}"),
    (59, "optimized/cuda/bwd_v4_tc_tail.cu",
     "            rq[b] = in ? q[row(j) * K + kk + d] : __float2bfloat16_rn(0.f);",
     "            rq[b] = in ? (p.mutant == 59 ? k : q)[row(j) * K + kk + d] : __float2bfloat16_rn(0.f);",
     "bwd v5, DeltaNet and GDN: the batched B9 slab staging puts k where q belongs"),
    (50, "optimized/cuda/bwd_common.cuh",
     "        st(dk + x, dKd * expf(float(rGl[b] - rGi[b])) + dkLP + rgate[b] * de);",
     "        st(dk + x, dKd * expf(float(rGl[b] - rGi[b])) + dkLP + (p.mutant == 50 && b == 1 ? 0.f : rgate[b]) * de);",
     "bwd v5: the batched tail (B10 (a)) drops (beta | b) de from dk for the second item of each batch"),
    # Rung 6 of the backward (bwd_v6_tc_b9.cuh: B9 for per-channel gates on tensor cores by levels).
    (66, "optimized/cuda/bwd_v6_tc_b9.cuh",
     "      if (s == 32) {  // blocks (2, 0), (2, 1), (3, 0), (3, 1)",
     "      if (p.mutant == 66 && s == 2) {\n      } else if (s == 32) {  // blocks (2, 0), (2, 1), (3, 0), (3, 1)",
     "bwd v6, per-channel gates: level 2's products are skipped (its pairs missing from de^L, dq^P, dk^LP)"),
    (67, "optimized/cuda/bwd_v6_tc_b9.cuh",
     "          const float f = sF[(m0 + g + (e >= 2 ? 8 : 0)) * LF + n0 + nt * 8 + 2 * t + (e & 1)];",
     "          const float f = sF[((m0 + g + (e >= 2 ? 8 : 0)) ^ (p.mutant == 67 ? s : 0)) * LF + n0 + nt * 8 + 2 * t + (e & 1)];",
     "bwd v6, per-channel gates: the epilogue scales by F of the row across the level (bit s flipped), not the output row's"),
    (68, "optimized/cuda/bwd_v6_tc_b9.cuh",
     "        const float F = expf(fminf(float(left ? Gr - Gm : Gm - Gr), 0.f));",
     "        const float F = expf(p.mutant == 68 ? float(left ? Gr - Gm : Gm - Gr) : fminf(float(left ? Gr - Gm : Gm - Gr), 0.f));",
     "bwd v6, per-channel gates: no exponent clamp (rows past Lc, G staged 0, give inf * 0 = NaN in dk^LP)"),
    # Rung 7 of the backward (bwd_common.cuh's RowBase: per-block bases and 32-bit offsets, V7Mid only).
    (69, "optimized/cuda/bwd_common.cuh",
     "              rvn[b] = in ? rb.base(ws.vn, V)[x] : 0.f;",
     "              rvn[b] = in ? rb.base(ws.vn, V)[x + (p.mutant == 69 ? V : 0)] : 0.f;",
     "bwd v7: the slab staging reads v_new one row off (row(i) + 1: the next head's row)"),
    (70, "optimized/cuda/bwd_v6_tc_b9.cuh",
     "          const int x = j * rb.HK + d;",
     "          const int x = j * (p.mutant == 70 ? rb.HV : rb.HK) + d;",
     "bwd v7, per-channel gates: b9_levels' staging offset strides rows by H V where H K belongs"),
    (71, "optimized/cuda/bwd_v4_tc_tail.cu",
     "              const int x = j * rb.HK + kk + d;",
     "              const int x = j * rb.HK + (p.mutant == 71 ? 0 : kk) + d;",
     "bwd v7, DeltaNet and GDN: V4Mid's B9 k, q staging offset forgets the slab's first channel kk"),
    (72, "optimized/cuda/bwd_common.cuh",
     "        HKG(p.H * gate_width(p)), valid(p.q) {}",
     "        HKG(p.mutant == 72 ? p.H * p.K : p.H * gate_width(p)), valid(p.q) {}",
     "bwd v7, scalar gates (GDN): G's 32-bit row stride is H K where H (gate width 1) belongs"),
    # Rung 5 of the forward (v5_split.cu: the state pass alone, then the parallel output kernel).
    (61, "optimized/cuda/v5_split.cu",
     "  const float* Sc = sw.S + cw * K * V;",
     "  const float* Sc = sw.S + (cw - (p.mutant == 61 && c > 0 ? H : 0)) * K * V;",
     "v5: the output kernel reads the state entering the previous chunk instead of its own"),
    (62, "optimized/cuda/v5_split.cu",
     "    if (k0 > 16 * wm) break;  // P is lower triangular",
     "    if (k0 > 16 * wm || p.mutant == 62) break;  // P is lower triangular",
     "v5: the output kernel drops its intra-chunk term P v_new"),
    (63, "optimized/cuda/v5_split.cu",
     "  __syncthreads();  // every tile in shared memory",
     "  if (p.mutant != 63) __syncthreads();  // every tile in shared memory",
     "v5: the barrier between filling the output kernel's tiles and reading them is removed (a race)"),
    (64, "optimized/cuda/v5_split.cu",
     "const int c = ch / H, h = ch % H, v0 = z * kBVO;",
     "const int c = ch / H, h = ch % H, v0 = (z + (p.mutant == 64 ? 1 : 0)) * kBVO;",
     "v5: the output kernel's value tile is off by one (tile z computes and writes tile z + 1's columns)"),
    (65, "optimized/cuda/v5_split.cu",
     "      const float* src = sw.vn + (std::int64_t(tok0 + i) * H + h) * V;",
     "      const float* src = sw.vn + (std::int64_t(tok0 + i) * H + (p.mutant == 65 ? (h + 1) % H : h)) * V;",
     "v5: the output kernel reads v_new of the next head"),
    # Rung 3 of the backward (bwd_v3_async.cu and the forward kernels it reuses).
    (41, "optimized/cuda/v2_tensorcore.cu",
     "      float* Sout = bwd.S + (std::int64_t(c_first + ci) * H + h) * K * V;",
     "      float* Sout = bwd.S + (std::int64_t(c_first + ci - (p.mutant == 41 && ci > 0 ? 1 : 0)) * H + h) * K * V;",
     "bwd v3: the state kernel stores each chunk's entering state one chunk early (off by one chunk)"),
    (42, "optimized/cuda/bwd_v3_async.cu",
     "      mma_acc_two_b(st, aq, sDo, aw, sNdv, LDV, k0, 8 * sn0);",
     "      if (p.mutant == 42) aq[0] = aq[1] = aq[2] = aq[3] = 0u;  // a zero bf16 operand: Qg^T do = 0\n"
     "      mma_acc_two_b(st, aq, sDo, aw, sNdv, LDV, k0, 8 * sn0);",
     "bwd v3: the reverse recurrence drops its term Qg^T do (B3)"),
    (43, "optimized/cuda/bwd_v3_async.cu",
     "    __syncthreads();  // -dv_new complete in sNdv; every read of sSh / sSl done",
     "    if (p.mutant != 43) __syncthreads();  // -dv_new complete in sNdv; every read of sSh / sSl done",
     "bwd v3: the barrier between writing -dv_new and reading it (and overwriting dS') is removed (a race)"),
    (44, "optimized/cuda/bwd_v3_async.cu",
     "      if (k0 < 16 * wm) continue;  // (P^T)_ij = P_ji = 0 for j < i",
     "      if (k0 < 16 * wm || p.mutant == 44) continue;  // (P^T)_ij = P_ji = 0 for j < i",
     "bwd v3: dv_new loses its intra-chunk term P^T do (B1)"),
    (45, "optimized/cuda/bwd_v3_async.cu",
     "    const double Gi = sGx[i * KGs + dd], Gl = sGx[(Lc - 1) * KGs + dd];",
     "    const double Gi = sGx[i * KGs + dd], Gl = sGx[(Lc - 1 - (p.mutant == 45 && Lc > 1 ? 1 : 0)) * KGs + dd];",
     "bwd v3: Kd = k exp(G_last - G) takes G_last from the chunk's second-to-last token (off by one)"),
    (46, "optimized/cuda/tc_common.cuh",
     "    for (int idx = tid; idx < Lc * 64; idx += kThreads) a_out[",
     "    for (int idx = tid; idx < (Lc - (p.mutant == 46 ? 1 : 0)) * 64; idx += kThreads) a_out[",
     "bwd v3: the intra-chunk kernel does not write the last row of A (a stale row reaches bwd_grads_tc)"),
    (47, "optimized/cuda/v2_tensorcore.cu",
     "          if (ii < Lc && cc < V) bwd.vn[",
     "          if (ii < Lc && cc < V - (p.mutant == 47 ? 1 : 0)) bwd.vn[",
     "bwd v3: the state kernel never writes v_new's last value column (off by one at the tile edge)"),
    (48, "optimized/cuda/bwd_v3_async.cu",
     "      mma_acc_two_b(dv, a, sSh, a, sSl, LDV, k0, 8 * wn0);",
     "      unsigned z48[4] = {0u, 0u, 0u, 0u};  // a zero bf16 operand for the lo part: Kd dS'_lo = 0\n"
     "      mma_acc_two_b(dv, a, sSh, p.mutant == 48 ? z48 : a, sSl, LDV, k0, 8 * wn0);",
     "bwd v3: dv_new = ... + Kd dS' with dS' rounded to bf16 (its lo part dropped): a precision bug"),
    (49, "optimized/cuda/bwd_v3_async.cu",
     "    ws.E[x] = (p.gdn2 ? ld(bg + x) : sbeta[i]) * kv * eg;",
     "    ws.E[x] = (p.gdn2 ? ld(bg + x) : (p.mutant == 49 ? 1.f : sbeta[i])) * kv * eg;",
     "bwd v3: E = e exp(G) forgets beta (e = k) in the operands of bwd_grads_tc"),
    # Rung 4 of the backward (bwd_v4_tc_tail.cu: B7 and, for DeltaNet and GDN, B9 on tensor cores).
    (51, "optimized/cuda/bwd_v4_tc_tail.cu",
     "put_split(sYh, sYl, i, j, j < i ? x : 0.f); });",
     "put_split(sYh, sYl, i, j, j < i - (p.mutant == 51 ? 1 : 0) ? x : 0.f); });",
     "bwd v4: B7's T1 = dA A^T drops its first subdiagonal (terms T1_{i,i-1}), so dL misses them"),
    (52, "optimized/cuda/bwd_v4_tc_tail.cu",
     "put_split(sYh, sYl, i, j, sbeta[i] * m1);",
     "put_split(sYh, sYl, i, j, sbeta[p.mutant == 52 ? j : i] * m1);",
     "bwd v4: B9's factor beta of M1b = Diag(beta) M1 taken at the column's row j instead of row i"),
    (53, "optimized/cuda/bwd_v4_tc_tail.cu",
     "    __syncthreads();\n    // B7: dL = -A^T T1",
     "    if (p.mutant != 53) __syncthreads();\n    // B7: dL = -A^T T1",
     "bwd v4: the barrier between storing T1's tiles and the product dL = -A^T T1 removed (a race)"),
    (54, "optimized/cuda/bwd_v4_tc_tail.cu",
     "const bool in = j < Lc && kk + d < K;\n        const bf16 zero16",
     "const bool in = j < Lc && kk + d < K - (p.mutant == 54 ? 1 : 0);\n        const bf16 zero16",
     "bwd v4: B9's staged k and q slabs stop one channel short (off by one at the tile edge)"),
    (55, "optimized/cuda/bwd_v4_tc_tail.cu",
     "aDk[a][b] += scale * aDkq[a][b];",
     "aDk[a][b] += (p.mutant == 55 ? 1.f : scale) * aDkq[a][b];",
     "bwd v4: B9's dk^{L,P} forgets the factor scale on M2^T q"),
]

HOOKS = [
    ("optimized/cuda/common.cuh",
     "  void* ws = nullptr;      ///< workspace of the version\n",
     "  void* ws = nullptr;      ///< workspace of the version\n  int mutant = 0;\n"),
    ("optimized/cuda/chunk_cuda.cu",
     "  Plan pl;\n  KParams& p = pl.p;\n",
     "  Plan pl;\n  KParams& p = pl.p;\n  const int mutant = std::getenv(\"LINATTN_MUTANT\") ? std::atoi(std::getenv(\"LINATTN_MUTANT\")) : 0;\n  p.mutant = mutant;\n"),
    ("optimized/cuda/chunk_cuda.cu", "#include <cmath>\n", "#include <cmath>\n#include <cstdlib>\n"),
]


def main():
    if os.path.exists(DEST):
        shutil.rmtree(DEST)
    files = subprocess.check_output(["git", "ls-files", "-co", "--exclude-standard"], cwd=SRC, text=True).split()
    for f in files:
        d = os.path.join(DEST, f)
        os.makedirs(os.path.dirname(d), exist_ok=True)
        shutil.copy2(os.path.join(SRC, f), d)
    for f, a, b in HOOKS + [(m[1], m[2], m[3]) for m in MUTANTS]:
        path = os.path.join(DEST, f)
        s = open(path).read()
        if s.count(a) != 1:
            sys.exit(f"make_mutants: {f}: expected exactly one occurrence of {a!r}, found {s.count(a)}")
        open(path, "w").write(s.replace(a, b))
    for n, f, _, _, what in MUTANTS:
        print(f"mutant {n}: {what} ({f})")
    subprocess.check_call(["cmake", "-S", DEST, "-B", os.path.join(DEST, "build"), "-DCMAKE_BUILD_TYPE=Release",
                           "-DLINATTN_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=90a",
                           "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"], stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()
