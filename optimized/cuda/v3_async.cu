// optimized/cuda/v3_async.cu -- rung 3 of the CUDA ladder: v2's algorithm and workspace, with an
// intra-chunk kernel whose memory traffic is no longer latency-bound. Same numerics as v2.
//
// What v2 measured (H200, bf16, B=8 T=4096 H=16 K=V=128): 2.4 ms for DeltaNet against fla's 1.0,
// about 2 ms of it in v2_intra (32 us per block, 62 waves of one block per SM), because its loads
// were issued one at a time: each loop iteration loaded a 2-byte value from global memory, stored
// it to shared memory, and only then issued the next load (the compiler cannot hoist a global load
// above a store through another pointer), so every block paid dozens of full DRAM latencies.
// v3 changes only the intra-chunk kernel:
//   * every input tile of the chunk (k, q, the gates, GDN2's b) is fetched with 16-byte cp.async
//     at the start, in one batch, so a block waits for memory once;
//   * the first value tile (v and GDN2's w) is fetched into registers at the start too, and each
//     later value tile while the previous one is multiplied;
//   * stores are 16-byte vectors; the cumulative sums of per-channel gates use all 256 threads;
//   * with scalar gates the shared memory fits two blocks per SM (113 KB).
// Sizes whose rows are not 16-byte multiples (K % 8 != 0 for bf16, K % 4 != 0 for float gates,
// bfloat16 gates) take element-wise loads: correct, slower. The state kernel is v2's.
//
// Measured (H200, bf16, float32 gates; RESULTS.md, run 3), B=8 T=4096 H=16 K=V=128 with BV=64:
// DeltaNet / GDN / KDA / GDN2 1.005 / 1.045 / 2.50 / 2.66 ms (fla 1.012 / 0.856 / 1.82 / 2.02);
// B=1 T=32768 (BV=16): 1.67 / 1.71 / 3.16 / 3.32 ms (fla 1.77 / 1.45 / 2.52 / 2.74). The intra
// kernel alone went from about 2 ms to 0.55 / 0.59 ms for DeltaNet / GDN as predicted, but takes
// 2.0 / 2.2 ms for KDA / GDN2: their per-channel path (entry-by-entry diagonal blocks reading six
// shared-memory rows per pair, about 200 KB of shared memory so one block per SM) is what is left.
// The state kernel alone: 0.68 ms (first shape, BV=32) and 1.10 ms (second shape, BV=16), where
// every value-column block re-reads the same w_aux / q / k / P tiles (8 blocks per head).
#include <cstdlib>
#include <string>
#include <type_traits>

#include "optimized/cuda/tc_common.cuh"

namespace linattn::cuda::detail {
namespace {

template <int KP, bool CH, bool GDN2>
struct V3Smem {
  static constexpr int LDK = ldk(KP);
  static constexpr int tile = 64 * LDK * 2;
  static constexpr int sK = 0;
  static constexpr int sQ = sK + tile;
  static constexpr int sE = sQ + tile;                 // also sT (phase 4) and the u0 hi tile
  static constexpr int sX = sE + tile;                 // q tilde (per-channel gates only)
  static constexpr int sKt = sX + (CH ? tile : 0);     // [96][LDK] (per-channel gates only)
  static constexpr int sL = sKt + (CH ? 96 * LDK * 2 : 0);
  static constexpr int sA = sL + 64 * 65 * 4;
  static constexpr int sAh = sA + 64 * 65 * 4;
  static constexpr int sAl = sAh + 64 * 72 * 2;
  static constexpr int sP = sAl + 64 * 72 * 2;
  static constexpr int sBeta = sP + 64 * 72 * 2;
  static constexpr int sTot = sBeta + 64 * 4;          // [4][KP] segment totals of the cumsum
  static constexpr int sG = sTot + (CH ? 4 * KP * 4 : 0);
  static constexpr int sB = sG + (CH ? 64 * KP * 4 : 64 * 4);
  static constexpr int bytes = sB + (GDN2 ? 64 * KP * 4 : 0);
  static_assert(3 * 16 * 17 * 4 <= tile, "sT must fit in sE");
};

__device__ __forceinline__ float bf(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int e = 0; e < 4; ++e) f[2 * e] = __low2float(h[e]), f[2 * e + 1] = __high2float(h[e]);
}
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint4 v;
  v.x = pack_bf16(f[0], f[1]), v.y = pack_bf16(f[2], f[3]), v.z = pack_bf16(f[4], f[5]), v.w = pack_bf16(f[6], f[7]);
  return v;
}
__device__ __forceinline__ void ld8f(const float* s, float (&f)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(s), b = *reinterpret_cast<const float4*>(s + 4);
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}

