// optimized/cuda/bwd_v14_pchan.cu -- rung 14 of the CUDA backward ladder: the split of the chunk-gradient
// kernel into a state side (G1) and a WY side (G2), rungs 10-13's, extended to per-channel gates, KDA and
// GDN2 (issue 6; bench/analysis_bwd_plan.md sections 3.1-3.3). Written in session 9 and run in session 9
// calls 3-4: correct, slower than rung 8 for KDA, not adopted (RESULTS.md "Rung 14").
//
// DeltaNet and GDN run rung 13 unchanged (bwd_v13_launch), so rung 14 is a superset of rung 13. For KDA
// and GDN2, rungs 10-13 ran rung 8 (one grads kernel, 7.75 / 7.11 ms at B=8 T=4096 H=16 K=V=128). Here:
// rung 8's front (bwd_v3_front with the levels intra kernel and the wide extras), then per (chunk, head)
//   G1' = bwd14_g1s<Tg> (one block per 64-channel slab kk of K, 2 blocks per SM): rung 12's bwd12_g1 --
//     B2 (dgamma), B4 (dQg, dKd, dw_aux), B5 (dP) for the slab, the same stagings and products -- with
//     B9's P half for per-channel gates by binary levels (the P terms of bwd_v6_tc_b9.cuh's b9_levels):
//       dq^P_r = sum_{j<=r} dP_rj k_j exp(G_r - G_j),  dk^P_r = sum_{i>=r} dP_ir q~_i exp(G_i - G_r),
//     then rung 10's G1 tail per channel in the fragment epilogue: dq (final), dk_part = dKd exp(G_last - G)
//     + dk^P (ws.dkLP), dG_part = dQg Qg - dKd Kd + q~ dq^P - k dk^P with dG_last = sum_i dKd_i Kd_i +
//     dgamma exp(G_last) folded into its last row (ws.dGc, [rows, K]); dw_aux -> ws.dwa.
//     The levels use ONE operand tile Z_s[r] = q~_r F_s[r] (left rows) or k_r F_s[r] (right rows): dP Z_s
//     on left output rows reads only right rows of Z_s, dP^T Z_s on right output rows only left rows (the
//     level masks and dP's strict lower triangle zero the rest), which are b9_levels' X_s and Y_s there.
//   G1 (fallback, and the test hook LINATTN_BWD14_ONE_BLOCK_G1) = bwd_grads_tc<Tg, V14Mid> (bwd_common.cuh,
//     Mid::kSplit): rung 10's G1, one block per (chunk, head), with the same P half (b9p_levels). Runs when
//     G1''s grid num_chunks * ceil(K / 64) reaches 2^31; writes the same values as G1' by design.
//   G2 = bwd14_wy<Tg> (2 blocks per SM): rung 10's G2 (bwd_v10_split.cu) with per-channel gates:
//     B6  dA = dv_new u0^T + dw_aux E^T,  u0 = beta v (KDA) or w (.) v (GDN2)
//     B8  du0 = A^T dv_new (-> ws.du0, KDA's dbeta), dv = beta du0 (KDA) or w (.) du0, dw = du0 (.) v
//         (GDN2);  dE = A^T dw_aux (-> ws.dE)
//     B7  T1 = dA A^T, dL = -A^T T1 (strictly lower)
//     B9  L half by levels:  de^L_r = sum_{j<r} dL_rj k_j exp(G_r - G_j),
//         dk^L_r = sum_{i>r} dL_ir e_i exp(G_i - G_r),  e = beta k (KDA) or b (.) k (GDN2)
//         (b9_levels' X_s = e F on left rows, k F on right rows; dL X_s, dL^T X_s)
//     B10 in the slab's fragment epilogue (its global loads batched per n-tile before its stores):
//         de = dE exp(G) + de^L, dk = dk_part + dk^L + (beta | b) de, dG = dG_part + dE E + e de^L - k dk^L
//         (back into ws.dGc); KDA: de -> ws.deL; GDN2: db = de (.) k
//     B11 dg_t = sum_{i >= t} dG_i per channel (the last row first, 8 rows' loads at a time) -> dg;
//         KDA: dbeta = <de, k> + <du0, v> per token (rung 8's sums).
//
// Why this shape (and not rungs 12 / 11's kernels templated on the gate kind): the per-channel B9 needs a
// 64 x 64 float64 G slab and float32 F (and, for the L half, e) slabs beside its tiles, which do not fit
// rung 11's G2' (106,240 bytes) without re-laying it out, and rungs 11 / 12's scalar-gate PTX must not
// move. G1' is rung 12's kernel body copied with a per-channel B9 (its tiles are free after the products:
// dP, Z, the k, q slabs, F and the G slab fit in 105,728 bytes); G2 is rung 10's G2 code with the gate
// terms per channel and the levels L half. Every existing kernel's PTX is unchanged (new instantiations and
// new kernels only). Rung 11's G2' changes (dE and de kept on chip, 16-byte k, v loads) are the next step.
//
// Numerics against rung 8 (same front, same products): dQg, dKd, dw_aux, dP, du0, dE are the same float32
// values (the same tiles and products); dq^P equals rung 8's (the same level products on every pair kept),
// hence dq = scale (dQg exp(G) + dq^P) bit for bit, and dv, GDN2's dw (the same expressions of du0) bit for
// bit. u0 = (beta | w) v is formed by mul.rn where rung 8's plain product may have been contracted into
// put_split's lo (rung 10's note), so dA, dL, de^L, de may differ from rung 8's in the last bits, hence
// db = de k and dbeta; float32 summation order differs in dk (dk^L and dk^P now summed apart, then
// dk_part + dk^L + gate de) and dG (four terms in G1, three in G2), hence dg. G1' and G1 write the same
// values (rung 12's argument: the same tiles, products and epilogue expressions; dQg and dKd parked in the
// workspace as float32 and read back). Tests (proofs_tests/test_cuda_backward.cu): "CUDA v14 per-channel
// split backward is rung 8 up to float32 summation order for KDA and GDN2" (dq, dv, dw, dh0 bit for bit;
// dk, dg, db, dbeta within rung 10's bounds, 5e-4 where stored in bf16, 2e-5 in float32: a first guess,
// to be tightened from the device run's printed differences) and "CUDA v14 slab G1 gives the one-block
// G1 gradients bit for bit for KDA and GDN2".
//
// Shared memory. G1': phase 1 rung 12's 9 tiles (82,944 bytes); B9: dP, Z hi + lo, the k, q slabs (tiles
// 0-5), F [64][68] and dP's diagonal (17,664), the G slab [64][64] float64 (32,768) at bytes 72,960-105,728
// over the free tiles 7-8; the tail's dG_part, dKd, Kd [64][65] float32 over tiles 0-5; dgamma [2][64],
// dG_last [64]: 106,496 bytes, 2 blocks per SM (2 x (106,496 + 1,024) = 215,040 <= 233,472).
// G1: rung 8's 167,424 bytes (1 block per SM); b9p_levels uses 105,728 of it.
// G2: 5 bf16 64 x 72 tiles (A hi, lo, then dL hi, lo; X hi, lo: dv_new | dw_aux, then dA, then X_s; the
// k slab) = 46,080, F [64][68] float32 17,408, e [64][64] float32 16,384, G [64][64] float64 32,768, beta
// [64] float32 256: 112,896 bytes, 2 blocks per SM (2 x (112,896 + 1,024) = 227,840 <= 233,472). Phase 1
// (B6-B8) uses 6 tiles (55,296 bytes): Y hi, lo (u0 | E, then T1) lie over the k slab and F's start.
// Static (nvcc 13.0 sm_90a, cuobjdump -res-usage / -sass; no GPU): see RESULTS.md "Rung 14".
//
// Range: rung 13's. Calls outside rung 3's range run rung 2 (via rung 3); H * max(K, V, 64) >= 2^25 runs
// rung 6. Workspace: rung 3's. Requires log-decays <= 0, as rung 6 (the host API checks).
#include <algorithm>
#include <cstdlib>

