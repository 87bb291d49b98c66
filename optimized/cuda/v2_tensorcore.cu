// optimized/cuda/v2_tensorcore.cu -- rung 2 of the CUDA ladder: the chunked algorithm of SPEC
// section 4 on bf16 tensor cores (mma.sync m16n8k16, float32 accumulation), bf16 inputs,
// K <= 128 (padded to 64 or 128 and masked), any V <= 256. Same two-kernel split as v1:
//
//   v2_intra  one block (8 warps) per (chunk, head), all chunks in parallel:
//     G = cumulative log-decays (float32, in log2 units), L and the intra-chunk read P:
//       scalar gates (DeltaNet, GDN): K K^T and Q K^T on tensor cores, then the factor
//       exp(G_i - G_j) per entry;
//       per-channel gates (KDA, GDN2): SPEC's sub-block factorisation -- for 16-row blocks I > J
//       with reference row r = 16 I, (e_i . exp(G_i - G_r)) . (k_j . exp(G_r - G_j)), both factors
//       <= 1, on tensor cores; the four 16 x 16 diagonal blocks entry by entry with exp(G_i - G_j);
//     A = (I + L)^-1 in float32 (16 x 16 diagonal blocks by forward substitution, one lane per
//       column; off-diagonal blocks level by level: A_IJ = -A_II sum_M L_IM A_MJ);
//     w_aux = A (e . exp(G)), u = A u0 on tensor cores with A split into bf16 hi + lo parts;
//     written to a chunk-major workspace: w_aux, q . exp(G) * scale, k . exp(G_C - G), P (bf16),
//     u and exp(G_C) (float32).
//   v2_state  one block (8 warps) per (sequence, head, BV value columns), chunks in order, the
//     next chunk's tiles loaded with cp.async while the current one computes (two stages):
//       v_new = u - w_aux S, o = (q . exp(G)) S + P v_new, S = Diag(exp(G_C)) S + (k . exp(G_C - G))^T v_new,
//     S kept in float32 registers as mma accumulators; its bf16 copy for the products with
//     w_aux and q is split into hi + lo parts so that S is not rounded to 8 bits.
//
// Measured (H200, bf16, float32 gates; RESULTS.md, run 3): DeltaNet / GDN / KDA / GDN2 take
// 2.60 / 2.71 / 4.29 / 5.22 ms at B=8 T=4096 H=16 K=V=128 (fla 1.01 / 0.86 / 1.82 / 2.02) and
// 3.06 / 3.19 / 4.75 / 5.77 ms at B=1 T=32768 (fla 1.77 / 1.45 / 2.52 / 2.74). Accuracy against
// v1 (float32 arithmetic on the same bf16 inputs): o 3.3e-3 to 4.0e-3 relative RMS, fla's
// 3.8e-3 to 4.9e-3. About 2 ms of every call is v2_intra: its loads are issued one at a time
// (see v3_async.cu). Value-column tile BV: 16 / 32 / 64 gave 3.35 / 2.62 / 2.43 ms (DeltaNet, first
// shape) and 3.08 / 3.21 / 3.81 ms (second shape).
// Never `best` (v3, then v4, replace v2_intra), but v2_state is the state kernel of v3 and v4, of
// v5's state pass (kBwd with kHt) and of the backward's rungs 3-6 (kBwd). Session 6 tried three
// variants of it, run-time knobs of launch_state / tc_state_launch below, all off by default because
// none helped overall (H200, B=8 T=4096 / B=1 T=32768, state kernel alone; RESULTS.md, "Session 6:
// the forward state kernel"): LINATTN_STATE_GRID=flat (value tile the fastest grid dimension: DRAM
// reads 1.20 -> 0.74 GB at B=8, time unchanged, 0.49-0.50 ms), LINATTN_STATE_STAGES=3 (3-stage
// pipeline at BV = 16: B=1 1.04 -> 1.03 ms), LINATTN_STATE_PREFETCH=1 (next k-step's fragments
// before this k-step's mma: B=8 0.49-0.50 -> 0.48-0.49 ms, B=1 1.04 -> 1.09, the backward's states
// kernel 0.68 -> 0.73). All three keep the arithmetic (and so the bits) of the default kernel.
// A fourth, LINATTN_STATE_BULK=1 (tile rows by cp.async.bulk on mbarriers, v2_state's kBulk), and a
// fifth, LINATTN_STATE_OCC2=1 (v2_state with NS = 1: 32 value columns, one stage, two blocks per SM),
// were written in session 6 and run in session 7 call 1: every forward test passes with each, and each
// is slower (state kernel at B=8: bulk 0.602-0.608 ms, OCC2 0.576-0.583, default 0.499; RESULTS.md).
#include <cstdlib>
#include <string>
#include <type_traits>

#include <cuda.h>  // CUtensorMap (forward rung 10's cluster state kernel; the driver's encoder is found at run time)
#include <cudaTypedefs.h>

#include "optimized/cuda/tc_common.cuh"

namespace linattn::cuda::detail {
namespace {

template <int KP>
struct IntraSmem {
  static constexpr int LDK = ldk(KP);
  // byte offsets
  static constexpr int sK = 0;
  static constexpr int sQ = sK + 64 * LDK * 2;
  static constexpr int sE = sQ + 64 * LDK * 2;
  static constexpr int sX = sE + 64 * LDK * 2;
  static constexpr int sKt = sX + 64 * LDK * 2;         // [96][LDK] (per-channel gates only)
  static constexpr int sL = sKt + 96 * LDK * 2;          // f32 [64][65]
  static constexpr int sA = sL + 64 * 65 * 4;            // f32 [64][65]
  static constexpr int sT = sA + 64 * 65 * 4;            // f32 [3][16][17]
  static constexpr int sAh = sT + 3 * 16 * 17 * 4;       // bf16 [64][72] A hi
  static constexpr int sAl = sAh + 64 * 72 * 2;          // bf16 [64][72] A lo
  static constexpr int sP = sAl + 64 * 72 * 2;           // bf16 [64][72]
  static constexpr int sBeta = sP + 64 * 72 * 2;         // f32 [64]
  static constexpr int sG = sBeta + 64 * 4;              // f32 [64][KP] or [64]
  static constexpr int bytes(bool channel) { return sG + (channel ? 64 * KP : 64) * 4; }
};

__device__ __forceinline__ float bf(bf16 x) { return __bfloat162float(x); }

// GATE: kGateNone, kGateScalar, kGateChannel. GDN2: b, w gates instead of beta.
template <int KP, int GATE, bool GDN2, class Tg>
__global__ void __launch_bounds__(kThreads) v2_intra(KParams p) {
  using S = IntraSmem<KP>;
  constexpr int LDK = S::LDK;
  constexpr bool CH = GATE == kGateChannel;
  extern __shared__ __align__(16) char smem[];
  bf16* sK = reinterpret_cast<bf16*>(smem + S::sK);
  bf16* sQ = reinterpret_cast<bf16*>(smem + S::sQ);
  bf16* sE = reinterpret_cast<bf16*>(smem + S::sE);
  bf16* sX = reinterpret_cast<bf16*>(smem + S::sX);
  bf16* sKt = reinterpret_cast<bf16*>(smem + S::sKt);
  float* sL = reinterpret_cast<float*>(smem + S::sL);
  float* sA = reinterpret_cast<float*>(smem + S::sA);
  float* sT = reinterpret_cast<float*>(smem + S::sT);
  bf16* sAh = reinterpret_cast<bf16*>(smem + S::sAh);
  bf16* sAl = reinterpret_cast<bf16*>(smem + S::sAl);
  bf16* sP = reinterpret_cast<bf16*>(smem + S::sP);
  float* sBeta = reinterpret_cast<float*>(smem + S::sBeta);
  float* sG = reinterpret_cast<float*>(smem + S::sG);

  const int K = p.K, V = p.V, H = p.H, h = blockIdx.y, c = blockIdx.x;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* k = static_cast<const bf16*>(p.k);
  const bf16* v = static_cast<const bf16*>(p.v);
  const Tg* gg = static_cast<const Tg*>(p.g);
  const Tg* beta = static_cast<const Tg*>(p.beta);
  const Tg* bgate = static_cast<const Tg*>(p.b);
  const Tg* wgate = static_cast<const Tg*>(p.w);
  int tok0, Lc;
  chunk_of(p, c, tok0, Lc);
  auto row = [&](int i) { return std::int64_t(tok0 + i) * H + h; };
  const V2Ws ws = v2_ws(p, KP);
  const std::int64_t cw = std::int64_t(c) * H + h;
  const int VP = vpad(V);

  // ---- Phase 1: load k, q (bf16, zero-padded), the gates; clear L and P.
  const bool vec = (K % 8) == 0;
  for (int idx = tid; idx < 64 * (KP / 8); idx += kThreads) {
    const int i = idx / (KP / 8), d8 = (idx % (KP / 8)) * 8;
    uint4 kv = make_uint4(0, 0, 0, 0), qv = make_uint4(0, 0, 0, 0);
    if (i < Lc && d8 < K) {
      if (vec) {
        kv = *reinterpret_cast<const uint4*>(k + row(i) * K + d8);
        qv = *reinterpret_cast<const uint4*>(q + row(i) * K + d8);
      } else {
        bf16* kb = reinterpret_cast<bf16*>(&kv);
        bf16* qb = reinterpret_cast<bf16*>(&qv);
        for (int e = 0; e < 8 && d8 + e < K; ++e) kb[e] = k[row(i) * K + d8 + e], qb[e] = q[row(i) * K + d8 + e];
      }
    }
    *reinterpret_cast<uint4*>(sK + i * LDK + d8) = kv;
    *reinterpret_cast<uint4*>(sQ + i * LDK + d8) = qv;
  }
  if (CH) {
    for (int idx = tid; idx < 64 * KP; idx += kThreads) {
      const int i = idx / KP, d = idx % KP;
      sG[idx] = (i < Lc && d < K) ? ld(gg + row(i) * K + d) : 0.f;
    }
  } else {
    for (int i = tid; i < 64; i += kThreads) sG[i] = (GATE == kGateScalar && i < Lc) ? ld(gg + row(i)) : 0.f;
  }
  if (!GDN2)
    for (int i = tid; i < 64; i += kThreads) sBeta[i] = i < Lc ? ld(beta + row(i)) : 0.f;
  for (int idx = tid; idx < 64 * 65; idx += kThreads) sL[idx] = 0.f, sA[idx] = 0.f;
  for (int idx = tid; idx < 64 * 72; idx += kThreads) sP[idx] = __float2bfloat16(0.f);
  __syncthreads();

  // ---- Phase 2: cumulative log-decays within the chunk, times log2(e) (exp(x) = exp2(x log2 e)).
  if (CH) {
    for (int d = tid; d < KP; d += kThreads) {
      float acc = 0.f;
#pragma unroll 8
      for (int i = 0; i < 64; ++i) acc += sG[i * KP + d], sG[i * KP + d] = acc * kLog2e;
    }
  } else if (GATE == kGateScalar) {
    if (warp == 0) {  // inclusive scan of 64 values: lane l holds rows l and l + 32
      float a = sG[lane], b = sG[lane + 32];
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const float x = __shfl_up_sync(0xffffffffu, a, o), y = __shfl_up_sync(0xffffffffu, b, o);
        if (lane >= o) a += x, b += y;
      }
      b += __shfl_sync(0xffffffffu, a, 31);
      sG[lane] = a * kLog2e, sG[lane + 32] = b * kLog2e;
    }
  }
  __syncthreads();
  auto Gs = [&](int i) { return GATE == kGateScalar ? sG[i] : 0.f; };  // scalar-gate G (log2 units)
  const float scale = p.scale;