/// Registers holding one 64 x 64 value tile (and GDN2's write gates) for this thread: groups
/// gi = tid + 256 s (s = 0, 1) of 8 consecutive columns, row gi / 8, columns (gi % 8) * 8.
struct VTile {
  uint4 v[2];
  float w[2][8];
};

template <bool GDN2, class Tg>
__device__ __forceinline__ void load_vtile(VTile& t, const KParams& p, int tok0, int Lc, int h, int v0) {
  const bf16* v = static_cast<const bf16*>(p.v);
  const Tg* wg = static_cast<const Tg*>(p.w);
  const int V = p.V;
#pragma unroll
  for (int s = 0; s < 2; ++s) {
    const int gi = threadIdx.x + 256 * s, i = gi >> 3, col = v0 + (gi & 7) * 8;
    const std::int64_t base = (std::int64_t(tok0 + i) * p.H + h) * V + col;
    t.v[s] = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int e = 0; e < 8; ++e) t.w[s][e] = 0.f;
    if (i >= Lc || col >= V) continue;
    if (V % 8 == 0) {
      t.v[s] = *reinterpret_cast<const uint4*>(v + base);
    } else {
      bf16* vb = reinterpret_cast<bf16*>(&t.v[s]);
      for (int e = 0; e < 8; ++e)
        if (col + e < V) vb[e] = v[base + e];
    }
    if (GDN2) {
      if (std::is_same<Tg, float>::value && V % 4 == 0) {
        const float4 a = *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(wg) + base);
        const float4 b = *reinterpret_cast<const float4*>(reinterpret_cast<const float*>(wg) + base + 4);
        t.w[s][0] = a.x, t.w[s][1] = a.y, t.w[s][2] = a.z, t.w[s][3] = a.w;
        t.w[s][4] = b.x, t.w[s][5] = b.y, t.w[s][6] = b.z, t.w[s][7] = b.w;
      } else {
        for (int e = 0; e < 8; ++e)
          if (col + e < V) t.w[s][e] = ld(wg + base + e);
      }
    }
  }
}

