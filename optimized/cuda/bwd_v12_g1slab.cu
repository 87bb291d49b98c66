// optimized/cuda/bwd_v12_g1slab.cu -- rung 12 of the CUDA backward ladder: rung 10 (bwd_v10_split.cu) with
// its state-side kernel G1 retiled by 64-channel slabs of K, 2 blocks per SM (issue 6;
// bench/analysis_bwd_plan.md sections 3.1 and 4, rung 10b). Written in session 8; run in
// session 9 call 1: bit for bit with rung 10, G1 2.68 -> 1.54 ms (DeltaNet), 3.04 -> 2.04 (GDN).
//
// Why: rung 10's G1 is rung 8's kernel cut short (bwd_grads_tc<Tg, V10Mid>): 196 registers, 167,424 bytes
// of shared memory, one block of 8 warps per SM, each block looping over every K slab and V slab of a
// (chunk, head); measured 2.67 ms (DeltaNet) / 3.04 ms (GDN) at B=8 T=4096 H=16 K=V=128.
//
// G1' = bwd12_g1 below, grid (num_chunks * ceil(K / 64), H), 256 threads, __launch_bounds__(256, 2).
// Block (chunk, slab kk) of head h, per value slab vv (in order): stage do, v_new, dv_new (hi + lo), and
// the rows kk.. kk+63 of S and dS' (hi + lo); accumulate over vv
//   B4  dQg = do S^T,  dKd = v_new dS'^T,  dw_aux = -dv_new S^T   (this slab's 64 channels)
//   B5  dP = do v_new^T                                          (recomputed by every slab's block)
//   B2  dgamma_d = sum_c S_dc dS'_dc (two half-row partial sums per channel, one add per vv slab)
// then B9's P half on tensor cores with this slab of k and q: M2 = dP (.) Gam (Gam_ij = exp(G_i - G_j)),
// dq^P = M2 k, dk^P = scale M2^T q; and in the fragments' epilogue what rung 10's G1 tail computes:
//   dq = scale (dQg exp(G_i) + dq^P)  (final),  dk_part = dKd exp(G_last - G_i) + dk^P  -> ws.dkLP,
//   GDN: dG_part = dQg Qg - dKd Kd + q~ dq^P - k dk^P -> ws.dGc, with dG_last = sum_i dKd_i Kd_i +
//   dgamma exp(G_last) added to its last row; dw_aux -> ws.dwa. Rung 10's G2 (bwd10_wy, called through
//   bwdc::bwd_v10_g2) then runs unchanged. ws.dQg, ws.dKd, ws.dqP are not written (only G1 read them).
//
// Numerics: every output element is rung 10's G1 value bit for bit (the design; to be confirmed on a GPU
// by proofs_tests/test_cuda_backward.cu's "CUDA v12 gradients equal v10 gradients bit for bit"): the same
// staged tiles and gemm64 calls in the same vv order give the same float32 accumulators (dP is the same
// sum in every slab's block), the same staging path is chosen (quads where rung 8's wideV holds, items
// otherwise: the two paths sum dgamma's half rows in different orders), and the epilogue's expressions are
// rung 10's G1 tail's, written the same way so that nvcc contracts them alike; the per-channel sum of
// dKd Kd runs over rows in order as there. So rung 12 = rung 10 = the gradients rung 10's tests bound.
//
// Shared memory: 9 bf16 64 x 72 tiles (do; v_new, dv_new, S, dS' hi + lo) = 82,944 bytes; after the
// products M2 hi + lo and the k, q slabs over tiles 0-3, then dG_part, dKd, Kd as float32 [64][65]
// (49,920) over all of them; dgamma [2][64] and dG_last [64] float32, G [64] float64: 84,224 bytes, no
// static shared memory. 2 blocks per SM: 2 x (84,224 + 1,024 reserved) = 170,496 <= 233,472.
// Static (nvcc 13.0 sm_90a, cuobjdump -res-usage and -sass; no GPU): 128 registers (the cap of
// __launch_bounds__(256, 2)), no spill, no stack, no local memory; 3,898 SASS instructions (224 HMMA,
// 151 LDG, 69 STG) against rung 10's G1 4,484 / 4,384 (RESULTS.md "Rung 12").
//
// Range: rung 10's. KDA and GDN2 run rung 8; calls outside rung 3's range run rung 2 (via rung 3);
// H * max(K, V, 64) >= 2^25 runs rung 6; num_chunks * ceil(K / 64) >= 2^31 runs rung 10. Workspace:
// rung 3's. Requires log-decays <= 0, as rung 6 (the host API checks; the device API not).
#include <algorithm>
#include <stdexcept>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {
namespace {

using bwdc::BWs;
using bwdc::C;
using bwdc::kThreads;
using bwdc::kTile;
using bwdc::LD;
using bwdc::LT;
using bf16 = __nv_bfloat16;

constexpr int kG1Tiles = 9;
constexpr std::size_t kG1TileBytes = sizeof(bf16) * std::size_t(kG1Tiles) * kTile;  // 82,944
constexpr std::size_t kG1Smem = kG1TileBytes + sizeof(float) * (3 * C) + sizeof(double) * C;  // 84,224
static_assert(kG1Smem == 84224, "the header's shared-memory formula");
static_assert(sizeof(float) * 3 * C * LD <= kG1TileBytes, "dG_part, dKd, Kd fit over the tiles");
// Rung 15 (kHi, bwd_v15_hionly.cu): hi tiles only, 5 (do; v_new, dv_new, S, dS'), 46,080 bytes, under
// the float32 overlay (dG_part, dKd, Kd: 49,920), which then sets the tile region: 51,200 bytes in all.
constexpr std::size_t kG1HiTileBytes = sizeof(float) * 3 * C * LD;  // 49,920
static_assert(sizeof(bf16) * 5 * kTile <= kG1HiTileBytes, "rung 15's 5 hi tiles fit under the overlay");
constexpr std::size_t kG1HiSmem = kG1HiTileBytes + sizeof(float) * (3 * C) + sizeof(double) * C;  // 51,200
static_assert(kG1HiSmem == 51200, "bwd_v15_hionly.cu's shared-memory figure");
// Rung 17 (kHi with kVnLo, bwd_v17_hybrid.cu): rung 15's tiles and v_new's lo tile (tile 5, for dP = do
// v_new^T hi + lo): 6 tiles, 55,296 bytes over the overlay's 49,920; 56,576 bytes in all.
constexpr std::size_t kG1HyTileBytes = sizeof(bf16) * 6 * kTile;  // 55,296
static_assert(kG1HyTileBytes >= kG1HiTileBytes, "rung 17's 6 tiles set the tile region");
constexpr std::size_t kG1HySmem = kG1HyTileBytes + sizeof(float) * (3 * C) + sizeof(double) * C;  // 56,576
static_assert(kG1HySmem == 56576, "bwd_v17_hybrid.cu's shared-memory figure");
template <bool kHi, bool kVnLo = false>
constexpr std::size_t g1_tile_bytes = kHi ? (kVnLo ? kG1HyTileBytes : kG1HiTileBytes) : kG1TileBytes;
template <bool kHi, bool kVnLo = false>
constexpr std::size_t g1_smem = kHi ? (kVnLo ? kG1HySmem : kG1HiSmem) : kG1Smem;

/// G1' of rung 12 (the file comment): B2, B4, B5 and B9's P half for one 64-channel slab of K of one
/// (chunk, head); writes dq, ws.dwa, ws.dkLP and (GDN) ws.dGc as rung 10's G1 does.
/// No gate dtype parameter: G1' reads no gate (G, Qg, Kd come from the prepare), so one kernel serves both.
/// kHi (rung 15): hi tiles only (no lo staged, split or multiplied: one MMA per product); tile T of the
/// hi + lo layout below is tile (T + 1) / 2 there (lo tiles unused), M2 hi, k and q at tiles 0, 1, 2.
/// kVnLo (rung 17, with kHi): v_new's lo tile too (tile 5), and dP = do v_new^T takes it (hi*hi + hi*lo:
/// do is exact in bf16, so dP is rung 13's); every other product stays hi only.
/// kLean (rung 18): GDN's Qg = scale q exp(G_i) and Kd = k exp(G_last - G_i) (F2) formed here from q, k and
/// G by the extras kernel's expressions (bwd_v3_async.cu, bwd3_extras_wide), not read from ws.Qg, ws.Kd
/// (which rung 18's front does not write): the same float32 values, so the same gradients bit for bit.
/// kDsH (rung 19, DeltaNet only: the launcher refuses a gate): dS' comes as bf16 (bwd3_dstates<.., kDsH> stores
/// bf16_rn(dS'), put_op4<true>'s rounding, into ws.dS's first half) and is copied to its hi tile as it is; B2's
/// dgamma (GDN's, from float32 S and dS') is not formed. The same tiles, so rung 18's gradients bit for bit.
/// kDwaH (rung 19, DeltaNet and GDN): dw_aux stored as bf16 pairs (st_bf_pair: round to nearest even) into ws.dwa's
/// first half, for G2''s kDwaH, which multiplies only that hi part (rung 18's G2' rounds the float32 alike).
/// kDvH (rung 20, DeltaNet and GDN): dv_new comes as bf16 too (bwd3_dstates<.., kDvH> stores bf16_rn(dv_new), the
/// rounding of put_op4<true> / put_op<true>, into ws.du0's first half; the launcher checks bwdc::dv_bf16_ok) and is
/// copied to its hi tile as it is. The same tile, so the same gradients bit for bit.
/// kKq8 (rung 22, with kLean): B9's k and q slabs staged by 16-byte octets (one load round trip; rung 12's staging
/// takes two, each of 8 two-byte loads per array and thread) where K % 8 == 0 and k, q are 16-byte aligned; the same
/// exact bf16 values in the same tiles, so the same gradients bit for bit.
template <bool kHi, bool kVnLo = false, bool kLean = false, bool kDsH = false, bool kDwaH = false, bool kDvH = false,
          bool kKq8 = false>
__global__ void __launch_bounds__(kThreads, 2) bwd12_g1(KParams p, bwdc::BwdOut out) {
  static_assert(kHi || !kLean, "kLean needs kHi (its formed Qg, Kd are plain products; see bwd11_wy)");
  static_assert(!kDsH || (kHi && kLean), "kDsH: rung 18's G1' reading bf16 dS'");
  static_assert(!kDwaH || (kHi && kLean), "kDwaH: rung 18's G1' storing bf16 dw_aux");
  static_assert(!kDvH || (kHi && kLean), "kDvH: rung 18's G1' reading bf16 dv_new");
  static_assert(!kKq8 || (kHi && kLean), "kKq8: rung 18's G1' staging k and q by octets");
  using bwdc::each_acc;
  using bwdc::gemm64;
  using bwdc::lo_op;
  using bwdc::put_op;
  using bwdc::zero;
  constexpr int kS = kHi ? 1 : 2;  // tiles per float32 operand (hi + lo, or hi)
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw);
  bf16* sdo = tiles;
  bf16 *svnh = tiles + kTile, *svnl = tiles + (kHi && kVnLo ? 5 : 2) * kTile;
  bf16 *sdvnh = tiles + (1 + kS) * kTile, *sdvnl = tiles + 4 * kTile;
  bf16 *sSh = tiles + (1 + 2 * kS) * kTile, *sSl = tiles + 6 * kTile;
  bf16 *sdSh = tiles + (1 + 3 * kS) * kTile, *sdSl = tiles + 8 * kTile;
  bf16 *sZh = tiles, *sZl = tiles + kTile;                             // M2 hi, lo (after the products)
  bf16 *sKs = tiles + kS * kTile, *sQs = tiles + (kS + 1) * kTile;  // k, q slabs (exact)
  float* sdG = reinterpret_cast<float*>(smem_raw);                    // [C][LD] dG_part (after B9)
  float* sdKd = sdG + C * LD;                                          // [C][LD] dKd
  float* sKd = sdKd + C * LD;                                          // [C][LD] Kd
  float* sdgam = reinterpret_cast<float*>(smem_raw + g1_tile_bytes<kHi, kVnLo>);  // [2][C] dgamma halves
  float* slast = sdgam + 2 * C;                                       // [C] dG_last
  double* sG = reinterpret_cast<double*>(slast + C);                  // [C] G_i (0 for DeltaNet)

