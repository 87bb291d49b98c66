// optimized/cuda/bwd_v14_pchan.cu -- rung 14 of the CUDA backward ladder: rung 10's split of the
// chunk-gradient kernel into G1 (state side) and G2 (WY side) extended to per-channel gates, KDA and
// GDN2 (issue 6; bench/analysis_bwd_plan.md sections 3.1-3.3). WRITTEN IN SESSION 9, NOT YET RUN ON A GPU.
//
// DeltaNet and GDN run rung 13 unchanged (bwd_v13_launch), so rung 14 is a superset of rung 13. For KDA
// and GDN2, rungs 10-13 ran rung 8 (one grads kernel, 7.75 / 7.11 ms at B=8 T=4096 H=16 K=V=128). Here:
// rung 8's front (bwd_v3_front with the levels intra kernel and the wide extras), then per (chunk, head)
//   G1 = bwd_grads_tc<Tg, V14Mid> (bwd_common.cuh, Mid::kSplit): rung 10's G1 -- B2 (dgamma), B4 (dQg,
//     dKd, dw_aux), B5 (dP) and its tail -- with B9's P half for per-channel gates by binary levels
//     (b9p_levels below, the P half of bwd_v6_tc_b9.cuh's b9_levels):
//       dq^P_r = sum_{j<=r} dP_rj k_j exp(G_r - G_j),  dk^P_r = sum_{i>=r} dP_ir q~_i exp(G_i - G_r),
//     then (kSplit's tail, already per channel) dq (final), dk_part = dKd exp(G_last - G) + dk^P (ws.dkLP),
//     dG_part = dQg Qg - dKd Kd + q~ dq^P - k dk^P with dG_last folded into the last row (ws.dGc, [C, K]).
//   G2 = bwd14_wy<Tg> below: rung 10's G2 (bwd_v10_split.cu) with per-channel gates:
//     B6  dA = dv_new u0^T + dw_aux E^T,  u0 = beta v (KDA) or w (.) v (GDN2)
//     B8  du0 = A^T dv_new (-> ws.du0, KDA's dbeta), dv = beta du0 (KDA) or w (.) du0, dw = du0 (.) v
//         (GDN2);  dE = A^T dw_aux (-> ws.dE)
//     B7  T1 = dA A^T, dL = -A^T T1 (strictly lower)
//     B9  L half by levels (b9l_levels below):  de^L_r = sum_{j<r} dL_rj k_j exp(G_r - G_j),
//         dk^L_r = sum_{i>r} dL_ir e_i exp(G_i - G_r),  e = beta k (KDA) or b (.) k (GDN2)
//     B10 in the slab's fragment epilogue: de = dE exp(G) + de^L, dk = dk_part + dk^L + (beta | b) de,
//         dG = dG_part + dE E + e de^L - k dk^L (back into ws.dGc); KDA: de -> ws.deL; GDN2: db = de (.) k
//     B11 dg_t = sum_{i >= t} dG_i per channel (the last row first) -> dg; KDA: dbeta = <de, k> + <du0, v>.
//
// Why this shape (and not rungs 12 / 11's kernels templated on the gate kind): the per-channel B9 needs
// a 64 x 64 float64 G slab, float32 F and e slabs beside its tiles (112,640 bytes for the L half alone),
// which do not fit rung 12's G1' (84,224 bytes, 2 blocks per SM) or rung 11's G2' (106,240) without
// re-laying them out; and their scalar-gate PTX must not move. G1 is rung 10's kernel (already split and
// per-channel in its tail; only its Mid is new), G2 is rung 10's G2 code with the gate terms per channel;
// both new instantiations leave every existing kernel's PTX unchanged. Rung 12 / 11's retilings (slabs,
// dE kept on chip) are the next step for these two kernels.
//
// Numerics against rung 8 (same front, same products): dQg, dKd, dw_aux, dP, dA, du0, dE, dL are the same
// float32 values (the same tiles and products; u0 and e formed by mul.rn where rung 8's plain product may
// have been contracted into put_split's lo, as rung 10 notes). The P half's level products see the same
// operands on every pair they keep (X_s on right rows = k F_s and Y_s on left rows = q~ F_s are one tile
// Z_s here: each level's masks and dP's lower triangle zero the other rows), so dq^P, and with it dq,
// equal rung 8's as numbers; de^L likewise (dL X_s, the same tiles), hence de, dv, dw, db. Float32
// summation order differs in dk^{L,P} (rung 8 accumulates dL^T X_s and dP^T Y_s into one fragment per
// level; here two kernels), hence dk, and in dG (six terms, now four in G1 and three in G2), hence dg.
// dbeta = <de, k> + <du0, v> is rung 8's sum of the same terms in the same order. The test (proofs_tests/test_cuda_backward.cu, "CUDA v14 per-channel split backward is rung 8 up to float32
// summation order for KDA and GDN2") holds dq, dv, dh0, db, dw, dbeta equal as numbers (relative RMS 0)
// where they are argued equal and dk, dg to rung 10's bounds (5e-4 bf16-stored, 2e-5 float32): a first
// guess, to be tightened from the device run's printed differences.
//
// Shared memory. G1: rung 10's (bwd_grads_tc, 167,424 bytes: one block per SM); b9p_levels uses 6 tiles,
// F, dP's diagonal and the G slab (105,728 bytes) of it. G2: 5 bf16 64 x 72 tiles (A hi, lo, then dL hi,
// lo; X hi, lo: dv_new | dw_aux, then dA, then X_s; Y hi, lo: u0 | E, then T1 -- over the k slab and F;
// the k slab) = 46,080, F [64][68] float32 17,408, e [64][64] float32 16,384, G [64][64] float64 32,768,
// beta [64] float32 256: 112,896 bytes; 2 blocks per SM need 2 x (112,896 + 1,024) = 227,840 <= 233,472.
// In phase 1 (B6-B8) the tiles Y hi, lo lie over the k slab and the start of F (6 tiles, 55,296 bytes).
//
// Range: rung 13's. Calls outside rung 3's range run rung 2 (via rung 3); H * max(K, V, 64) >= 2^25 runs
// rung 6. Workspace: rung 3's. Requires log-decays <= 0, as rung 6 (the host API checks).
#include <algorithm>

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

void g1(const BwdCall& c, bwdc::Profile& prof) {
  if (c.gate_dtype == 0) launch_g1<float>(c, prof);
  else launch_g1<bf16>(c, prof);
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
