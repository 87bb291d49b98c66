// optimized/cuda/bwd_v16_b9one.cu -- rung 16 of the CUDA backward ladder: the split chunk gradient for
// per-channel gates (KDA, GDN2) with B9 in ONE kernel, both halves by levels in one pass per level as rung
// 8 does (issue 6). Written in session 9; run in session 10 (RESULTS.md "Rung 16"): correct (rung 8's
// gradients up to float32 summation order), but slower: KDA backward 12.70 ms against rung 8's 10.69, its B9
// kernel alone 6.83 ms (estimate 2.6-4). Not adopted.
//
// Why: rung 14 split KDA / GDN2 into G1' (B9's P half by levels) and G2 (its L half by levels): correct,
// but 4.17 + 4.14 ms against rung 8's one kernel's 7.77 ms, since each half builds the levels' F_s and
// operand tiles again (~2.6 ms each); rung 8 builds them once for both halves. fla, likewise, does all the
// per-channel intra-chunk gradient work in one kernel (chunk_kda_bwd_intra). Here the split keeps only the
// products, and B9 is one kernel:
// DeltaNet and GDN run rung 13 unchanged (bwd_v13_launch). For KDA and GDN2: rung 8's front
// (bwd_v3_front with the levels intra kernel and the wide extras), then per (chunk, head)
//   G1s = bwd16_g1s<Tg> (one block per 64-channel slab kk of K, 2 blocks per SM): rung 14's G1' without
//     B9's P half: B2 (dgamma), B4 (dQg -> ws.dQg, dKd, dw_aux -> ws.dwa), B5 (dP -> the hand-over, slab 0's
//     block), then per (r, d) in the fragments' epilogue dG_part = dQg Qg - dKd Kd (+ dG_last = sum_i dKd_i
//     Kd_i + dgamma exp(G_last) in the last row; -> ws.dGc) and dk_part = dKd exp(G_last - G) (-> ws.dKd,
//     over dKd, which nothing reads afterwards).
//   G2s = bwd16_wy<Tg> (55,552 bytes of shared memory): rung 14's G2 up to B7: B6 (dA), B8 (du0 -> ws.du0,
//     dv final, GDN2's dw final, dE -> ws.dE), B7 (A^T T1 -> the hand-over; dL = -A^T T1 strictly lower).
//   B9 = bwd16_b9<Tg> (one block per (chunk, head), 1 block per SM): reads dP and A^T T1 back into rung 8's
//     fragments and runs rung 8's own B9, bwd_v6_tc_b9.cuh's b9_levels<Tg, kRowBase, kWide> (per slab and
//     level s = 32 .. 1: F_s, X_s, Y_s built once, then dL X_s, dP X_s on left rows and dL^T X_s + dP^T Y_s on
//     right rows: de^L -> ws.deL, dq^P -> ws.dqP, dk^LP = dk^L + dk^P -> ws.dkLP), then B10 per (r, d):
//       dq = scale (dQg exp(G) + dq^P),  de = dE exp(G) + de^L,  dk = dk_part + dk^LP + (beta | b) de,
//       dG = dG_part + q~ dq^P - k dk^LP + dE E + e de^L  (e = (beta | b) k, q~ = scale q)
//     and B11: dg_t = sum_{i >= t} dG_i per channel (rung 14's loop); KDA dbeta = <de, k> + <du0, v>
//     (rung 14's sums), GDN2 db = de (.) k.
// The hand-over (new workspace region, at the byte offset of the front's tensor-core region, which nothing
// reads after the front; with a saved forward that region is not reserved, so bwd_v16_saved_workspace_bytes
// extends the backward's workspace): dP and A^T T1 as float32 [C][C] per (chunk, head):
// 2 x 16,384 = 32,768 bytes per (chunk, head) (256 MiB at B=8 T=4096 H=16), written once and read once
// (512 MiB of traffic); besides, G1s writes dk_part and G2s dE / du0 as rung 14 did, and the B9 kernel
// re-reads dQg, dq^P, dk_part, dk^LP, de^L, dE, E, G, dG_part, k, q and the gate per (r, d) in B10
// (rung 8's tail reads the same arrays; rung 14 kept dq^P, dk^P, de^L, dk^L in registers instead).
//
// Numerics against rung 8 (same front, same products): dQg, dKd, dw_aux, dP, du0, dE are the same float32
// values (rung 14's argument: the same tiles and products); b9_levels is rung 8's own function with rung 8's
// template arguments, so dq^P and, given dL, de^L and dk^LP are rung 8's bit for bit; dq = scale (dQg exp(G)
// + dq^P) is rung 8's expression: dq bit for bit, and dv, GDN2's dw (the same expressions of du0) bit for
// bit. As in rung 14, u0 = (beta | w) v is formed by mul.rn where rung 8's product may have been contracted
// into put_split's lo, so dA, dL (hence de^L, dk^LP, de, db, dbeta) may differ from rung 8's in the last
// bits; float32 summation order differs in dk (dk_part + dk^LP + gate de) and dG (dG_part written by G1s,
// four terms added by the B9 kernel), hence dg. Tests (proofs_tests/test_cuda_backward.cu): "CUDA v16 one
// B9 kernel backward is rung 8 up to float32 summation order for KDA and GDN2" (dq, dv, dw, dh0 bit for bit;
// dk, dg, db, dbeta within rung 14's bounds) and rung 13 bit for bit for DeltaNet and GDN.
//
// Shared memory. G1s: rung 12's 9 product tiles (82,944 bytes); the tail's dG_part, dKd, Kd [64][65]
// float32 over tiles 0-5; dgamma [2][64] and dG_last [64] after the tiles: 83,712 bytes (2 blocks per SM
// by __launch_bounds__; 3 would fit the shared memory). G2s: 6 bf16 64 x 72 tiles (A, dv_new | dw_aux then
// dA, u0 | E then T1; hi + lo) and beta [64]: 55,552 bytes. B9: b9_levels' kLevelsBytes (10 tiles, F, e,
// dP's diagonal, the G slab: 158,976) and beta [64]: 159,232 bytes, 1 block per SM, as rung 8's kernel.
// Static (nvcc 13.0 sm_90a, cuobjdump -res-usage / -sass; no GPU): see RESULTS.md "Rung 16".
//
// Range: rung 14's. Calls outside rung 3's range run rung 2 (via rung 3); H * max(K, V, 64) >= 2^25 runs
// rung 6. Requires log-decays <= 0, as rung 6 (the host API checks).
#include <algorithm>
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
using bwdc::LT;
using bf16 = __nv_bfloat16;