  const int K = p.K, V = p.V, H = p.H, h = blockIdx.y;
  const int nK = (K + 63) / 64, chunk = blockIdx.x / nK, kk = (blockIdx.x - chunk * nK) * 64;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int m0 = (warp & 3) * 16, n0 = (warp >> 2) * 32;
  int tok0, Lc;
  chunk_of(p, chunk, tok0, Lc);
  const bwdc::RowBase rb(p, tok0, h);
  const BWs ws = bwdc::bwd_ws(p);
  const bool gated = p.gate != kGateNone;  // GDN (KDA, GDN2 never come here)
  const bf16* dO = static_cast<const bf16*>(out.do_);
  const bf16* v = static_cast<const bf16*>(p.v);
  const float* S = ws.S + (std::int64_t(chunk) * H + h) * K * V;
  const float* dS = ws.dS + (std::int64_t(chunk) * H + h) * K * V;
  const bf16* dSb = reinterpret_cast<const bf16*>(ws.dS) + (std::int64_t(chunk) * H + h) * K * V;  // kDsH
  const bf16* dvb = nullptr;  // kDvH (formed only there: rb.base's asm would keep it alive in the other kernels)
  if constexpr (kDvH) dvb = rb.base(reinterpret_cast<const bf16*>(ws.du0), V);
  const double* Gb = rb.base_opt(ws.G, rb.KG);
  const int HK = rb.HK, HV = rb.HV;