  // ---- Phase 3: L (strictly lower) and P (lower incl. diagonal).
  if (!CH) {
    const int mi = warp >> 1, nh = warp & 1;  // rows 16 mi.., cols 32 nh..
    float kk[4][4] = {}, qk[4][4] = {};
    if (32 * nh <= 16 * mi + 15) {
      mma_kk_qk<KP>(kk, qk, sK, sQ, LDK, mi, nh);
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 16 * mi + g8 + (e >> 1) * 8, j = 32 * nh + 8 * nt + 2 * t4 + (e & 1);
        const float ex = j <= i ? exp2f(Gs(i) - Gs(j)) : 0.f;
        sL[i * 65 + j] = j < i ? sBeta[i] * kk[nt][e] * ex : 0.f;
        sP[i * 72 + j] = __float2bfloat16(j <= i ? scale * qk[nt][e] * ex : 0.f);
      }
  } else {
    // Factored operands of the off-diagonal blocks. Rows i >= 16 of sE / sX: e_i . exp(G_i - G_r)
    // and q_i . exp(G_i - G_r), r = 16 * (i / 16). sKt: for I = 1, 2, 3 the rows j < 16 I of
    // k_j . exp(G_r - G_j), r = 16 I, stored from row offset 0, 16, 48.
    for (int idx = tid; idx < 48 * KP; idx += kThreads) {
      const int i = 16 + idx / KP, d = idx % KP, r = i & ~15;
      const float f = exp2f(sG[i * KP + d] - sG[r * KP + d]);
      const float kv = bf(sK[i * LDK + d]);
      const float e = GDN2 ? (d < K && i < Lc ? ld(bgate + row(i) * K + d) : 0.f) * kv : kv;
      sE[i * LDK + d] = __float2bfloat16(e * f);
      sX[i * LDK + d] = __float2bfloat16(bf(sQ[i * LDK + d]) * f);
    }
    for (int idx = tid; idx < 96 * KP; idx += kThreads) {
      const int rr = idx / KP, d = idx % KP;
      const int I = rr < 16 ? 1 : (rr < 48 ? 2 : 3);
      const int j = rr - (I == 1 ? 0 : (I == 2 ? 16 : 48)), r = 16 * I;
      sKt[rr * LDK + d] = __float2bfloat16(bf(sK[j * LDK + d]) * exp2f(sG[r * KP + d] - sG[j * KP + d]));
    }
    // The four 16 x 16 diagonal blocks, entry by entry: 4 x 136 pairs j <= i.
    for (int pidx = tid; pidx < 4 * 136; pidx += kThreads) {
      const int I = pidx / 136;
      int rem = pidx % 136, ii = 0;
      while (rem > ii) rem -= ii + 1, ++ii;  // pair (ii, rem) with rem <= ii
      const int i = 16 * I + ii, j = 16 * I + rem;
      float lsum = 0.f, psum = 0.f;
      for (int d8 = 0; d8 < KP; d8 += 8) {
        const uint4 kiv = *reinterpret_cast<const uint4*>(sK + i * LDK + d8);
        const uint4 kjv = *reinterpret_cast<const uint4*>(sK + j * LDK + d8);
        const uint4 qiv = *reinterpret_cast<const uint4*>(sQ + i * LDK + d8);
        const bf16* ki = reinterpret_cast<const bf16*>(&kiv);
        const bf16* kj = reinterpret_cast<const bf16*>(&kjv);
        const bf16* qi = reinterpret_cast<const bf16*>(&qiv);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const int d = d8 + e;
          const float ex = exp2f(sG[i * KP + d] - sG[j * KP + d]);
          const float kjx = bf(kj[e]) * ex;
          float ei = bf(ki[e]);
          if (GDN2) ei *= (d < K && i < Lc) ? ld(bgate + row(i) * K + d) : 0.f;
          lsum += ei * kjx;
          psum += bf(qi[e]) * kjx;
        }
      }
      if (j < i) sL[i * 65 + j] = GDN2 ? lsum : sBeta[i] * lsum;
      sP[i * 72 + j] = __float2bfloat16(scale * psum);
    }
    __syncthreads();
    // Off-diagonal blocks on tensor cores: 6 blocks of L and 6 of P, 16 x 16 each.
    for (int task = warp; task < 12; task += 8) {
      const int blk = task % 6;
      const bool isP = task >= 6;
      const int I = blk < 1 ? 1 : (blk < 3 ? 2 : 3);
      const int J = blk - (I == 1 ? 0 : (I == 2 ? 1 : 3));
      const int off = I == 1 ? 0 : (I == 2 ? 16 : 48);
      float acc[2][4] = {};
#pragma unroll
      for (int k0 = 0; k0 < KP; k0 += 16) {
        unsigned a[4], b[4];
        load_a(a, isP ? sX : sE, LDK, 16 * I, k0);
        load_b_nk(b, sKt, LDK, off + 16 * J, k0);
        mma_bf16(acc[0], a, b[0], b[1]);
        mma_bf16(acc[1], a, b[2], b[3]);
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = 16 * I + g8 + (e >> 1) * 8, j = 16 * J + 8 * nt + 2 * t4 + (e & 1);
          if (isP) sP[i * 72 + j] = __float2bfloat16(scale * acc[nt][e]);
          else sL[i * 65 + j] = GDN2 ? acc[nt][e] : sBeta[i] * acc[nt][e];
        }
    }
  }
  __syncthreads();

  // ---- Phase 4: A = (I + L)^-1 (float32). Diagonal blocks: lanes of warps 0, 1, one per column.
  if (warp < 2) {
    const int I = 2 * warp + (lane >> 4), j = lane & 15;
    const float* Lb = sL + (16 * I) * 65 + 16 * I;
    float a[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) a[i] = i == j ? 1.f : 0.f;
#pragma unroll
    for (int i = 1; i < 16; ++i) {
      float s = 0.f;
#pragma unroll
      for (int m = 0; m < i; ++m) s += Lb[i * 65 + m] * a[m];  // a[m] = 0 for m < j
      if (i > j) a[i] = -s;
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) sA[(16 * I + i) * 65 + 16 * I + j] = a[i];
  }
  __syncthreads();
  for (int lev = 1; lev < 4; ++lev) {  // blocks (I, I - lev)
    const int nb = 4 - lev;
    for (int e = tid; e < nb * 256; e += kThreads) {
      const int I = lev + e / 256, J = I - lev, a = (e % 256) / 16, b = e % 16;
      float s = 0.f;
      for (int M = J; M < I; ++M)
#pragma unroll 4
        for (int cc = 0; cc < 16; ++cc) s += sL[(16 * I + a) * 65 + 16 * M + cc] * sA[(16 * M + cc) * 65 + 16 * J + b];
      sT[(e / 256) * 272 + a * 17 + b] = s;
    }
    __syncthreads();
    for (int e = tid; e < nb * 256; e += kThreads) {
      const int I = lev + e / 256, J = I - lev, a = (e % 256) / 16, b = e % 16;
      float s = 0.f;
#pragma unroll 4
      for (int cc = 0; cc < 16; ++cc) s += sA[(16 * I + a) * 65 + 16 * I + cc] * sT[(e / 256) * 272 + cc * 17 + b];
      sA[(16 * I + a) * 65 + 16 * J + b] = -s;
    }
    __syncthreads();
  }
  // A = hi + lo in bf16 (hi = round(A), lo = round(A - hi)): 16 bits of A reach the tensor cores.
  split_a_hilo(sA, sAh, sAl, tid);

  // ---- Phase 5: e . exp(G) for w_aux; write q . exp(G) * scale, k . exp(G_C - G), exp(G_C), P.
  for (int idx = tid; idx < 64 * KP; idx += kThreads) {
    const int i = idx / KP, d = idx % KP;
    const float G = CH ? sG[i * KP + d] : Gs(i);
    const float GC = CH ? sG[63 * KP + d] : Gs(63);
    const float kv = bf(sK[i * LDK + d]);
    float e = GDN2 ? ((d < K && i < Lc) ? ld(bgate + row(i) * K + d) : 0.f) * kv : sBeta[i] * kv;
    sE[i * LDK + d] = __float2bfloat16(e * exp2f(G));
    ws.qg[(cw * 64 + i) * KP + d] = __float2bfloat16(scale * bf(sQ[i * LDK + d]) * exp2f(G));
    ws.kd[(cw * 64 + i) * KP + d] = __float2bfloat16(kv * exp2f(GC - G));
    if (i == 0) ws.gC[cw * KP + d] = exp2f(GC);
  }
  for (int idx = tid; idx < 64 * 8; idx += kThreads) {
    const int i = idx >> 3, j8 = (idx & 7) * 8;
    *reinterpret_cast<uint4*>(ws.P + (cw * 64 + i) * 64 + j8) = *reinterpret_cast<const uint4*>(sP + i * 72 + j8);
  }
  __syncthreads();

  // w_aux = A (e . exp(G)): warp -> rows 16 mi.., columns nb.. (KP / 2 of them).
  {
    constexpr int NT = KP / 16;  // n-tiles of 8 per warp
    const int mi = warp >> 1, nb = (warp & 1) * (KP / 2);
    float acc[NT][4] = {};
    mma_lower_a_hilo<NT, false>(acc, sAh, sAl, sE, nullptr, LDK, mi, nb);
    store_frag_bf16(acc, sX, LDK, mi, nb, g8, t4);
  }
  __syncthreads();
  for (int idx = tid; idx < 64 * (KP / 8); idx += kThreads) {
    const int i = idx / (KP / 8), d8 = (idx % (KP / 8)) * 8;
    *reinterpret_cast<uint4*>(ws.w + (cw * 64 + i) * KP + d8) = *reinterpret_cast<const uint4*>(sX + i * LDK + d8);
  }

  __syncthreads();  // sX (w_aux) read out before it is reused below
  // u = A u0, 64 value columns at a time; u0_j = beta_j v_j (GDN2: w_j . v_j), staged in sE.
  for (int v0 = 0; v0 < VP; v0 += 64) {
    for (int idx = tid; idx < 64 * 64; idx += kThreads) {
      const int i = idx >> 6, cc = idx & 63, col = v0 + cc;
      float u0 = 0.f;
      if (i < Lc && col < V) {
        const float vv = bf(v[row(i) * V + col]);
        u0 = GDN2 ? ld(wgate + row(i) * V + col) * vv : sBeta[i] * vv;
      }
      sE[i * LDK + cc] = __float2bfloat16(u0);
      sX[i * LDK + cc] = __float2bfloat16(u0 - bf(__float2bfloat16(u0)));  // lo part of u0
    }
    __syncthreads();
    const int mi = warp >> 1, nb = (warp & 1) * 32;
    float acc[4][4] = {};
    mma_lower_a_hilo<4, true>(acc, sAh, sAl, sE, sX, LDK, mi, nb);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int i = 16 * mi + g8, j = v0 + nb + 8 * nt + 2 * t4;
      *reinterpret_cast<float2*>(ws.u + (cw * 64 + i) * VP + j) = make_float2(acc[nt][0], acc[nt][1]);
      *reinterpret_cast<float2*>(ws.u + (cw * 64 + i + 8) * VP + j) = make_float2(acc[nt][2], acc[nt][3]);
    }
    __syncthreads();
  }
}