#include "optimized/cuda/bwd_common.cuh"
#include "optimized/cuda/bwd_v6_tc_b9.cuh"

namespace linattn::cuda::detail {
namespace {

using bwdc::BWs;
using bwdc::C;
using bwdc::kThreads;
using bwdc::kTile;
using bwdc::LF;
using bwdc::LT;
using bf16 = __nv_bfloat16;

// ------------------------------------------------------------------------------------------------
// G1: B9's P half by levels (per-channel gates).
// ------------------------------------------------------------------------------------------------
constexpr std::size_t kP9Bytes = sizeof(bf16) * 6 * std::size_t(kTile) + sizeof(float) * (64 * LF + 64) + sizeof(double) * 64 * 64;
static_assert(kP9Bytes == 105728, "the header's G1 shared-memory figure");
static_assert(kP9Bytes <= bwdc::kSmemMain, "the P-half levels fit in bwd_grads_tc's shared memory");
static_assert((sizeof(bf16) * 6 * kTile + sizeof(float) * (64 * LF + 64)) % sizeof(double) == 0, "G 8-byte aligned");

/// Stage slab kk of k, q (bf16 tiles) and G (float64 [64][64]) for rows < Lc, channels < K (0 elsewhere);
/// e (float32 [64][64], may be null) = gate k as b9_levels forms it (gate = beta_j or b_jd).
template <class Tg>
__device__ __forceinline__ void stage_slab(const KParams& p, const BWs& ws, const bwdc::RowBase& rb, int kk, int Lc,
                                           const float* sbeta, bf16* sKs, bf16* sQs, float* sE, double* sG, int tid) {
  const int K = p.K;
  const bf16 *kb = rb.base(static_cast<const bf16*>(p.k), K), *qb = rb.base(static_cast<const bf16*>(p.q), K);
  const Tg* bgb = rb.base_opt(static_cast<const Tg*>(p.b), K);
  const double* Gb = rb.base(ws.G, rb.KG);
  constexpr int kItems = 64 * 64 / kThreads, kB = 4;
#pragma unroll 1
  for (int t0 = 0; t0 < kItems; t0 += kB) {
    bf16 rk[kB], rq[kB];
    float rgate[kB];
    double rG[kB];
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int idx = tid + (t0 + b) * kThreads, j = idx >> 6, d = kk + (idx & 63);
      const bool in = j < Lc && d < K;
      const int x = j * rb.HK + d;
      rk[b] = in ? kb[x] : __float2bfloat16_rn(0.f);
      rq[b] = (in && sQs) ? qb[x] : __float2bfloat16_rn(0.f);
      rgate[b] = (in && sE) ? (p.gdn2 ? ld(bgb + x) : sbeta[j]) : 0.f;
      rG[b] = in ? Gb[j * rb.HKG + d] : 0.0;
    }
#pragma unroll
    for (int b = 0; b < kB; ++b) {
      const int idx = tid + (t0 + b) * kThreads, j = idx >> 6, dd = idx & 63;
      sKs[j * LT + dd] = rk[b];
      if (sQs) sQs[j * LT + dd] = rq[b];
      if (sE) sE[idx] = rgate[b] * bwdc::bf(rk[b]);  // b9_levels' e
      sG[idx] = rG[b];
    }
  }
}

/// Reference row of row r at level s and F_s[r] (bwd_v6_tc_b9.cuh's b9_levels: left rows have bit s).
__device__ __forceinline__ float level_F(const double* sG, int r, int d, int s, bool& left) {
  left = (r & s) != 0;
  const int m = left ? (r & ~(s - 1)) : ((r & ~(2 * s - 1)) + s);
  const double Gr = sG[r * 64 + d], Gm = sG[m * 64 + d];
  return expf(fminf(float(left ? Gr - Gm : Gm - Gr), 0.f));
}

/// B9's P half for per-channel gates by levels (b9_levels' derivation, its P terms only):
///   dq^P_r = sum_{j<=r} dP_rj k_j exp(G_r - G_j),  dk^P_r = sum_{i>=r} dP_ir q~_i exp(G_i - G_r)
/// per 64-channel slab and level s = 32 .. 1, with one operand tile Z_s[r] = q~_r F_s[r] (left rows) or
/// k_r F_s[r] (right rows): dP Z_s on left output rows reads only right rows of Z_s, dP^T Z_s on right
/// output rows only left rows (the level masks and dP's strict lower triangle zero the rest), which are
/// b9_levels' X_s and Y_s there. Diagonal terms dP_rr k_r, dP_rr q~_r in float32. Writes ws.dqP (dq^P)
/// and ws.dkLP (dk^P) for rows < Lc, channels < K. accP: B5's dP (gemm64's layout). Call after a barrier
/// ending every read of the product tiles; returns after a barrier.
template <class Tg>
__device__ __forceinline__ void b9p_levels(const KParams& p, const BWs& ws, unsigned char* smem_raw, int tok0, int Lc,
                                           const float* sbeta, const float (&accP)[4][4]) {
  using bwdc::each_acc;
  using bwdc::put_split;
  using bwdc::zero;
  const int K = p.K, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int mb = warp & 3, m0 = 16 * mb, n0 = (warp >> 2) * 32;
  const int g = lane >> 2, t = lane & 3;
  const bwdc::RowBase rb(p, tok0, h);
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw);
  bf16 *sPh = tiles, *sPl = tiles + kTile;                  // dP, strictly lower (diagonal in sdg)
  bf16 *sZh = tiles + 2 * kTile, *sZl = tiles + 3 * kTile;  // Z_s of the level being run
  bf16 *sKs = tiles + 4 * kTile, *sQs = tiles + 5 * kTile;  // k, q slabs (exact in bf16)
  float* sF = reinterpret_cast<float*>(tiles + 6 * kTile);  // [64][LF] F_s
  float* sdg = sF + 64 * LF;                                 // [64] dP_rr
  double* sG = reinterpret_cast<double*>(sdg + 64);          // [64][64] G slab