  for (int i = tid; i < 2 * C; i += kThreads) sdgam[i] = 0.f;
  for (int i = tid; i < C; i += kThreads) sG[i] = (gated && i < Lc) ? rb.G(Gb, i, 0) : 0.0;
  // Rung 8's choice of staging path (v's alignment included, though v is not read here): the quad path
  // and the item path sum dgamma's half rows in different orders, so the path must be rung 10's.
  const bool wideV = V % 4 == 0 && bwdc::aligned(ws.vn, 16) && bwdc::aligned(ws.dvn, 16) && bwdc::aligned(ws.S, 16) &&
                     bwdc::aligned(ws.dS, 16) && bwdc::aligned(dO, 8) && bwdc::aligned(v, 8);

  float accQ[4][4], accK[4][4], accW[4][4], accP[4][4];
  zero(accQ), zero(accK), zero(accW), zero(accP);
  for (int vv = 0; vv < V; vv += 64) {
    __syncthreads();  // the previous slab's tiles are read (and sdgam, sG initialised)
    if (wideV) {
      // Rung 8's quads: quad qd = tid + t * kThreads holds row i = qd >> 4, columns c .. c + 3,
      // c = 4 (qd & 15); dgamma by its butterfly (lanes xor 4, 2, 1, then the quad's own columns).
      constexpr int kQ = C * C / 4 / kThreads, kQB = 2;
#pragma unroll 1
      for (int t0 = 0; t0 < kQ; t0 += kQB) {
        uint2 rdo[kQB], rdsb[kQB], rdvb[kQB];
        float rvn[kQB][4], rdvn[kQB][4], rs[kQB][4], rds[kQB][4];
#pragma unroll
        for (int b = 0; b < kQB; ++b) {
          const int qd = tid + (t0 + b) * kThreads, i = qd >> 4, cc = vv + 4 * (qd & 15), d = kk + i;
          const bool in = i < Lc && cc < V, ins = d < K && cc < V;
          const int x = i * HV + cc;
#pragma unroll
          for (int e = 0; e < 4; ++e) rvn[b][e] = rdvn[b][e] = rs[b][e] = rds[b][e] = 0.f;
          rdo[b] = rdsb[b] = rdvb[b] = make_uint2(0u, 0u);
          if (in) {
            rdo[b] = *reinterpret_cast<const uint2*>(rb.base(dO, V) + x);
            bwdc::ld4(rb.base(ws.vn, V) + x, rvn[b]);
            if constexpr (kDvH) rdvb[b] = *reinterpret_cast<const uint2*>(dvb + x);
            else bwdc::ld4(rb.base(ws.dvn, V) + x, rdvn[b]);
          }
          if (ins) {
            bwdc::ld4(S + std::int64_t(d) * V + cc, rs[b]);
            if constexpr (kDsH) rdsb[b] = *reinterpret_cast<const uint2*>(dSb + std::int64_t(d) * V + cc);
            else bwdc::ld4(dS + std::int64_t(d) * V + cc, rds[b]);
          }
        }
#pragma unroll
        for (int b = 0; b < kQB; ++b) {
          const int qd = tid + (t0 + b) * kThreads, i = qd >> 4, c = 4 * (qd & 15), d = kk + i;
          *reinterpret_cast<uint2*>(sdo + i * LT + c) = rdo[b];
          bwdc::put_op4<kHi && !kVnLo>(svnh, svnl, i, c, rvn[b]);
          if constexpr (kDvH) *reinterpret_cast<uint2*>(sdvnh + i * LT + c) = rdvb[b];
          else bwdc::put_op4<kHi>(sdvnh, sdvnl, i, c, rdvn[b]);
          bwdc::put_op4<kHi>(sSh, sSl, i, c, rs[b]);
          if constexpr (kDsH) {
            *reinterpret_cast<uint2*>(sdSh + i * LT + c) = rdsb[b];  // no dgamma (DeltaNet)
          } else {
            bwdc::put_op4<kHi>(sdSh, sdSl, i, c, rds[b]);
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
      }
    } else {
      // Rung 5's item batches (rung 8's fallback): item idx = tid + t * kThreads is row idx >> 6, column
      // idx & 63; dgamma by a whole-warp butterfly over the 32 columns of a half row.
      constexpr int kItems = C * C / kThreads, kB = 4;
#pragma unroll 1
      for (int t0 = 0; t0 < kItems; t0 += kB) {
        bf16 rdo[kB], rdsb[kB], rdvb[kB];
        float rvn[kB], rdvn[kB], rs[kB], rds[kB];
#pragma unroll
        for (int b = 0; b < kB; ++b) {
          const int idx = tid + (t0 + b) * kThreads, i = idx >> 6, cc = vv + (idx & 63), d = kk + i;
          const bool in = i < Lc && cc < V, ins = d < K && cc < V;
          const int x = i * HV + cc;
          rdo[b] = in ? rb.base(dO, V)[x] : __float2bfloat16_rn(0.f);
          rvn[b] = in ? rb.base(ws.vn, V)[x] : 0.f;
          // kDvH: unreachable (the launcher's dv_bf16_ok implies the quad path's wideV), kept correct
          if constexpr (kDvH) rdvb[b] = in ? dvb[x] : __float2bfloat16_rn(0.f);
          else rdvn[b] = in ? rb.base(ws.dvn, V)[x] : 0.f;
          rs[b] = ins ? S[std::int64_t(d) * V + cc] : 0.f;
          if constexpr (kDsH) rdsb[b] = ins ? dSb[std::int64_t(d) * V + cc] : __float2bfloat16_rn(0.f);
          else rds[b] = ins ? dS[std::int64_t(d) * V + cc] : 0.f;
        }
#pragma unroll
        for (int b = 0; b < kB; ++b) {
          const int idx = tid + (t0 + b) * kThreads, i = idx >> 6, c = idx & 63, d = kk + i;
          sdo[i * LT + c] = rdo[b];
          put_op<kHi && !kVnLo>(svnh, svnl, i, c, rvn[b]);
          if constexpr (kDvH) sdvnh[i * LT + c] = rdvb[b];
          else put_op<kHi>(sdvnh, sdvnl, i, c, rdvn[b]);
          put_op<kHi>(sSh, sSl, i, c, rs[b]);
          if constexpr (kDsH) {
            sdSh[i * LT + c] = rdsb[b];  // no dgamma (DeltaNet)
          } else {
            put_op<kHi>(sdSh, sdSl, i, c, rds[b]);
            float prod = rs[b] * rds[b];
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) prod += __shfl_xor_sync(0xffffffffu, prod, o);
            if (lane == 0 && d < K) sdgam[(c >> 5) * C + i] += prod;
          }
        }
      }
    }
    __syncthreads();
    // B4: dQg = do S^T, dKd = v_new dS'^T, dw_aux = -dv_new S^T (negated below); B5: dP = do v_new^T
    gemm64<false, false>(accQ, sdo, nullptr, sSh, lo_op<kHi>(sSl), m0, n0);
    gemm64<false, false>(accK, svnh, lo_op<kHi>(svnl), sdSh, lo_op<kHi>(sdSl), m0, n0);
    gemm64<false, false>(accW, sdvnh, lo_op<kHi>(sdvnl), sSh, lo_op<kHi>(sSl), m0, n0);
    gemm64<false, false>(accP, sdo, nullptr, svnh, lo_op<kHi && !kVnLo>(svnl), m0, n0);
  }
  // dw_aux of this slab (G2 reads it)
  {
    const bool evenK = K % 2 == 0 && bwdc::aligned(ws.dwa, 8);
#pragma unroll
    for (int a = 0; a < 4; ++a)
#pragma unroll
      for (int b = 0; b < 4; ++b) accW[a][b] = -accW[a][b];
    if constexpr (kDwaH) {
      bf16* dwab = rb.base(reinterpret_cast<bf16*>(ws.dwa), K);
      bwdc::each_acc_pair(accW, m0, n0, [&](int r, int c, float x0, float x1) {
        if (r < Lc) bwdc::st_bf_pair(dwab + r * HK + kk + c, x0, x1, kk + c, K);
      });
    } else {
      bwdc::store_acc_pairs(rb.base(ws.dwa, K), HK, kk, K, Lc, evenK, accW, m0, n0);
    }
  }
  __syncthreads();  // every product tile read: M2 and the slabs overlay them
  // B9's M2 = dP (.) Gam, lower with the diagonal (V4Mid::run_impl's expression)
  each_acc(accP, m0, n0, [&](int i, int j, float x) {
    put_op<kHi>(sZh, sZl, i, j, (i < Lc && j <= i) ? x * expf(float(sG[i] - sG[j])) : 0.f);
  });
  {
    const bf16 *kb = rb.base(static_cast<const bf16*>(p.k), K), *qb = rb.base(static_cast<const bf16*>(p.q), K);
    // kKq8: octet o = tid + t * kThreads (t < 2) is row o >> 3, columns 8 (o & 7) .. + 7 of the slab; with K % 8 == 0
    // (so H K too) and aligned bases an octet is wholly inside K or wholly outside, and 16-byte aligned.
    const bool oct = kKq8 && K % 8 == 0 && bwdc::aligned(kb, 16) && bwdc::aligned(qb, 16);
    constexpr int kItems = C * C / kThreads, kB = 8;
    if (oct) {
      uint4 wk[2], wq[2];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int o = tid + t * kThreads, j = o >> 3, d = 8 * (o & 7);
        const bool inside = j < Lc && kk + d < K;  // (the octet wholly inside K or outside)
        wk[t] = inside ? *reinterpret_cast<const uint4*>(kb + j * HK + kk + d) : make_uint4(0u, 0u, 0u, 0u);
        wq[t] = inside ? *reinterpret_cast<const uint4*>(qb + j * HK + kk + d) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int o = tid + t * kThreads, j = o >> 3, d = 8 * (o & 7);
        *reinterpret_cast<uint4*>(sKs + j * LT + d) = wk[t];
        *reinterpret_cast<uint4*>(sQs + j * LT + d) = wq[t];
      }
    }
#pragma unroll 1
    for (int t0 = 0; t0 < (oct ? 0 : kItems); t0 += kB) {
      bf16 rk[kB], rq[kB];
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int idx = tid + (t0 + b) * kThreads, j = idx >> 6, d = idx & 63;
        const bool in = j < Lc && kk + d < K;
        const int x = j * HK + kk + d;
        rk[b] = in ? kb[x] : __float2bfloat16_rn(0.f);
        rq[b] = in ? qb[x] : __float2bfloat16_rn(0.f);
      }
#pragma unroll
      for (int b = 0; b < kB; ++b) {
        const int idx = tid + (t0 + b) * kThreads, j = idx >> 6, d = idx & 63;
        sKs[j * LT + d] = rk[b], sQs[j * LT + d] = rq[b];
      }
    }
  }
  __syncthreads();
  // B9's P half: dq^P = M2 k, dk^P = scale M2^T q (rung 10's aDk = 0 + scale aDkq)
  float aDq[4][4], aDk[4][4], aDkq[4][4];
  zero(aDq), zero(aDk), zero(aDkq);
  gemm64<false, true>(aDq, sZh, lo_op<kHi>(sZl), sKs, nullptr, m0, n0);
  gemm64<true, true>(aDkq, sZh, lo_op<kHi>(sZl), sQs, nullptr, m0, n0);
  const float scale = p.scale;
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b) aDk[a][b] += scale * aDkq[a][b];
  __syncthreads();  // the B9 tiles read: dG_part, dKd, Kd overlay them
  // Rung 10's G1 tail per (token r, channel d) in the fragments' epilogue (accQ, accK, aDq, aDk share
  // each_acc's layout: entry [nt][e] is (r, c) of each).
  {
    const bf16 *kb = rb.base(static_cast<const bf16*>(p.k), K), *qb = rb.base(static_cast<const bf16*>(p.q), K);
    const float *Qgb = rb.base(ws.Qg, K), *Kdb = rb.base(ws.Kd, K);
    float* dkLPb = rb.base(ws.dkLP, K);
    bf16* dqb = rb.base(static_cast<bf16*>(out.dq), K);
    const int g8 = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = m0 + g8 + (e >= 2 ? 8 : 0), c = n0 + nt * 8 + 2 * t4 + (e & 1), d = kk + c;
        if (r >= Lc || d >= K) continue;
        const int x = r * HK + d;
        const double Gi = rb.G(Gb, r, d), Gl = rb.G(Gb, Lc - 1, d);
        const float kv = bwdc::bf(kb[x]), qv = p.scale * bwdc::bf(qb[x]);
        const float dQg = accQ[nt][e], dKd = accK[nt][e], dqP = aDq[nt][e], dkP = aDk[nt][e];
        if (gated) {
          // kLean: bwd3_extras_wide's (scale q) exp(G_i) and k exp(G_last - G_i), on the same float64 G
          const float Qg = kLean ? qv * expf(float(Gi)) : Qgb[x], Kd = kLean ? kv * expf(float(Gl - Gi)) : Kdb[x];
          sdG[r * LD + c] = dQg * Qg - dKd * Kd + qv * dqP - kv * dkP;
          sdKd[r * LD + c] = dKd, sKd[r * LD + c] = Kd;
        }
        const float eg = expf(float(Gi));
        st(dqb + x, p.scale * (dQg * eg + dqP));
        dkLPb[x] = dKd * expf(float(Gl - Gi)) + dkP;
      }
  }
  if (gated) {
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
}

