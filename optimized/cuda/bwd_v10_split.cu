// optimized/cuda/bwd_v10_split.cu -- rung 10 of the CUDA backward ladder: rung 8's chunk-gradient kernel
// split in two, G1 (the state side) and G2 (the WY side), for DeltaNet and GDN (issue 6;
// bench/analysis_bwd_plan.md sections 3.1, 3.2 and 4, rung 10a). Written in session 8, run in session 8
// call 6 and not `best`: its tests pass, DeltaNet's backward is 2.7% faster than rung 8's and GDN's 7%
// slower, because G2 takes 2.1-2.6 ms where the plan estimated 0.44-0.65 (its du0, dE, de round trips
// through global memory; RESULTS.md "Rung 10").
//
// Scope: DeltaNet and GDN (no gate or one scalar gate per token). KDA and GDN2 (per-channel gates) run
// rung 8 unchanged inside rung 10 (bwd_v8_launch): their B9 by levels (bwd_v6_tc_b9.cuh) computes the
// L and P halves in one pass per level and is not split yet, so for them rung 10 IS rung 8.
//
// Stages are docs/derivation-backward.md's "Chunked backward". Prepare, states and dstates are rung 8's
// (bwd_v3_front with the levels intra kernel and the wide extras kernel). Then, per (chunk, head):
//   G1 = bwd_grads_tc<Tg, V10Mid> (bwd_common.cuh, Mid::kSplit; bwd_v4_tc_tail.cu): rung 8's kernel
//     cut short. B2 (dgamma), B4 (dQg, dKd, dw_aux = -dv_new S^T, stored as rung 8 stores it), B5 (dP),
//     B9's P half on tensor cores (dq^P = M2 k, dk^P = scale M2^T q, M2 = dP (.) Gam: run_impl's kSP),
//     and of B10 / B11 what needs only those: dq (final), dk_part = dKd exp(G_last - G) + dk^P (ws.dkLP),
//     dG_part = dQg Qg - dKd Kd + q~ dq^P - k dk^P with dG_last = sum_i dKd_i Kd_i + dgamma gamma added
//     to its last row (ws.dGc; GDN only). A, u0 and E are not staged; B6, B7, B8 and the L half are
//     not computed. The arithmetic of what it keeps is rung 8's code (same paths: kRowBase, kWide).
//     Still one block of 8 warps per SM (rung 8's 167,424 bytes of shared memory; rung 10b retiles it).
//   G2 = bwd10_wy<Tg> below: grid (chunks, heads), 256 threads, __launch_bounds__(256, 2).
//     B6  dA = dv_new u0^T + dw_aux E^T          (V slabs, then K slabs: rung 8's order of the adds)
//     B8  du0 = A^T dv_new -> ws.du0 and dv = beta du0;  dE = A^T dw_aux -> ws.dE
//     B7  T1 = dA A^T, dL = -A^T T1 (strictly lower; hi + lo tensor-core products, V4Mid's code)
//     B9  L half: M1 = dL (.) Gam, M1b = Diag(beta) M1;  de^L = M1 k, dk^L = M1b^T k per K slab
//     B10 in the same slab's fragment epilogue: de = dE exp(G) + de^L (-> ws.deL),
//         dk = dk_part + dk^L + beta de (final), dG = dG_part + dE E + e de^L - k dk^L (shared memory)
//     B11 dg_t = sum_{i >= t} dG_i (per channel, last row first; dG_last is in dG_part's last row),
//         then per token dbeta = <de, k> + <du0, v> and GDN's dg = sum_d dg_td.
//   Operands as rung 8's: A, dv_new, dw_aux, u0 = beta v and E as bf16 hi + lo (hi*hi + hi*lo +
//   lo*hi), k exact in bf16, float32 accumulation; float64 G.
//
// Numerics against rung 8: du0, dE, dq^P, dq, dv are the same float32 values (the same tiles, products
// and expressions: dq and dv bit for bit); dA, dL, de^L, de too, except that G2 forms u0 = beta v by
// mul.rn where rung 8's plain product may have been contracted into put_split's lo = u0 - bf16(u0).
// Float32 summation order differs in dk (dk^{L,P} was one sum M1b^T k + scale M2^T q, now dk_part +
// dk^L) and dG (rung 8's six terms in one expression, now four in G1 and three in G2), hence dg.
// Tested against rung 8 (proofs_tests/test_cuda_backward.cu: dq, dv, dh0 bit for bit; dk, dbeta, dg
// within a relative RMS bound derived there) and against the float64 reference with rung 3's bounds.
//
// Shared memory of G2: 7 bf16 64 x 72 tiles (A hi, lo; X hi, lo: dv_new | dw_aux, then dA, then M1;
// Y hi, lo: u0 | E, then T1, then M1b; a k slab) = 7 x 9,216 = 64,512 bytes, dG [64][K <= 128] float32
// 32,768, beta [64] float32 256 and G [64] float64 512: 98,048 bytes, no static shared memory; 2 blocks
// per SM need 2 x (98,048 + 1,024 reserved) = 198,144 <= 233,472 (228 KB per SM on the H200).
// Static (nvcc 13.0 sm_90a, cuobjdump -res-usage; no GPU): G2 bwd10_wy<float> and <bf16> 124 registers
// (__launch_bounds__(256, 2) caps them at 128), no spill, no stack, no local memory; 6,608 / 6,614 SASS
// instructions (352 HMMA). G1 bwd_grads_tc<Tg, V10Mid> 196 registers (rung 8's V8Mid 238 / 237), no
// spill; 4,484 / 4,384 SASS instructions against V8Mid's 11,817 / 11,837 (HMMA 224 against 768): still
// one block per SM by shared memory. PTX of every existing backward kernel unchanged.
// Time, measured (session 8 call 6, B=8 T=4096 H=16 K=V=128 bf16, rung 8 / 10 in one process): every test
// passes (closeness: dq, dv, dh0, dbeta bit for bit with rung 8, dk within 3.5e-5 and dg within 3.6e-6
// relative RMS of it); backward DeltaNet 6.839 / 6.657 ms (G1 2.670 + G2 2.097 against rung 8's grads
// 4.960), GDN 7.114 / 7.615 (G1 3.036 + G2 2.622 against 5.142); KDA, GDN2 equal (rung 8 runs).
//
// Range: rung 8's. Calls outside rung 3's range (float32 inputs, K < 16 or K > 128) run rung 2 through
// bwd_v3_launch; calls with H * max(K, V, 64) >= 2^25 (32-bit offsets) run rung 6; KDA and GDN2 run
// rung 8. Workspace: rung 3's (G1 hands over through its dkLP and dGc arrays, G2 uses du0, dE, deL).
// Requires log-decays <= 0, as rung 6 (the host API checks; the device API not).
#include <algorithm>

