// optimized/cuda/bwd_v6_tc_b9.cuh -- the device code of backward rung 6 (bwd_v6_tc_b9.cu says what,
// why and how well): B9 of the chunk gradients for per-channel gates (KDA, GDN2) on bf16 tensor cores
// by binary levels of reference rows, as bench/models/bwd_b9_levels_model.py (`levels`) computes it.
// Called by V6Mid::run (bwd_v4_tc_tail.cu) after its tensor-core B7, in place of rung 2's float32 B9.
#pragma once

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail::bwdc {

constexpr int LF = 68;  // row stride (floats) of the F tile (68: 2-way bank conflicts in the epilogue)
// Shared memory of b9_levels, inside bwd_grads_tc's overlay: 10 bf16 tiles (dL, dP, X, Y hi + lo;
// k and q slabs), F [64][LF], e [64][64], dP's diagonal [64] (float32), G [64][64] (float64).
constexpr std::size_t kLevelsBytes =
    sizeof(bf16) * 10 * std::size_t(kTile) + sizeof(float) * (64 * LF + 64 * 64 + 64) + sizeof(double) * 64 * 64;
static_assert(kLevelsBytes <= kSmemMain, "the levels B9 fits in bwd_grads_tc's shared memory");
static_assert((sizeof(bf16) * 10 * kTile + sizeof(float) * (64 * LF + 64 * 64 + 64)) % sizeof(double) == 0,
              "G is 8-byte aligned");

/// The A-fragment mask of level s in a diagonal 16 x 16 block (mma.cuh's A layout: register x holds
/// rows g + 8 (x & 1), columns 2t + 8 (x >> 1) and + 1): keep the pairs (r, c) with r ^ c in [s, 2s).
/// Off the diagonal the table's blocks are wholly one level: all ones (s = 0 stands for that).
__device__ __forceinline__ void level_mask(unsigned (&mask)[4], int s) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int x = 0; x < 4; ++x) {
    const int r = g + 8 * (x & 1), c = 2 * t + 8 * (x >> 1);
    const bool lo = s == 0 || ((r ^ c) & ~(s - 1)) == s;
    const bool hi = s == 0 || ((r ^ (c + 1)) & ~(s - 1)) == s;
    mask[x] = (lo ? 0x0000FFFFu : 0u) | (hi ? 0xFFFF0000u : 0u);
  }
}

/// One k-step of 16 (contraction rows k0..k0+15) of a level product: acc (this warp's rows m0..m0+15,
/// channels n0..n0+31) += A B, A = the row-major tile (ATRANS: its transpose) masked by `mask`, B a
/// row-major [k][n] tile; both hi + lo: hi*hi + hi*lo + lo*hi, in gemm64's order. kHi (rung 15's V15Mid):
/// hi*hi only (Al, Bl not read).
template <bool ATRANS, bool kHi = false>
__device__ __forceinline__ void level_kstep(float (&acc)[4][4], const bf16* Ah, const bf16* Al, const bf16* Bh,
                                            const bf16* Bl, int m0, int k0, int n0, const unsigned (&mask)[4]) {
  unsigned ah[4], al[4];
  if constexpr (kHi) {
    if (ATRANS) load_a_t(ah, Ah, LT, m0, k0);
    else load_a(ah, Ah, LT, m0, k0);
#pragma unroll
    for (int x = 0; x < 4; ++x) ah[x] &= mask[x];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      unsigned bh[4];
      load_b_kn(bh, Bh, LT, k0, n0 + 16 * half);
      mma_bf16(acc[2 * half], ah, bh[0], bh[1]);
      mma_bf16(acc[2 * half + 1], ah, bh[2], bh[3]);
    }
    return;
  }
  if (ATRANS) load_a_t(ah, Ah, LT, m0, k0), load_a_t(al, Al, LT, m0, k0);
  else load_a(ah, Ah, LT, m0, k0), load_a(al, Al, LT, m0, k0);