// ------------------------------------------------------------------------------------------------
// The sequential pass over the chunks of one sequence, for one head and BV value columns.
// NS: pipeline stages (chunks in shared memory at once; NS - 1 of look-ahead). 2 everywhere but the
// forward at BV = 16, where 3 is an option (LINATTN_STATE_STAGES, tc_state_launch), and the forward's
// two-blocks-per-SM variant (LINATTN_STATE_OCC2=1, v2_state's NS = 1: one stage, no look-ahead).
// kBulk (LINATTN_STATE_BULK=1, NS = 2 only): NS mbarriers (8 bytes each) in a 16-byte-aligned slot
// after sVn; without kBulk the layout and size are unchanged.
// kLean (forward rung 6, NS = 2): a second bf16 v_new tile sVk (v_new rows times exp(G_C - G_i), the
// state update's operand) and NS stages of the chunk's 64 log2 decays G_i (sGl), after sBar; the
// layout before them is the default's.
// kMC (forward rung 10's cluster state kernel v2_state_mc, session 17): W, Qg, Kd and P as 64-column halves
// of 128-byte rows in the tensor copies' 128-byte swizzle, without padding (load_a_sw128), tiles at 1024-byte
// offsets, and 4 mbarriers at sBar (full and empty, per stage).
template <int KP, int BV, int NS = 2, bool kBulk = false, bool kLean = false, bool kMC = false>
struct StateSmem {
  static constexpr int LDK = ldk(KP);
  static constexpr int LDV = BV + 8;
  static constexpr int LDU = BV + 4;  // float
  static constexpr int tileK = kMC ? 64 * KP * 2 : 64 * LDK * 2;
  static constexpr int tileP = kMC ? 64 * 64 * 2 : 64 * 72 * 2;
  static constexpr int sW = 0;                        // [NS] bf16 [64][LDK] (kMC: [KP / 64][64][64] swizzled)
  static constexpr int sQg = sW + NS * tileK;
  static constexpr int sKd = sQg + NS * tileK;
  static constexpr int sP = sKd + NS * tileK;         // [NS] bf16 [64][72] (kMC: [64][64] swizzled)
  static constexpr int sU = sP + NS * tileP;          // [NS] f32 [64][LDU]
  static constexpr int sgC = sU + NS * 64 * LDU * 4;  // [NS] f32 [KP]
  static constexpr int sSh = sgC + NS * KP * 4;       // bf16 [KP][LDV] state, hi part
  static constexpr int sSl = sSh + KP * LDV * 2;     // bf16 [KP][LDV] lo part
  static constexpr int sVn = sSl + KP * LDV * 2;     // bf16 [64][LDV]
  static constexpr int sBar = sVn + 64 * LDV * 2;    // [NS] mbarrier (kBulk only)
  static constexpr int sVk = sBar + (kBulk ? (NS * 8 + 15) / 16 * 16 : kMC ? 32 : 0);  // bf16 [64][LDV] (kLean)
  static constexpr int sGl = sVk + (kLean ? 64 * LDV * 2 : 0);                // [NS] f32 [64] (kLean)
  static constexpr int bytes = sGl + (kLean ? NS * 64 * 4 : 0);
  static_assert(sBar % 16 == 0, "mbarrier slot alignment");
  static_assert(!kMC || (sP % 1024 == 0 && sU % 1024 == 0 && tileK % 1024 == 0), "kMC: tensor-copy boxes 1024-byte aligned");
};

/// kMC: the tensor maps of the workspace's W, Qg, Kd ([rows][KP] bf16) and P ([rows][64]), boxes of 64 columns
/// by 64 rows with the 128-byte swizzle (one copy per 64 columns of a chunk's tile). A __grid_constant__ kernel
/// parameter (the copies read it in place).
struct StateTmaps {
  CUtensorMap w, qg, kd, P;
};

// LINATTN_STATE_OCC2=1 (v2_state NS = 1): two co-resident blocks per SM need 2 x (bytes + 1 KB that
// the runtime reserves per block) <= 228 KB, i.e. bytes <= 113 KB. KP = 128, BV = 32, NS = 1:
// 3 x 17,408 (W, Qg, Kd) + 9,216 (P) + 9,216 (u, LDU 36) + 512 (gC) + 2 x 10,240 (S hi, lo; LDV 40)
// + 5,120 (v_new) = 96,768 bytes (94.5 KB); KP = 64: 61,696 (60.25 KB). The alternatives do not fit
// or are not needed: KP = 128 at BV = 64, NS = 1 is 125,440 bytes; at BV = 32, NS = 2, 167,936;
// at BV = 16, NS = 2, 149,504 (BV = 16, NS = 1: 82,432).
constexpr int kOcc2SmemMax = 113 * 1024;
static_assert(2 * (StateSmem<128, 32, 1>::bytes + 1024) <= 228 * 1024 && StateSmem<128, 32, 1>::bytes <= kOcc2SmemMax,
              "LINATTN_STATE_OCC2: two KP = 128 blocks no longer fit in one SM's shared memory");
static_assert(StateSmem<64, 32, 1>::bytes <= kOcc2SmemMax, "LINATTN_STATE_OCC2: two KP = 64 blocks no longer fit");
static_assert(StateSmem<128, 64, 1>::bytes > kOcc2SmemMax && StateSmem<128, 32, 2>::bytes > kOcc2SmemMax &&
                  StateSmem<128, 16, 2>::bytes > kOcc2SmemMax,
              "the comment above: at KP = 128 only one-stage tiles of BV <= 32 columns fit twice per SM");

/// The bytes of one chunk's bulk copies in v2_state's kBulk (the tx-count each barrier phase waits
/// for): 64 rows of W, Qg (not kBwd), Kd (KP bf16 each), P (64 bf16, not kBwd), u (BV float32), and
/// gC (KP float32).
__host__ __device__ constexpr unsigned state_bulk_tx(int KP, int BV, bool kBwd) {
  return 64u * ((kBwd ? 2 : 3) * KP * 2 + (kBwd ? 0 : 128) + BV * 4) + KP * 4;
}

/// kBwd (the backward's rung 3, bwd_v3_async.cu): o is not computed (no q . exp(G) or P tiles are
/// loaded); instead the state entering each chunk goes to bwd.S and v_new (float32) to bwd.vn.
/// kHt (with kBwd; the forward's rung 5, v5_split.cu): the final state is written to p.ht as well.
struct StateBwdOut {
  float* S = nullptr;   // [num_chunks, H, K, V]
  float* vn = nullptr;  // [B * T * H, V]
};

/// kBulk (LINATTN_STATE_BULK=1; NS = 2; with or without kBwd / kHt / kPF). Written in session 6, run in
/// session 7 call 1 (tests and synccheck pass; slower: 0.602-0.608 ms at B=8 against the default's 0.499,
/// 1.616-1.635 at B=1 against 1.03-1.04); off by default (the default instantiations' PTX is unchanged). issue()
/// loads each chunk's tiles with one cp.async.bulk per tile row (64 rows each of W, Qg, Kd, P, u and
/// one gC copy: 321 copies, 193 with kBwd) completing on stage stg's mbarrier (arrival count 1:
/// thread 0's arrive.expect_tx of state_bulk_tx bytes, posted before the block barrier after which
/// the copies are issued); the loop top waits with try_wait.parity on barrier ci & 1, phase parity
/// (ci >> 1) & 1. Same bytes into the same places as the cp.async path (the u zero fill never occurs:
/// v0 + BV <= VP), so the same arithmetic and bits: bench/models/state_bulk_model.py checks the byte
/// ranges, the expect-tx total and the barrier protocol. Why: ncu (session 6 call 4,
/// bench/logs_session6/call4/ncu/state_b{1,8}.summary.txt) put 32% of the kernel's executed
/// instructions and 32% of its stall samples in the cp.async issue code at B=1 T=32768 (BV = 16),
/// 19% / 18% at B=8 T=4096 (BV = 64). Caveat from the SASS (nvcc 13.0): a bulk copy takes uniform
/// registers, so each warp issues its lanes' copies one at a time (ELECT, 4 R2UR, UBLKCP, BRA.U.ANY:
/// 9 instructions per copy), about 3500 warp instructions per chunk (warps 0, 1 about 700 each)
/// against about 1300 (ncu, BV = 16) and 1500 (BV = 64) for the cp.async path, where one LDGSTS
/// moves 32 x 16 bytes: fewer LSU operations, not fewer instructions. Whole-tile copies would take
/// a handful per chunk: a workspace whose rows are padded to ldk(KP) as in shared memory (one 1-D
/// copy per tile; the intra kernels write it), or cp.async.bulk.tensor.2d (if its box may be KP + 8
/// wide over a KP-wide tensor, the 8 columns past the end zero-filled; unchecked).
/// How to run it on the H200 (B = build/<dir>; one command per line; session 7 call 1 ran these):
///   LINATTN_STATE_BULK=1 $B/proofs_tests/test_cuda_forward                    (every forward test)
///   LINATTN_STATE_BULK=1 compute-sanitizer --tool memcheck (then racecheck, synccheck)
///     $B/proofs_tests/test_cuda_forward "CUDA chunked forward of a packed batch of many short
///     sequences equals the reference"
///   LINATTN_STATE_BULK=1 $B/proofs_tests/test_cuda_backward                   (kBwd)
///   python3 optimized/cuda/bench/bench_forward.py --lib $B/optimized/cuda/liblinattn_cuda_capi.so
///     --fla .fla --versions 4 --sweep-versions 4 --split, with and without LINATTN_STATE_BULK=1.
///
/// NS = 1 (LINATTN_STATE_OCC2=1; tc_state_launch, the forward only: not kBwd, so neither the
/// backward's states pass nor v5's split state pass). Written in session 6, run in session 7 call 1 (every
/// forward test passes; slower: 0.576-0.583 ms at B=8 against the default's 0.499); off by default (the default instantiations' PTX is unchanged: 84 of 84 entries,
/// bench/ptx_identity.py against HEAD; minBlocks 0 in __launch_bounds__ emits no .minnctapersm).
/// What: where pick_bv gives 64 or 32 columns, BV = 32 with one pipeline stage -- chunk ci's tiles
/// are waited for at the loop top, used, and chunk ci + 1's issued only after a barrier at the end of
/// iteration ci (after the stage's last reads, sKd and sgC) -- and __launch_bounds__(256, 2), so that
/// two blocks share an SM and one's loads and barriers overlap the other's mma.
/// Why (H200, session 6, B=8 T=4096 H=16 K=V=128): this kernel is 0.49-0.50 ms of GDN's 0.99 ms
/// forward (fla's whole GDN forward 0.85) at KP = 128, BV = 64, two stages, 204,800 bytes of shared
/// memory and 170 registers: one block of 8 warps per SM. ncu (bench/logs_session6/call4/ncu/
/// state_b8.*): issue slots 27% busy, 0.37 eligible warps per scheduler, 38% of the stall samples on
/// HMMA (dependent accumulations, ldmatrix right before use). The grid, stages and prefetch knobs
/// above all kept 8 warps per SM and did not help.
/// Occupancy (nvcc 13.0, cuobjdump --dump-resource-usage): 128 registers at KP = 128 (124 at
/// KP = 64; with kPF 124 / 123), no spill, no stack: 128 x 256 x 2 = 65,536 <= 65,536 registers per
/// SM. Shared memory StateSmem<128, 32, 1>::bytes = 96,768 (KP = 64: 61,696): 2 x (96,768 + 1,024)
/// = 195,584 <= 233,472 (228 KB). So 2 blocks, 16 warps per SM (4 per scheduler); at B=8 T=4096,
/// 512 blocks in 264 slots, 1.94 waves as the default's 256 in 132.
/// Bits: the same floating-point operations in the same order as the default at the same BV (PTX of
/// NS = 1 and NS = 2 at BV = 32, with and without kPF: the same 196 mma / ldmatrix / f32 / cvt
/// instructions at KP = 128, 112 at KP = 64, in the same order with the same operands once registers
/// are named by first appearance; the kernels differ in barriers, 3 against 2, and where the
/// cp.async are issued). And BV changes no output value: every operation above acts on one value column at a time
/// (u - w_aux S, qg S + P v_new, Diag(exp(G_C)) S + Kd^T v_new, the hi / lo split, the bf16 rounding
/// of v_new; each mma output element sums over the same k-steps in the same order whatever n-tile
/// or warp holds it), so o and the final state equal the default's at BV = 64 bit for bit.
/// test_cuda_forward's "CUDA v5 split forward equals v4 fused forward bit for bit" has held 64-column
/// against 32-column tiles bit for bit on the H200 since session 5.
/// Grid: unchanged order (N, H, value tiles), so that only the occupancy changes: at B=8 the first
/// wave of 264 blocks holds value tiles 0 and 1 of every (sequence, head) and the second tiles 2 and 3,
/// so DRAM still reads the workspace about twice, as in the default (1.20 GB); the flat order (one
/// pass, 0.74 GB) measured no faster at one block per SM and combines (LINATTN_STATE_GRID=flat).
/// Risk: each BV = 32 block loads the chunk's W, Qg, Kd and P tiles as a BV = 64 block does: 66,048
/// bytes per block and chunk against 74,240, so 1.78x the L2-to-SM bytes; the BV sweep (header:
/// 2.62 ms at BV = 32 against 2.43 at 64, whole v2 forward, one block per SM) is that cost. With one
/// stage a block alone on its SM (the tail of the last wave, small grids) waits for every load.
/// How to run it on the H200 (B = build/<dir>; one command per line; session 7 call 1 ran these):
///   LINATTN_STATE_OCC2=1 $B/proofs_tests/test_cuda_forward                    (every forward test)
///   LINATTN_STATE_OCC2=1 LINATTN_V2_BV=64 $B/proofs_tests/test_cuda_forward   (pick_bv gives 16 in
///     most test cases, where NS = 1 does not apply; forced to 64 every case runs it, and the v5-v4
///     bit test then compares it with v5's two-stage 32-column state pass bit for bit)
///   the same with LINATTN_STATE_PREFETCH=1 added (kPF with NS = 1)
///   LINATTN_STATE_OCC2=1 LINATTN_V2_BV=64 compute-sanitizer --tool memcheck (then racecheck,
///     synccheck) $B/proofs_tests/test_cuda_forward "CUDA chunked forward of a packed batch of many
///     short sequences equals the reference"
///   python3 optimized/cuda/bench/bench_forward.py --lib $B/optimized/cuda/liblinattn_cuda_capi.so
///     --fla .fla --versions 4 --sweep-versions 4 --split, with and without LINATTN_STATE_OCC2=1
///     (and with LINATTN_STATE_GRID=flat added);
///   ncu --section Occupancy --section LaunchStats -k regex:v2_state on bench_forward.py --versions 4
///     --shapes 8x4096x16x128x128 with LINATTN_STATE_OCC2=1: Block Limit Registers and Block Limit
///     Shared Mem should read 2, Theoretical Occupancy 25%.
///
/// kLean (forward rung 6, v6_lean.cu: bf16 inputs, gate none or scalar; v2_state_lean below): no q~,
/// k~ tiles. issue() stages the chunk's q and k rows from the inputs (zero-filled past the chunk's
/// end and past K) into the Qg and Kd tiles and its G_i (lean_g) into sGl; then
///   o_i = scale exp(G_i) (q_i S) + (P v_new)_i       (the row factor on the float32 accumulator of
///                                                     q S, before P v_new is added)
///   S'  = exp(G_C) S + k^T [exp(G_C - G_i) v_new_i]  (v_new rows scaled, then rounded to bf16, in sVk;
///                                                     P v_new keeps the unscaled bf16 v_new of sVn)
/// For DeltaNet (G = 0) the second factor is 1 and sVn serves both products.
///
/// kSave (the saving forward with states, chunk_cuda.hpp SavedForward; v2_state_save below): the
/// forward kernel (o, and ht where p.ht is set) that also stores what kBwd stores -- the state entering
/// each chunk to bwd.S and v_new (float32) to bwd.vn -- at the same points of the same computation:
/// kBwd's products are the forward's minus the independent o accumulations (os_), so S and v_new are
/// the same values bit for bit, and the backward's states kernel can be skipped.
/// kLean with kSave or kBwd (session 15; v2_state_lean_save, v2_state_bwd_lean below): the same pairing for
/// the lean kernel, where forward rung 9 is `best` (v9_in_best): the saving forward stores the lean chain's S
/// and v_new (v_new before its exp(G_C - G_i) factor, as kBwd stores it), and the backward's recompute runs
/// the lean chain without o (no q rows loaded), so both give the lean states bit for bit. For DeltaNet the
/// lean and default chains give the same S and v_new (k~ = k, one bf16 v_new); only o differs.
/// kSbf (with kBwd or kSave; backward rung 28, bwd_v28_sbf16.cu): S stored as its bf16 hi part (round to nearest even:
/// the hi tile sSh the products read, by 16-byte rows, state_hi_store_rows) into bwd.S's first half instead of float32;
/// the same chain, so the same S rounded once.
/// Its own instantiations (v2_state_*_sbf below), so that the float32 kernels' code is unchanged.
template <int KP, int BV, bool kBwd, bool kHt, int NS, bool kPF, bool kBulk, bool kLean, bool kSave = false,
          bool kMC = false, bool kSbf = false>
