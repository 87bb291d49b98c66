// optimized/cuda/bwd_v4_tc_tail.cu -- rung 4 of the CUDA backward ladder (`best` since session 5;
// RESULTS.md "Rung 4"): rung 3 (bwd_v3_async.cu: prepare, states, dstates on tensor cores) with the float32 FFMA
// parts of its chunk-gradient kernel moved onto tensor cores (docs/derivation-backward.md,
// "Chunked backward", B7 and B9):
//
//   bwd_grads_tc<Tg, V4Mid> (bwd_common.cuh): rung 2's kernel - the products B4-B6, B8 and the tail
//   B10, B11 are the same code - with its middle replaced by V4Mid below:
//     B7  T1 = dA A^T, dL = -A^T T1 (strictly lower parts): two 64^3 products with A, dA, T1 split
//         into bf16 hi + lo (hi*hi + hi*lo + lo*hi, as rung 2's products). A's hi + lo tiles are
//         the ones the products staged; dA and T1 go from the mma accumulators into tiles.
//     B9  DeltaNet, GDN (scalar or no gate): Gam_ij = exp(G_i - G_j) (j <= i, <= 1) is applied
//         elementwise to the 64 x 64 matrices before they become operands, M1 = dL (.) Gam,
//         M1b = Diag(beta) M1, M2 = dP (.) Gam (each hi + lo), and then per 64-channel slab
//           de^L = M1 k,  dq^P = M2 k,  dk^{L,P} = M1b^T k + scale M2^T q
//         four 64 x 64 x 64 products with k and q exact in bf16 (e = beta k: beta is moved onto
//         M1's rows, scale onto the result). Not "exp(G_i) and exp(-G_j) as row and column
//         scalings": exp(-G_j) overflows float32 for G_j < -88 (log-decays down to -1000 are tested).
//         KDA, GDN2 (per-channel gates): rung 2's staged float32 B9 (bwd_common.cuh), fed with dL
//         and dP from the tensor-core B7. The binary-level factoring of v4_levels.cu would carry over
//         (the pair sums are the forward's L and P shapes, with k / e / q slabs as the other
//         operand), but it needs a level loop per product and per 64-channel slab; not written here
//         (rung 6 does it: bwd_v6_tc_b9.cuh, V6Mid below).
//
// Shared memory: rung 2's, 167,424 bytes (the float32 overlay of its B7 / B9, 165,120, is larger
// than the 17 bf16 product tiles, 156,672; plus 2,304 for dgamma and beta): one block of 8 warps
// per SM. B7 and B9 reuse the product tiles (A hi, lo stay; dA / M1, T1 / M1b, M2 and the k, q
// slabs over the others: 10 tiles and 512 bytes of G; the static_assert reserves 11). Not reduced:
// DeltaNet and GDN would fit in 158,976 bytes without the overlay, still one block per SM; KDA and
// GDN2 use rung 2's overlay.
//
// Numerics (where precision goes): B7's products see about 16 bits of A, dA, T1 (hi + lo, lo*lo
// dropped: relative error about 2^-16 per term, float32 accumulation); B9's M1, M1b, M2 are rounded
// to float32 before their hi + lo split (rung 2 rounded k Gam instead), k and q exact. Both are
// below rung 3's bf16-level error (its recurrences take bf16 operands), so the bounds are rung 3's:
// 1e-2 for dq, dk, dv, dh0 and 2e-2 for the gate gradients (proofs_tests/test_cuda_backward.cu).
//
// Range: as rung 3 (bf16 inputs, 16 <= K <= 128); other calls run rung 3's path to rung 2, so
// BwdVersion::v4_tc_tail accepts every call. Workspace: rung 3's.
// Algebra checked without a GPU by a float64 numpy model of these tiles against rung 2's direct
// B7 / B9 sums (largest difference 1.2e-15 relative; the script and numbers are in RESULTS.md,
// "Rung 4"). Measured (H200, session 5 call 4, B=8 T=4096 H=16 K=V=128 bf16): backward 16.43 /
// 16.71 / 30.72 / 32.15 ms for DN / GDN / KDA / GDN2 (rung 3 21.55 / 22.05 / 31.81 / 33.24); grads
// kernel 13.8 ms for DN (rung 3 19.0). BwdVersion::best since then (tests, sanitizers, mutants).
#include <cstdio>
#include <cstdlib>