#pragma unroll
  for (int x = 0; x < 4; ++x) ah[x] &= mask[x], al[x] &= mask[x];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int n = n0 + 16 * half;
    unsigned bh[4], bl[4];
    load_b_kn(bh, Bh, LT, k0, n);
    load_b_kn(bl, Bl, LT, k0, n);
    mma_bf16(acc[2 * half], ah, bh[0], bh[1]);
    mma_bf16(acc[2 * half + 1], ah, bh[2], bh[3]);
    mma_bf16(acc[2 * half], ah, bl[0], bl[1]);
    mma_bf16(acc[2 * half + 1], ah, bl[2], bl[3]);
    mma_bf16(acc[2 * half], al, bh[0], bh[1]);
    mma_bf16(acc[2 * half + 1], al, bh[2], bh[3]);
  }
}

/// B9 of the chunked backward (docs/derivation-backward.md, "Chunked backward") by levels, for any
/// gate width (the model's derivation): per 64-channel slab and level s = 32 .. 1 (the pairs i > j
/// whose highest bit of i ^ j is s; i a left row, j a right row, reference row
/// m = i & ~(s - 1) = (j & ~(2s - 1)) + s),
///   F_s[r] = exp(min(G_r - G_m, 0)) (left r),  exp(min(G_m - G_r, 0)) (right r)   (float32),
///   X_s[r] = e_r F_s[r] (left), k_r F_s[r] (right);  Y_s[r] = q~_r F_s[r] (left), 0 (right),
///   de^L_r  += F_s[r] sum_j dL_rj X_s[j],  dq^P_r += F_s[r] sum_j dP_rj X_s[j]      (r left),
///   dk^LP_r += F_s[r] sum_i (dL_ir X_s[i] + dP_ir Y_s[i])                          (r right),
/// the sums over the level's pairs only (A masked on the diagonal blocks), then the diagonal terms
/// dq^P_r += dP_rr k_r, dk^LP_r += dP_rr q~_r. Equals the float32 B9's direct sums (bwd_common.cuh):
///   de^L_r = sum_{j<r} dL_rj k_j exp(G_r - G_j),  dq^P_r = sum_{j<=r} dP_rj k_j exp(G_r - G_j),
///   dk^LP_r = sum_{i>r} dL_ir e_i exp(G_i - G_r) + sum_{i>=r} dP_ir q~_i exp(G_i - G_r),
/// since exp(G_i - G_j) = exp(G_i - G_m) exp(G_m - G_j) for j < m <= i, both factors <= 1 (log-decays
/// <= 0, SPEC section 4). The clamp keeps F finite on rows >= Lc, whose G is staged 0 (without it
/// exp(0 - G_m) = inf there and 0 * inf = NaN reaches valid rows of dk^LP); a no-op on valid rows.
/// Writes ws.deL, ws.dqP, ws.dkLP for rows < Lc, channels < K, as the float32 B9 does.
/// accL: B7's A^T T1 (dL = -accL), accP: B5's dP, both this warp's 16 x 32 part (gemm64's layout).
/// Call after a barrier that ends every read of the product tiles (all of the overlay is free);
/// returns after a barrier (the tail may overlay it again). kRowBase (rung 7): the staging's and the
/// outputs' [rows, W] addresses by per-block bases and 32-bit offsets (bwd_common.cuh's RowBase).
/// kWide (rung 8, with kRowBase): the outputs stored by column pairs (st_pair_w: 8 bytes where aligned).
/// kHi (rung 15's V15Mid): hi-only operands (dL, dP, X_s, Y_s rounded to bf16, no lo tiles staged or
/// multiplied: put_op, level_kstep<.., true>); F, the epilogue and the diagonal terms stay float32.
template <class Tg, bool kRowBase = false, bool kWide = false, bool kHi = false>
__device__ __forceinline__ void b9_levels(const KParams& p, const BWs& ws, unsigned char* smem_raw, int tok0, int Lc,
                                          const float* sbeta, const float (&accL)[4][4],
                                          const float (&accP)[4][4]) {
  const int K = p.K, H = p.H, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int mb = warp & 3, m0 = 16 * mb, n0 = (warp >> 2) * 32;
  auto row = [&](int i) { return std::int64_t(tok0 + i) * H + h; };
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw);
  bf16 *sLh = tiles, *sLl = tiles + kTile;              // dL, strictly lower
  bf16 *sPh = tiles + 2 * kTile, *sPl = tiles + 3 * kTile;  // dP, strictly lower (diagonal in sdg)
  bf16 *sXh = tiles + 4 * kTile, *sXl = tiles + 5 * kTile;  // X_s of the level being run
  bf16 *sYh = tiles + 6 * kTile, *sYl = tiles + 7 * kTile;  // Y_s
  bf16 *sKs = tiles + 8 * kTile, *sQs = tiles + 9 * kTile;  // slabs of k and q (exact in bf16)
  float* sF = reinterpret_cast<float*>(tiles + 10 * kTile);  // [64][LF] F_s
  float* sE = sF + 64 * LF;                                   // [64][64] e slab (float32)
  float* sdg = sE + 64 * 64;                                  // [64] dP_rr
  double* sG = reinterpret_cast<double*>(sdg + 64);           // [64][64] G slab (0 past Lc and K)

  each_acc(accL, m0, n0, [&](int i, int j, float x) {
    put_op<kHi>(sLh, sLl, i, j, (i < Lc && j < i) ? -x : 0.f);
  });
  each_acc(accP, m0, n0, [&](int i, int j, float x) {
    put_op<kHi>(sPh, sPl, i, j, (i < Lc && j < i) ? x : 0.f);
    if (i == j) sdg[i] = i < Lc ? x : 0.f;  // each diagonal entry is in exactly one warp's part
  });
  const bf16* k = static_cast<const bf16*>(p.k);
  const bf16* q = static_cast<const bf16*>(p.q);
  const Tg* bg = static_cast<const Tg*>(p.b);
  const int g = lane >> 2, t = lane & 3;