__device__ __forceinline__ void v2_state_body(const KParams& p, const StateBwdOut& bwd, const StateTmaps* tm = nullptr) {
  static_assert(!kSave || (!kBwd && !kHt && NS == 2 && !kPF && !kBulk), "kSave: the default or lean forward kernel plus kBwd's stores");
  static_assert(!kSbf || ((kBwd || kSave) && NS == 2 && !kHt && !kPF && !kBulk && !kMC), "kSbf: the plain kBwd / kSave stores");
  static_assert(!kBulk || NS == 2, "kBulk: two stages (parity of chunk ci's barrier phase = (ci >> 1) & 1)");
  static_assert(NS != 1 || (!kBwd && !kBulk), "NS = 1 (LINATTN_STATE_OCC2): the forward only, cp.async tiles");
  static_assert(!kLean || (NS == 2 && !kHt && !kPF && !kBulk), "kLean: two stages, cp.async tiles, no knobs");
  static_assert(!kMC || (BV == 16 && NS == 2 && !kBwd && !kHt && !kPF && !kBulk && !kLean && !kSave),
                "kMC: rung 10's forward kernel at 16 value columns");
  using S = StateSmem<KP, BV, NS, kBulk, kLean, kMC>;
  constexpr int LDK = S::LDK, LDV = S::LDV, LDU = S::LDU;
  extern __shared__ __align__(16) char smem[];
  bf16* sSh = reinterpret_cast<bf16*>(smem + S::sSh);
  bf16* sSl = reinterpret_cast<bf16*>(smem + S::sSl);
  bf16* sVn = reinterpret_cast<bf16*>(smem + S::sVn);
  const int K = p.K, V = p.V, H = p.H;
  // Grid (N, H, value tiles), or with LINATTN_STATE_GRID=flat one dimension with the value tile
  // fastest, so a head's value tiles run side by side and share its w, q, k, P reads in L2 (both
  // decodings agree when the 3-d grid has gridDim.y = gridDim.z = 1).
  int n, h, v0;
  if (gridDim.y == 1 && gridDim.z == 1) {
    const int nvt = (p.V + BV - 1) / BV, bx = blockIdx.x, r = bx / nvt;
    v0 = (bx - r * nvt) * BV, h = r % p.H, n = r / p.H;
  } else {
    n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * BV;
  }
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  // kMC: this CTA's rank in its cluster (the value tiles of one head) and the cluster's size; the bytes rank 0's
  // four copies deliver to each CTA per chunk.
  unsigned mc_rank = 0, mc_size = 1;
  if constexpr (kMC) {
    mc_rank = cluster_ctarank(), mc_size = cluster_nctarank();
    // The 128-byte swizzle acts on absolute shared-memory address bits (sw128_at assumes chunk bits [4:6] are
    // XORed with row bits [7:9] of a 1024-byte-aligned tile). This kernel has no static shared memory, so the
    // dynamic base is the window's start (it was, on the H200: bit for bit in session 17); say so if not.
    if (smem_u32(smem) & 1023u) {
      if (tid == 0) printf("linattn: v2_state_mc: dynamic shared memory at %u, not 1024-byte aligned\n", smem_u32(smem));
      __trap();
    }
  }
  constexpr unsigned kMcBytes = 3u * 64 * KP * 2 + 64 * 64 * 2;
  const V2Ws ws = v2_ws(p, KP);
  const int VP = vpad(V);
  bf16* o = static_cast<bf16*>(p.o);

  const int t_begin = seq_begin(p, n), t_end = seq_end(p, n);
  const int nchunks = (t_end - t_begin + C - 1) / C;
  const int c_first = p.seq_chunk0 ? p.seq_chunk0[n] : n * p.chunks_per_seq;

  // State fragment ownership: m-tile sm (rows 16 sm of S), n-tiles sn0 .. sn0 + SNT.
  constexpr int MT = KP / 16;           // m-tiles of S
  constexpr int NG = 8 / MT;            // warps sharing an m-tile
  constexpr int SNT = BV / 8 / NG;      // n-tiles per warp
  static_assert(SNT >= 1, "BV too small for this KP");
  const int sm = warp % MT, sn0 = (warp / MT) * SNT;
  // Chunk-row products (64 x BV): m-tile wm = warp & 3, n-tiles wn0 .. wn0 + ONT.
  constexpr int ONT = BV / 16;
  const int wm = warp & 3, wn0 = (warp >> 2) * ONT;

  float st[SNT][4];
  const std::int64_t sbase = (std::int64_t(n) * H + h) * K * V;
  state_frag_load(st, p.h0, sbase, K, V, sm, sn0, v0, g8, t4);
  auto store_state_bf16 = [&]() { state_frag_store_hilo<LDV>(st, sSh, sSl, sm, sn0, g8, t4); };
  store_state_bf16();

  auto issue = [&](int ci) {  // cp.async the tiles of chunk ci (of this sequence) into stage ci % NS
    const int stg = ci % NS;
    const std::int64_t cw = std::int64_t(c_first + ci) * H + h;
    char* base = smem;
    bf16* dW = reinterpret_cast<bf16*>(base + S::sW + stg * S::tileK);
    bf16* dQ = reinterpret_cast<bf16*>(base + S::sQg + stg * S::tileK);
    bf16* dK = reinterpret_cast<bf16*>(base + S::sKd + stg * S::tileK);
    bf16* dP = reinterpret_cast<bf16*>(base + S::sP + stg * S::tileP);
    float* dU = reinterpret_cast<float*>(base + S::sU + stg * 64 * LDU * 4);
    float* dG = reinterpret_cast<float*>(base + S::sgC + stg * KP * 4);
    if constexpr (kBulk) {
      // One bulk copy per tile row (each row is contiguous in the workspace, 16-byte aligned, a
      // multiple of 16 bytes long); copy j of the chunk's 64 NR + 1 goes to thread j % 256 (forward:
      // warps 0, 1 issue 64, the others 32 or 33; balanced maps made ptxas spill 4-24 bytes in some
      // instantiations, nvcc 13.0). Rows
      // t = j / 64: W, Qg, Kd (KP * 2 bytes), P (128), u (BV * 4: columns v0 .. v0 + BV, all < VP since
      // BV divides 64 and so VP, hence no zero fill), then gC (KP * 4). Completion: stage stg's
      // mbarrier, whose expect-tx (state_bulk_tx bytes) thread 0 posted before the block barrier
      // that precedes this call, so every copy is issued after its bytes are expected.
      constexpr int NR = kBwd ? 3 : 5;
      const std::int64_t tileKs = ws.qg - ws.w;  // elements between the W, Qg, Kd arrays
      void* bar = base + S::sBar + 8 * stg;
      for (int j = tid; j <= 64 * NR; j += kThreads) {
        const int t = j >> 6, i = j & 63;
        char* dst;
        const void* src;
        unsigned nbytes;
        if (t == NR) {
          dst = reinterpret_cast<char*>(dG), src = ws.gC + cw * KP, nbytes = KP * 4;
        } else if (t == NR - 1) {
          dst = reinterpret_cast<char*>(dU + i * LDU), src = ws.u + (cw * 64 + i) * VP + v0, nbytes = BV * 4;
        } else if (!kBwd && t == 3) {
          dst = reinterpret_cast<char*>(dP + i * 72), src = ws.P + (cw * 64 + i) * 64, nbytes = 128;
        } else {  // W, Qg, Kd tile tt (kBwd: t = 0, 1 are W, Kd)
          const int tt = kBwd ? 2 * t : t;
          dst = reinterpret_cast<char*>(dW + i * LDK) + tt * NS * S::tileK;
          src = ws.w + tt * tileKs + (cw * 64 + i) * KP, nbytes = KP * 2;
        }
        bulk_g2s(dst, src, nbytes, bar);
      }
      return;
    }
    if constexpr (kMC) {  // rank 0's thread 0 multicasts the chunk's W, Qg, Kd and P to the whole cluster
      if (mc_rank == 0 && tid == 0) {
        void* bar = base + S::sBar + 8 * stg;  // full[stg]: the same offset in every CTA
        const int row = int(cw) * 64;
        const unsigned short mask = (unsigned short)((1u << mc_size) - 1);
#pragma unroll
        for (int c0 = 0; c0 < KP; c0 += 64) {  // 64-column boxes (128-byte rows, swizzled), 8 KB each
          tma2_multicast(dW + c0 * 64, &tm->w, c0, row, bar, mask);
          tma2_multicast(dQ + c0 * 64, &tm->qg, c0, row, bar, mask);
          tma2_multicast(dK + c0 * 64, &tm->kd, c0, row, bar, mask);
        }
        tma2_multicast(dP, &tm->P, 0, row, bar, mask);
      }
    } else if constexpr (kLean) {  // W from the workspace; q, k rows of the chunk's tokens from the inputs
      // A thread's 16-byte column d8 is the same in every sweep and its row advances by RS, so both offsets
      // advance by constants (session 16: the per-row 64-bit products were most of this loop's instructions,
      // spent by every warp between the chunk's first barrier and its first product).
      constexpr int PK = KP / 8, RS = kThreads / PK;
      static_assert(kThreads % PK == 0 && 64 % RS == 0, "a fixed column per thread, whole sweeps");
      const int tok0 = t_begin + ci * C, Lc = min(C, t_end - tok0);
      const bf16* q = static_cast<const bf16*>(p.q);
      const bf16* k = static_cast<const bf16*>(p.k);
      const int d8 = (tid % PK) * 8, i0 = tid / PK;
      const std::int64_t xstep = std::int64_t(RS) * H * K;
      std::int64_t woff = (cw * 64 + i0) * KP + d8, src = (std::int64_t(tok0 + i0) * H + h) * K + d8;
      for (int i = i0; i < 64; i += RS, woff += RS * KP, src += xstep) {
        cp_async16(dW + i * LDK + d8, ws.w + woff);
        const bool in = i < Lc && d8 < K;
        if (K % 8 == 0) {
          if (!kBwd) cp_async16(dQ + i * LDK + d8, in ? q + src : q, in ? 16 : 0);  // kBwd: no q S
          cp_async16(dK + i * LDK + d8, in ? k + src : k, in ? 16 : 0);
        } else {  // element-wise (rows not 16-byte aligned); visible after the loop-top barrier
          for (int e = 0; e < 8; ++e) {
            const bool ok = in && d8 + e < K;
            if (!kBwd) dQ[i * LDK + d8 + e] = ok ? q[src + e] : __float2bfloat16(0.f);
            dK[i * LDK + d8 + e] = ok ? k[src + e] : __float2bfloat16(0.f);
          }
        }
      }
      float* dGl = reinterpret_cast<float*>(base + S::sGl + stg * 64 * 4);
      if (tid < 16) cp_async16(dGl + tid * 4, lean_g(p, KP) + cw * 64 + tid * 4);
    } else {
      cp_async_wqk_tiles<KP, !kBwd>(dW, dQ, dK, ws, cw, tid);
    }
    if (!kBwd && !kMC) cp_async_p_tile(dP, ws.P, cw, tid);
    {  // u's 64 x BV tile: a fixed 16-byte column per thread, rows RU apart (offsets by constant steps)
      constexpr int PU = BV / 4, RU = kThreads / PU;
      static_assert(kThreads % PU == 0 && 64 % RU == 0, "a fixed column per thread, whole sweeps");
      const int c4 = (tid % PU) * 4, i0 = tid / PU;
      const bool live = v0 + c4 < VP;
      std::int64_t uoff = (cw * 64 + i0) * VP + v0 + c4;
      for (int i = i0; i < 64; i += RU, uoff += std::int64_t(RU) * VP)
        cp_async16(dU + i * LDU + c4, ws.u + uoff, live ? 16 : 0);
    }
    cp_async_gc<KP>(dG, ws.gC, cw, tid);
    cp_async_commit();
  };

  // kBulk: chunk ci's copies complete on mbarrier ci & 1 (arrival count 1: thread 0's expect-tx).
  if constexpr (kMC) {
    // full[s] (count 1: this CTA's expect-tx; the bytes come from rank 0's multicast copies) and, used in rank
    // 0 only, empty[s] (count = cluster size: each CTA arrives once its warps are done with stage s).
    if (tid == 0) {
      for (int s2 = 0; s2 < 2; ++s2) {
        mbar_init(smem + S::sBar + 8 * s2, 1);
        mbar_init(smem + S::sBar + 16 + 8 * s2, mc_size);
      }
      fence_mbarrier_init();
    }
    cluster_sync();  // every CTA's barriers initialised before a copy or a remote arrival reaches them
    if (nchunks > 0) {
      if (tid == 0) mbar_arrive_expect_tx(smem + S::sBar, kMcBytes);
      issue(0);
    }
  } else if constexpr (kBulk) {
    if (tid == 0) {
      for (int s2 = 0; s2 < NS; ++s2) mbar_init(smem + S::sBar + 8 * s2, 1);
      fence_mbarrier_init();
      if (nchunks > 0) mbar_arrive_expect_tx(smem + S::sBar, state_bulk_tx(KP, BV, kBwd));
    }
    __syncthreads();  // barriers initialised and chunk 0's bytes expected before any copy is issued
    if (nchunks > 0) issue(0);
  } else if (NS <= 2) {
    if (nchunks > 0) issue(0);
  } else {  // NS - 1 chunks in flight; one commit group per chunk slot, empty past the end
#pragma unroll
    for (int j = 0; j < NS - 1; ++j) {
      if (j < nchunks) issue(j);
      else cp_async_commit();
    }
  }
  for (int ci = 0; ci < nchunks; ++ci) {
    const int stg = ci % NS, tok0 = t_begin + ci * C, Lc = min(C, t_end - tok0);
    if constexpr (kMC) {
      cp_async_wait<0>();                                          // this thread's u and gC copies of chunk ci
      mbar_wait_parity(smem + S::sBar + 8 * stg, (ci >> 1) & 1);  // the multicast W, Qg, Kd, P of chunk ci
      __syncthreads();  // ... landed for every thread; chunk ci - 1 is done in this CTA (stage stg ^ 1 free)
      if (ci + 1 < nchunks) {
        const int s1 = stg ^ 1;
        if (tid == 0) {
          // Stage s1 held chunk ci - 1: tell rank 0 it is free here; expect chunk ci + 1's bytes in it. Rank 0
          // copies into it once every CTA has said so (empty[s1]'s phase for chunk ci - 1).
          if (ci >= 1) mbar_arrive_remote(smem + S::sBar + 16 + 8 * s1, 0);
          mbar_arrive_expect_tx(smem + S::sBar + 8 * s1, kMcBytes);
          if (mc_rank == 0 && ci >= 1) mbar_wait_parity_cluster(smem + S::sBar + 16 + 8 * s1, ((ci - 1) >> 1) & 1);
        }
        issue(ci + 1);
      }
    } else if constexpr (kBulk) {
      mbar_wait_parity(smem + S::sBar + 8 * stg, (ci >> 1) & 1);  // chunk ci's bytes landed (phase ci >> 1)
      if (tid == 0 && ci + 1 < nchunks)  // stage (ci + 1) % NS: its phase for chunk ci - 1 completed
        mbar_arrive_expect_tx(smem + S::sBar + 8 * ((ci + 1) % NS), state_bulk_tx(KP, BV, kBwd));
      __syncthreads();  // every thread saw chunk ci; chunk ci - 1 fully done (its stage is free)
      if (ci + 1 < nchunks) issue(ci + 1);
    } else if constexpr (NS == 1) {  // chunk ci's tiles, issued at the end of iteration ci - 1
      cp_async_wait<0>();
      __syncthreads();  // the stage landed for every thread (and S hi, lo of chunk ci - 1 are stored)
    } else if (NS == 2) {
      cp_async_wait<0>();
      __syncthreads();  // stage stg landed for every thread; previous chunk fully done
      if (ci + 1 < nchunks) issue(ci + 1);
    } else {
      cp_async_wait<NS - 2>();  // chunk ci's group done (ci + 1 .. ci + NS - 2 may be in flight)
      __syncthreads();          // ... for every thread; previous chunk fully done (its stage is free)
      if (ci + NS - 1 < nchunks) issue(ci + NS - 1);
      else cp_async_commit();
    }
    const bf16* sW = reinterpret_cast<const bf16*>(smem + S::sW + stg * S::tileK);
    const bf16* sQg = reinterpret_cast<const bf16*>(smem + S::sQg + stg * S::tileK);
    const bf16* sKd = reinterpret_cast<const bf16*>(smem + S::sKd + stg * S::tileK);
    const bf16* sP = reinterpret_cast<const bf16*>(smem + S::sP + stg * S::tileP);
    const float* sU = reinterpret_cast<const float*>(smem + S::sU + stg * 64 * LDU * 4);
    const float* sgC = reinterpret_cast<const float*>(smem + S::sgC + stg * KP * 4);
    if (kBwd || kSave) {  // the state entering this chunk (float32, or its bf16 hi part for rung 28)
      const std::int64_t off = (std::int64_t(c_first + ci) * H + h) * K * V;
      // kSbf: the hi tile sSh, which holds bf16_rn of this very state (state_frag_store_hilo, after the loop top's
      // barrier; overwritten only after the barrier that ends its reads), by 16-byte row stores (state_hi_store_rows)
      if constexpr (kSbf) state_hi_store_rows<KP, BV, LDV>(sSh, reinterpret_cast<bf16*>(bwd.S) + off, K, V, v0, tid);
      else state_frag_store_pairs(st, bwd.S + off, K, V, sm, sn0, v0, g8, t4);
    }

    // v_new = u - w_aux S and o = qg S (rows 16 wm.., columns of n-tiles wn0..).
    float ws_[ONT][4] = {}, os_[ONT][4] = {};
    if (kPF) {
      // kPF (LINATTN_STATE_PREFETCH=1): the same products in the same order, with the next k-step's
      // fragments (ldmatrix of w, qg and of S hi, lo) loaded before this k-step's mma: ncu (session 6
      // call 4) found the first mma after each ldmatrix of S the kernel's main stall (24% of samples
      // at B=8 T=4096), ldmatrix issued just before use with 2 warps per scheduler to hide it.
      constexpr int NP = ONT / 2 > 0 ? ONT / 2 : 1;  // S fragment loads per k-step (x4 each)
      unsigned aw[2][4], aq[2][4], bh[2][NP][4], bl[2][NP][4];
      auto frags = [&](int buf, int k0) {
        load_a(aw[buf], sW, LDK, 16 * wm, k0);
        if (!kBwd) load_a(aq[buf], sQg, LDK, 16 * wm, k0);
        if (ONT % 2) {
          load_b_kn(bh[buf][0], sSh, LDV, k0, (8 * wn0) & ~15);
          load_b_kn(bl[buf][0], sSl, LDV, k0, (8 * wn0) & ~15);
        } else {
#pragma unroll
          for (int np = 0; np < ONT / 2; ++np) {
            load_b_kn(bh[buf][np], sSh, LDV, k0, 8 * wn0 + 16 * np);
            load_b_kn(bl[buf][np], sSl, LDV, k0, 8 * wn0 + 16 * np);
          }
        }
      };
      frags(0, 0);
#pragma unroll
      for (int k0 = 0; k0 < KP; k0 += 16) {
        const int cur = (k0 / 16) & 1;
        if (k0 + 16 < KP) frags(cur ^ 1, k0 + 16);
        if (ONT % 2) {  // BV = 16 with 2 n-groups: one n-tile per warp (as below)
          const int sel = ((8 * wn0) >> 3) & 1;
          const unsigned h0 = sel ? bh[cur][0][2] : bh[cur][0][0], h1 = sel ? bh[cur][0][3] : bh[cur][0][1];
          const unsigned l0 = sel ? bl[cur][0][2] : bl[cur][0][0], l1 = sel ? bl[cur][0][3] : bl[cur][0][1];
          mma_bf16(ws_[ONT - 1], aw[cur], h0, h1);
          mma_bf16(ws_[ONT - 1], aw[cur], l0, l1);
          if (!kBwd) {
            mma_bf16(os_[ONT - 1], aq[cur], h0, h1);
            mma_bf16(os_[ONT - 1], aq[cur], l0, l1);
          }
        } else {
#pragma unroll
          for (int np = 0; np < ONT / 2; ++np) {
            mma_bf16(ws_[2 * np], aw[cur], bh[cur][np][0], bh[cur][np][1]);
            mma_bf16(ws_[2 * np + 1], aw[cur], bh[cur][np][2], bh[cur][np][3]);
            mma_bf16(ws_[2 * np], aw[cur], bl[cur][np][0], bl[cur][np][1]);
            mma_bf16(ws_[2 * np + 1], aw[cur], bl[cur][np][2], bl[cur][np][3]);
            if (!kBwd) {
              mma_bf16(os_[2 * np], aq[cur], bh[cur][np][0], bh[cur][np][1]);
              mma_bf16(os_[2 * np + 1], aq[cur], bh[cur][np][2], bh[cur][np][3]);
              mma_bf16(os_[2 * np], aq[cur], bl[cur][np][0], bl[cur][np][1]);
              mma_bf16(os_[2 * np + 1], aq[cur], bl[cur][np][2], bl[cur][np][3]);
            }
          }
        }
      }
    }
#pragma unroll
    for (int k0 = 0; k0 < KP; k0 += 16) {
      if (kPF) break;
      unsigned aw[4], aq[4];
      if constexpr (kMC) {
        load_a_sw128(aw, sW, 16 * wm, k0);
        load_a_sw128(aq, sQg, 16 * wm, k0);
      } else {
        load_a(aw, sW, LDK, 16 * wm, k0);
        if (!kBwd) load_a(aq, sQg, LDK, 16 * wm, k0);
      }
#pragma unroll
      for (int np = 0; np < ONT / 2; ++np) {
        unsigned bh[4], bl[4];
        load_b_kn(bh, sSh, LDV, k0, 8 * wn0 + 16 * np);
        load_b_kn(bl, sSl, LDV, k0, 8 * wn0 + 16 * np);
        mma_bf16(ws_[2 * np], aw, bh[0], bh[1]);
        mma_bf16(ws_[2 * np + 1], aw, bh[2], bh[3]);
        mma_bf16(ws_[2 * np], aw, bl[0], bl[1]);
        mma_bf16(ws_[2 * np + 1], aw, bl[2], bl[3]);
        if (!kBwd) {
          mma_bf16(os_[2 * np], aq, bh[0], bh[1]);
          mma_bf16(os_[2 * np + 1], aq, bh[2], bh[3]);
          mma_bf16(os_[2 * np], aq, bl[0], bl[1]);
          mma_bf16(os_[2 * np + 1], aq, bl[2], bl[3]);
        }
      }
      if (ONT % 2) {  // BV = 16 with 2 n-groups: one n-tile per warp; its S hi and lo fragments in one x4
        unsigned b[4];  // (session 17; two 16-column x4 reads of which half was used before, same operands)
        load_b_kn8_pair(b, sSh, sSl, LDV, k0, 8 * wn0);
        mma_bf16(ws_[ONT - 1], aw, b[0], b[1]);
        mma_bf16(ws_[ONT - 1], aw, b[2], b[3]);
        if (!kBwd) {
          mma_bf16(os_[ONT - 1], aq, b[0], b[1]);
          mma_bf16(os_[ONT - 1], aq, b[2], b[3]);
        }
      }
    }
    // kLean: row factors of rows 16 wm + g8 (r0) and + 8 (r1): scale exp(G_i) for q S, exp(G_C - G_i)
    // for the state update's v_new (G in log2 units; G_C = G_63, constant past a ragged chunk's end).
    float qf0 = 0.f, qf1 = 0.f, vf0 = 1.f, vf1 = 1.f;
    bf16* sVk = reinterpret_cast<bf16*>(smem + S::sVk);
    const bool lean_gated = kLean && p.gate == kGateScalar;  // DeltaNet: G = 0, exp(G_C - G_i) = 1
    if constexpr (kLean) {
      const float* sG_ = reinterpret_cast<const float*>(smem + S::sGl + stg * 64 * 4);
      const int r0 = 16 * wm + g8;
      const float g0 = sG_[r0], g1 = sG_[r0 + 8], gc = sG_[63];
      qf0 = p.scale * exp2f(g0), qf1 = p.scale * exp2f(g1);
      vf0 = exp2f(gc - g0), vf1 = exp2f(gc - g1);
    }
#pragma unroll
    for (int nt = 0; nt < ONT; ++nt) {
      const int i = 16 * wm + g8, col = 8 * (wn0 + nt) + 2 * t4;
      const float2 u01 = *reinterpret_cast<const float2*>(sU + i * LDU + col);
      const float2 u23 = *reinterpret_cast<const float2*>(sU + (i + 8) * LDU + col);
      ws_[nt][0] = u01.x - ws_[nt][0], ws_[nt][1] = u01.y - ws_[nt][1];
      ws_[nt][2] = u23.x - ws_[nt][2], ws_[nt][3] = u23.y - ws_[nt][3];
      *reinterpret_cast<unsigned*>(sVn + i * LDV + col) = pack_bf16(ws_[nt][0], ws_[nt][1]);
      *reinterpret_cast<unsigned*>(sVn + (i + 8) * LDV + col) = pack_bf16(ws_[nt][2], ws_[nt][3]);
      if constexpr (kLean) {  // o = scale exp(G_i) (q S) before P v_new is added; v_new exp(G_C - G_i)
        os_[nt][0] *= qf0, os_[nt][1] *= qf0, os_[nt][2] *= qf1, os_[nt][3] *= qf1;
        if (lean_gated) {
          *reinterpret_cast<unsigned*>(sVk + i * LDV + col) = pack_bf16(ws_[nt][0] * vf0, ws_[nt][1] * vf0);
          *reinterpret_cast<unsigned*>(sVk + (i + 8) * LDV + col) = pack_bf16(ws_[nt][2] * vf1, ws_[nt][3] * vf1);
        }
      }
      if (kBwd || kSave) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int ii = i + hh * 8, cc = v0 + col;
          if (ii < Lc) st_pair(bwd.vn + (std::int64_t(tok0 + ii) * H + h) * V + cc, ws_[nt][2 * hh], ws_[nt][2 * hh + 1], cc, V);
        }
      }
    }
    __syncthreads();  // v_new complete in sVn; every read of sSh / sSl done

    // o += P v_new, then store o (rows < Lc, columns < V).