/// Store this warp's 16 x 32 part of a gemm64 accumulator (each_acc's layout) into t, float32 [C][C]
/// row-major, by column pairs (t 8-byte aligned: the hand-over is 256-byte aligned, C * C floats a block).
__device__ __forceinline__ void store_frag(float* t, const float (&acc)[4][4], int m0, int n0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh)
      *reinterpret_cast<float2*>(t + (m0 + g + 8 * hh) * C + n0 + nt * 8 + 2 * t4) =
          make_float2(acc[nt][2 * hh], acc[nt][2 * hh + 1]);
}

/// store_frag's inverse: the same thread's entries back into acc (the same float32 values).
__device__ __forceinline__ void load_frag(float (&acc)[4][4], const float* t, int m0, int n0) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const float2 x = *reinterpret_cast<const float2*>(t + (m0 + g + 8 * hh) * C + n0 + nt * 8 + 2 * t4);
      acc[nt][2 * hh] = x.x, acc[nt][2 * hh + 1] = x.y;
    }
}

/// Bytes of the hand-over (dP and A^T T1, float32 [C][C] per (chunk, head)); 0 for scalar gates (rung 13).
std::size_t dpl_bytes(const KParams& p) {
  if (p.gate != kGateChannel && !p.gdn2) return 0;
  return 2 * sizeof(float) * std::size_t(p.num_chunks) * p.H * C * C;
}
/// Its byte offset in p.ws: the front's tensor-core region's (bwd_v3_async.cu's tc_offset), dead after the front.
std::size_t dpl_offset(const KParams& p) { return (bwdc::bwd_ws_bytes(p) + 255) / 256 * 256; }

// ------------------------------------------------------------------------------------------------
// G1s: rung 14's G1' without B9's P half.
// ------------------------------------------------------------------------------------------------
constexpr std::size_t kS1Tiles = sizeof(bf16) * 9 * std::size_t(kTile);  // 82,944
constexpr std::size_t kS1Smem = kS1Tiles + sizeof(float) * 3 * C;        // 83,712
static_assert(kS1Smem == 83712, "the header's G1s shared-memory figure");
static_assert(sizeof(float) * 3 * C * bwdc::LD <= sizeof(bf16) * 6 * std::size_t(kTile), "the tail's matrices fit over tiles 0-5");