#pragma unroll 1
  for (int kk = 0; kk < K; kk += 64) {
    __syncthreads();  // dL, dP tiles written; the previous slab's k, q, e, G read
    // Stage the slab: k, q (bf16), e = beta k or b (.) k (float32, as the float32 B9's e_at), G.
    constexpr int kItems = 64 * 64 / kThreads, kB = 4;
    bool staged = false;
    if constexpr (kWide) {
      const RowBase rb(p, tok0, h);
      if (K % 4 == 0 && rb.KG == K && aligned(k, 8) && aligned(q, 8) && aligned(ws.G, 16) &&
          (!p.gdn2 || aligned(bg, int(4 * sizeof(Tg))))) {
        // Rung 8: by quads (row j = qd >> 4, channels dd .. dd + 3, dd = 4 (qd & 15)), 2 per batch:
        // one 8-byte load of k and of q, one 16- / 8-byte load of b, two 16-byte loads of G; per
        // element the same values and the same product e = gate k as the item loop below.
        staged = true;
        const double* Gb = rb.base(ws.G, rb.KG);
#pragma unroll 1
        for (int t0 = 0; t0 < kItems / 4; t0 += 2) {
          uint2 rk[2], rq[2];
          float rgate[2][4];
          double rG[2][4];
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            const int qd = tid + (t0 + b) * kThreads, j = qd >> 4, d = kk + 4 * (qd & 15);
            const int xq = j * rb.HK + d;
            rk[b] = rq[b] = make_uint2(0u, 0u);
#pragma unroll
            for (int e = 0; e < 4; ++e) rgate[b][e] = 0.f, rG[b][e] = 0.0;
            if (j < Lc && d < K) {
              rk[b] = *reinterpret_cast<const uint2*>(rb.base(k, K) + xq);
              rq[b] = *reinterpret_cast<const uint2*>(rb.base(q, K) + xq);
              if (p.gdn2) ld4(rb.base_opt(bg, K) + xq, rgate[b]);
              else rgate[b][0] = rgate[b][1] = rgate[b][2] = rgate[b][3] = sbeta[j];
              const double2 g0 = *reinterpret_cast<const double2*>(Gb + j * rb.HKG + d);
              const double2 g1 = *reinterpret_cast<const double2*>(Gb + j * rb.HKG + d + 2);
              rG[b][0] = g0.x, rG[b][1] = g0.y, rG[b][2] = g1.x, rG[b][3] = g1.y;
            }
          }
#pragma unroll
          for (int b = 0; b < 2; ++b) {
            const int qd = tid + (t0 + b) * kThreads, j = qd >> 4, dd = 4 * (qd & 15);
            *reinterpret_cast<uint2*>(sKs + j * LT + dd) = rk[b];
            *reinterpret_cast<uint2*>(sQs + j * LT + dd) = rq[b];
            float kf[4];
            unpack4(rk[b], kf);
            *reinterpret_cast<float4*>(sE + j * 64 + dd) =
                make_float4(rgate[b][0] * kf[0], rgate[b][1] * kf[1], rgate[b][2] * kf[2], rgate[b][3] * kf[3]);
            *reinterpret_cast<double2*>(sG + j * 64 + dd) = make_double2(rG[b][0], rG[b][1]);
            *reinterpret_cast<double2*>(sG + j * 64 + dd + 2) = make_double2(rG[b][2], rG[b][3]);
          }
        }
      }
    }