  each_acc(accP, m0, n0, [&](int i, int j, float x) {
    put_split(sPh, sPl, i, j, (i < Lc && j < i) ? x : 0.f);
    if (i == j) sdg[i] = i < Lc ? x : 0.f;
  });
  const float scale = p.scale;
  const bool even = K % 2 == 0 && bwdc::aligned(ws.dqP, 8) && bwdc::aligned(ws.dkLP, 8);
#pragma unroll 1
  for (int kk = 0; kk < K; kk += 64) {
    __syncthreads();  // dP written; the previous slab read
    stage_slab<Tg>(p, ws, rb, kk, Lc, sbeta, sKs, sQs, nullptr, sG, tid);
    float oDq[4][4], oDk[4][4];
    zero(oDq), zero(oDk);
#pragma unroll 1
    for (int s = 32; s >= 1; s >>= 1) {  // levels, P half
      __syncthreads();  // the slab staged; the previous level's F, Z read
      for (int idx = tid; idx < 64 * 64; idx += kThreads) {
        const int r = idx >> 6, d = idx & 63;
        bool left;
        const float F = level_F(sG, r, d, s, left);
        sF[r * LF + d] = F;
        put_split(sZh, sZl, r, d, left ? (scale * bwdc::bf(sQs[r * LT + d])) * F : bwdc::bf(sKs[r * LT + d]) * F);
      }
      __syncthreads();
      // One accumulator for both sides (the left rows' product, then the right rows'): the output row's
      // factor F_s[r] applied after each, float32, as b9_levels' epilogue.
      float a[4][4];
      unsigned mask[4];
      bwdc::level_mask(mask, s <= 8 ? s : 0);
      auto add_f = [&](float (&o)[4][4]) {
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) o[nt][e] += sF[(m0 + g + (e >= 2 ? 8 : 0)) * LF + n0 + nt * 8 + 2 * t + (e & 1)] * a[nt][e];
      };
      auto left_step = [&](int bj) { bwdc::level_kstep<false>(a, sPh, sPl, sZh, sZl, m0, 16 * bj, n0, mask); };
      auto right_step = [&](int bi) { bwdc::level_kstep<true>(a, sPh, sPl, sZh, sZl, m0, 16 * bi, n0, mask); };
      zero(a);
      if (s == 32) {
        if (mb >= 2) left_step(0), left_step(1), add_f(oDq);
        else right_step(2), right_step(3), add_f(oDk);
      } else if (s == 16) {
        if (mb & 1) left_step(mb - 1), add_f(oDq);
        else right_step(mb + 1), add_f(oDk);
      } else {
        left_step(mb), add_f(oDq);
        zero(a);
        right_step(mb), add_f(oDk);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int r = m0 + g + 8 * hh, c = n0 + nt * 8 + 2 * t, d = kk + c;
        if (r >= Lc) continue;
        const int x = r * rb.HK + d;
        const float q0 = oDq[nt][2 * hh] + sdg[r] * bwdc::bf(sKs[r * LT + c]);
        const float q1 = oDq[nt][2 * hh + 1] + sdg[r] * bwdc::bf(sKs[r * LT + c + 1]);
        const float k0 = oDk[nt][2 * hh] + sdg[r] * (scale * bwdc::bf(sQs[r * LT + c]));
        const float k1 = oDk[nt][2 * hh + 1] + sdg[r] * (scale * bwdc::bf(sQs[r * LT + c + 1]));
        if (even) {
          bwdc::st_pair_even(rb.base(ws.dqP, K) + x, q0, q1, d, K);
          bwdc::st_pair_even(rb.base(ws.dkLP, K) + x, k0, k1, d, K);
        } else {
          bwdc::st_pair_w(rb.base(ws.dqP, K) + x, q0, q1, d, K);
          bwdc::st_pair_w(rb.base(ws.dkLP, K) + x, k0, k1, d, K);
        }
      }
  }
  __syncthreads();  // every read of the levels' shared memory done
}

/// G1's Mid (bwd_common.cuh's bwd_grads_tc): rung 10's V10Mid flags (rung 8's kernel, kSplit), its B9
/// the P half for per-channel gates (b9p_levels). Only KDA and GDN2 reach it (bwd_v14_launch).
struct V14Mid {
  static constexpr bool kOwn = true;
  static constexpr bool kBatchLoads = true;
  static constexpr bool kUnrolledB9 = true;  // never reached: run returns true
  static constexpr bool kRowBase = true;
  static constexpr bool kWide = true;
  static constexpr bool kNoExtras = false;
  static constexpr bool kSplit = true;
  template <class Tg>
  static __device__ __forceinline__ bool run(const KParams& p, const BWs& ws, unsigned char* smem_raw, int tok0,
                                             int Lc, const float* sbeta, const float (&accP)[4][4],
                                             const float (&)[4][4]) {
    b9p_levels<Tg>(p, ws, smem_raw, tok0, Lc, sbeta, accP);
    return true;
  }
};

template <class Tg>
void launch_g1(const BwdCall& c, bwdc::Profile& prof) {
  const KParams& p = c.p;
  auto kern = bwdc::bwd_grads_tc<Tg, V14Mid>;
  const std::size_t smem = bwdc::kSmemMain + sizeof(float) * (2 * 256 + C);  // rung 8's
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  bwdc::BwdOut o{c.do_, c.dq, c.dk, c.dv, c.dg, c.dbeta, c.db, c.dw};
  kern<<<dim3(p.num_chunks, p.H), kThreads, smem, c.stream>>>(p, o);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  prof.mark();
}

// ------------------------------------------------------------------------------------------------
// G1': G1 retiled by 64-channel slabs of K (rung 12's bwd12_g1 with the per-channel P half), 2 blocks per SM.
// ------------------------------------------------------------------------------------------------
// Shared memory: phase 1 (products) rung 12's 9 tiles (do; v_new, dv_new, S, dS' hi + lo: 82,944 bytes);
// B9 over them: dP hi, lo, Z hi, lo, k, q slabs (tiles 0-5), F [64][LF] and dP's diagonal [64] float32
// (17,664) and the G slab [64][64] float64 (32,768) from byte 72,960 to 105,728 (over tiles 7-8, free
// after the products); the tail's dG_part, dKd, Kd float32 [64][65] (49,920) over tiles 0-5; dgamma
// [2][64] and dG_last [64] float32 after all of it: 106,496 bytes, 2 x (106,496 + 1,024) = 215,040 <=
// 233,472: 2 blocks per SM.
constexpr std::size_t kS1Tiles = sizeof(bf16) * 9 * std::size_t(kTile);                        // 82,944
constexpr std::size_t kS1GOff = sizeof(bf16) * 6 * std::size_t(kTile) + sizeof(float) * (64 * LF + 64);  // 72,960
constexpr std::size_t kS1GEnd = kS1GOff + sizeof(double) * 64 * 64;                              // 105,728
constexpr std::size_t kS1Smem = (kS1GEnd > kS1Tiles ? kS1GEnd : kS1Tiles) + sizeof(float) * 3 * C;  // 106,496
static_assert(kS1GOff % sizeof(double) == 0, "the G slab 8-byte aligned, right after F and dP's diagonal");
static_assert(kS1Smem == 106496, "the comment's G1' shared-memory figure");
static_assert(2 * (kS1Smem + 1024) <= 233472, "2 blocks per SM");
static_assert(sizeof(float) * 3 * C * bwdc::LD <= sizeof(bf16) * 6 * std::size_t(kTile), "the tail's matrices fit over tiles 0-5");