template <bool kHi, bool kVnLo = false, bool kLean = false, bool kDsH = false, bool kDwaH = false, bool kDvH = false,
          bool kKq8 = false>
void launch_g1(const BwdCall& c, bwdc::Profile& prof) {
  const KParams& p = c.p;
  if (kDsH && (p.gate != kGateNone || p.gdn2))
    throw std::logic_error("linattn::cuda: bwd12_g1: bf16 dS' (rung 19) is for DeltaNet only");
  if (kDvH && !bwdc::dv_bf16_ok(c))
    throw std::logic_error("linattn::cuda: bwd12_g1: bf16 dv_new (rung 20) needs rung 18's range, V % 8 == 0 and an "
                           "aligned ws.du0 (bwdc::dv_bf16_ok)");
  auto kern = bwd12_g1<kHi, kVnLo, kLean, kDsH, kDwaH, kDvH, kKq8>;
  constexpr std::size_t smem = g1_smem<kHi, kVnLo>;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  bwdc::BwdOut o{c.do_, c.dq, c.dk, c.dv, c.dg, c.dbeta, c.db, c.dw};
  const int nK = (p.K + 63) / 64;
  kern<<<dim3(unsigned(p.num_chunks) * unsigned(nK), p.H), kThreads, smem, c.stream>>>(p, o);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  prof.mark();
}

}  // namespace