#include "optimized/cuda/bwd_common.cuh"
#include "optimized/cuda/bwd_v6_tc_b9.cuh"

namespace linattn::cuda::detail {
namespace {

using bwdc::BWs;
using bwdc::C;
using bwdc::kThreads;
using bwdc::kTile;
using bwdc::LD;
using bwdc::LT;
using bwdc::Profile;
using bf16 = __nv_bfloat16;

/// Rung 4's middle of bwd_grads_tc: B7 on tensor cores for every operator, B9 on tensor cores for
/// scalar gates and DeltaNet (returns true), else dL and dP left in the float32 overlay (false).
struct V4Mid {
  static constexpr bool kOwn = true;
  static constexpr bool kBatchLoads = false;  // rung 5's V5Mid sets it (bwd_common.cuh)
  static constexpr bool kUnrolledB9 = false;  // likewise
  static constexpr bool kRowBase = false;     // rung 7's V7Mid sets it (bwd_common.cuh, RowBase)
  static constexpr bool kWide = false;        // rung 8's V8Mid sets it (bwd_common.cuh, full-width accesses)
  static constexpr bool kNoExtras = false;    // rung 9's V9Mid sets it (bwd_common.cuh, F1 and F2 formed in the kernel)
  static constexpr bool kSplit = false;       // rung 10's V10Mid sets it (bwd_common.cuh, G1 of the split)
  static constexpr bool kHiOnly = false;      // rung 15's V15Mid sets it (hi-only operands, one MMA per product)