/// G1' of rung 14 (KDA, GDN2): rung 12's bwd12_g1 (B2, B4, B5 for one 64-channel slab of K of one (chunk,
/// head), the same stagings and products in the same order) with B9's P half by levels (b9p_levels' code for
/// this slab, results kept in registers) and rung 10's G1 tail per channel in the fragment epilogue; writes
/// dq, ws.dwa, ws.dkLP and ws.dGc as G1 (V14Mid) does, the same values by design. Reads no gate (G comes
/// from the prepare); Tg only for rung 8's choice of staging path (w's alignment, GDN2).
template <class Tg>
__global__ void __launch_bounds__(kThreads, 2) bwd14_g1s(KParams p, bwdc::BwdOut out) {
  using bwdc::each_acc;
  using bwdc::gemm64;
  using bwdc::LD;
  using bwdc::put_split;
  using bwdc::zero;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw);
  bf16* sdo = tiles;
  bf16 *svnh = tiles + kTile, *svnl = tiles + 2 * kTile;
  bf16 *sdvnh = tiles + 3 * kTile, *sdvnl = tiles + 4 * kTile;
  bf16 *sSh = tiles + 5 * kTile, *sSl = tiles + 6 * kTile;
  bf16 *sdSh = tiles + 7 * kTile, *sdSl = tiles + 8 * kTile;
  bf16 *sPh = tiles, *sPl = tiles + kTile;                  // dP, strictly lower (after the products)
  bf16 *sZh = tiles + 2 * kTile, *sZl = tiles + 3 * kTile;  // Z_s
  bf16 *sKs = tiles + 4 * kTile, *sQs = tiles + 5 * kTile;  // k, q slabs (exact)
  float* sF = reinterpret_cast<float*>(tiles + 6 * kTile);  // [64][LF] F_s
  float* sdg = sF + 64 * LF;                                 // [64] dP_rr
  double* sG = reinterpret_cast<double*>(smem_raw + kS1GOff);  // [64][64] G slab
  float* sdG = reinterpret_cast<float*>(smem_raw);          // [C][LD] dG_part (after B9)
  float* sdKd = sdG + C * LD;                                // [C][LD] dKd
  float* sKd = sdKd + C * LD;                                // [C][LD] Kd
  float* sdgam = reinterpret_cast<float*>(smem_raw + (kS1GEnd > kS1Tiles ? kS1GEnd : kS1Tiles));  // [2][C]
  float* slast = sdgam + 2 * C;                                                                   // [C]

  const int K = p.K, V = p.V, H = p.H, h = blockIdx.y;
  const int nK = (K + 63) / 64, chunk = blockIdx.x / nK, kk = (blockIdx.x - chunk * nK) * 64;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int mb = warp & 3, m0 = 16 * mb, n0 = (warp >> 2) * 32;
  const int g8 = lane >> 2, t4 = lane & 3;
  int tok0, Lc;
  chunk_of(p, chunk, tok0, Lc);
  const bwdc::RowBase rb(p, tok0, h);
  const BWs ws = bwdc::bwd_ws(p);
  const bf16* dO = static_cast<const bf16*>(out.do_);
  const bf16* v = static_cast<const bf16*>(p.v);
  const float* S = ws.S + (std::int64_t(chunk) * H + h) * K * V;
  const float* dS = ws.dS + (std::int64_t(chunk) * H + h) * K * V;
  const double* Gb = rb.base(ws.G, rb.KG);
  const int HK = rb.HK, HV = rb.HV;

  for (int i = tid; i < 2 * C; i += kThreads) sdgam[i] = 0.f;
  // Rung 8's choice of staging path (rung 12 says why; v's alignment and, for GDN2, w's as rung 8's wideV)
  const bool wideV = V % 4 == 0 && bwdc::aligned(ws.vn, 16) && bwdc::aligned(ws.dvn, 16) && bwdc::aligned(ws.S, 16) &&
                     bwdc::aligned(ws.dS, 16) && bwdc::aligned(dO, 8) && bwdc::aligned(v, 8) &&
                     (!p.gdn2 || bwdc::aligned(static_cast<const Tg*>(p.w), int(4 * sizeof(Tg))));

  float accQ[4][4], accK[4][4], accW[4][4], accP[4][4];
  zero(accQ), zero(accK), zero(accW), zero(accP);
  for (int vv = 0; vv < V; vv += 64) {
    __syncthreads();  // the previous slab's tiles are read (and sdgam initialised)
    if (wideV) {
      constexpr int kQ = C * C / 4 / kThreads, kQB = 2;
#pragma unroll 1
      for (int t0 = 0; t0 < kQ; t0 += kQB) {
        uint2 rdo[kQB];
        float rvn[kQB][4], rdvn[kQB][4], rs[kQB][4], rds[kQB][4];
#pragma unroll
        for (int b = 0; b < kQB; ++b) {
          const int qd = tid + (t0 + b) * kThreads, i = qd >> 4, cc = vv + 4 * (qd & 15), d = kk + i;
          const bool in = i < Lc && cc < V, ins = d < K && cc < V;
          const int x = i * HV + cc;
#pragma unroll
          for (int e = 0; e < 4; ++e) rvn[b][e] = rdvn[b][e] = rs[b][e] = rds[b][e] = 0.f;
          rdo[b] = make_uint2(0u, 0u);
          if (in) {
            rdo[b] = *reinterpret_cast<const uint2*>(rb.base(dO, V) + x);
            bwdc::ld4(rb.base(ws.vn, V) + x, rvn[b]);
            bwdc::ld4(rb.base(ws.dvn, V) + x, rdvn[b]);
          }
          if (ins) bwdc::ld4(S + std::int64_t(d) * V + cc, rs[b]), bwdc::ld4(dS + std::int64_t(d) * V + cc, rds[b]);
        }
#pragma unroll
        for (int b = 0; b < kQB; ++b) {
          const int qd = tid + (t0 + b) * kThreads, i = qd >> 4, c = 4 * (qd & 15), d = kk + i;
          *reinterpret_cast<uint2*>(sdo + i * LT + c) = rdo[b];
          bwdc::put_split4(svnh, svnl, i, c, rvn[b]);
          bwdc::put_split4(sdvnh, sdvnl, i, c, rdvn[b]);
          bwdc::put_split4(sSh, sSl, i, c, rs[b]);
          bwdc::put_split4(sdSh, sdSl, i, c, rds[b]);
          float pr[4];
#pragma unroll
          for (int e = 0; e < 4; ++e) pr[e] = rs[b][e] * rds[b][e];
#pragma unroll
          for (int o = 4; o > 0; o >>= 1)
#pragma unroll
            for (int e = 0; e < 4; ++e) pr[e] += __shfl_xor_sync(0xffffffffu, pr[e], o);
          const float prod = (pr[0] + pr[2]) + (pr[1] + pr[3]);
          if ((lane & 7) == 0 && d < K) sdgam[(c >> 5) * C + i] += prod;  // one writer per half row
        }
      }
    } else {
      constexpr int kItems = C * C / kThreads, kB = 4;
#pragma unroll 1
      for (int t0 = 0; t0 < kItems; t0 += kB) {
        bf16 rdo[kB];
        float rvn[kB], rdvn[kB], rs[kB], rds[kB];
#pragma unroll
        for (int b = 0; b < kB; ++b) {
          const int idx = tid + (t0 + b) * kThreads, i = idx >> 6, cc = vv + (idx & 63), d = kk + i;
          const bool in = i < Lc && cc < V, ins = d < K && cc < V;
          const int x = i * HV + cc;
          rdo[b] = in ? rb.base(dO, V)[x] : __float2bfloat16_rn(0.f);
          rvn[b] = in ? rb.base(ws.vn, V)[x] : 0.f;
          rdvn[b] = in ? rb.base(ws.dvn, V)[x] : 0.f;
          rs[b] = ins ? S[std::int64_t(d) * V + cc] : 0.f;
          rds[b] = ins ? dS[std::int64_t(d) * V + cc] : 0.f;
        }
#pragma unroll
        for (int b = 0; b < kB; ++b) {
          const int idx = tid + (t0 + b) * kThreads, i = idx >> 6, c = idx & 63, d = kk + i;
          sdo[i * LT + c] = rdo[b];
          put_split(svnh, svnl, i, c, rvn[b]);
          put_split(sdvnh, sdvnl, i, c, rdvn[b]);
          put_split(sSh, sSl, i, c, rs[b]);
          put_split(sdSh, sdSl, i, c, rds[b]);
          float prod = rs[b] * rds[b];
#pragma unroll
          for (int o = 16; o > 0; o >>= 1) prod += __shfl_xor_sync(0xffffffffu, prod, o);
          if (lane == 0 && d < K) sdgam[(c >> 5) * C + i] += prod;
        }
      }
    }
    __syncthreads();
    // B4: dQg = do S^T, dKd = v_new dS'^T, dw_aux = -dv_new S^T (negated below); B5: dP = do v_new^T
    gemm64<false, false>(accQ, sdo, nullptr, sSh, sSl, m0, n0);
    gemm64<false, false>(accK, svnh, svnl, sdSh, sdSl, m0, n0);
    gemm64<false, false>(accW, sdvnh, sdvnl, sSh, sSl, m0, n0);
    gemm64<false, false>(accP, sdo, nullptr, svnh, svnl, m0, n0);
  }
  {  // dw_aux of this slab (G2 reads it)
    const bool evenK = K % 2 == 0 && bwdc::aligned(ws.dwa, 8);
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) accW[a][b] = -accW[a][b];
    bwdc::store_acc_pairs(rb.base(ws.dwa, K), HK, kk, K, Lc, evenK, accW, m0, n0);
    // dQg and dKd parked in the workspace (as rung 10's G1 stores them) through the levels, read back by
    // the same thread in the tail: 32 registers fewer across the level loop (with them live it spilled
    // 164 bytes, reloaded in every level); float32 stored and loaded, so the same values.
    const bool evenQK = K % 2 == 0 && bwdc::aligned(ws.dQg, 8) && bwdc::aligned(ws.dKd, 8);
    bwdc::store_acc_pairs(rb.base(ws.dQg, K), HK, kk, K, Lc, evenQK, accQ, m0, n0);
    bwdc::store_acc_pairs(rb.base(ws.dKd, K), HK, kk, K, Lc, evenQK, accK, m0, n0);
  }
  __syncthreads();  // every product tile read: dP, the slabs, F and G overlay them
  // B9's P half by levels for this slab (b9p_levels' code): dP strictly lower and its diagonal, the k, q
  // and G slabs, then per level F_s, Z_s and the two products.
  each_acc(accP, m0, n0, [&](int i, int j, float x) {
    put_split(sPh, sPl, i, j, (i < Lc && j < i) ? x : 0.f);
    if (i == j) sdg[i] = i < Lc ? x : 0.f;
  });
  stage_slab<Tg>(p, ws, rb, kk, Lc, sdg, sKs, sQs, nullptr, sG, tid);  // no e: sdg never read as beta
  const float scale = p.scale;
  float oDq[4][4], oDk[4][4];
  zero(oDq), zero(oDk);