#include "optimized/cuda/bwd_common.cuh"
#include "optimized/cuda/route.hpp"

namespace linattn::cuda::detail {
namespace {

using bwdc::BWs;
using bwdc::C;
using bwdc::kThreads;
using bwdc::kTile;
using bwdc::LT;
using bf16 = __nv_bfloat16;

constexpr int kG2Tiles = 7;
constexpr std::size_t kG2TileBytes = sizeof(bf16) * std::size_t(kG2Tiles) * kTile;  // 64,512
constexpr std::size_t kG2Smem = kG2TileBytes + sizeof(float) * (C * 128 + C) + sizeof(double) * C;  // 98,048
static_assert(kG2Smem == 98048, "the header's shared-memory formula");

/// Stage a 64 x 64 float32 tile of a [rows, W] array (columns col0.., zero outside Lc x W) as hi + lo:
/// by quads where `quads` (W and col0 multiples of 4, base 16-byte aligned: bwdc::stage_quads), else
/// 16 items per thread, all loaded before any is stored.
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

/// G2, the WY side of rung 10's split (DeltaNet, GDN): B6, B8, B7, B9's L half, the rest of B10, B11
/// per (chunk, head), from G1's hand-over (ws.dwa, ws.dkLP, ws.dGc) and the prepare's A, E, G and the
/// dstates' dv_new. The file comment lists the stages and the shared memory.
template <class Tg>
__global__ void __launch_bounds__(kThreads, 2) bwd10_wy(KParams p, bwdc::BwdOut out) {
  using bwdc::each_acc;
  using bwdc::gemm64;
  using bwdc::put_split;
  using bwdc::zero;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw);
  bf16 *sAh = tiles, *sAl = tiles + kTile;                  // A hi, lo (the whole kernel)
  bf16 *sXh = tiles + 2 * kTile, *sXl = tiles + 3 * kTile;  // dv_new | dw_aux slab, then dA, then M1
  bf16 *sYh = tiles + 4 * kTile, *sYl = tiles + 5 * kTile;  // u0 | E slab, then T1, then M1b
  bf16* sKs = tiles + 6 * kTile;                            // k slab (exact in bf16)
  float* sdG = reinterpret_cast<float*>(smem_raw + kG2TileBytes);  // [Lc][K] dG, then its reverse sum
  float* sbeta = sdG + C * 128;                                     // [C]
  double* sG = reinterpret_cast<double*>(sbeta + C);                // [C] G_i (0 for DeltaNet)