/// G1s of rung 16 (KDA, GDN2): rung 14's bwd14_g1s (B2, B4, B5 for one 64-channel slab of K of one (chunk,
/// head), the same stagings and products in the same order) without B9: writes ws.dwa, ws.dQg, dk_part
/// (ws.dKd), dG_part + dG_last (ws.dGc) and, slab 0's block, dP (the hand-over). Tg only for rung 8's choice
/// of staging path (w's alignment, GDN2).
template <class Tg>
__global__ void __launch_bounds__(kThreads, 2) bwd16_g1s(KParams p, bwdc::BwdOut out, float* dpl) {
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
  float* sdG = reinterpret_cast<float*>(smem_raw);          // [C][LD] dG_part (after the products)
  float* sdKd = sdG + C * LD;                                // [C][LD] dKd
  float* sKd = sdKd + C * LD;                                // [C][LD] Kd
  float* sdgam = reinterpret_cast<float*>(smem_raw + kS1Tiles);  // [2][C]
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
    // dQg for the B9 kernel's dq (float32 stored and loaded: the same value)
    const bool evenQ = K % 2 == 0 && bwdc::aligned(ws.dQg, 8);
    bwdc::store_acc_pairs(rb.base(ws.dQg, K), HK, kk, K, Lc, evenQ, accQ, m0, n0);
  }
  // B5's dP (the same in every slab's block: do v_new^T over all of V) handed over by slab 0's block
  if (kk == 0) store_frag(dpl + (std::int64_t(chunk) * H + h) * C * C, accP, m0, n0);
  __syncthreads();  // every product tile read: dG_part, dKd, Kd overlay them
  // Rung 14's G1' tail without the B9 terms, per (token r, channel d) in the fragments' epilogue:
  // dG_part = dQg Qg - dKd Kd, dk_part = dKd exp(G_last - G) (-> ws.dKd, in place of dKd)
  {
    const float *Qgb = rb.base(ws.Qg, K), *Kdb = rb.base(ws.Kd, K);
    float* dkpb = rb.base(ws.dKd, K);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g8 + (e >= 2 ? 8 : 0), c = n0 + nt * 8 + 2 * t4 + (e & 1), d = kk + c;
        if (r >= Lc || d >= K) continue;
        const int x = r * HK + d;
        const double Gi = rb.G(Gb, r, d), Gl = rb.G(Gb, Lc - 1, d);
        const float dQg = accQ[nt][e], dKd = accK[nt][e];
        const float Qg = Qgb[x], Kd = Kdb[x];
        sdG[r * LD + c] = dQg * Qg - dKd * Kd;
        sdKd[r * LD + c] = dKd, sKd[r * LD + c] = Kd;
        dkpb[x] = dKd * expf(float(Gl - Gi));
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

// ------------------------------------------------------------------------------------------------
// G2s: rung 14's G2 up to B7.
// ------------------------------------------------------------------------------------------------
constexpr std::size_t kG2Smem = sizeof(bf16) * 6 * std::size_t(kTile) + sizeof(float) * C;  // 55,552
static_assert(kG2Smem == 55552, "the header's G2s shared-memory figure");

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

/// G2s of rung 16 (KDA, GDN2): rung 14's G2 up to B7 -- B6, B8 (du0, dv and GDN2's dw final; dE -> ws.dE),
/// B7 (A^T T1 -> the hand-over; dL = -A^T T1 strictly lower) -- per (chunk, head), from G1s's ws.dwa and the
/// prepare's A, E and the dstates' dv_new. B9, B10, B11 are the B9 kernel's.
template <class Tg>
__global__ void __launch_bounds__(kThreads, 2) bwd16_wy(KParams p, bwdc::BwdOut out, float* dpl) {
  using bwdc::each_acc;
  using bwdc::gemm64;
  using bwdc::put_split;
  using bwdc::zero;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw);
  bf16 *sAh = tiles, *sAl = tiles + kTile;                  // A hi, lo (phase 1), then dL hi, lo
  bf16 *sXh = tiles + 2 * kTile, *sXl = tiles + 3 * kTile;  // dv_new | dw_aux slab, then dA, then X_s
  bf16 *sYh = tiles + 4 * kTile, *sYl = tiles + 5 * kTile;  // u0 | E slab, then T1 (phase 1 only)
  float* sbeta = reinterpret_cast<float*>(tiles + 6 * kTile);     // [C] beta (KDA; 0 for GDN2)

  const int K = p.K, V = p.V, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int mb = warp & 3, m0 = 16 * mb, n0 = (warp >> 2) * 32;
  int tok0, Lc;
  chunk_of(p, blockIdx.x, tok0, Lc);
  const bwdc::RowBase rb(p, tok0, h);
  const BWs ws = bwdc::bwd_ws(p);
  const bool gdn2 = p.gdn2;
  const bf16* vb = rb.base(static_cast<const bf16*>(p.v), V);
  const Tg* beta = static_cast<const Tg*>(p.beta);
  const Tg* wgb = rb.base_opt(static_cast<const Tg*>(p.w), V);
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
  // B7's A^T T1 for the B9 kernel (b9_levels negates and masks it into dL)
  store_frag(dpl + (std::int64_t(p.num_chunks) + blockIdx.x) * std::int64_t(p.H) * C * C + std::int64_t(h) * C * C, acc, m0, n0);
}