#pragma unroll 1
  for (int s = 32; s >= 1; s >>= 1) {  // levels, slab G1'
    __syncthreads();  // dP and the slab staged; the previous level's F, Z read
    for (int idx = tid; idx < 64 * 64; idx += kThreads) {
      const int r = idx >> 6, d = idx & 63;
      bool left;
      const float F = level_F(sG, r, d, s, left);
      sF[r * LF + d] = F;
      put_split(sZh, sZl, r, d, left ? (scale * bwdc::bf(sQs[r * LT + d])) * F : bwdc::bf(sKs[r * LT + d]) * F);  // Z_s of G1'
    }
    __syncthreads();
    float a[4][4];
    unsigned mask[4];
    bwdc::level_mask(mask, s <= 8 ? s : 0);
    auto add_f = [&](float (&o)[4][4]) {
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          o[nt][e] += sF[(m0 + g8 + (e >= 2 ? 8 : 0)) * LF + n0 + nt * 8 + 2 * t4 + (e & 1)] * a[nt][e];
    };
    auto left_step = [&](int bj) { bwdc::level_kstep<false>(a, sPh, sPl, sZh, sZl, m0, 16 * bj, n0, mask); };
    auto right_step = [&](int bi) { bwdc::level_kstep<true>(a, sPh, sPl, sZh, sZl, m0, 16 * bi, n0, mask); };
    zero(a);
    if (s == 32) {
      if (mb >= 2) left_step(0), left_step(1), add_f(oDq);
      else right_step(2), right_step(3), add_f(oDk);
    } else if (s == 16) {
      if (mb & 1) left_step(mb - 1), add_f(oDq);
      else right_step(mb + 1), add_f(oDk);
    } else {
      left_step(mb), add_f(oDq);
      zero(a);
      right_step(mb), add_f(oDk);
    }
  }
  // The diagonal terms (b9p_levels' expressions): dq^P, dk^P complete in oDq, oDk
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = m0 + g8 + (e >= 2 ? 8 : 0), c = n0 + nt * 8 + 2 * t4 + (e & 1);
      oDq[nt][e] = oDq[nt][e] + sdg[r] * bwdc::bf(sKs[r * LT + c]);
      oDk[nt][e] = oDk[nt][e] + sdg[r] * (scale * bwdc::bf(sQs[r * LT + c]));
    }
  __syncthreads();  // the B9 tiles read: dG_part, dKd, Kd overlay them
  // Rung 10's G1 tail per (token r, channel d) in the fragments' epilogue (rung 12's code, G per channel)
  {
    const bf16 *kb = rb.base(static_cast<const bf16*>(p.k), K), *qb = rb.base(static_cast<const bf16*>(p.q), K);
    const float *Qgb = rb.base(ws.Qg, K), *Kdb = rb.base(ws.Kd, K);
    const float *dQgb = rb.base(ws.dQg, K), *dKdb = rb.base(ws.dKd, K);
    float* dkLPb = rb.base(ws.dkLP, K);
    bf16* dqb = rb.base(static_cast<bf16*>(out.dq), K);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g8 + (e >= 2 ? 8 : 0), c = n0 + nt * 8 + 2 * t4 + (e & 1), d = kk + c;
        if (r >= Lc || d >= K) continue;
        const int x = r * HK + d;
        const double Gi = rb.G(Gb, r, d), Gl = rb.G(Gb, Lc - 1, d);
        const float kv = bwdc::bf(kb[x]), qv = p.scale * bwdc::bf(qb[x]);
        const float dQg = dQgb[x], dKd = dKdb[x], dqP = oDq[nt][e], dkP = oDk[nt][e];
        const float Qg = Qgb[x], Kd = Kdb[x];
        sdG[r * LD + c] = dQg * Qg - dKd * Kd + qv * dqP - kv * dkP;
        sdKd[r * LD + c] = dKd, sKd[r * LD + c] = Kd;
        const float eg = expf(float(Gi));
        st(dqb + x, p.scale * (dQg * eg + dqP));
        dkLPb[x] = dKd * expf(float(Gl - Gi)) + dkP;
      }
  }
  __syncthreads();  // dG_part, dKd, Kd complete
  // B10's dG_last per channel: rows in order, as rung 10's G1 tail
  if (tid < C && kk + tid < K) {
    float kdk = 0.f;
    for (int i = 0; i < Lc; ++i) kdk += sdKd[i * LD + tid] * sKd[i * LD + tid];
    slast[tid] = kdk + (sdgam[tid] + sdgam[C + tid]) * expf(float(rb.G(Gb, Lc - 1, kk + tid)));
  }
  __syncthreads();
  float* dGcb = rb.base(ws.dGc, K);
  for (int idx = tid; idx < Lc * C; idx += kThreads) {
    const int i = idx >> 6, c = idx & 63;
    if (kk + c >= K) continue;
    const float x = sdG[i * LD + c];
    dGcb[i * HK + kk + c] = i == Lc - 1 ? x + slast[c] : x;
  }
}