  const int K = p.K, V = p.V, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int m0 = (warp & 3) * 16, n0 = (warp >> 2) * 32;
  int tok0, Lc;
  chunk_of(p, blockIdx.x, tok0, Lc);
  const bwdc::RowBase rb(p, tok0, h);
  const BWs ws = bwdc::bwd_ws(p);
  const bool gated = p.gate == kGateScalar;  // GDN; DeltaNet has no dg (KDA, GDN2 never come here)
  const bf16 *kb = rb.base(static_cast<const bf16*>(p.k), K), *vb = rb.base(static_cast<const bf16*>(p.v), V);
  const Tg* beta = static_cast<const Tg*>(p.beta);
  const double* Gb = rb.base_opt(ws.G, rb.KG);
  const int HK = rb.HK, HV = rb.HV;

  for (int i = tid; i < C; i += kThreads) {
    sbeta[i] = i < Lc ? ld(beta + rb.r0 + std::int64_t(i) * rb.H) : 0.f;
    sG[i] = (gated && i < Lc) ? rb.G(Gb, i, 0) : 0.0;
  }
  stage_f32(sAh, sAl, rb.base(ws.A, C), rb.HC, 0, C, Lc, bwdc::aligned(ws.A, 16), tid);
  __syncthreads();  // sbeta (u0's staging)