#pragma unroll
    for (int k0 = 0; k0 < 64; k0 += 16) {
      if (kBwd) break;
      if (k0 > 16 * wm) break;  // P is lower triangular
      unsigned a[4];
      if constexpr (kMC) load_a_sw128(a, sP, 16 * wm, k0);
      else load_a(a, sP, 72, 16 * wm, k0);
      mma_acc_b(os_, a, sVn, LDV, k0, 8 * wn0);
      if (ONT % 2) {  // one n-tile: an x2 read of its 8 columns (session 17; was x4 over 16, half used)
        unsigned b[2];
        load_b_kn8(b, sVn, LDV, k0, 8 * wn0);
        mma_bf16(os_[ONT - 1], a, b[0], b[1]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < ONT; ++nt)
#pragma unroll
      for (int hh = 0; hh < 2; ++hh) {
        const int i = 16 * wm + g8 + 8 * hh, col = v0 + 8 * (wn0 + nt) + 2 * t4;
        if (kBwd || i >= Lc) continue;
        bf16* dst = o + (std::int64_t(tok0 + i) * H + h) * V + col;
        if (col + 1 < V && (V % 2) == 0) {
          *reinterpret_cast<unsigned*>(dst) = pack_bf16(os_[nt][2 * hh], os_[nt][2 * hh + 1]);
        } else {
          if (col < V) dst[0] = __float2bfloat16(os_[nt][2 * hh]);
          if (col + 1 < V) dst[1] = __float2bfloat16(os_[nt][2 * hh + 1]);
        }
      }

    // S = Diag(exp(G_C)) S + Kd^T v_new (rows 16 sm.. of S, n-tiles sn0..); kLean: k^T of the scaled
    // v_new (sVk) for scalar gates.
    const bf16* sVs = lean_gated ? sVk : sVn;
    state_frag_decay(st, sgC, sm, g8);
#pragma unroll
    for (int k0 = 0; k0 < 64; k0 += 16) {
      unsigned a[4];
      if constexpr (kMC) load_a_t_sw128(a, sKd, 16 * sm, k0);
      else load_a_t(a, sKd, LDK, 16 * sm, k0);
      mma_acc_b(st, a, sVs, LDV, k0, 8 * sn0);
      if (SNT % 2) {
        unsigned b[4];
        const int nn = 8 * sn0, sel = (nn >> 3) & 1;
        load_b_kn(b, sVs, LDV, k0, nn & ~15);
        mma_bf16(st[SNT - 1], a, sel ? b[2] : b[0], sel ? b[3] : b[1]);
      }
    }
    store_state_bf16();  // read by the next chunk after its first barrier
    if constexpr (NS == 1) {  // one stage: refill it once every thread is past its last read (sKd, sgC)
      if (ci + 1 < nchunks) {  // nchunks is the block's: the barrier is reached by all or none
        __syncthreads();
        issue(ci + 1);
      }
    }
  }
  if ((!kBwd || kHt) && p.ht) {
    state_frag_store(st, p.ht, sbase, K, V, sm, sn0, v0, g8, t4);
  }
  if constexpr (kMC) cluster_sync();  // no CTA leaves while a peer may still reach its barriers or memory
}