template <class Tg>
void launch_g1s(const BwdCall& c, bwdc::Profile& prof) {
  const KParams& p = c.p;
  auto kern = bwd14_g1s<Tg>;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kS1Smem)));
  bwdc::BwdOut o{c.do_, c.dq, c.dk, c.dv, c.dg, c.dbeta, c.db, c.dw};
  const int nK = (p.K + 63) / 64;
  kern<<<dim3(unsigned(p.num_chunks) * unsigned(nK), p.H), kThreads, kS1Smem, c.stream>>>(p, o);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  prof.mark();
}

// ------------------------------------------------------------------------------------------------
// G2: the WY side for per-channel gates.
// ------------------------------------------------------------------------------------------------
constexpr std::size_t kG2TileBytes = sizeof(bf16) * 5 * std::size_t(kTile);  // 46,080
constexpr std::size_t kG2Smem = kG2TileBytes + sizeof(float) * (64 * LF + 64 * 64) + sizeof(double) * 64 * 64 +
                                sizeof(float) * C;  // 112,896
static_assert(kG2Smem == 112896, "the header's G2 shared-memory figure");
static_assert(6 * sizeof(bf16) * kTile <= kG2TileBytes + sizeof(float) * (64 * LF + 64 * 64), "phase 1's 6 tiles fit");
static_assert(2 * (kG2Smem + 1024) <= 233472, "2 blocks per SM");

/// A 64 x 64 float32 tile of a [rows, W] array (columns col0.., zero outside Lc x W) as hi + lo
/// (bwd_v10_split.cu's stage_f32).
__device__ __forceinline__ void stage_f32(bf16* hi, bf16* lo, const float* base, int HW, int col0, int W, int Lc,
                                          bool quads, int tid) {
  if (quads) return bwdc::stage_quads(hi, lo, base, HW, col0, W, Lc, tid);
  constexpr int kItems = C * C / kThreads;
  float x[kItems];
#pragma unroll
  for (int t = 0; t < kItems; ++t) {
    const int idx = tid + t * kThreads, i = idx >> 6, c = col0 + (idx & 63);
    x[t] = (i < Lc && c < W) ? base[i * HW + c] : 0.f;
  }
#pragma unroll
  for (int t = 0; t < kItems; ++t) {
    const int idx = tid + t * kThreads;
    bwdc::put_split(hi, lo, idx >> 6, idx & 63, x[t]);
  }
}