  // B6 and B8, V slabs: dA = dv_new u0^T;  du0 = A^T dv_new (-> ws.du0), dv = beta du0
  float accA[4][4];
  zero(accA);
  {
    const float* dvnb = rb.base(ws.dvn, V);
    float* du0b = rb.base(ws.du0, V);
    bf16* dvb = rb.base(static_cast<bf16*>(out.dv), V);
    const bool quadsV = V % 4 == 0 && bwdc::aligned(ws.dvn, 16);
    const bool evenV = V % 2 == 0 && bwdc::aligned(ws.du0, 8);
    for (int vv = 0; vv < V; vv += 64) {
      __syncthreads();  // the previous slab's tiles read
      stage_f32(sXh, sXl, dvnb, HV, vv, V, Lc, quadsV, tid);
      constexpr int kItems = C * C / kThreads;
      float u[kItems];
#pragma unroll
      for (int t = 0; t < kItems; ++t) {
        const int idx = tid + t * kThreads, i = idx >> 6, cc = vv + (idx & 63);
        u[t] = (i < Lc && cc < V) ? ld(vb + i * HV + cc) : 0.f;
      }
#pragma unroll
      for (int t = 0; t < kItems; ++t) {
        const int idx = tid + t * kThreads, i = idx >> 6;
        put_split(sYh, sYl, i, idx & 63, __fmul_rn(sbeta[i], u[t]));  // u0 = beta v (F2), not fused
      }
      __syncthreads();
      gemm64<false, false>(accA, sXh, sXl, sYh, sYl, m0, n0);
      float accU[4][4];
      zero(accU);
      gemm64<true, true>(accU, sAh, sAl, sXh, sXl, m0, n0);
      bwdc::store_acc_pairs(du0b, HV, vv, V, Lc, evenV, accU, m0, n0);
      each_acc(accU, m0, n0, [&](int j, int c, float x) {
        if (j < Lc && vv + c < V) st(dvb + j * HV + vv + c, sbeta[j] * x);  // B10: dv = beta du0
      });
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
  // B7 (V4Mid::run_impl's code): dA strictly lower as an operand; T1 = dA A^T (strictly lower kept);
  // dL = -A^T T1 (strictly lower)
  each_acc(accA, m0, n0, [&](int i, int j, float x) { put_split(sXh, sXl, i, j, (i < Lc && j < i) ? x : 0.f); });
  __syncthreads();
  float acc[4][4];
  zero(acc);
  gemm64<false, false>(acc, sXh, sXl, sAh, sAl, m0, n0);
  each_acc(acc, m0, n0, [&](int i, int j, float x) { put_split(sYh, sYl, i, j, j < i ? x : 0.f); });
  __syncthreads();
  zero(acc);
  gemm64<true, true>(acc, sAh, sAl, sYh, sYl, m0, n0);
  __syncthreads();  // every read of the dA and T1 tiles done
  // B9's L half: M1 = dL (.) Gam, M1b = Diag(beta) M1 (strictly lower), Gam_ij = exp(G_i - G_j) <= 1
  each_acc(acc, m0, n0, [&](int i, int j, float x) {
    const float m1 = (i < Lc && j < i) ? -x * expf(float(sG[i] - sG[j])) : 0.f;
    put_split(sXh, sXl, i, j, m1);
    put_split(sYh, sYl, i, j, sbeta[i] * m1);
  });
  // Per 64-channel slab: de^L = M1 k, dk^L = M1b^T k; B10 in the fragments' epilogue.
  const float *dEb = rb.base(ws.dE, K), *dkpb = rb.base(ws.dkLP, K), *dGcb = rb.base(ws.dGc, K);
  const float* Eb = rb.base(ws.E, K);
  float* deb = rb.base(ws.deL, K);
  bf16* dkb = rb.base(static_cast<bf16*>(out.dk), K);
  const int g8 = lane >> 2, t4 = lane & 3;
  for (int kk = 0; kk < K; kk += 64) {
    __syncthreads();  // the M tiles complete; the previous slab read
    {
      constexpr int kItems = C * C / kThreads;
      bf16 rk[kItems];
#pragma unroll
      for (int t = 0; t < kItems; ++t) {
        const int idx = tid + t * kThreads, j = idx >> 6, d = kk + (idx & 63);
        rk[t] = (j < Lc && d < K) ? kb[j * HK + d] : __float2bfloat16_rn(0.f);
      }
#pragma unroll
      for (int t = 0; t < kItems; ++t) {
        const int idx = tid + t * kThreads;
        sKs[(idx >> 6) * LT + (idx & 63)] = rk[t];
      }
    }
    __syncthreads();
    float aDe[4][4], aDk[4][4];
    zero(aDe), zero(aDk);
    gemm64<false, true>(aDe, sXh, sXl, sKs, nullptr, m0, n0);
    gemm64<true, true>(aDk, sYh, sYl, sKs, nullptr, m0, n0);
    // aDe and aDk share each_acc's layout: entry [nt][e] is (r, c) of both.
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g8 + (e >= 2 ? 8 : 0), d = kk + n0 + nt * 8 + 2 * t4 + (e & 1);
        if (r >= Lc || d >= K) continue;
        const int x = r * HK + d;
        const float deL = aDe[nt][e], dkL = aDk[nt][e], dE = dEb[x];
        const float de = dE * expf(float(sG[r])) + deL;  // rung 8's de
        deb[x] = de;
        st(dkb + x, dkpb[x] + dkL + sbeta[r] * de);
        if (gated) {
          const float kv = bwdc::bf(kb[x]);
          sdG[r * K + d] = dGcb[x] + dE * Eb[x] + (sbeta[r] * kv) * deL - kv * dkL;
        }
      }
  }
  __syncthreads();  // de and dG complete
  if (gated) {
    // B11: dg_t = sum_{i >= t} dG_i per channel, the last row first (dG_last is in its last row)
    for (int d = tid; d < K; d += kThreads) {
      float a = 0.f;
      for (int i = Lc - 1; i >= 0; --i) a += sdG[i * K + d], sdG[i * K + d] = a;
    }
    __syncthreads();
  }
  // Per token (one warp each): dbeta = <de, k> + <du0, v> (rung 8's sums); GDN: dg = sum_d dg_d.
  const float* du0b = rb.base(ws.du0, V);
  Tg* dbetab = rb.base_opt(static_cast<Tg*>(out.dbeta), 1);
  Tg* dg1b = rb.base_opt(static_cast<Tg*>(out.dg), 1);
  for (int i = warp; i < Lc; i += kThreads / 32) {
    float a = 0.f;
    for (int d = lane; d < K; d += 32) a += deb[i * HK + d] * ld(kb + i * HK + d);
    for (int c = lane; c < V; c += 32) a += du0b[i * HV + c] * ld(vb + i * HV + c);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
    if (lane == 0) st(dbetab + i * rb.H, a);
    if (gated) {
      float g = 0.f;
      for (int d = lane; d < K; d += 32) g += sdG[i * K + d];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) g += __shfl_xor_sync(0xffffffffu, g, o);
      if (lane == 0) st(dg1b + i * rb.H, g);
    }
  }
}

template <class Tg>
void launch_wy(const BwdCall& c, bwdc::Profile& prof) {
  const KParams& p = c.p;
  auto kern = bwd10_wy<Tg>;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kG2Smem)));
  bwdc::BwdOut o{c.do_, c.dq, c.dk, c.dv, c.dg, c.dbeta, c.db, c.dw};
  kern<<<dim3(p.num_chunks, p.H), kThreads, kG2Smem, c.stream>>>(p, o);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  prof.mark();
}

}  // namespace