  template <class Tg>
  static __device__ __forceinline__ bool run(const KParams& p, const BWs& ws, unsigned char* smem_raw, int tok0,
                                             int Lc, const float* sbeta, const float (&accP)[4][4],
                                             const float (&accA)[4][4]) {
    return run_impl<Tg, false>(p, ws, smem_raw, tok0, Lc, sbeta, accP, accA);
  }
  /// kBatch (rung 5's V5Mid): B9's k, q slab staging loads 8 items per thread before storing them.
  /// kLevels (rung 6's V6Mid): per-channel gates run B9 by levels on tensor cores (bwd_v6_tc_b9.cuh).
  /// kRB (rung 7's V7Mid): the [rows, W] arrays through per-block bases and 32-bit offsets (RowBase).
  /// kW (rung 8's V8Mid, with kRB): de^L, dq^P, dk^{L,P} stored by column pairs (st_pair_w).
  /// kSP (rung 10's V10Mid, with kW; DeltaNet and GDN only): B9's P half alone, dq^P = M2 k into ws.dqP
  /// and dk^P = scale M2^T q into ws.dkLP; no B7, no M1 (the L half is G2's, bwd_v10_split.cu).
  /// kHi (rung 15's V15Mid): hi-only operands (put_op, lo_op; b9_levels<.., kHi>).
  template <class Tg, bool kBatch, bool kLevels = false, bool kRB = false, bool kW = false, bool kSP = false,
            bool kHi = false>
  static __device__ __forceinline__ bool run_impl(const KParams& p, const BWs& ws, unsigned char* smem_raw,
                                                  int tok0, int Lc, const float* sbeta, const float (&accP)[4][4],
                                                  const float (&accA)[4][4]) {
    using bwdc::each_acc;
    using bwdc::gemm64;
    using bwdc::lo_op;
    using bwdc::put_op;
    using bwdc::zero;
    const int K = p.K, H = p.H, h = blockIdx.y;
    const int tid = threadIdx.x, nt = blockDim.x, warp = tid >> 5;
    const int m0 = (warp & 3) * 16, n0 = (warp >> 2) * 32;
    auto row = [&](int i) { return std::int64_t(tok0 + i) * H + h; };
    const bool tc9 = p.gate != kGateChannel && !p.gdn2;  // B9 on tensor cores (DeltaNet, GDN)
    bf16* tiles = reinterpret_cast<bf16*>(smem_raw);
    const bf16 *sAh = tiles, *sAl = tiles + kTile;        // A hi, lo: staged by the products, kept
    bf16 *sXh = tiles + 2 * kTile, *sXl = tiles + 3 * kTile;  // dA, then M1 = dL (.) Gam
    bf16 *sYh = tiles + 4 * kTile, *sYl = tiles + 5 * kTile;  // T1, then M1b = Diag(beta) M1
    bf16 *sZh = tiles + 6 * kTile, *sZl = tiles + 7 * kTile;  // M2 = dP (.) Gam
    bf16 *sKs = tiles + 8 * kTile, *sQs = tiles + 9 * kTile;  // slabs of k and q (exact)
    double* sG = reinterpret_cast<double*>(tiles + 10 * kTile);  // [C] G_i (scalar gates; 0 for DeltaNet)

    // (bwd_grads_tc's barrier before this call: every product tile read, tiles 2.. are free)
    for (int i = tid; i < C; i += nt) sG[i] = (tc9 && i < Lc) ? bwdc::G_at(p, ws, row(i), 0) : 0.0;
    // B6's dA, strictly lower, as an operand
    if constexpr (!kSP)
    each_acc(accA, m0, n0, [&](int i, int j, float x) { put_op<kHi>(sXh, sXl, i, j, (i < Lc && j < i) ? x : 0.f); });
    __syncthreads();
    // B9's M2 = dP (.) Gam, lower with the diagonal (B5's dP)
    if (tc9)
      each_acc(accP, m0, n0, [&](int i, int j, float x) {
        put_op<kHi>(sZh, sZl, i, j, (i < Lc && j <= i) ? x * expf(float(sG[i] - sG[j])) : 0.f);
      });
    // B7: T1 = dA A^T (strictly lower part kept: T1_ij = sum_{m <= j} dA_im A_jm for j < i)
    float acc[4][4];
    if constexpr (!kSP) {  // rung 10's G1: no B7, no M1 (G2's); M2 above is its only operand
    zero(acc);
    gemm64<false, false>(acc, sXh, lo_op<kHi>(sXl), sAh, lo_op<kHi>(sAl), m0, n0);
    each_acc(acc, m0, n0, [&](int i, int j, float x) { put_op<kHi>(sYh, sYl, i, j, j < i ? x : 0.f); });
    __syncthreads();
    // B7: dL = -A^T T1 (strictly lower: dL_ij = -sum_{a >= i} A_ai T1_aj for j < i)
    zero(acc);
    gemm64<true, true>(acc, sAh, lo_op<kHi>(sAl), sYh, lo_op<kHi>(sYl), m0, n0);
    __syncthreads();  // every read of the dA and T1 tiles (and of A) done
    if constexpr (kLevels) {
      if (!tc9) {
        bwdc::b9_levels<Tg, kRB, kW, kHi>(p, ws, smem_raw, tok0, Lc, sbeta, acc, accP);
        return true;
      }
    }
    if (!tc9) {
      // Per-channel gates: dL and dP into rung 2's float32 overlay (sdA, sdP) for its B9.
      float* sdA = reinterpret_cast<float*>(smem_raw) + C * LD;
      float* sdP = sdA + 2 * C * LD;
      each_acc(acc, m0, n0, [&](int i, int j, float x) { sdA[i * LD + j] = (i < Lc && j < i) ? -x : 0.f; });
      each_acc(accP, m0, n0, [&](int i, int j, float x) { sdP[i * LD + j] = (i < Lc && j <= i) ? x : 0.f; });
      __syncthreads();
      return false;
    }
    // M1 = dL (.) Gam and M1b = Diag(beta) M1 (strictly lower)
    each_acc(acc, m0, n0, [&](int i, int j, float x) {
      const float m1 = (i < Lc && j < i) ? -x * expf(float(sG[i] - sG[j])) : 0.f;
      put_op<kHi>(sXh, sXl, i, j, m1);
      put_op<kHi>(sYh, sYl, i, j, sbeta[i] * m1);
    });
    }  // !kSP
    // B9 per 64-channel slab: de^L = M1 k, dq^P = M2 k, dk^{L,P} = M1b^T k + scale M2^T q
    const bf16* k = static_cast<const bf16*>(p.k);
    const bf16* q = static_cast<const bf16*>(p.q);
    for (int kk = 0; kk < K; kk += 64) {
      __syncthreads();  // the M tiles complete; the previous slab read
      if (kBatch) {
        constexpr int kItems = 64 * 64 / kThreads, kB = 8;
#pragma unroll 1
        for (int t0 = 0; t0 < kItems; t0 += kB) {
          bf16 rk[kB], rq[kB];
#pragma unroll
          for (int b = 0; b < kB; ++b) {
            const int idx = tid + (t0 + b) * kThreads, j = idx >> 6, d = idx & 63;
            const bool in = j < Lc && kk + d < K;
            if constexpr (kRB) {
              const bwdc::RowBase rb(p, tok0, h);
              const int x = j * rb.HK + kk + d;
              rk[b] = in ? rb.base(k, K)[x] : __float2bfloat16_rn(0.f);
              rq[b] = in ? rb.base(q, K)[x] : __float2bfloat16_rn(0.f);
            } else {
            rk[b] = in ? k[row(j) * K + kk + d] : __float2bfloat16_rn(0.f);
            rq[b] = in ? q[row(j) * K + kk + d] : __float2bfloat16_rn(0.f);
            }
          }
#pragma unroll
          for (int b = 0; b < kB; ++b) {
            const int idx = tid + (t0 + b) * kThreads, j = idx >> 6, d = idx & 63;
            sKs[j * LT + d] = rk[b], sQs[j * LT + d] = rq[b];
          }
        }
      } else
      for (int idx = tid; idx < 64 * 64; idx += nt) {
        const int j = idx >> 6, d = idx & 63;
        const bool in = j < Lc && kk + d < K;
        const bf16 zero16 = __float2bfloat16_rn(0.f);
        sKs[j * LT + d] = in ? k[row(j) * K + kk + d] : zero16;
        sQs[j * LT + d] = in ? q[row(j) * K + kk + d] : zero16;
      }
      __syncthreads();
      float aDe[4][4], aDq[4][4], aDk[4][4], aDkq[4][4];
      zero(aDe), zero(aDq), zero(aDk), zero(aDkq);
      if constexpr (!kSP) gemm64<false, true>(aDe, sXh, lo_op<kHi>(sXl), sKs, nullptr, m0, n0);
      gemm64<false, true>(aDq, sZh, lo_op<kHi>(sZl), sKs, nullptr, m0, n0);
      if constexpr (!kSP) gemm64<true, true>(aDk, sYh, lo_op<kHi>(sYl), sKs, nullptr, m0, n0);  // kSP: aDk stays 0
      gemm64<true, true>(aDkq, sZh, lo_op<kHi>(sZl), sQs, nullptr, m0, n0);
      const float scale = p.scale;
      if constexpr (kW) {
        // Rung 8: de^L, dq^P (and dk^{L,P} below) by column pairs (st_pair_w), through RowBase.
        static_assert(kRB, "kW addresses through RowBase");
        const bwdc::RowBase rb(p, tok0, h);
        const bool even = K % 2 == 0 && bwdc::aligned(ws.deL, 8) && bwdc::aligned(ws.dqP, 8) && bwdc::aligned(ws.dkLP, 8);
        if constexpr (!kSP) bwdc::store_acc_pairs(rb.base(ws.deL, K), rb.HK, kk, K, Lc, even, aDe, m0, n0);
        bwdc::store_acc_pairs(rb.base(ws.dqP, K), rb.HK, kk, K, Lc, even, aDq, m0, n0);
      } else {
      each_acc(aDe, m0, n0, [&](int r, int d, float x) {
        if constexpr (kRB) {
          const bwdc::RowBase rb(p, tok0, h);
          if (r < Lc && kk + d < K) rb.base(ws.deL, K)[r * rb.HK + kk + d] = x;
        } else if (r < Lc && kk + d < K) ws.deL[row(r) * K + kk + d] = x;
      });
      each_acc(aDq, m0, n0, [&](int r, int d, float x) {
        if constexpr (kRB) {
          const bwdc::RowBase rb(p, tok0, h);
          if (r < Lc && kk + d < K) rb.base(ws.dqP, K)[r * rb.HK + kk + d] = x;
        } else if (r < Lc && kk + d < K) ws.dqP[row(r) * K + kk + d] = x;
      });
      }
      // aDk and aDkq have the same layout: entry by entry
#pragma unroll
      for (int a = 0; a < 4; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) aDk[a][b] += scale * aDkq[a][b];
      if constexpr (kW) {
        const bwdc::RowBase rb(p, tok0, h);
        const bool even = K % 2 == 0 && bwdc::aligned(ws.deL, 8) && bwdc::aligned(ws.dqP, 8) && bwdc::aligned(ws.dkLP, 8);
        bwdc::store_acc_pairs(rb.base(ws.dkLP, K), rb.HK, kk, K, Lc, even, aDk, m0, n0);
      } else
      each_acc(aDk, m0, n0, [&](int r, int d, float x) {
        if constexpr (kRB) {
          const bwdc::RowBase rb(p, tok0, h);
          if (r < Lc && kk + d < K) rb.base(ws.dkLP, K)[r * rb.HK + kk + d] = x;
        } else if (r < Lc && kk + d < K) ws.dkLP[row(r) * K + kk + d] = x;
      });
    }
    __syncthreads();  // the B9 tiles read: the tail's dG may overlay them
    return true;
  }
};

/// Rung 5 (bwd_v5_levels_front.cu): V4Mid with bwd_grads_tc's stagings loading in batches and the
/// per-channel float32 B9 unrolled (bwd_common.cuh, kBatchLoads, kUnrolledB9), and its own B9 k, q
/// slab staging batched (run_impl<Tg, true>).
struct V5Mid : V4Mid {
  static constexpr bool kBatchLoads = true;
  static constexpr bool kUnrolledB9 = true;
  template <class Tg>
  static __device__ __forceinline__ bool run(const KParams& p, const BWs& ws, unsigned char* smem_raw, int tok0,
                                             int Lc, const float* sbeta, const float (&accP)[4][4],
                                             const float (&accA)[4][4]) {
    return run_impl<Tg, true>(p, ws, smem_raw, tok0, Lc, sbeta, accP, accA);
  }
};

/// Rung 6 (bwd_v6_tc_b9.cu): V4Mid with V5Mid's flags and B9 for per-channel gates (KDA, GDN2) on tensor cores by
/// binary levels (bwd_v6_tc_b9.cuh's b9_levels) instead of the float32 B9: run always returns true.
struct V6Mid : V4Mid {
  static constexpr bool kBatchLoads = true;
  static constexpr bool kUnrolledB9 = true;  // as V5Mid (the float32 B9 is never reached)
  template <class Tg>
  static __device__ __forceinline__ bool run(const KParams& p, const BWs& ws, unsigned char* smem_raw, int tok0,
                                             int Lc, const float* sbeta, const float (&accP)[4][4],
                                             const float (&accA)[4][4]) {
    return run_impl<Tg, true, true>(p, ws, smem_raw, tok0, Lc, sbeta, accP, accA);
  }
};

/// Rung 7 (bwd_v7_rowbase.cu): V6Mid with kRowBase: bwd_grads_tc's, run_impl's and b9_levels' loads and
/// stores of [rows, W] arrays through per-block bases and 32-bit offsets (bwd_common.cuh's RowBase);
/// the same values and floating-point operations, so rung 6's gradients bit for bit.
struct V7Mid : V6Mid {
  static constexpr bool kRowBase = true;
  template <class Tg>
  static __device__ __forceinline__ bool run(const KParams& p, const BWs& ws, unsigned char* smem_raw, int tok0,
                                             int Lc, const float* sbeta, const float (&accP)[4][4],
                                             const float (&accA)[4][4]) {
    return run_impl<Tg, true, true, true>(p, ws, smem_raw, tok0, Lc, sbeta, accP, accA);
  }
};

/// Rung 8 (bwd_v8_wide.cu): V7Mid with kWide: bwd_grads_tc's float32 fragment stores by column pairs
/// (8 bytes where aligned), its stagings and tail by 4 consecutive columns per thread (16-byte float32,
/// 8-byte bf16 loads and stores), run_impl's and b9_levels' outputs by pairs; the same values and
/// floating-point operations in the same order, so rung 7's gradients bit for bit.
struct V8Mid : V7Mid {
  static constexpr bool kWide = true;
  template <class Tg>
  static __device__ __forceinline__ bool run(const KParams& p, const BWs& ws, unsigned char* smem_raw, int tok0,
                                             int Lc, const float* sbeta, const float (&accP)[4][4],
                                             const float (&accA)[4][4]) {
    return run_impl<Tg, true, true, true, true>(p, ws, smem_raw, tok0, Lc, sbeta, accP, accA);
  }
};

/// Rung 9 (bwd_v9_noextras.cu): V8Mid with kNoExtras: bwd_grads_tc forms G (float64, per chunk) and
/// E, Qg, Kd itself with bwd3_extras' expressions instead of reading them from the prepare's extras
/// kernel, which is not launched; the same values, so rung 8's gradients bit for bit. run is V8Mid's.
struct V9Mid : V8Mid {
  static constexpr bool kNoExtras = true;
};

/// Rung 10's G1 (bwd_v10_split.cu; DeltaNet and GDN only, the host routes KDA and GDN2 to rung 8): V8Mid
/// with kSplit: bwd_grads_tc keeps B2, B4, B5 (A, u0 and E not staged; no B6, B8), run does B9's P half
/// only (run_impl's kSP), and the kernel's tail writes dq, dk_part and dG_part (+ dG_last) for G2.
struct V10Mid : V8Mid {
  static constexpr bool kSplit = true;
  template <class Tg>
  static __device__ __forceinline__ bool run(const KParams& p, const BWs& ws, unsigned char* smem_raw, int tok0,
                                             int Lc, const float* sbeta, const float (&accP)[4][4],
                                             const float (&accA)[4][4]) {
    return run_impl<Tg, true, true, true, true, true>(p, ws, smem_raw, tok0, Lc, sbeta, accP, accA);
  }
};

/// Rung 15 (bwd_v15_hionly.cu; KDA and GDN2, the host routes DeltaNet and GDN to the split kernels):
/// V8Mid with kHiOnly: every product of bwd_grads_tc, run_impl (B7) and b9_levels with hi-only operands
/// (float32 operands rounded to bf16, one MMA per product, no lo tiles staged); shared memory as rung 8's.
struct V15Mid : V8Mid {
  static constexpr bool kHiOnly = true;
  template <class Tg>
  static __device__ __forceinline__ bool run(const KParams& p, const BWs& ws, unsigned char* smem_raw, int tok0,
                                             int Lc, const float* sbeta, const float (&accP)[4][4],
                                             const float (&accA)[4][4]) {
    return run_impl<Tg, true, true, true, true, false, true>(p, ws, smem_raw, tok0, Lc, sbeta, accP, accA);
  }
};

/// Rung 17 (bwd_v17_hybrid.cu; KDA and GDN2): V15Mid with kLoDpDu0: dP = do v_new^T and du0 = A^T dv_new
/// take v_new's and dv_new's lo (staged in rung 8's lo tiles, unused by V15Mid); every other product, B7
/// and B9 by levels hi only, as V15Mid (bench/models/bwd_v17_hybrid_model.py).
struct V17Mid : V15Mid {
  static constexpr bool kLoDpDu0 = true;
};

template <class Tg, class Mid>
void launch_grads(const BwdCall& c, Profile& prof) {
  const KParams& p = c.p;
  auto kern = bwdc::bwd_grads_tc<Tg, Mid>;
  const std::size_t smem = bwdc::kSmemMain + sizeof(float) * (2 * 256 + C);
  static_assert(11 * std::size_t(kTile) * sizeof(bf16) + C * sizeof(double) <= bwdc::kSmemMain, "V4Mid's tiles fit");
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  bwdc::BwdOut o{c.do_, c.dq, c.dk, c.dv, c.dg, c.dbeta, c.db, c.dw};
  kern<<<dim3(p.num_chunks, p.H), kThreads, smem, c.stream>>>(p, o);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  prof.mark();
}

}  // namespace

std::size_t bwd_v4_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v4_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung3_range(c)) return bwd_v3_launch(c);  // outside the range: rung 2 (via rung 3)
  Profile prof(c.stream, "bwd_v4");
  bwdc::bwd_v3_front(c, prof);
  if (p.num_chunks > 0) bwdc::bwd_v4_grads(c, prof);
}