template <int KP, int BV, bool kBwd = false, bool kHt = false, int NS = 2, bool kPF = false, bool kBulk = false>
__global__ void __launch_bounds__(kThreads, NS == 1 ? 2 : 0) v2_state(KParams p, StateBwdOut bwd) {
  v2_state_body<KP, BV, kBwd, kHt, NS, kPF, kBulk, false>(p, bwd);
}

/// Forward rung 6's state kernel (v2_state_body's kLean; two stages, cp.async tiles).
template <int KP, int BV>
__global__ void __launch_bounds__(kThreads) v2_state_lean(KParams p) {
  v2_state_body<KP, BV, false, false, 2, false, false, true>(p, StateBwdOut{});
}

/// Forward rung 10's state kernel (v10_pipeline.cu): v2_state's default forward kernel (two stages, cp.async
/// tiles; the same body, so the same values bit for bit) that first signals griddepcontrol.launch_dependents,
/// so that the next kernel of the stream, when launched as a programmatic dependent (rung 10's intra kernel
/// of the next segment), may start on the SMs' room beside this grid instead of after it. Without such a
/// launch the signal has no effect (PTX ISA, griddepcontrol).
template <int KP, int BV>
__global__ void __launch_bounds__(kThreads) v2_state_pdl(KParams p) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  v2_state_body<KP, BV, false, false, 2, false, false, false>(p, StateBwdOut{});
}

