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
// Version::best from run 3 until rung 4 (v4_levels.cu, run F1, where v3 measured 1.029 / 1.048 /
// 2.472 / 2.643 ms and 1.676 / 1.711 / 3.133 / 3.310 ms). Its intra kernel (with A written out) is
// also the prepare stage of the backward's rung 3.
// The kernel itself is tci::intra in tc_common.cuh (shared with v4); this file gives it v3's
// per-channel-gate L and P (V3Diag).
#include <cstdlib>
#include <string>
#include <type_traits>

#include "optimized/cuda/tc_common.cuh"

namespace linattn::cuda::detail {
namespace {

struct V3Diag {
  static constexpr int kt_rows = 96;  // sKt: the columns' operands of blocks I = 1, 2, 3
  static constexpr bool tc_inverse = false;  // phase 4's off-diagonal blocks of A on CUDA cores

  /// L and P for per-channel gates: blocks I > J factored at reference row 16 I on tensor cores,
  /// the four 16 x 16 diagonal blocks entry by entry (see the header of v2_tensorcore.cu).
  template <int KP, bool GDN2>
  __device__ static void lp(const tci::Tiles& t, float scale, const KParams& p) {
    using namespace tci;
    (void)p;
    constexpr int LDK = ldk(KP);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
    bf16 *sK = t.sK, *sQ = t.sQ, *sE = t.sE, *sX = t.sX, *sKt = t.sKt, *sP = t.sP;
    float *sL = t.sL, *sBeta = t.sBeta, *sG = t.sG, *sB = t.sB;
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
};

template <int KP>
void launch_kp(const Call& c) {
  if (!skip_kernel("intra")) tci::launch<V3Diag, KP>(c);
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
  if (tc_pick_kp(c.p.K) == 64) return tci::launch<V3Diag, 64>(c, a_out);
  return tci::launch<V3Diag, 128>(c, a_out);
}

}  // namespace linattn::cuda::detail