#pragma unroll 1
    for (int t0 = staged ? kItems : 0; t0 < kItems; t0 += kB) {
      bf16 rk[kB], rq[kB];
      float rgate[kB];
      double rG[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int idx = tid + (t0 + b) * kThreads, j = idx >> 6, d = kk + (idx & 63);
        const bool in = j < Lc && d < K;
        if constexpr (kRowBase) {
          const RowBase rb(p, tok0, h);
          const int x = j * rb.HK + d;
          rk[b] = in ? rb.base(k, K)[x] : __float2bfloat16_rn(0.f);
          rq[b] = in ? rb.base(q, K)[x] : __float2bfloat16_rn(0.f);
          rgate[b] = in ? (p.gdn2 ? ld(rb.base_opt(bg, K) + x) : sbeta[j]) : 0.f;
          rG[b] = in ? rb.G(rb.base(ws.G, rb.KG), j, d) : 0.0;
        } else {
        const std::int64_t x = row(j) * K + d;
        rk[b] = in ? k[x] : __float2bfloat16_rn(0.f);
        rq[b] = in ? q[x] : __float2bfloat16_rn(0.f);
        rgate[b] = in ? (p.gdn2 ? ld(bg + x) : sbeta[j]) : 0.f;
        rG[b] = in ? G_at(p, ws, row(j), d) : 0.0;
        }
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int idx = tid + (t0 + b) * kThreads, j = idx >> 6, dd = idx & 63;
        sKs[j * LT + dd] = rk[b], sQs[j * LT + dd] = rq[b];
        sE[idx] = rgate[b] * bf(rk[b]);
        sG[idx] = rG[b];
      }
    }
    float oDe[4][4], oDq[4][4], oDk[4][4];
    zero(oDe), zero(oDq), zero(oDk);