// ------------------------------------------------------------------------------------------------
// The B9 kernel: rung 8's B9 by levels (both halves in one pass per level), then B10 and B11.
// ------------------------------------------------------------------------------------------------
constexpr std::size_t kB9Smem = bwdc::kLevelsBytes + sizeof(float) * C;
static_assert(kB9Smem == 159232, "the header's B9 shared-memory figure");
static_assert(kB9Smem + 1024 <= 233472, "1 block per SM");

/// The B9 kernel of rung 16 (KDA, GDN2), one block per (chunk, head): dP and dL (-A^T T1) from the hand-over
/// into rung 8's fragments, rung 8's b9_levels<Tg, true, true> (de^L, dq^P, dk^LP -> ws), then B10 per (r, d)
/// and B11 per channel (the file comment's expressions), reading G1s's and G2s's outputs from the workspace.
template <class Tg>
__global__ void __launch_bounds__(kThreads) bwd16_b9(KParams p, bwdc::BwdOut out, const float* dpl) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* sbeta = reinterpret_cast<float*>(smem_raw + bwdc::kLevelsBytes);  // [C] beta (KDA; 0 for GDN2)
  const int K = p.K, V = p.V, H = p.H, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int m0 = 16 * (warp & 3), n0 = (warp >> 2) * 32;
  int tok0, Lc;
  chunk_of(p, blockIdx.x, tok0, Lc);
  const bwdc::RowBase rb(p, tok0, h);
  const BWs ws = bwdc::bwd_ws(p);
  const bool gdn2 = p.gdn2;
  const Tg* beta = static_cast<const Tg*>(p.beta);
  for (int i = tid; i < C; i += kThreads) sbeta[i] = (!gdn2 && i < Lc) ? ld(beta + rb.r0 + std::int64_t(i) * rb.H) : 0.f;
  float accL[4][4], accP[4][4];  // B7's A^T T1 and B5's dP, as rung 8's kernel holds them
  load_frag(accP, dpl + (std::int64_t(blockIdx.x) * H + h) * C * C, m0, n0);
  load_frag(accL, dpl + (std::int64_t(p.num_chunks) * H + std::int64_t(blockIdx.x) * H + h) * C * C, m0, n0);
  __syncthreads();  // sbeta
  bwdc::b9_levels<Tg, true, true>(p, ws, smem_raw, tok0, Lc, sbeta, accL, accP);  // rung 8's B9 (V8Mid's)
  // B10 per (r, d), rows < Lc, channels < K (b9_levels ended with a barrier: its global outputs are visible)
  const int HK = rb.HK;
  const bf16 *kb = rb.base(static_cast<const bf16*>(p.k), K), *qb = rb.base(static_cast<const bf16*>(p.q), K);
  const bf16* vb = rb.base(static_cast<const bf16*>(p.v), V);
  const Tg* bgb = rb.base_opt(static_cast<const Tg*>(p.b), K);
  const double* Gb = rb.base(ws.G, rb.KG);
  const float *dQgb = rb.base(ws.dQg, K), *dqPb = rb.base(ws.dqP, K), *dkpb = rb.base(ws.dKd, K);
  const float *dkLPb = rb.base(ws.dkLP, K), *dEb = rb.base(ws.dE, K), *Eb = rb.base(ws.E, K);
  float *deb = rb.base(ws.deL, K), *dGcb = rb.base(ws.dGc, K);
  bf16 *dqb = rb.base(static_cast<bf16*>(out.dq), K), *dkb = rb.base(static_cast<bf16*>(out.dk), K);
  Tg* dbb = rb.base_opt(static_cast<Tg*>(out.db), K);
  const float scale = p.scale;
  for (int idx = tid; idx < Lc * K; idx += kThreads) {
    const int r = idx / K, d = idx - r * K, x = r * HK + d;
    const float eg = expf(float(rb.G(Gb, r, d)));
    const float dqP = dqPb[x], dkLP = dkLPb[x], deL = deb[x], dE = dEb[x];
    const float kv = bwdc::bf(kb[x]), qv = scale * bwdc::bf(qb[x]);
    const float gate = gdn2 ? ld(bgb + x) : sbeta[r];
    st(dqb + x, scale * (dQgb[x] * eg + dqP));  // rung 8's dq
    const float de = dE * eg + deL;             // rung 8's de
    st(dkb + x, dkpb[x] + dkLP + gate * de);
    dGcb[x] = dGcb[x] + qv * dqP - kv * dkLP + dE * Eb[x] + (gate * kv) * deL;
    if (gdn2) st(dbb + x, de * kv);  // rung 8's db = de k
    else deb[x] = de;
  }
  __syncthreads();  // de and dG complete (global memory, written by this block)
  const int HV = rb.HV;
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
void launch_all(const BwdCall& c, bwdc::Profile& prof, float* dpl) {
  const KParams& p = c.p;
  bwdc::BwdOut o{c.do_, c.dq, c.dk, c.dv, c.dg, c.dbeta, c.db, c.dw};
  auto k1 = bwd16_g1s<Tg>;
  auto k2 = bwd16_wy<Tg>;
  auto k3 = bwd16_b9<Tg>;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(k1, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kS1Smem)));
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(k2, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kG2Smem)));
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(k3, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kB9Smem)));
  const int nK = (p.K + 63) / 64;
  k1<<<dim3(unsigned(p.num_chunks) * unsigned(nK), p.H), kThreads, kS1Smem, c.stream>>>(p, o, dpl);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  prof.mark();  // "grads" in the profile: G1s
  k2<<<dim3(p.num_chunks, p.H), kThreads, kG2Smem, c.stream>>>(p, o, dpl);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  prof.mark();  // "wy": G2s
  // The B9 kernel's time on a line of its own (bwdc::Profile holds the front's 3 marks and 2 more)
  cudaEvent_t ev[2];
  if (prof.on)
    for (auto& e : ev) LINATTN_CUDA_CHECK(cudaEventCreate(&e));
  if (prof.on) LINATTN_CUDA_CHECK(cudaEventRecord(ev[0], c.stream));
  k3<<<dim3(p.num_chunks, p.H), kThreads, kB9Smem, c.stream>>>(p, o, dpl);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  if (prof.on) {
    LINATTN_CUDA_CHECK(cudaEventRecord(ev[1], c.stream));
    LINATTN_CUDA_CHECK(cudaEventSynchronize(ev[1]));
    float ms = 0.f;
    LINATTN_CUDA_CHECK(cudaEventElapsedTime(&ms, ev[0], ev[1]));
    std::fprintf(stderr, "bwd_v16 b9 kernel (ms): %.3f\n", ms);
    for (auto& e : ev) cudaEventDestroy(e);
  }
}

}  // namespace