void bwdc::bwd_v4_grads(const BwdCall& c, Profile& prof, bool batch_loads) {
  if (batch_loads) {
    if (c.gate_dtype == 0) launch_grads<float, V5Mid>(c, prof);
    else launch_grads<bf16, V5Mid>(c, prof);
  } else {
    if (c.gate_dtype == 0) launch_grads<float, V4Mid>(c, prof);
    else launch_grads<bf16, V4Mid>(c, prof);
  }
}

void bwdc::bwd_v6_grads(const BwdCall& c, Profile& prof) {
  if (c.gate_dtype == 0) launch_grads<float, V6Mid>(c, prof);
  else launch_grads<bf16, V6Mid>(c, prof);
}

void bwdc::bwd_v7_grads(const BwdCall& c, Profile& prof) {
  if (c.gate_dtype == 0) launch_grads<float, V7Mid>(c, prof);
  else launch_grads<bf16, V7Mid>(c, prof);
}

void bwdc::bwd_v8_grads(const BwdCall& c, Profile& prof) {
  if (c.gate_dtype == 0) launch_grads<float, V8Mid>(c, prof);
  else launch_grads<bf16, V8Mid>(c, prof);
}

void bwdc::bwd_v9_grads(const BwdCall& c, Profile& prof) {
  if (c.gate_dtype == 0) launch_grads<float, V9Mid>(c, prof);
  else launch_grads<bf16, V9Mid>(c, prof);
}

void bwdc::bwd_v15_grads(const BwdCall& c, Profile& prof) {
  if (c.gate_dtype == 0) launch_grads<float, V15Mid>(c, prof);
  else launch_grads<bf16, V15Mid>(c, prof);
}

void bwdc::bwd_v17_grads(const BwdCall& c, Profile& prof) {
  if (c.gate_dtype == 0) launch_grads<float, V17Mid>(c, prof);
  else launch_grads<bf16, V17Mid>(c, prof);
}

void bwdc::bwd_v10_g1(const BwdCall& c, Profile& prof) {
  if (c.gate_dtype == 0) launch_grads<float, V10Mid>(c, prof);
  else launch_grads<bf16, V10Mid>(c, prof);
}

}  // namespace linattn::cuda::detail