/// Forward rung 10's cluster state kernel (session 17; v10_pipeline.cu, where v10_cluster_size() > 1): the value
/// tiles of one head form a cluster of CL CTAs (grid (1, H, V / 16), cluster (1, 1, CL)). Every CTA reads the same
/// W, Qg, Kd and P tiles of each chunk, which v2_state_pdl loads CL times from L2 with cp.async (about 16
/// LDGSTS and 130 instructions per thread and chunk; ncu of call 2: L2 throughput 67%, a quarter of the stall
/// samples on the issue code). Here rank 0's thread 0 loads each tile once with tensor copies multicast to the
/// whole cluster; u (per value tile) and exp(G_C) stay cp.async. Protocol (two stages, kMC in v2_state_body):
/// full[s] in each CTA (count 1, its thread 0's expect-tx of the 4 tiles' bytes), empty[s] in rank 0 (count CL,
/// one remote arrival per CTA when its warps are done with stage s); rank 0 copies chunk ci + 1 into stage s
/// once empty[s]'s phase for chunk ci - 1 has completed. The tiles land in 128-byte-swizzled 64-column halves
/// instead of padded rows (load_a_sw128): the same values reach the same mma fragments, so o and the state are
/// v2_state_pdl's bit for bit. Call 4 of session 17 ran a first layout, 8-column slabs (boxes {8, 64, KP / 8} of
/// 16-byte rows): bit for bit, but the state kernel alone took 1.73 ms against 0.97 without clusters.
template <int KP>
__global__ void __launch_bounds__(kThreads) v2_state_mc(KParams p, const __grid_constant__ StateTmaps tm) {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
  v2_state_body<KP, 16, false, false, 2, false, false, false, false, true>(p, StateBwdOut{}, &tm);
}

/// The saving forward's state kernel with states (v2_state_body's kSave; two stages, cp.async tiles).
template <int KP, int BV>
__global__ void __launch_bounds__(kThreads) v2_state_save(KParams p, StateBwdOut bwd) {
  v2_state_body<KP, BV, false, false, 2, false, false, false, true>(p, bwd);
}

/// The saving forward's lean state kernel with states (kLean + kSave; rung 9's o and ht, and its S, v_new).
template <int KP, int BV>
__global__ void __launch_bounds__(kThreads) v2_state_lean_save(KParams p, StateBwdOut bwd) {
  v2_state_body<KP, BV, false, false, 2, false, false, true, true>(p, bwd);
}

/// The backward's lean states kernel (kLean + kBwd): rung 9's S and v_new, no o.
template <int KP, int BV>
__global__ void __launch_bounds__(kThreads) v2_state_bwd_lean(KParams p, StateBwdOut bwd) {
  v2_state_body<KP, BV, true, false, 2, false, false, true>(p, bwd);
}

/// Backward rung 28's four (kSbf: S stored as bf16): the backward's states kernel (kBwd, the default tiles, no knobs),
/// the saving forward's (kSave), and their lean pair (kLean).
template <int KP, int BV>
__global__ void __launch_bounds__(kThreads) v2_state_bwd_sbf(KParams p, StateBwdOut bwd) {
  v2_state_body<KP, BV, true, false, 2, false, false, false, false, false, true>(p, bwd);
}
template <int KP, int BV>
__global__ void __launch_bounds__(kThreads) v2_state_save_sbf(KParams p, StateBwdOut bwd) {
  v2_state_body<KP, BV, false, false, 2, false, false, false, true, false, true>(p, bwd);
}
template <int KP, int BV>
__global__ void __launch_bounds__(kThreads) v2_state_lean_save_sbf(KParams p, StateBwdOut bwd) {
  v2_state_body<KP, BV, false, false, 2, false, false, true, true, false, true>(p, bwd);
}
template <int KP, int BV>
__global__ void __launch_bounds__(kThreads) v2_state_bwd_lean_sbf(KParams p, StateBwdOut bwd) {
  v2_state_body<KP, BV, true, false, 2, false, false, true, false, false, true>(p, bwd);
}

int pick_bv(const KParams& p) {
  if (const char* env = std::getenv("LINATTN_V2_BV")) return std::atoi(env);
  // Widest tile that still fills the 132 SMs once (measured: B=8 T=4096 H=16 V=128 -> 64,
  // B=1 T=32768 H=16 -> 16; narrower tiles re-read the shared w_aux / q / k tiles more often).
  const long blocks64 = long(p.N) * p.H * ((p.V + 63) / 64);
  if (blocks64 >= 132) return 64;
  const long blocks32 = long(p.N) * p.H * ((p.V + 31) / 32);
  return blocks32 >= 132 ? 32 : 16;
}

template <int KP, int GATE, bool GDN2, class Tg>
void launch_intra(const Call& c) {
  const int bytes = IntraSmem<KP>::bytes(GATE == kGateChannel);
  auto kern = v2_intra<KP, GATE, GDN2, Tg>;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  kern<<<dim3(c.p.num_chunks, c.p.H), kThreads, bytes, c.stream>>>(c.p);
  LINATTN_CUDA_CHECK(cudaGetLastError());
}

template <int KP, class Tg>
void launch_intra_op(const Call& c) {
  if (c.p.gate == kGateNone) return launch_intra<KP, kGateNone, false, Tg>(c);
  if (c.p.gate == kGateScalar) return launch_intra<KP, kGateScalar, false, Tg>(c);
  if (!c.p.gdn2) return launch_intra<KP, kGateChannel, false, Tg>(c);
  return launch_intra<KP, kGateChannel, true, Tg>(c);
}

// The state kernel's knobs below: whether the environment variable `name` is set to `value`, and
// its value as an integer (0 when unset).
bool env_is(const char* name, const char* value) {
  const char* env = std::getenv(name);
  return env && std::string(env) == value;
}
int env_int(const char* name) {
  const char* env = std::getenv(name);
  return env ? std::atoi(env) : 0;
}

// LINATTN_STATE_GRID=flat: one grid dimension, value tile fastest (v2_state's decoding); else
// (N, H, value tiles).
bool state_grid_flat() { return env_is("LINATTN_STATE_GRID", "flat"); }

// LINATTN_STATE_PREFETCH=1: v2_state's kPF (the next k-step's fragments loaded before this one's mma).
bool state_prefetch() { return env_int("LINATTN_STATE_PREFETCH") == 1; }

// LINATTN_STATE_BULK=1: v2_state's kBulk (tiles by cp.async.bulk, one per row, on an mbarrier per
// stage); two stages, so it overrides LINATTN_STATE_STAGES=3; combines with LINATTN_STATE_PREFETCH
// and LINATTN_STATE_GRID. Forward, backward and v5's split state pass alike.
bool state_bulk() { return env_int("LINATTN_STATE_BULK") == 1; }

// LINATTN_STATE_OCC2=1: v2_state with NS = 1 at BV = 32, two blocks per SM (tc_state_launch; the
// forward only). It combines with LINATTN_STATE_PREFETCH (kPF: 124 registers, no spill) and
// LINATTN_STATE_GRID=flat, takes precedence over LINATTN_STATE_BULK (ignored where it applies: kBulk
// is two-stage), and never meets LINATTN_STATE_STAGES=3 (BV = 16 only).
bool state_occ2() { return env_int("LINATTN_STATE_OCC2") == 1; }

template <int KP, int BV, bool kBwd = false, bool kHt = false, int NS = 2>
void launch_state(const Call& c, StateBwdOut bwd = {}) {
  int bytes = StateSmem<KP, BV, NS>::bytes;
  static_assert(StateSmem<KP, BV, NS>::bytes <= 227 * 1024, "state kernel shared memory over the sm_90 limit");
  void (*kern)(KParams, StateBwdOut);
  if constexpr (NS == 1) {  // LINATTN_STATE_OCC2: with or without kPF, never kBulk; the carveout asks
    // for all 228 KB as shared memory so that two blocks fit (a hint the driver may also reach alone)
    static_assert(StateSmem<KP, BV, 1>::bytes <= kOcc2SmemMax, "NS = 1 is the two-blocks-per-SM variant");
    kern = state_prefetch() ? v2_state<KP, BV, kBwd, kHt, 1, true> : v2_state<KP, BV, kBwd, kHt, 1>;
    LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                            int(cudaSharedmemCarveoutMaxShared)));
  } else {
    kern = state_prefetch() ? v2_state<KP, BV, kBwd, kHt, NS, true> : v2_state<KP, BV, kBwd, kHt, NS>;
    if constexpr (NS == 2) {
      static_assert(StateSmem<KP, BV, 2, true>::bytes <= 227 * 1024, "kBulk shared memory over the sm_90 limit");
      if (state_bulk()) {
        bytes = StateSmem<KP, BV, 2, true>::bytes;
        kern = state_prefetch() ? v2_state<KP, BV, kBwd, kHt, 2, true, true> : v2_state<KP, BV, kBwd, kHt, 2, false, true>;
      }
    }
  }
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const int nvt = (c.p.V + BV - 1) / BV;
  const dim3 grid = state_grid_flat() ? dim3(unsigned(c.p.N) * c.p.H * nvt) : dim3(c.p.N, c.p.H, nvt);
  kern<<<grid, kThreads, bytes, c.stream>>>(c.p, bwd);
  LINATTN_CUDA_CHECK(cudaGetLastError());
}

/// One launch of a state kernel over the 3-d grid (sequences, heads, value tiles of BV columns) with `bytes`
/// of dynamic shared memory; `args` follow p (the kernels without a StateBwdOut take none).
template <int BV, class Kern, class... Args>
void launch_value_tiles(Kern kern, int bytes, const Call& c, Args... args) {
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const int nvt = (c.p.V + BV - 1) / BV;
  kern<<<dim3(c.p.N, c.p.H, nvt), kThreads, bytes, c.stream>>>(c.p, args...);
  LINATTN_CUDA_CHECK(cudaGetLastError());
}

/// f(std::integral_constant<int, KP>{}, std::integral_constant<int, BV>{}) for KP = 64 or 128 and BV = 64,
/// 32 or anything else 16 (pick_bv's tile widths): the one dispatch of the state kernels' instantiations.
template <class F>
decltype(auto) with_kp_bv(int KP, int bv, F&& f) {
  using K64 = std::integral_constant<int, 64>;
  using K128 = std::integral_constant<int, 128>;
  using B16 = std::integral_constant<int, 16>;
  using B32 = std::integral_constant<int, 32>;
  if (KP == 64) {
    if (bv == 64) return f(K64{}, K64{});
    if (bv == 32) return f(K64{}, B32{});
    return f(K64{}, B16{});
  }
  if (bv == 64) return f(K128{}, K64{});
  if (bv == 32) return f(K128{}, B32{});
  return f(K128{}, B16{});
}

template <int KP, int BV>
void launch_state_lean(const Call& c) {
  constexpr int bytes = StateSmem<KP, BV, 2, false, true>::bytes;
  static_assert(bytes <= 227 * 1024, "lean state kernel shared memory over the sm_90 limit");
  launch_value_tiles<BV>(v2_state_lean<KP, BV>, bytes, c);
}

template <int KP, int BV>
void launch_state_lean_save(const Call& c, StateBwdOut bwd) {
  launch_value_tiles<BV>(v2_state_lean_save<KP, BV>, StateSmem<KP, BV, 2, false, true>::bytes, c, bwd);
}

template <int KP, int BV>
void launch_state_bwd_lean(const Call& c, StateBwdOut bwd) {
  launch_value_tiles<BV>(v2_state_bwd_lean<KP, BV>, StateSmem<KP, BV, 2, false, true>::bytes, c, bwd);
}

template <int KP, int BV>
void launch_state_pdl(const Call& c) {
  // All 228 KB as shared memory, so that an SM running one block of this kernel has room for one block of
  // rung 7's intra kernel beside it (the carveout is a hint; rung 10 checks the byte count).
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(v2_state_pdl<KP, BV>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          int(cudaSharedmemCarveoutMaxShared)));
  launch_value_tiles<BV>(v2_state_pdl<KP, BV>, StateSmem<KP, BV>::bytes, c);  // the default kernel's layout
}

/// cuTensorMapEncodeTiled from the driver (through the runtime, so that no -lcuda is needed); null if absent.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      f = nullptr;
      (void)cudaGetLastError();  // the fallback's launch checks cudaGetLastError: leave no error behind
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