std::size_t bwd_v12_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwdc::bwd_v12_g1(const BwdCall& c, bwdc::Profile& prof) { launch_g1<false>(c, prof); }  // rung 13's G1'
void bwdc::bwd_v12_g1_hi(const BwdCall& c, bwdc::Profile& prof) { launch_g1<true>(c, prof); }  // rung 15's
void bwdc::bwd_v12_g1_hy(const BwdCall& c, bwdc::Profile& prof) { launch_g1<true, true>(c, prof); }  // rung 17's
void bwdc::bwd_v12_g1_lean(const BwdCall& c, bwdc::Profile& prof) { launch_g1<true, true, true>(c, prof); }  // rung 18's
// Rung 19's: DeltaNet reads bf16 dS'; with LINATTN_BWD19_DWA_BF16=1 DeltaNet and GDN also store bf16 dw_aux (GDN
// keeps float32 dS': its dgamma needs it).
void bwdc::bwd_v12_g1_dsh(const BwdCall& c, bwdc::Profile& prof) { launch_g1<true, true, true, true>(c, prof); }
void bwdc::bwd_v12_g1_dsh_dwah(const BwdCall& c, bwdc::Profile& prof) { launch_g1<true, true, true, true, true>(c, prof); }
void bwdc::bwd_v12_g1_dwah(const BwdCall& c, bwdc::Profile& prof) { launch_g1<true, true, true, false, true>(c, prof); }
// Rung 20's: bf16 dv_new as well (DeltaNet with bf16 dS', GDN with float32 dS').
void bwdc::bwd_v12_g1_dsh_dvh(const BwdCall& c, bwdc::Profile& prof) {
  launch_g1<true, true, true, true, false, true>(c, prof);
}
void bwdc::bwd_v12_g1_dvh(const BwdCall& c, bwdc::Profile& prof) { launch_g1<true, true, true, false, false, true>(c, prof); }
// Rung 22's: rung 21's three G1' (DeltaNet bf16 dS'; GDN bf16 dv_new, or rung 18's) with k and q staged by octets.
void bwdc::bwd_v12_g1_dsh_kq8(const BwdCall& c, bwdc::Profile& prof) {
  launch_g1<true, true, true, true, false, false, true>(c, prof);
}
void bwdc::bwd_v12_g1_dvh_kq8(const BwdCall& c, bwdc::Profile& prof) {
  launch_g1<true, true, true, false, false, true, true>(c, prof);
}
void bwdc::bwd_v12_g1_lean_kq8(const BwdCall& c, bwdc::Profile& prof) {
  launch_g1<true, true, true, false, false, false, true>(c, prof);
}

void bwd_v12_launch(const BwdCall& c) {  // G1', then rung 10's G2 unchanged
  // The grid's x extent (a signed int index in the kernel): else rung 10 (one block per chunk).
  if (!bwdc::slab_grid_fits(c.p)) return bwd_v10_launch(c);
  bwdc::bwd_split_launch(c, "bwd_v12", bwdc::bwd_v12_g1, bwdc::bwd_v10_g2);
}

}  // namespace linattn::cuda::detail