#pragma unroll 1
    for (int s = 32; s >= 1; s >>= 1) {
      __syncthreads();  // the slab staged; the previous level's F, X, Y read
      // Build F_s, X_s, Y_s (every row of the slab: 16 items per thread)
      for (int idx = tid; idx < 64 * 64; idx += kThreads) {
        const int r = idx >> 6, d = idx & 63;
        const bool left = (r & s) != 0;
        const int m = left ? (r & ~(s - 1)) : ((r & ~(2 * s - 1)) + s);
        const double Gr = sG[r * 64 + d], Gm = sG[m * 64 + d];
        const float F = expf(fminf(float(left ? Gr - Gm : Gm - Gr), 0.f));
        sF[r * LF + d] = F;
        put_op<kHi>(sXh, sXl, r, d, (left ? sE[r * 64 + d] : bf(sKs[r * LT + d])) * F);
        put_op<kHi>(sYh, sYl, r, d, left ? (p.scale * bf(sQs[r * LT + d])) * F : 0.f);
      }
      __syncthreads();
      // This warp's contractions at level s (the model's TABLE; dk^LP's is the transpose):
      // de^L, dq^P where its rows are left (A = dL, dP; B = X over the right block),
      // dk^LP where they are right (A = dL^T with B = X, dP^T with B = Y, over the left block).
      float aL[4][4], aP[4][4], aK[4][4];
      zero(aL), zero(aP), zero(aK);
      unsigned mask[4];
      level_mask(mask, s <= 8 ? s : 0);
      auto left_step = [&](int bj) {
        level_kstep<false, kHi>(aL, sLh, sLl, sXh, sXl, m0, 16 * bj, n0, mask);
        level_kstep<false, kHi>(aP, sPh, sPl, sXh, sXl, m0, 16 * bj, n0, mask);
      };
      auto right_step = [&](int bi) {
        level_kstep<true, kHi>(aK, sLh, sLl, sXh, sXl, m0, 16 * bi, n0, mask);
        level_kstep<true, kHi>(aK, sPh, sPl, sYh, sYl, m0, 16 * bi, n0, mask);
      };
      if (s == 32) {  // blocks (2, 0), (2, 1), (3, 0), (3, 1)
        if (mb >= 2) left_step(0), left_step(1);
        else right_step(2), right_step(3);
      } else if (s == 16) {  // blocks (1, 0), (3, 2)
        if (mb & 1) left_step(mb - 1);
        else right_step(mb + 1);
      } else {  // the diagonal blocks, masked: left and right rows of the same block
        left_step(mb);
        right_step(mb);
      }
      // Epilogue: the output row's factor, float32
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float f = sF[(m0 + g + (e >= 2 ? 8 : 0)) * LF + n0 + nt * 8 + 2 * t + (e & 1)];
          oDe[nt][e] += f * aL[nt][e];
          oDq[nt][e] += f * aP[nt][e];
          oDk[nt][e] += f * aK[nt][e];
        }
    }
    // Diagonal terms (exp(0) = 1) in float32, and the slab's outputs
    const float scale = p.scale;
    if constexpr (kWide) {
      static_assert(kRowBase, "kWide addresses through RowBase");
      const RowBase rb(p, tok0, h);
      // Every pair aligned and both or neither column in range when K is even (store_acc_pairs).
      const bool even = K % 2 == 0 && aligned(ws.deL, 8) && aligned(ws.dqP, 8) && aligned(ws.dkLP, 8);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int r = m0 + g + 8 * hh, c = n0 + nt * 8 + 2 * t, d = kk + c;
          if (r < Lc) {
            const int x = r * rb.HK + d;
            const float e0 = oDe[nt][2 * hh], e1 = oDe[nt][2 * hh + 1];
            const float q0 = oDq[nt][2 * hh] + sdg[r] * bf(sKs[r * LT + c]);
            const float q1 = oDq[nt][2 * hh + 1] + sdg[r] * bf(sKs[r * LT + c + 1]);
            const float k0 = oDk[nt][2 * hh] + sdg[r] * (scale * bf(sQs[r * LT + c]));
            const float k1 = oDk[nt][2 * hh + 1] + sdg[r] * (scale * bf(sQs[r * LT + c + 1]));
            if (even) {
              st_pair_even(rb.base(ws.deL, K) + x, e0, e1, d, K);
              st_pair_even(rb.base(ws.dqP, K) + x, q0, q1, d, K);
              st_pair_even(rb.base(ws.dkLP, K) + x, k0, k1, d, K);
            } else {
              st_pair_w(rb.base(ws.deL, K) + x, e0, e1, d, K);
              st_pair_w(rb.base(ws.dqP, K) + x, q0, q1, d, K);
              st_pair_w(rb.base(ws.dkLP, K) + x, k0, k1, d, K);
            }
          }
        }
    } else {
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g + (e >= 2 ? 8 : 0), c = n0 + nt * 8 + 2 * t + (e & 1), d = kk + c;
        if constexpr (kRowBase) {
          if (r < Lc && d < K) {
            const RowBase rb(p, tok0, h);
            const int x = r * rb.HK + d;
            rb.base(ws.deL, K)[x] = oDe[nt][e];
            rb.base(ws.dqP, K)[x] = oDq[nt][e] + sdg[r] * bf(sKs[r * LT + c]);
            rb.base(ws.dkLP, K)[x] = oDk[nt][e] + sdg[r] * (scale * bf(sQs[r * LT + c]));
          }
        } else
        if (r < Lc && d < K) {
          const std::int64_t x = row(r) * K + d;
          ws.deL[x] = oDe[nt][e];
          ws.dqP[x] = oDq[nt][e] + sdg[r] * bf(sKs[r * LT + c]);
          ws.dkLP[x] = oDk[nt][e] + sdg[r] * (scale * bf(sQs[r * LT + c]));
        }
      }
    }
  }
  __syncthreads();  // every read of the levels' shared memory done
}

}  // namespace linattn::cuda::detail::bwdc