/// G2 of rung 14 (KDA, GDN2): B6, B8, B7, B9's L half by levels, the rest of B10, B11 per (chunk, head),
/// from G1's hand-over (ws.dwa, ws.dkLP, ws.dGc) and the prepare's A, E, G and the dstates' dv_new. The
/// file comment lists the stages and the shared memory.
template <class Tg>
__global__ void __launch_bounds__(kThreads, 2) bwd14_wy(KParams p, bwdc::BwdOut out) {
  using bwdc::each_acc;
  using bwdc::gemm64;
  using bwdc::put_split;
  using bwdc::zero;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw);
  bf16 *sAh = tiles, *sAl = tiles + kTile;                  // A hi, lo (phase 1), then dL hi, lo
  bf16 *sXh = tiles + 2 * kTile, *sXl = tiles + 3 * kTile;  // dv_new | dw_aux slab, then dA, then X_s
  bf16 *sYh = tiles + 4 * kTile, *sYl = tiles + 5 * kTile;  // u0 | E slab, then T1 (phase 1 only)
  bf16* sKs = tiles + 4 * kTile;                            // k slab (levels), over Y hi
  float* sF = reinterpret_cast<float*>(smem_raw + kG2TileBytes);  // [64][LF] F_s (levels), over Y lo's end
  float* sE = sF + 64 * LF;                                        // [64][64] e slab
  double* sG = reinterpret_cast<double*>(sE + 64 * 64);            // [64][64] G slab
  float* sbeta = reinterpret_cast<float*>(sG + 64 * 64);           // [C] beta (KDA; 0 for GDN2)

  const int K = p.K, V = p.V, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int mb = warp & 3, m0 = 16 * mb, n0 = (warp >> 2) * 32;
  const int g8 = lane >> 2, t4 = lane & 3;
  int tok0, Lc;
  chunk_of(p, blockIdx.x, tok0, Lc);
  const bwdc::RowBase rb(p, tok0, h);
  const BWs ws = bwdc::bwd_ws(p);
  const bool gdn2 = p.gdn2;
  const bf16 *kb = rb.base(static_cast<const bf16*>(p.k), K), *vb = rb.base(static_cast<const bf16*>(p.v), V);
  const Tg* beta = static_cast<const Tg*>(p.beta);
  const Tg* wgb = rb.base_opt(static_cast<const Tg*>(p.w), V);
  const Tg* bgb = rb.base_opt(static_cast<const Tg*>(p.b), K);
  const int HK = rb.HK, HV = rb.HV;

  for (int i = tid; i < C; i += kThreads) sbeta[i] = (!gdn2 && i < Lc) ? ld(beta + rb.r0 + std::int64_t(i) * rb.H) : 0.f;
  stage_f32(sAh, sAl, rb.base(ws.A, C), rb.HC, 0, C, Lc, bwdc::aligned(ws.A, 16), tid);
  __syncthreads();  // sbeta (u0's staging)

  // B6 and B8, V slabs: dA = dv_new u0^T;  du0 = A^T dv_new;  dv = (beta | w) du0, GDN2 dw = du0 v
  float accA[4][4];
  zero(accA);
  {
    const float* dvnb = rb.base(ws.dvn, V);
    float* du0b = rb.base(ws.du0, V);
    bf16* dvb = rb.base(static_cast<bf16*>(out.dv), V);
    Tg* dwb = rb.base_opt(static_cast<Tg*>(out.dw), V);
    const bool quadsV = V % 4 == 0 && bwdc::aligned(ws.dvn, 16);
    const bool evenV = V % 2 == 0 && bwdc::aligned(ws.du0, 8);
    for (int vv = 0; vv < V; vv += 64) {
      __syncthreads();  // the previous slab's tiles read
      stage_f32(sXh, sXl, dvnb, HV, vv, V, Lc, quadsV, tid);
      constexpr int kItems = C * C / kThreads;
      float u[kItems];  // u0 = (beta | w) v (F2) by mul.rn, not fused into put_split's lo
#pragma unroll
      for (int t = 0; t < kItems; ++t) {
        const int idx = tid + t * kThreads, i = idx >> 6, cc = vv + (idx & 63);
        const bool in = i < Lc && cc < V;
        u[t] = in ? __fmul_rn(gdn2 ? ld(wgb + i * HV + cc) : sbeta[i], ld(vb + i * HV + cc)) : 0.f;
      }
#pragma unroll
      for (int t = 0; t < kItems; ++t) {
        const int idx = tid + t * kThreads;
        put_split(sYh, sYl, idx >> 6, idx & 63, u[t]);
      }
      __syncthreads();
      gemm64<false, false>(accA, sXh, sXl, sYh, sYl, m0, n0);
      float accU[4][4];
      zero(accU);
      gemm64<true, true>(accU, sAh, sAl, sXh, sXl, m0, n0);
      if (!gdn2) {
        bwdc::store_acc_pairs(du0b, HV, vv, V, Lc, evenV, accU, m0, n0);  // KDA's dbeta reads it
        each_acc(accU, m0, n0, [&](int j, int c, float x) {
          if (j < Lc && vv + c < V) st(dvb + j * HV + vv + c, sbeta[j] * x);  // B10: dv = beta du0
        });
      } else {
        each_acc(accU, m0, n0, [&](int j, int c, float x) {
          if (j < Lc && vv + c < V) {
            const int y = j * HV + vv + c;
            st(dvb + y, ld(wgb + y) * x);  // rung 8's dv = w du0
            st(dwb + y, x * ld(vb + y));   // and dw = du0 v
          }
        });
      }
    }
  }
  // B6 and B8, K slabs: dA += dw_aux E^T;  dE = A^T dw_aux (-> ws.dE)
  {
    const float *dwab = rb.base(ws.dwa, K), *Eb = rb.base(ws.E, K);
    float* dEb = rb.base(ws.dE, K);
    const bool quadsK = K % 4 == 0 && bwdc::aligned(ws.dwa, 16) && bwdc::aligned(ws.E, 16);
    const bool evenK = K % 2 == 0 && bwdc::aligned(ws.dE, 8);
    for (int kk = 0; kk < K; kk += 64) {
      __syncthreads();
      stage_f32(sXh, sXl, dwab, HK, kk, K, Lc, quadsK, tid);
      stage_f32(sYh, sYl, Eb, HK, kk, K, Lc, quadsK, tid);
      __syncthreads();
      gemm64<false, false>(accA, sXh, sXl, sYh, sYl, m0, n0);
      float accE[4][4];
      zero(accE);
      gemm64<true, true>(accE, sAh, sAl, sXh, sXl, m0, n0);
      bwdc::store_acc_pairs(dEb, HK, kk, K, Lc, evenK, accE, m0, n0);
    }
  }
  __syncthreads();  // the slab tiles read
  // B7: dA strictly lower as an operand; T1 = dA A^T (strictly lower kept); dL = -A^T T1
  each_acc(accA, m0, n0, [&](int i, int j, float x) { put_split(sXh, sXl, i, j, (i < Lc && j < i) ? x : 0.f); });
  __syncthreads();
  float acc[4][4];
  zero(acc);
  gemm64<false, false>(acc, sXh, sXl, sAh, sAl, m0, n0);
  each_acc(acc, m0, n0, [&](int i, int j, float x) { put_split(sYh, sYl, i, j, j < i ? x : 0.f); });
  __syncthreads();
  zero(acc);
  gemm64<true, true>(acc, sAh, sAl, sYh, sYl, m0, n0);
  __syncthreads();  // every read of A, dA and T1 done: the levels' shared memory is free
  // B9's L half by levels (b9_levels' L terms): dL into A's tiles
  bf16 *sLh = sAh, *sLl = sAl;
  each_acc(acc, m0, n0, [&](int i, int j, float x) { put_split(sLh, sLl, i, j, (i < Lc && j < i) ? -x : 0.f); });
  const float *dEb = rb.base(ws.dE, K), *dkpb = rb.base(ws.dkLP, K), *Eb = rb.base(ws.E, K);
  float* dGcb = rb.base(ws.dGc, K);
  float* deb = rb.base(ws.deL, K);
  bf16* dkb = rb.base(static_cast<bf16*>(out.dk), K);
  Tg* dbb = rb.base_opt(static_cast<Tg*>(out.db), K);