template <int KP, int GATE, bool GDN2, class Tg>
__global__ void __launch_bounds__(kThreads) v3_intra(KParams p, float* a_out) {
  constexpr bool CH = GATE == kGateChannel;
  using S = V3Smem<KP, CH, GDN2>;
  constexpr int LDK = S::LDK;
  extern __shared__ __align__(16) char smem[];
  bf16* sK = reinterpret_cast<bf16*>(smem + S::sK);
  bf16* sQ = reinterpret_cast<bf16*>(smem + S::sQ);
  bf16* sE = reinterpret_cast<bf16*>(smem + S::sE);
  bf16* sX = reinterpret_cast<bf16*>(smem + S::sX);
  bf16* sKt = reinterpret_cast<bf16*>(smem + S::sKt);
  float* sL = reinterpret_cast<float*>(smem + S::sL);
  float* sA = reinterpret_cast<float*>(smem + S::sA);
  float* sT = reinterpret_cast<float*>(smem + S::sE);
  bf16* sAh = reinterpret_cast<bf16*>(smem + S::sAh);
  bf16* sAl = reinterpret_cast<bf16*>(smem + S::sAl);
  bf16* sP = reinterpret_cast<bf16*>(smem + S::sP);
  float* sBeta = reinterpret_cast<float*>(smem + S::sBeta);
  float* sTot = reinterpret_cast<float*>(smem + S::sTot);
  float* sG = reinterpret_cast<float*>(smem + S::sG);
  float* sB = reinterpret_cast<float*>(smem + S::sB);

  const int K = p.K, V = p.V, H = p.H, h = blockIdx.y, c = blockIdx.x;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const bf16* q = static_cast<const bf16*>(p.q);
  const bf16* k = static_cast<const bf16*>(p.k);
  const Tg* gg = static_cast<const Tg*>(p.g);
  const Tg* beta = static_cast<const Tg*>(p.beta);
  const Tg* bgate = static_cast<const Tg*>(p.b);
  int tok0, Lc;
  chunk_of(p, c, tok0, Lc);
  auto row = [&](int i) { return std::int64_t(tok0 + i) * H + h; };
  const V2Ws ws = v2_ws(p, KP);
  const std::int64_t cw = std::int64_t(c) * H + h;
  const int VP = vpad(V);
  const float scale = p.scale;

  // ---- Phase 1: one batch of loads. Tiles by 16-byte cp.async (zero-filled outside the chunk).
  constexpr bool gate_f32 = std::is_same<Tg, float>::value;
  const bool vec_k = K % 8 == 0, vec_g = gate_f32 && K % 4 == 0;
  for (int idx = tid; idx < 64 * (KP / 8); idx += kThreads) {
    const int i = idx / (KP / 8), d8 = (idx % (KP / 8)) * 8;
    const bool in = i < Lc && d8 < K;
    if (vec_k) {
      cp_async16(sK + i * LDK + d8, in ? k + row(i) * K + d8 : k, in ? 16 : 0);
      cp_async16(sQ + i * LDK + d8, in ? q + row(i) * K + d8 : q, in ? 16 : 0);
    } else {
      for (int e = 0; e < 8; ++e) {
        const bool ok = in && d8 + e < K;
        sK[i * LDK + d8 + e] = ok ? k[row(i) * K + d8 + e] : __float2bfloat16(0.f);
        sQ[i * LDK + d8 + e] = ok ? q[row(i) * K + d8 + e] : __float2bfloat16(0.f);
      }
    }
  }
  if (CH) {
    for (int idx = tid; idx < 64 * (KP / 4); idx += kThreads) {
      const int i = idx / (KP / 4), d4 = (idx % (KP / 4)) * 4;
      const bool in = i < Lc && d4 < K;
      if (vec_g) {
        const float* gf = reinterpret_cast<const float*>(gg);
        cp_async16(sG + i * KP + d4, in ? gf + row(i) * K + d4 : gf, in ? 16 : 0);
        if (GDN2) {
          const float* bfp = reinterpret_cast<const float*>(bgate);
          cp_async16(sB + i * KP + d4, in ? bfp + row(i) * K + d4 : bfp, in ? 16 : 0);
        }
      } else {
        for (int e = 0; e < 4; ++e) {
          const bool ok = in && d4 + e < K;
          sG[i * KP + d4 + e] = ok ? ld(gg + row(i) * K + d4 + e) : 0.f;
          if (GDN2) sB[i * KP + d4 + e] = ok ? ld(bgate + row(i) * K + d4 + e) : 0.f;
        }
      }
    }
  } else if (tid < 64) {
    sG[tid] = (GATE == kGateScalar && tid < Lc) ? ld(gg + row(tid)) : 0.f;
  }
  if (!GDN2 && tid >= 64 && tid < 128) sBeta[tid - 64] = tid - 64 < Lc ? ld(beta + row(tid - 64)) : 0.f;
  cp_async_commit();
  VTile vt;
  load_vtile<GDN2, Tg>(vt, p, tok0, Lc, h, 0);
  for (int idx = tid; idx < 64 * 65; idx += kThreads) sL[idx] = 0.f, sA[idx] = 0.f;
  for (int idx = tid; idx < 64 * 72 / 8; idx += kThreads)
    reinterpret_cast<uint4*>(sP)[idx] = make_uint4(0, 0, 0, 0);
  cp_async_wait<0>();
  __syncthreads();

  // ---- Phase 2: cumulative log-decays within the chunk, in log2 units.
  if (CH) {
    constexpr int NS = kThreads / KP, R = 64 / NS;  // segments of R rows, one thread per (segment, channel)
    const int d = tid % KP, seg = tid / KP;
    float vals[R], run = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) run += sG[(seg * R + r) * KP + d], vals[r] = run;
    sTot[seg * KP + d] = run;
    __syncthreads();
    float off = 0.f;
    for (int s2 = 0; s2 < seg; ++s2) off += sTot[s2 * KP + d];
#pragma unroll
    for (int r = 0; r < R; ++r) sG[(seg * R + r) * KP + d] = (vals[r] + off) * kLog2e;
  } else if (GATE == kGateScalar) {
    if (warp == 0) {
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
  auto Gs = [&](int i) { return GATE == kGateScalar ? sG[i] : 0.f; };

  // ---- Phase 3: L (strictly lower) and P (lower incl. diagonal).
  if (!CH) {
    const int mi = warp >> 1, nh = warp & 1;
    float kk[4][4] = {}, qk[4][4] = {};
    if (32 * nh <= 16 * mi + 15) {
#pragma unroll
      for (int k0 = 0; k0 < KP; k0 += 16) {
        unsigned ak[4], aq[4], b[4];
        load_a(ak, sK, LDK, 16 * mi, k0);
        load_a(aq, sQ, LDK, 16 * mi, k0);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          load_b_nk(b, sK, LDK, 32 * nh + 16 * np, k0);
          mma_bf16(kk[2 * np], ak, b[0], b[1]);
          mma_bf16(kk[2 * np + 1], ak, b[2], b[3]);
          mma_bf16(qk[2 * np], aq, b[0], b[1]);
          mma_bf16(qk[2 * np + 1], aq, b[2], b[3]);
        }
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
    }
  } else {
    // Factored operands of the off-diagonal blocks (see v2): rows i >= 16 of sE / sX, and sKt.
    for (int idx = tid; idx < 48 * (KP / 8); idx += kThreads) {
      const int i = 16 + idx / (KP / 8), d8 = (idx % (KP / 8)) * 8, r = i & ~15;
      float kv[8], qv[8], gi[8], gr[8], e[8], x[8];
      unpack8(*reinterpret_cast<const uint4*>(sK + i * LDK + d8), kv);
      unpack8(*reinterpret_cast<const uint4*>(sQ + i * LDK + d8), qv);
      ld8f(sG + i * KP + d8, gi);
      ld8f(sG + r * KP + d8, gr);
      if (GDN2) ld8f(sB + i * KP + d8, e);
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const float f = exp2f(gi[t] - gr[t]);
        x[t] = qv[t] * f;
        e[t] = (GDN2 ? e[t] * kv[t] : kv[t]) * f;
      }
      *reinterpret_cast<uint4*>(sE + i * LDK + d8) = pack8(e);
      *reinterpret_cast<uint4*>(sX + i * LDK + d8) = pack8(x);
    }
    for (int idx = tid; idx < 96 * (KP / 8); idx += kThreads) {
      const int rr = idx / (KP / 8), d8 = (idx % (KP / 8)) * 8;
      const int I = rr < 16 ? 1 : (rr < 48 ? 2 : 3);
      const int j = rr - (I == 1 ? 0 : (I == 2 ? 16 : 48)), r = 16 * I;
      float kv[8], gj[8], gr[8];
      unpack8(*reinterpret_cast<const uint4*>(sK + j * LDK + d8), kv);
      ld8f(sG + j * KP + d8, gj);
      ld8f(sG + r * KP + d8, gr);
#pragma unroll
      for (int t = 0; t < 8; ++t) kv[t] *= exp2f(gr[t] - gj[t]);
      *reinterpret_cast<uint4*>(sKt + rr * LDK + d8) = pack8(kv);
    }
    // The four 16 x 16 diagonal blocks, entry by entry: 4 x 136 pairs j <= i.
    for (int pidx = tid; pidx < 4 * 136; pidx += kThreads) {
      const int I = pidx / 136;
      int rem = pidx % 136, ii = 0;
      while (rem > ii) rem -= ii + 1, ++ii;
      const int i = 16 * I + ii, j = 16 * I + rem;
      float lsum = 0.f, psum = 0.f;
#pragma unroll 2
      for (int d8 = 0; d8 < KP; d8 += 8) {
        float ki[8], kj[8], qi[8], gi[8], gj[8], bi[8];
        unpack8(*reinterpret_cast<const uint4*>(sK + i * LDK + d8), ki);
        unpack8(*reinterpret_cast<const uint4*>(sK + j * LDK + d8), kj);
        unpack8(*reinterpret_cast<const uint4*>(sQ + i * LDK + d8), qi);
        ld8f(sG + i * KP + d8, gi);
        ld8f(sG + j * KP + d8, gj);
        if (GDN2) ld8f(sB + i * KP + d8, bi);
#pragma unroll
        for (int t = 0; t < 8; ++t) {
          const float kjx = kj[t] * exp2f(gi[t] - gj[t]);
          lsum += (GDN2 ? bi[t] * ki[t] : ki[t]) * kjx;
          psum += qi[t] * kjx;
        }
      }
      if (j < i) sL[i * 65 + j] = GDN2 ? lsum : sBeta[i] * lsum;
      sP[i * 72 + j] = __float2bfloat16(scale * psum);
    }
    __syncthreads();
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

  // ---- Phase 4: A = (I + L)^-1 in float32 (as v2); sT lives in sE, free here.
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
      for (int m = 0; m < i; ++m) s += Lb[i * 65 + m] * a[m];
      if (i > j) a[i] = -s;
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) sA[(16 * I + i) * 65 + 16 * I + j] = a[i];
  }
  __syncthreads();
  for (int lev = 1; lev < 4; ++lev) {
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
  if (a_out)  // the backward's rung 3 (bwd_v3_async.cu) keeps A; null for the forward
    for (int idx = tid; idx < Lc * 64; idx += kThreads) a_out[row(idx >> 6) * 64 + (idx & 63)] = sA[(idx >> 6) * 65 + (idx & 63)];
  for (int idx = tid; idx < 64 * 64; idx += kThreads) {
    const int i = idx >> 6, j = idx & 63;
    const float a = sA[i * 65 + j];
    const bf16 hi = __float2bfloat16(a);
    sAh[i * 72 + j] = hi;
    sAl[i * 72 + j] = __float2bfloat16(a - bf(hi));
  }

  // ---- Phase 5: e . exp(G) into sE; q . exp(G) * scale, k . exp(G_C - G), exp(G_C), P to the workspace.
  for (int idx = tid; idx < 64 * (KP / 8); idx += kThreads) {
    const int i = idx / (KP / 8), d8 = (idx % (KP / 8)) * 8;
    float kv[8], qv[8], G[8], GC[8], e[8];
    unpack8(*reinterpret_cast<const uint4*>(sK + i * LDK + d8), kv);
    unpack8(*reinterpret_cast<const uint4*>(sQ + i * LDK + d8), qv);
    if (CH) {
      ld8f(sG + i * KP + d8, G);
      ld8f(sG + 63 * KP + d8, GC);
    } else {
#pragma unroll
      for (int t = 0; t < 8; ++t) G[t] = Gs(i), GC[t] = Gs(63);
    }
    if (GDN2) ld8f(sB + i * KP + d8, e);
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      const float eg = exp2f(G[t]);
      e[t] = (GDN2 ? e[t] : sBeta[i]) * kv[t] * eg;
      qv[t] = scale * qv[t] * eg;
      kv[t] = kv[t] * exp2f(GC[t] - G[t]);
    }
    *reinterpret_cast<uint4*>(sE + i * LDK + d8) = pack8(e);
    *reinterpret_cast<uint4*>(ws.qg + (cw * 64 + i) * KP + d8) = pack8(qv);
    *reinterpret_cast<uint4*>(ws.kd + (cw * 64 + i) * KP + d8) = pack8(kv);
    if (i == 0) {
      float gcv[8];
#pragma unroll
      for (int t = 0; t < 8; ++t) gcv[t] = exp2f(GC[t]);
      *reinterpret_cast<float4*>(ws.gC + cw * KP + d8) = make_float4(gcv[0], gcv[1], gcv[2], gcv[3]);
      *reinterpret_cast<float4*>(ws.gC + cw * KP + d8 + 4) = make_float4(gcv[4], gcv[5], gcv[6], gcv[7]);
    }
  }
  for (int idx = tid; idx < 64 * 8; idx += kThreads) {
    const int i = idx >> 3, j8 = (idx & 7) * 8;
    *reinterpret_cast<uint4*>(ws.P + (cw * 64 + i) * 64 + j8) = *reinterpret_cast<const uint4*>(sP + i * 72 + j8);
  }
  __syncthreads();

  // w_aux = A (e . exp(G)), staged in sQ (free now), stored with 16-byte vectors.
  {
    constexpr int NT = KP / 16;
    const int mi = warp >> 1, nb = (warp & 1) * (KP / 2);
    float acc[NT][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < 64; k0 += 16) {
      if (k0 > 16 * mi) break;
      unsigned ah[4], al[4], b[4];
      load_a(ah, sAh, 72, 16 * mi, k0);
      load_a(al, sAl, 72, 16 * mi, k0);
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        load_b_kn(b, sE, LDK, k0, nb + 16 * np);
        mma_bf16(acc[2 * np], ah, b[0], b[1]);
        mma_bf16(acc[2 * np + 1], ah, b[2], b[3]);
        mma_bf16(acc[2 * np], al, b[0], b[1]);
        mma_bf16(acc[2 * np + 1], al, b[2], b[3]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const int i = 16 * mi + g8, j = nb + 8 * nt + 2 * t4;
      *reinterpret_cast<unsigned*>(sQ + i * LDK + j) = pack_bf16(acc[nt][0], acc[nt][1]);
      *reinterpret_cast<unsigned*>(sQ + (i + 8) * LDK + j) = pack_bf16(acc[nt][2], acc[nt][3]);
    }
  }
  __syncthreads();
  for (int idx = tid; idx < 64 * (KP / 8); idx += kThreads) {
    const int i = idx / (KP / 8), d8 = (idx % (KP / 8)) * 8;
    *reinterpret_cast<uint4*>(ws.w + (cw * 64 + i) * KP + d8) = *reinterpret_cast<const uint4*>(sQ + i * LDK + d8);
  }

  // u = A u0 per 64-column value tile: u0 hi in sE, lo in sK (both free now); next tile's loads
  // are in flight while this one is multiplied.
  for (int v0 = 0; v0 < VP; v0 += 64) {
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      const int gi = tid + 256 * s, i = gi >> 3, c8 = (gi & 7) * 8;
      float vv[8], hi[8], lo[8];
      unpack8(vt.v[s], vv);
#pragma unroll
      for (int t = 0; t < 8; ++t) {
        const float u0 = (GDN2 ? vt.w[s][t] : sBeta[i]) * vv[t];
        hi[t] = bf(__float2bfloat16(u0));
        lo[t] = u0 - hi[t];
      }
      *reinterpret_cast<uint4*>(sE + i * LDK + c8) = pack8(hi);
      *reinterpret_cast<uint4*>(sK + i * LDK + c8) = pack8(lo);
    }
    if (v0 + 64 < VP) load_vtile<GDN2, Tg>(vt, p, tok0, Lc, h, v0 + 64);
    __syncthreads();
    const int mi = warp >> 1, nb = (warp & 1) * 32;
    float acc[4][4] = {};
#pragma unroll
    for (int k0 = 0; k0 < 64; k0 += 16) {
      if (k0 > 16 * mi) break;
      unsigned ah[4], al[4], b[4], bl[4];
      load_a(ah, sAh, 72, 16 * mi, k0);
      load_a(al, sAl, 72, 16 * mi, k0);
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        load_b_kn(b, sE, LDK, k0, nb + 16 * np);
        load_b_kn(bl, sK, LDK, k0, nb + 16 * np);
        mma_bf16(acc[2 * np], ah, b[0], b[1]);
        mma_bf16(acc[2 * np + 1], ah, b[2], b[3]);
        mma_bf16(acc[2 * np], al, b[0], b[1]);
        mma_bf16(acc[2 * np + 1], al, b[2], b[3]);
        mma_bf16(acc[2 * np], ah, bl[0], bl[1]);
        mma_bf16(acc[2 * np + 1], ah, bl[2], bl[3]);
      }
    }
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int i = 16 * mi + g8, j = v0 + nb + 8 * nt + 2 * t4;
      *reinterpret_cast<float2*>(ws.u + (cw * 64 + i) * VP + j) = make_float2(acc[nt][0], acc[nt][1]);
      *reinterpret_cast<float2*>(ws.u + (cw * 64 + i + 8) * VP + j) = make_float2(acc[nt][2], acc[nt][3]);
    }
    __syncthreads();
  }
}