/// A tensor map of `rows` rows of `cols` bf16 (row stride cols * 2 bytes) at `base`, boxes of 64 columns by 64
/// rows with the 128-byte swizzle (sw128_at's layout). False if the driver refuses it.
bool encode_sw128_map(CUtensorMap* m, const void* base, std::int64_t rows, int cols) {
  auto enc = tensor_map_encoder();
  if (!enc) return false;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(cols) * 2};
  const cuuint32_t box[2] = {64, 64};
  const cuuint32_t estr[2] = {1, 1};
  return enc(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box, estr,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

/// v2_state_mc's launch configuration over `grid` with clusters of `cl` value tiles (the cluster attribute in
/// `attr`, which must outlive the configuration), after the kernel's shared-memory attributes are set: its
/// dynamic bytes, and all 228 KB as shared memory (room for an intra block beside it, as launch_state_pdl).
template <int KP>
cudaLaunchConfig_t state_mc_config(dim3 grid, int cl, cudaStream_t stream, cudaLaunchAttribute& attr) {
  constexpr int bytes = StateSmem<KP, 16, 2, false, false, true>::bytes;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(v2_state_mc<KP>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(v2_state_mc<KP>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          int(cudaSharedmemCarveoutMaxShared)));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = bytes;
  cfg.stream = stream;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 1, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = unsigned(cl);
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cfg;
}

template <int KP>
bool launch_state_mc(const Call& c, int cl) {
  const KParams& p = c.p;
  const V2Ws ws = v2_ws(p, KP);
  const std::int64_t rows = std::int64_t(p.num_chunks) * p.H * 64;
  if (rows > (std::int64_t(1) << 31) - 64) return false;  // the copies' row coordinate is a 32-bit int
  StateTmaps tm;
  if (!encode_sw128_map(&tm.w, ws.w, rows, KP) || !encode_sw128_map(&tm.qg, ws.qg, rows, KP) ||
      !encode_sw128_map(&tm.kd, ws.kd, rows, KP) || !encode_sw128_map(&tm.P, ws.P, rows, 64))
    return false;
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = state_mc_config<KP>(dim3(p.N, p.H, (p.V + 15) / 16), cl, c.stream, attr);
  LINATTN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, v2_state_mc<KP>, p, tm));
  return true;
}

template <int KP>
int state_mc_max_clusters(int cl) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = state_mc_config<KP>(dim3(1, 1, unsigned(cl)), cl, nullptr, attr);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, v2_state_mc<KP>, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

template <int KP, int BV>
void launch_state_save(const Call& c, StateBwdOut bwd) {
  launch_value_tiles<BV>(v2_state_save<KP, BV>, StateSmem<KP, BV>::bytes, c, bwd);  // the default kernel's layout
}

template <int KP>
void launch_kp(const Call& c) {
  if (c.p.num_chunks > 0 && !skip_kernel("intra")) {
    if (c.gate_dtype == 0) launch_intra_op<KP, float>(c);
    else launch_intra_op<KP, bf16>(c);
  }
  tc_state_launch(c, KP);
}

}  // namespace

bool skip_kernel(const char* which) {
  const char* only = std::getenv("LINATTN_TC_ONLY");  // benchmark knob: time one kernel alone
  return only && *only && std::string(only) != which;
}

int tc_pick_bv(const KParams& p) { return pick_bv(p); }

void tc_state_launch(const Call& c, int KP) {
  if (skip_kernel("state")) return;
  const int bv = pick_bv(c.p);
  // LINATTN_STATE_OCC2=1 (v2_state's NS = 1): where pick_bv gives 64 or 32 columns, 32 columns, one
  // stage, two blocks per SM. Same outputs bit for bit (a value column's arithmetic does not depend on
  // BV: see v2_state).
  if (state_occ2() && (bv == 64 || bv == 32)) {
    if (KP == 64) return launch_state<64, 32, false, false, 1>(c);
    return launch_state<128, 32, false, false, 1>(c);
  }
  // LINATTN_STATE_STAGES=3: a 3-stage cp.async pipeline at BV = 16 (two chunks of look-ahead; the
  // one tile width where 3 stages fit in shared memory at KP = 128).
  const bool three = env_int("LINATTN_STATE_STAGES") == 3 && !state_bulk();  // kBulk: two stages only
  if (KP == 64) {
    if (bv == 64) return launch_state<64, 64>(c);
    if (bv == 32) return launch_state<64, 32>(c);
    if (three) return launch_state<64, 16, false, false, 3>(c);
    return launch_state<64, 16>(c);
  }
  if (bv == 64) return launch_state<128, 64>(c);
  if (bv == 32) return launch_state<128, 32>(c);
  if (three) return launch_state<128, 16, false, false, 3>(c);
  return launch_state<128, 16>(c);
}

void tc_state_pdl_launch(const Call& c, int KP) {
  if (skip_kernel("state")) return;
  // the default kernel's tile widths (no knobs: NS = 2, 3-d grid)
  with_kp_bv(KP, pick_bv(c.p),
             [&](auto kp, auto bv) { launch_state_pdl<decltype(kp)::value, decltype(bv)::value>(c); });
}

bool tc_state_mc_launch(const Call& c, int KP, int cl) {
  if (skip_kernel("state")) return true;
  return KP == 64 ? launch_state_mc<64>(c, cl) : launch_state_mc<128>(c, cl);
}

int tc_state_mc_max_clusters(int KP, int cl) {
  return KP == 64 ? state_mc_max_clusters<64>(cl) : state_mc_max_clusters<128>(cl);
}

std::size_t tc_state_mc_smem_bytes(int KP) {
  return KP == 64 ? StateSmem<64, 16, 2, false, false, true>::bytes : StateSmem<128, 16, 2, false, false, true>::bytes;
}

int tc_state_mc_regs(int KP) {
  cudaFuncAttributes a{};
  if (KP == 64) LINATTN_CUDA_CHECK(cudaFuncGetAttributes(&a, v2_state_mc<64>));
  else LINATTN_CUDA_CHECK(cudaFuncGetAttributes(&a, v2_state_mc<128>));
  return a.numRegs;
}

int tc_state_pdl_regs(int KP) {
  cudaFuncAttributes a{};
  if (KP == 64) LINATTN_CUDA_CHECK(cudaFuncGetAttributes(&a, v2_state_pdl<64, 16>));
  else LINATTN_CUDA_CHECK(cudaFuncGetAttributes(&a, v2_state_pdl<128, 16>));
  return a.numRegs;
}

std::size_t tc_state_smem_bytes(int KP, int BV) {
  return with_kp_bv(KP, BV,
                    [](auto kp, auto bv) { return std::size_t(StateSmem<decltype(kp)::value, decltype(bv)::value>::bytes); });
}

void tc_state_lean_launch(const Call& c, int KP) {
  if (skip_kernel("state")) return;
  // the default kernel's tile widths (no knobs: NS = 2, 3-d grid)
  with_kp_bv(KP, pick_bv(c.p),
             [&](auto kp, auto bv) { launch_state_lean<decltype(kp)::value, decltype(bv)::value>(c); });
}

void tc_state_bwd_launch(const Call& c, int KP, float* s_out, float* vn_out, bool s_bf16) {
  const StateBwdOut bwd{s_out, vn_out};
  with_kp_bv(KP, pick_bv(c.p), [&](auto kp, auto bv) {
    constexpr int KPv = decltype(kp)::value, BVv = decltype(bv)::value;
    if (s_bf16) launch_value_tiles<BVv>(v2_state_bwd_sbf<KPv, BVv>, StateSmem<KPv, BVv>::bytes, c, bwd);  // rung 28
    else launch_state<KPv, BVv, true>(c, bwd);
  });
}

void tc_state_lean_save_launch(const Call& c, int KP, float* s_out, float* vn_out, bool s_bf16) {
  const StateBwdOut bwd{s_out, vn_out};
  with_kp_bv(KP, pick_bv(c.p), [&](auto kp, auto bv) {
    constexpr int KPv = decltype(kp)::value, BVv = decltype(bv)::value;
    if (s_bf16)  // rung 28
      launch_value_tiles<BVv>(v2_state_lean_save_sbf<KPv, BVv>, StateSmem<KPv, BVv, 2, false, true>::bytes, c, bwd);
    else launch_state_lean_save<KPv, BVv>(c, bwd);
  });
}

void tc_state_bwd_lean_launch(const Call& c, int KP, float* s_out, float* vn_out, bool s_bf16) {
  const StateBwdOut bwd{s_out, vn_out};
  with_kp_bv(KP, pick_bv(c.p), [&](auto kp, auto bv) {
    constexpr int KPv = decltype(kp)::value, BVv = decltype(bv)::value;
    if (s_bf16)  // rung 28
      launch_value_tiles<BVv>(v2_state_bwd_lean_sbf<KPv, BVv>, StateSmem<KPv, BVv, 2, false, true>::bytes, c, bwd);
    else launch_state_bwd_lean<KPv, BVv>(c, bwd);
  });
}

void tc_state_save_launch(const Call& c, int KP, float* s_out, float* vn_out, bool s_bf16) {
  // pick_bv's tile width, as the forward's and the backward's state kernels (BV changes no value:
  // v2_state above); none of the forward's knobs (OCC2, STAGES, BULK, PREFETCH, GRID).
  const StateBwdOut bwd{s_out, vn_out};
  with_kp_bv(KP, pick_bv(c.p), [&](auto kp, auto bv) {
    constexpr int KPv = decltype(kp)::value, BVv = decltype(bv)::value;
    if (s_bf16) launch_value_tiles<BVv>(v2_state_save_sbf<KPv, BVv>, StateSmem<KPv, BVv>::bytes, c, bwd);  // rung 28
    else launch_state_save<KPv, BVv>(c, bwd);
  });
}

void tc_state_split_launch(const Call& c, int KP, float* s_out, float* vn_out) {
  if (skip_kernel("state")) return;
  const StateBwdOut bwd{s_out, vn_out};
  // BV <= 32: v5 splits only where pick_bv gives 16 or 32 (unless forced), and the BV = 64
  // instantiation with kHt spilled 4 bytes (ptxas, nvcc 13.0, KP = 128).
  const int bv = pick_bv(c.p);
  if (KP == 64) {
    if (bv >= 32) return launch_state<64, 32, true, true>(c, bwd);
    return launch_state<64, 16, true, true>(c, bwd);
  }
  if (bv >= 32) return launch_state<128, 32, true, true>(c, bwd);
  return launch_state<128, 16, true, true>(c, bwd);
}

std::size_t tc_workspace_bytes(const KParams& p) {
  const int KP = tc_pick_kp(p.K);
  const std::size_t blocks = std::size_t(p.num_chunks) * p.H;
  return blocks * (3 * 64 * KP * 2 + 64 * 64 * 2 + 64 * std::size_t(vpad(p.V)) * 4 + KP * 4) + 256;
}

std::size_t tc_lean_workspace_bytes(const KParams& p) {
  return tc_workspace_bytes(p) + std::size_t(p.num_chunks) * p.H * 64 * 4;
}

bool v2_supports(const Call& c, std::string* why) {
  if (c.dtype != 1) {
    if (why) *why = "v2_tensorcore takes bfloat16 q, k, v (float32 inputs: v1_simple)";
    return false;
  }
  if (c.p.K > 128 || c.p.K < 16) {
    // K < 16: each output sums too few bf16-rounded products for the bf16 error bound (measured
    // 1e-2 relative at K = 1 against 3e-3 at K >= 16); such heads go to v1 (float32 arithmetic).
    if (why) *why = "v2_tensorcore and v3_async take 16 <= K <= 128 (K = " + std::to_string(c.p.K) + ": v1_simple)";
    return false;
  }
  return true;
}

std::size_t v2_workspace_bytes(const KParams& p) { return tc_workspace_bytes(p); }

void v2_launch(Call c) {
  if (tc_pick_kp(c.p.K) == 64) return launch_kp<64>(c);
  return launch_kp<128>(c);
}

}  // namespace linattn::cuda::detail