std::size_t bwd_v16_workspace_bytes(const KParams& p) {
  return std::max(bwd_v3_workspace_bytes(p), dpl_offset(p) + dpl_bytes(p));
}

std::size_t bwd_v16_saved_workspace_bytes(const KParams& p) {
  return std::max(bwd_saved_workspace_bytes(p), dpl_offset(p) + dpl_bytes(p));
}

void bwd_v16_launch(const BwdCall& c) {
  const KParams& p = c.p;
  if (p.gate != kGateChannel && !p.gdn2) return bwd_v13_launch(c);  // DeltaNet, GDN: rung 13
  if (p.N == 0) return;
  if (!bwdc::in_rung3_range(c)) return bwd_v3_launch(c);    // outside the range: rung 2 (via rung 3)
  if (!bwdc::in_rowbase_range(p)) return bwd_v6_launch(c);  // RowBase's 32-bit offsets
  // G1s's grid x extent num_chunks * ceil(K / 64) < 2^31 (rung 14's fallback otherwise: rung 8)
  if (!bwdc::slab_grid_fits(p)) return bwd_v8_launch(c);
  bwdc::Profile prof(c.stream, "bwd_v16");
  bwdc::bwd_v3_front(c, prof, /*levels_intra=*/true, /*wide_extras=*/true);  // rung 8's front
  if (p.num_chunks > 0) {
    float* dpl = reinterpret_cast<float*>(static_cast<char*>(p.ws) + dpl_offset(p));
    if (c.gate_dtype == 0) launch_all<float>(c, prof, dpl);
    else launch_all<bf16>(c, prof, dpl);
  }
}

}  // namespace linattn::cuda::detail