template <int KP, int GATE, bool GDN2, class Tg>
void launch_intra(const Call& c, float* a_out = nullptr) {
  constexpr int bytes = V3Smem<KP, GATE == kGateChannel, GDN2>::bytes;
  static_assert(bytes <= 227 * 1024, "shared memory");
  auto kern = v3_intra<KP, GATE, GDN2, Tg>;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  kern<<<dim3(c.p.num_chunks, c.p.H), kThreads, bytes, c.stream>>>(c.p, a_out);
  LINATTN_CUDA_CHECK(cudaGetLastError());
}

template <int KP, class Tg>
void launch_intra_op(const Call& c, float* a_out = nullptr) {
  if (c.p.gate == kGateNone) return launch_intra<KP, kGateNone, false, Tg>(c, a_out);
  if (c.p.gate == kGateScalar) return launch_intra<KP, kGateScalar, false, Tg>(c, a_out);
  if (!c.p.gdn2) return launch_intra<KP, kGateChannel, false, Tg>(c, a_out);
  return launch_intra<KP, kGateChannel, true, Tg>(c, a_out);
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

bool v3_supports(const Call& c, std::string* why) { return v2_supports(c, why); }
std::size_t v3_workspace_bytes(const KParams& p) { return tc_workspace_bytes(p); }
void v3_launch(Call c) {
  if (tc_pick_kp(c.p.K) == 64) return launch_kp<64>(c);
  return launch_kp<128>(c);
}

void v3_intra_launch_with_A(const Call& c, float* a_out) {
  if (c.p.num_chunks == 0) return;
  if (tc_pick_kp(c.p.K) == 64) {
    if (c.gate_dtype == 0) return launch_intra_op<64, float>(c, a_out);
    return launch_intra_op<64, bf16>(c, a_out);
  }
  if (c.gate_dtype == 0) return launch_intra_op<128, float>(c, a_out);
  return launch_intra_op<128, bf16>(c, a_out);
}

}  // namespace linattn::cuda::detail