std::size_t bwd_v10_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwdc::bwd_v10_g2(const BwdCall& c, bwdc::Profile& prof) {  // rung 12 runs G2 through this
  if (c.gate_dtype == 0) launch_wy<float>(c, prof);
  else launch_wy<bf16>(c, prof);
}

void bwdc::bwd_split_launch(const BwdCall& c, const char* name, void (*g1)(const BwdCall&, Profile&),
                            void (*g2)(const BwdCall&, Profile&), bool g_only, bool ds_bf16, bool dv_bf16,
                            DsPick ds, bool dv_planes) {
  const KParams& p = c.p;
  if (p.N == 0) return;
  if (!bwdc::in_rung3_range(c)) return bwd_v3_launch(c);  // outside the range: rung 2 (via rung 3)
  if (!bwdc::in_rowbase_range(p)) return bwd_v6_launch(c);  // RowBase's 32-bit offsets, as rungs 7 and 8
  if (p.gate == kGateChannel || p.gdn2) return bwd_v8_launch(c);  // KDA, GDN2: not split (file comment)
  bwdc::Profile prof(c.stream, name);
  bwdc::bwd_v3_front(c, prof, /*levels_intra=*/true, /*wide_extras=*/true, /*extras=*/true, g_only, ds_bf16,
                     dv_bf16, ds, dv_planes);  // rung 8's front
  if (p.num_chunks > 0) {
    set_backward_split_route(name);  // route.hpp: this rung's G1 / G2 run
    g1(c, prof);  // the state side: "grads" in the profile
    g2(c, prof);  // the WY side: "wy"
  }
}

void bwd_v10_launch(const BwdCall& c) { bwdc::bwd_split_launch(c, "bwd_v10", bwdc::bwd_v10_g1, bwdc::bwd_v10_g2); }

}  // namespace linattn::cuda::detail