#pragma unroll 1
  for (int kk = 0; kk < K; kk += 64) {
    __syncthreads();  // dL written; the previous slab read
    stage_slab<Tg>(p, ws, rb, kk, Lc, sbeta, sKs, nullptr, sE, sG, tid);
    float oDe[4][4], oDk[4][4];
    zero(oDe), zero(oDk);
#pragma unroll 1
    for (int s = 32; s >= 1; s >>= 1) {  // levels, L half
      __syncthreads();  // the slab staged; the previous level's F, X read
      for (int idx = tid; idx < 64 * 64; idx += kThreads) {
        const int r = idx >> 6, d = idx & 63;
        bool left;
        const float F = level_F(sG, r, d, s, left);
        sF[r * LF + d] = F;
        put_split(sXh, sXl, r, d, (left ? sE[r * 64 + d] : bwdc::bf(sKs[r * LT + d])) * F);  // b9_levels' X_s
      }
      __syncthreads();
      float a[4][4];  // one accumulator for both sides, as in b9p_levels
      unsigned mask[4];
      bwdc::level_mask(mask, s <= 8 ? s : 0);
      auto add_f = [&](float (&o)[4][4]) {
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            o[nt][e] += sF[(m0 + g8 + (e >= 2 ? 8 : 0)) * LF + n0 + nt * 8 + 2 * t4 + (e & 1)] * a[nt][e];
      };
      auto left_step = [&](int bj) { bwdc::level_kstep<false>(a, sLh, sLl, sXh, sXl, m0, 16 * bj, n0, mask); };
      auto right_step = [&](int bi) { bwdc::level_kstep<true>(a, sLh, sLl, sXh, sXl, m0, 16 * bi, n0, mask); };
      zero(a);
      if (s == 32) {
        if (mb >= 2) left_step(0), left_step(1), add_f(oDe);
        else right_step(2), right_step(3), add_f(oDk);
      } else if (s == 16) {
        if (mb & 1) left_step(mb - 1), add_f(oDe);
        else right_step(mb + 1), add_f(oDk);
      } else {
        left_step(mb), add_f(oDe);
        zero(a);
        right_step(mb), add_f(oDk);
      }
    }
    // B10 in the fragments' epilogue (each (r, d) of the slab is this thread's alone): per n-tile, the
    // global loads of its 4 entries before any of their stores (rung 11's lesson: loads behind possibly
    // aliasing stores cost one round trip each).
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      float rdE[4], rdkp[4], rE[4], rdG[4], rgate[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g8 + (e >= 2 ? 8 : 0), d = kk + n0 + nt * 8 + 2 * t4 + (e & 1), x = r * HK + d;
        const bool in = r < Lc && d < K;
        rdE[e] = in ? dEb[x] : 0.f, rdkp[e] = in ? dkpb[x] : 0.f, rE[e] = in ? Eb[x] : 0.f;
        rdG[e] = in ? dGcb[x] : 0.f;
        rgate[e] = in ? (gdn2 ? ld(bgb + x) : sbeta[r]) : 0.f;
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g8 + (e >= 2 ? 8 : 0), c = n0 + nt * 8 + 2 * t4 + (e & 1), d = kk + c;
        if (r >= Lc || d >= K) continue;
        const int x = r * HK + d;
        const float deL = oDe[nt][e], dkL = oDk[nt][e], dE = rdE[e];
        const float de = dE * expf(float(sG[r * 64 + c])) + deL;  // rung 8's de
        const float kv = bwdc::bf(sKs[r * LT + c]);
        st(dkb + x, rdkp[e] + dkL + rgate[e] * de);
        dGcb[x] = rdG[e] + dE * rE[e] + sE[r * 64 + c] * deL - kv * dkL;
        if (gdn2) st(dbb + x, de * kv);  // rung 8's db = de k
        else deb[x] = de;
      }
    }
  }
  __syncthreads();  // de and dG complete (global memory, written by this block)
  // B11: dg_t = sum_{i >= t} dG_i per channel, the last row first (dG_last is in its last row)
  Tg* dgb = rb.base_opt(static_cast<Tg*>(out.dg), K);
  for (int d = tid; d < K; d += kThreads) {
    float a = 0.f;
    int i = Lc - 1;
    for (; i >= 7; i -= 8) {  // 8 rows' loads before their adds and stores (for all the compiler knows,
      float xg[8];            // the stores to dg may alias dG): the same adds in the same order
#pragma unroll
      for (int e = 0; e < 8; ++e) xg[e] = dGcb[(i - e) * HK + d];
#pragma unroll
      for (int e = 0; e < 8; ++e) a += xg[e], st(dgb + (i - e) * HK + d, a);
    }
    for (; i >= 0; --i) a += dGcb[i * HK + d], st(dgb + i * HK + d, a);
  }
  if (gdn2) return;
  // KDA, per token (one warp each): dbeta = <de, k> + <du0, v> (rung 8's sums)
  const float* du0b = rb.base(ws.du0, V);
  Tg* dbetab = rb.base_opt(static_cast<Tg*>(out.dbeta), 1);
  for (int i = warp; i < Lc; i += kThreads / 32) {
    float a = 0.f;
    for (int d = lane; d < K; d += 32) a += deb[i * HK + d] * ld(kb + i * HK + d);
    for (int c = lane; c < V; c += 32) a += du0b[i * HV + c] * ld(vb + i * HV + c);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
    if (lane == 0) st(dbetab + i * rb.H, a);
  }
}

template <class Tg>
void launch_g2(const BwdCall& c, bwdc::Profile& prof) {
  const KParams& p = c.p;
  auto kern = bwd14_wy<Tg>;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kG2Smem)));
  bwdc::BwdOut o{c.do_, c.dq, c.dk, c.dv, c.dg, c.dbeta, c.db, c.dw};
  kern<<<dim3(p.num_chunks, p.H), kThreads, kG2Smem, c.stream>>>(p, o);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  prof.mark();
}

/// G1: G1' (bwd14_g1s, one block per 64-channel slab) unless its grid's x extent num_chunks * ceil(K / 64)
/// reaches 2^31 or the test hook LINATTN_BWD14_ONE_BLOCK_G1 is set (any value): then the one-block G1
/// (bwd_grads_tc<Tg, V14Mid>), which writes the same values (proofs_tests/test_cuda_backward.cu compares them).
void g1(const BwdCall& c, bwdc::Profile& prof) {
  const bool one_block = std::getenv("LINATTN_BWD14_ONE_BLOCK_G1") != nullptr ||
                         !bwdc::slab_grid_fits(c.p);
  if (c.gate_dtype == 0) one_block ? launch_g1<float>(c, prof) : launch_g1s<float>(c, prof);
  else one_block ? launch_g1<bf16>(c, prof) : launch_g1s<bf16>(c, prof);
}

void g2(const BwdCall& c, bwdc::Profile& prof) {
  if (c.gate_dtype == 0) launch_g2<float>(c, prof);
  else launch_g2<bf16>(c, prof);
}

}  // namespace

std::size_t bwd_v14_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v14_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.gate != kGateChannel && !p.gdn2) return bwd_v13_launch(c);  // DeltaNet, GDN: rung 13
  if (p.N == 0) return;
  if (!bwdc::in_rung3_range(c)) return bwd_v3_launch(c);    // outside the range: rung 2 (via rung 3)
  if (!bwdc::in_rowbase_range(p)) return bwd_v6_launch(c);  // RowBase's 32-bit offsets
  bwdc::Profile prof(c.stream, "bwd_v14");
  bwdc::bwd_v3_front(c, prof, /*levels_intra=*/true, /*wide_extras=*/true);  // rung 8's front
  if (p.num_chunks > 0) {
    g1(c, prof);  // the state side: "grads" in the profile
    g2(c, prof);  // the WY side: "wy"
  }
}

}  // namespace linattn::cuda::detail
