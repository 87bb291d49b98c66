// optimized/cuda/bwd_v11_wyfast.cu -- rung 11 of the CUDA backward ladder: rung 10 with a faster G2 (the
// WY side of the split chunk-gradient kernel; issue 6). Written in session 8; run in session 9
// call 1: bit for bit with rung 10, G2 2.09 -> 1.45 ms (DeltaNet), 2.62 -> 1.91 (GDN).
//
// Rung 10's G2 (bwd10_wy, bwd_v10_split.cu) took 2.1 / 2.6 ms (DeltaNet / GDN) against a byte-based
// estimate of 0.44-0.65 ms. RESULTS.md "Rung 11" has the static analysis; in short: per block it wrote
// du0, dE and de to global memory and read them back (192 of its 432 / 512 KiB at K = V = 128, DeltaNet
// / GDN), read k two / three times, loaded v and k by 2-byte scalar loads, and its slab epilogue (B10)
// interleaved its scalar global loads with global stores through pointers the compiler must assume
// alias, so each of a thread's 32 elements waited 2 (GDN: 3) load round trips, one after another.
//
// G2' = bwd11_wy<Tg> below: the same stages, tiles, products and float32 expressions as bwd10_wy, so the
// same values bit for bit (tested against rung 10), with these changes only:
//   dE   stays on chip: B8's fragment epilogue stores dE into the dG buffer (sdG, float32, exact) at the
//        element the same thread reads back in B10's epilogue (gemm64's fragment layout is the same
//        for both products); B10 then overwrites it with dG (GDN). No ws.dE.
//   de   stays on chip: B10 stores each K slab's de into the A tiles' memory (free after B7, float32
//        [64][72]); after the slab, each warp adds its rows' de k terms to per-lane partial sums kept
//        in shared memory, the same terms in the same order as rung 10's dbeta loop (d = lane, lane + 32,
//        ... ascending, one fma each). No ws.deL, and k is read from the staged slab, not again.
//   k, v 16-byte loads (8 bf16) when V, K % 8 == 0 and the bases are 16-byte aligned, else rung 10's.
//   B10  by column pairs: dk_part, dG_part and E loaded as float2 for two fragment column groups (4
//        pairs) at a time, all before any store; dk stored as bf16 pairs (4 bytes); dv likewise in B8.
//   du0  still goes through ws.du0 (dbeta's <du0, v> terms follow the de terms in each lane's sum, and
//        [64][V] float32 does not fit beside dG at 2 blocks per SM): 32 KB written, read back once;
//        for V <= 128 four rows' du0 and v are loaded at once (rung 10: one round trip per row).
//   The de k partial sums live in shared memory ([64][32] float32, 8 KB: 106,240 bytes in all, still
//   2 blocks per SM: 2 x (106,240 + 1,024) = 214,528 <= 233,472).
// Static figures (nvcc 13.0 sm_90a, cuobjdump -res-usage): 128 registers, no spill, no local memory;
// RESULTS.md "Rung 11" has the rest.
//
// Range and routing: rung 10's (KDA, GDN2 run rung 8; outside rung 3's range rung 2; 32-bit offsets
// overflow: rung 6). Prepare, states, dstates and G1 are rung 10's (rung 8's front, bwd_v10_g1).
// Workspace: rung 3's (ws.dE and ws.deL are left unused). Requires log-decays <= 0, as rung 10.
#include <algorithm>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {
namespace {

using bwdc::BWs;
using bwdc::C;
using bwdc::kThreads;
using bwdc::kTile;
using bwdc::LT;
using bwdc::st_bf_pair;
using bf16 = __nv_bfloat16;

constexpr int kG2Tiles = 7;
constexpr std::size_t kG2TileBytes = sizeof(bf16) * std::size_t(kG2Tiles) * kTile;  // 64,512
// Rung 10's 98,048 bytes and dbeta's per-lane partial sums [64][32] float32 (8,192): 106,240 bytes.
constexpr std::size_t kG2Smem = kG2TileBytes + sizeof(float) * (C * 128 + C) + sizeof(double) * C + sizeof(float) * C * 32;
static_assert(kG2Smem == 106240, "the header's shared-memory formula");
constexpr int LDE = 72;  // row stride (floats) of the de slab over A's tiles: float2 stores conflict-free
static_assert(sizeof(float) * C * LDE <= 2 * sizeof(bf16) * kTile, "the de slab fits in A hi + lo");
// Rung 15 (kHi, bwd_v15_hionly.cu): no X, Y lo tiles: A hi (tile 0; tile 1 kept for the de slab), X hi,
// Y hi, the k slab: 5 tiles, 46,080 bytes; 87,808 bytes in all.
constexpr std::size_t kG2HiSmem = kG2Smem - sizeof(bf16) * 2 * kTile;
static_assert(kG2HiSmem == 87808, "bwd_v15_hionly.cu's shared-memory figure");
template <bool kHi>
constexpr std::size_t g2_tile_bytes = kHi ? kG2TileBytes - sizeof(bf16) * 2 * kTile : kG2TileBytes;
template <bool kHi>
constexpr std::size_t g2_smem = kHi ? kG2HiSmem : kG2Smem;
// Rung 21 (kDuV, bwd_v21_duvsmem.cu): dbeta's du0 v products [64][LDE] float32 (summed over the value slabs) after
// dbeta's lane partials: 106,240 bytes in all, still 2 blocks per SM (2 x (106,240 + 1,024) = 214,528 <= 233,472).
constexpr std::size_t kDuVBytes = sizeof(float) * C * LDE;
template <bool kHi, bool kDuV>
constexpr std::size_t g2_smem_all = g2_smem<kHi> + (kDuV ? kDuVBytes : 0);
static_assert(g2_smem_all<true, true> == 106240, "bwd_v21_duvsmem.cu's shared-memory figure");
// Rung 17 (kHi with kLo, bwd_v17_hybrid.cu): rung 15's tiles, and X's lo in tile 1 (A lo's, unused when
// kHi; the de slab takes it only after B7) for the products in kLo: no more shared memory than rung 15.
constexpr unsigned kLoDu0 = 1;  // du0 = A^T dv_new: hi*hi + hi*lo(dv_new) (the only bit so far)

/// Rung 10's stage_f32 (the same hi + lo values): by quads where `quads`, else 16 items per thread.
/// kHi (rung 15): the hi tile only.
template <bool kHi = false>
__device__ __forceinline__ void stage_f32(bf16* hi, bf16* lo, const float* base, int HW, int col0, int W, int Lc,
                                          bool quads, int tid) {
  if (quads) return bwdc::stage_quads<kHi>(hi, lo, base, HW, col0, W, Lc, tid);
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
    bwdc::put_op<kHi>(hi, lo, idx >> 6, idx & 63, x[t]);
  }
}

/// Rung 19's fallback of stage_f32<true> for a bf16 [rows, W] array (dw_aux as G1' stored it): the hi tile
/// receives the stored values as they are, 16 items per thread.
__device__ __forceinline__ void stage_bf16_items(bf16* hi, const bf16* base, int HW, int col0, int W, int Lc, int tid) {
  constexpr int kItems = C * C / kThreads;
  bf16 x[kItems];
#pragma unroll
  for (int t = 0; t < kItems; ++t) {
    const int idx = tid + t * kThreads, i = idx >> 6, c = col0 + (idx & 63);
    x[t] = (i < Lc && c < W) ? base[i * HW + c] : __float2bfloat16_rn(0.f);
  }
#pragma unroll
  for (int t = 0; t < kItems; ++t) {
    const int idx = tid + t * kThreads;
    hi[(idx >> 6) * LT + (idx & 63)] = x[t];
  }
}

/// Rung 18 (kLean): the E slab, E_id = (beta_i k_id) exp(G_i) for columns col0.. (zero outside Lc x K),
/// formed from k (bf16, global), beta and G (shared) by bwd3_extras_wide's expression (bwd_v3_async.cu;
/// exp(G_i) = 1 exactly for DeltaNet, G = 0) instead of read from ws.E: the same float32 values, staged by
/// put_op4 as stage_quads stages ws.E. Quad qd = tid + t * kThreads (t < 4): row qd >> 4, columns
/// 4 (qd & 15) .. + 3; one 8-byte k load per quad where quadsK (K % 4 == 0, k 8-byte aligned).
template <bool kHi>
__device__ __forceinline__ void stage_e(bf16* hi, bf16* lo, const bf16* kb, int HK, int col0, int K, int Lc,
                                        const float* sbeta, const double* sG, bool gated, bool quadsK, int tid) {
  float x[4][4];
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int qd = tid + t * kThreads, i = qd >> 4, d = col0 + 4 * (qd & 15);
    float kf[4] = {0.f, 0.f, 0.f, 0.f};
    if (i < Lc && d < K) {
      if (quadsK) {
        bwdc::unpack4(*reinterpret_cast<const uint2*>(kb + i * HK + d), kf);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) kf[e] = d + e < K ? bwdc::bf(kb[i * HK + d + e]) : 0.f;
      }
    }
    const float eg = gated && i < Lc ? expf(float(sG[i])) : 1.f, b = i < Lc ? sbeta[i] : 0.f;
#pragma unroll
    for (int e = 0; e < 4; ++e) x[t][e] = b * kf[e] * eg;  // bwd3_extras_wide: ef * kf * eg
  }
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int qd = tid + t * kThreads;
    bwdc::put_op4<kHi>(hi, lo, qd >> 4, 4 * (qd & 15), x[t]);
  }
}

/// Rung 18 (kLean), one K slab of B6 / B8's operands: the dw_aux slab (stage_quads' loads and values) and
/// the E slab (stage_e's), with every global load of both issued before the first shared store. Staged one
/// after the other (stage_f32, then stage_e), the k loads issue only after the dw_aux slab's shared
/// stores, which the compiler cannot separate from them (generic pointers): one more dependent global round
/// trip per slab (session 11's candidate for rung 18's G2' being 0.02-0.06 ms slower than rung 17's).
/// Same values, same tiles: bit for bit with the two calls. Requires quads (dw_aux 16-byte aligned, K % 4
/// == 0) and quadsK (k 8-byte aligned); the caller falls back to the two calls otherwise.
/// Rung 19 (TD = bf16; kHi): dw_aux comes as the bf16 values G1' stored (its hi part, rounded as put_op4<true>
/// rounds the float32 one), copied to the hi tile as they are: the same tile.
template <bool kHi, class TD = float>
__device__ __forceinline__ void stage_dwa_e(bf16* xh, bf16* xl, bf16* yh, bf16* yl, const TD* dwab, const bf16* kb,
                                            int HK, int col0, int K, int Lc, const float* sbeta, const double* sG,
                                            bool gated, int tid) {
  constexpr bool kDwaH = std::is_same_v<TD, bf16>;
  static_assert(!kDwaH || kHi, "bf16 dw_aux is its hi part only");
  float a[4][4];
  uint2 aw[4], kw[4];
#pragma unroll
  for (int t = 0; t < 4; ++t) {  // every global load first (load_quads' and stage_e's, under one range test)
    const int qd = tid + t * kThreads, i = qd >> 4, d = col0 + 4 * (qd & 15);
    const bool in = i < Lc && d < K;
    if constexpr (kDwaH) {
      aw[t] = in ? *reinterpret_cast<const uint2*>(dwab + i * HK + d) : make_uint2(0u, 0u);
    } else {
      if (in) bwdc::ld4(dwab + i * HK + d, a[t]);
      else a[t][0] = a[t][1] = a[t][2] = a[t][3] = 0.f;
    }
    kw[t] = in ? *reinterpret_cast<const uint2*>(kb + i * HK + d) : make_uint2(0u, 0u);
  }
  if constexpr (kDwaH) {
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int qd = tid + t * kThreads;
      *reinterpret_cast<uint2*>(xh + (qd >> 4) * LT + 4 * (qd & 15)) = aw[t];
    }
  } else {
    bwdc::put_quads<kHi>(xh, xl, a, tid);
  }
#pragma unroll
  for (int t = 0; t < 4; ++t) {  // stage_e's expression on the loaded k
    const int qd = tid + t * kThreads, i = qd >> 4;
    float kf[4];
    bwdc::unpack4(kw[t], kf);
    const float eg = gated && i < Lc ? expf(float(sG[i])) : 1.f, b = i < Lc ? sbeta[i] : 0.f;
    float x[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) x[e] = b * kf[e] * eg;
    bwdc::put_op4<kHi>(yh, yl, qd >> 4, 4 * (qd & 15), x);
  }
}

/// The 8 bf16 of a 16-byte word (element 0 at the lowest address).
__device__ __forceinline__ void unpack8(uint4 w, bf16 (&x)[8]) {
  const unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int e = 0; e < 4; ++e)
    x[2 * e] = __ushort_as_bfloat16(u[e] & 0xffffu), x[2 * e + 1] = __ushort_as_bfloat16(u[e] >> 16);
}

/// Row i's 8 bf16 at columns c.. of a [rows, W] array (zero outside Lc x W; W % 8 == 0, base 16-byte
/// aligned, HW % 8 == 0: an octet is wholly in range or wholly out), one 16-byte load.
__device__ __forceinline__ uint4 ld8(const bf16* base, int HW, int i, int c, int W, int Lc) {
  return (i < Lc && c < W) ? *reinterpret_cast<const uint4*>(base + i * HW + c) : make_uint4(0, 0, 0, 0);
}

/// float2 of columns col, col + 1 (each zero when out of range): one 8-byte load when both are in range
/// and a is 8-byte aligned.
__device__ __forceinline__ float2 ld_pair(const float* a, int col, int W) {
  if (col + 1 < W && (reinterpret_cast<std::uintptr_t>(a) & 7) == 0) return *reinterpret_cast<const float2*>(a);
  return make_float2(col < W ? a[0] : 0.f, col + 1 < W ? a[1] : 0.f);
}

/// G2' of rung 11 (DeltaNet, GDN): rung 10's bwd10_wy (B6, B8, B7, B9's L half, the rest of B10, B11
/// per (chunk, head)) with dE and de kept on chip and wide loads; the file comment lists the changes.
/// kHi (rung 15): X, Y, A hi tiles only (no lo staged, split or multiplied: one MMA per product); X hi,
/// Y hi and the k slab at tiles 2, 3, 4 (A hi at 0, tile 1 for the de slab).
/// kLo (rung 17, with kHi; bit kLoDu0): dv_new's lo staged in tile 1 in the V slabs, and du0 = A^T dv_new
/// alone multiplies it (dA = dv_new u0^T stays hi*hi).
/// kLean (rung 18): E = (beta k) exp(G) formed here (stage_e; B10's GDN term likewise) instead of read
/// from ws.E, which rung 18's front does not write: the same values, so the same gradients bit for bit.
/// kDwaH (rung 19, with kLean): dw_aux read as the bf16 array G1' (bwd12_g1's kDwaH) leaves in ws.dwa's first half:
/// the values its hi tile held in rung 18, so the same gradients bit for bit.
/// kDuV (rung 21, with kLean): dbeta's <du0, v> terms (B10: dbeta = <de, k> + <du0, v>) formed on chip in the V
/// slabs' epilogue, from du0's fragments and v staged exactly in the k slab's tile (free until B9), instead of du0
/// stored to ws.du0 as float32 and read back with v at the end: 64 KB of float32 and 16 KB of v less per (chunk,
/// head) at V = 128. Each thread adds its fragment's du0 v products into sDuV[row][c mod 64] (its own elements; the
/// slabs in order), and each lane's dbeta sum takes sDuV[i][lane] and sDuV[i][lane + 32] after its de k terms.
/// Every other output is bit for bit rung 18's; dbeta is the same terms in another float32 order. (A first version
/// summed each row in registers and by shuffles: 56 bytes of spills at the 128-register cap.)
template <class Tg, bool kHi = false, unsigned kLo = 0, bool kLean = false, bool kDwaH = false, bool kDuV = false>
__global__ void __launch_bounds__(kThreads, 2) bwd11_wy(KParams p, bwdc::BwdOut out) {
  static_assert(!kDwaH || kLean, "kDwaH: rung 18's G2' reading bf16 dw_aux");
  static_assert(!kDuV || kLean, "kDuV: rung 18's G2' with dbeta's <du0, v> on chip");
  // kLean's products are plain multiplies: with hi + lo staging (put_split's x - bf16(x)) the compiler could
  // contract one into an FMA (rung 9 uses __fmul_rn there), so kLean is for the hi-only instantiation only.
  static_assert(kHi || !kLean, "kLean needs kHi");
  using bwdc::each_acc;
  using bwdc::gemm64;
  using bwdc::lo_op;
  using bwdc::put_op;
  using bwdc::zero;
  constexpr int kS = kHi ? 1 : 2;  // tiles per float32 operand (hi + lo, or hi) of X and Y
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* tiles = reinterpret_cast<bf16*>(smem_raw);
  bf16 *sAh = tiles, *sAl = tiles + kTile;                  // A hi, lo (to B7), then the de slab
  bf16 *sXh = tiles + 2 * kTile, *sXl = tiles + (kHi && kLo ? 1 : 3) * kTile;  // dv_new | dw_aux slab, then dA, then M1
  bf16 *sYh = tiles + (2 + kS) * kTile, *sYl = tiles + 5 * kTile;  // u0 | E slab, then T1, then M1b
  bf16* sKs = tiles + (2 + 2 * kS) * kTile;                         // k slab (exact in bf16)
  float* sde = reinterpret_cast<float*>(smem_raw);                  // [64][LDE] de of one K slab (after B7)
  float* sdG = reinterpret_cast<float*>(smem_raw + g2_tile_bytes<kHi>);  // [Lc][K] dE, then dG, then its reverse sum
  float* sbeta = sdG + C * 128;                                     // [C]
  double* sG = reinterpret_cast<double*>(sbeta + C);                // [C] G_i (0 for DeltaNet)
  float* sPa = reinterpret_cast<float*>(sG + C);                    // [C][32] dbeta's lane partials
  float* sDuV = sPa + C * 32;                                       // kDuV: [C][LDE] du0 v, summed over slabs

  const int K = p.K, V = p.V, h = blockIdx.y;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int m0 = (warp & 3) * 16, n0 = (warp >> 2) * 32;
  const int g8 = lane >> 2, t4 = lane & 3;
  int tok0, Lc;
  chunk_of(p, blockIdx.x, tok0, Lc);
  const bwdc::RowBase rb(p, tok0, h);
  const BWs ws = bwdc::bwd_ws(p);
  const bool gated = p.gate == kGateScalar;  // GDN; DeltaNet has no dg (KDA, GDN2 never come here)
  const bf16 *kb = rb.base(static_cast<const bf16*>(p.k), K), *vb = rb.base(static_cast<const bf16*>(p.v), V);
  const Tg* beta = static_cast<const Tg*>(p.beta);
  const double* Gb = rb.base_opt(ws.G, rb.KG);
  const int HK = rb.HK, HV = rb.HV;
  constexpr int kItems = C * C / kThreads;  // 16 items (2 octets) per thread of a 64 x 64 tile

  for (int i = tid; i < C; i += kThreads) {
    sbeta[i] = i < Lc ? ld(beta + rb.r0 + std::int64_t(i) * rb.H) : 0.f;
    sG[i] = (gated && i < Lc) ? rb.G(Gb, i, 0) : 0.0;
  }
  stage_f32<kHi>(sAh, sAl, rb.base(ws.A, C), rb.HC, 0, C, Lc, bwdc::aligned(ws.A, 16), tid);
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
    const bool octV = V % 8 == 0 && bwdc::aligned(vb, 16);
    for (int vv = 0; vv < V; vv += 64) {
      __syncthreads();  // the previous slab's tiles read
      // kLean (rung 18, since session 14): where both take their vector paths, the v loads are issued with
      // the dv_new loads, before the dv_new slab's shared stores (as stage_dwa_e in the K slabs); the same
      // tiles, so the same bits. Elsewhere dv_new's slab is staged first, then v's loads issue.
      const bool fused = kLean && quadsV && octV;
      uint4 w[2];
      auto load_v = [&] {
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int o = tid + t * kThreads;
          w[t] = ld8(vb, HV, o >> 3, vv + 8 * (o & 7), V, Lc);
        }
      };
      if (fused) {
        float x[4][4];
#pragma unroll
        for (int t = 0; t < 4; ++t) {  // load_quads' loads, the slab's column offset folded into d
          const int qd = tid + t * kThreads, i = qd >> 4, d = vv + 4 * (qd & 15);
          if (i < Lc && d < V) bwdc::ld4(dvnb + i * HV + d, x[t]);
          else x[t][0] = x[t][1] = x[t][2] = x[t][3] = 0.f;
        }
        load_v();
        bwdc::put_quads<kHi && !(kLo & kLoDu0)>(sXh, sXl, x, tid);
      } else {
        stage_f32<kHi && !(kLo & kLoDu0)>(sXh, sXl, dvnb, HV, vv, V, Lc, quadsV, tid);
      }
      if (octV) {  // u0 = beta v (F2, not fused) from two 16-byte loads per thread
        if (!fused) load_v();
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const int o = tid + t * kThreads, i = o >> 3, c = 8 * (o & 7);
          if constexpr (kDuV) *reinterpret_cast<uint4*>(sKs + i * LT + c) = w[t];  // v exactly (zeros outside)
          bf16 x[8];
          unpack8(w[t], x);
#pragma unroll
          for (int hq = 0; hq < 2; ++hq) {
            float u0[4];
#pragma unroll
            for (int e = 0; e < 4; ++e) u0[e] = __fmul_rn(sbeta[i], bwdc::bf(x[4 * hq + e]));
            bwdc::put_op4<kHi>(sYh, sYl, i, c + 4 * hq, u0);
          }
        }
      } else {  // rung 10's scalar staging
        float u[kItems];
#pragma unroll
        for (int t = 0; t < kItems; ++t) {
          const int idx = tid + t * kThreads, i = idx >> 6, cc = vv + (idx & 63);
          u[t] = (i < Lc && cc < V) ? ld(vb + i * HV + cc) : 0.f;
        }
#pragma unroll
        for (int t = 0; t < kItems; ++t) {
          const int idx = tid + t * kThreads, i = idx >> 6;
          put_op<kHi>(sYh, sYl, i, idx & 63, __fmul_rn(sbeta[i], u[t]));  // u0 = beta v (F2), not fused
          if constexpr (kDuV) sKs[i * LT + (idx & 63)] = __float2bfloat16_rn(u[t]);  // v exactly (bf16 input)
        }
      }
      __syncthreads();
      gemm64<false, false>(accA, sXh, lo_op<kHi>(sXl), sYh, lo_op<kHi>(sYl), m0, n0);
      float accU[4][4];
      zero(accU);
      gemm64<true, true>(accU, sAh, lo_op<kHi>(sAl), sXh, lo_op<kHi && !(kLo & kLoDu0)>(sXl), m0, n0);
      if constexpr (kDuV) {
        // du0 v of this slab beside dv's stores (v zero outside Lc x V, as staged), into this thread's own elements
        // of sDuV: set by the first slab, added to by the next ones
        bwdc::each_acc_pair(accU, m0, n0, [&](int j, int c, float x0, float x1) {
          const __nv_bfloat162 v2 = *reinterpret_cast<const __nv_bfloat162*>(sKs + j * LT + c);
          float2 pr = make_float2(x0 * __low2float(v2), x1 * __high2float(v2));
          float2* d = reinterpret_cast<float2*>(sDuV + j * LDE + c);
          if (vv > 0) pr.x += d->x, pr.y += d->y;
          *d = pr;
          const float bj = sbeta[j];
          if (j < Lc) st_bf_pair(dvb + j * HV + vv + c, bj * x0, bj * x1, vv + c, V);  // B10: dv = beta du0
        });
      } else {
        bwdc::store_acc_pairs(du0b, HV, vv, V, Lc, evenV, accU, m0, n0);
        bwdc::each_acc_pair(accU, m0, n0, [&](int j, int c, float x0, float x1) {
          if (j < Lc) st_bf_pair(dvb + j * HV + vv + c, sbeta[j] * x0, sbeta[j] * x1, vv + c, V);  // B10: dv = beta du0
        });
      }
    }
  }
  // B6 and B8, K slabs: dA += dw_aux E^T;  dE = A^T dw_aux, kept in sdG (this thread's fragment elements)
  {
    const float *dwab = rb.base(ws.dwa, K), *Eb = rb.base(ws.E, K);
    const bool quadsK = K % 4 == 0 && bwdc::aligned(ws.dwa, 16) && bwdc::aligned(ws.E, 16);
    // dw_aux as G1' stored it: float32 (rung 18), or bf16 in the array's first half (kDwaH, rung 19)
    const auto dwp = [&] {
      if constexpr (kDwaH) return rb.base(reinterpret_cast<const bf16*>(ws.dwa), K);
      else return dwab;
    }();
    for (int kk = 0; kk < K; kk += 64) {
      __syncthreads();
      if constexpr (kLean) {
        if (quadsK && bwdc::aligned(kb, 8)) {
          stage_dwa_e<kHi>(sXh, sXl, sYh, sYl, dwp, kb, HK, kk, K, Lc, sbeta, sG, gated, tid);
        } else {
          if constexpr (kDwaH) stage_bf16_items(sXh, dwp, HK, kk, K, Lc, tid);
          else stage_f32<kHi>(sXh, sXl, dwp, HK, kk, K, Lc, quadsK, tid);
          stage_e<kHi>(sYh, sYl, kb, HK, kk, K, Lc, sbeta, sG, gated, K % 4 == 0 && bwdc::aligned(kb, 8), tid);
        }
      } else {
        stage_f32<kHi>(sXh, sXl, dwab, HK, kk, K, Lc, quadsK, tid);
        stage_f32<kHi>(sYh, sYl, Eb, HK, kk, K, Lc, quadsK, tid);
      }
      __syncthreads();
      gemm64<false, false>(accA, sXh, lo_op<kHi>(sXl), sYh, lo_op<kHi>(sYl), m0, n0);
      float accE[4][4];
      zero(accE);
      gemm64<true, true>(accE, sAh, lo_op<kHi>(sAl), sXh, lo_op<kHi>(sXl), m0, n0);
      each_acc(accE, m0, n0, [&](int r, int c, float x) {
        if (r < Lc && kk + c < K) sdG[r * K + kk + c] = x;
      });
    }
  }
  __syncthreads();  // the slab tiles read
  // B7 (V4Mid::run_impl's code): dA strictly lower as an operand; T1 = dA A^T (strictly lower kept);
  // dL = -A^T T1 (strictly lower)
  each_acc(accA, m0, n0, [&](int i, int j, float x) { put_op<kHi>(sXh, sXl, i, j, (i < Lc && j < i) ? x : 0.f); });
  __syncthreads();
  float acc[4][4];
  zero(acc);
  gemm64<false, false>(acc, sXh, lo_op<kHi>(sXl), sAh, lo_op<kHi>(sAl), m0, n0);
  each_acc(acc, m0, n0, [&](int i, int j, float x) { put_op<kHi>(sYh, sYl, i, j, j < i ? x : 0.f); });
  __syncthreads();
  zero(acc);
  gemm64<true, true>(acc, sAh, lo_op<kHi>(sAl), sYh, lo_op<kHi>(sYl), m0, n0);
  __syncthreads();  // every read of the dA, T1 and A tiles done (A's memory becomes the de slab)
  // B9's L half: M1 = dL (.) Gam, M1b = Diag(beta) M1 (strictly lower), Gam_ij = exp(G_i - G_j) <= 1
  each_acc(acc, m0, n0, [&](int i, int j, float x) {
    const float m1 = (i < Lc && j < i) ? -x * expf(float(sG[i] - sG[j])) : 0.f;
    put_op<kHi>(sXh, sXl, i, j, m1);
    put_op<kHi>(sYh, sYl, i, j, sbeta[i] * m1);
  });
  // Per 64-channel slab: de^L = M1 k, dk^L = M1b^T k; B10 in the fragments' epilogue; then dbeta's
  // de k terms of the slab into each lane's partial sums sPa[i][lane] (rung 10's order).
  const float *dkpb = rb.base(ws.dkLP, K), *dGcb = rb.base(ws.dGc, K);
  const float* Eb = rb.base(ws.E, K);
  bf16* dkb = rb.base(static_cast<bf16*>(out.dk), K);
  const bool octK = K % 8 == 0 && bwdc::aligned(kb, 16);
  for (int i = warp; i < C; i += kThreads / 32) sPa[i * 32 + lane] = 0.f;  // each lane its own
  for (int kk = 0; kk < K; kk += 64) {
    __syncthreads();  // the M tiles complete; the previous slab's k and de read
    {  // the k slab by octets (row o >> 3, columns 8 (o & 7)..): one 16-byte load each where octK
      uint4 w[2];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int o = tid + t * kThreads, j = o >> 3, d = kk + 8 * (o & 7);
        if (octK) {
          w[t] = ld8(kb, HK, j, d, K, Lc);
        } else {
          unsigned short s[8];
#pragma unroll
          for (int e = 0; e < 8; ++e) s[e] = (j < Lc && d + e < K) ? __bfloat16_as_ushort(kb[j * HK + d + e]) : 0;
          w[t] = make_uint4(s[0] | (unsigned(s[1]) << 16), s[2] | (unsigned(s[3]) << 16), s[4] | (unsigned(s[5]) << 16),
                            s[6] | (unsigned(s[7]) << 16));
        }
      }
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int o = tid + t * kThreads;
        *reinterpret_cast<uint4*>(sKs + (o >> 3) * LT + 8 * (o & 7)) = w[t];
      }
    }
    __syncthreads();
    float aDe[4][4], aDk[4][4];
    zero(aDe), zero(aDk);
    gemm64<false, true>(aDe, sXh, lo_op<kHi>(sXl), sKs, nullptr, m0, n0);
    gemm64<true, true>(aDk, sYh, lo_op<kHi>(sYl), sKs, nullptr, m0, n0);
    // B10 by column pairs, kNB fragment columns nt at a time: their global operands loaded before any store.
    constexpr int kNB = 2;
#pragma unroll
    for (int nh = 0; nh < 4 / kNB; ++nh) {
      float2 dkp[kNB][2], dgc[kNB][2], ev[kNB][2];
#pragma unroll
      for (int a = 0; a < kNB; ++a)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int nt = kNB * nh + a, r = m0 + g8 + 8 * hh, c = kk + n0 + nt * 8 + 2 * t4;
          const bool in = r < Lc;
          const int x = r * HK + c;
          dkp[a][hh] = in ? ld_pair(dkpb + x, c, K) : make_float2(0.f, 0.f);
          if (gated) {
            dgc[a][hh] = in ? ld_pair(dGcb + x, c, K) : make_float2(0.f, 0.f);
            if (!kLean) ev[a][hh] = in ? ld_pair(Eb + x, c, K) : make_float2(0.f, 0.f);
          }
        }
#pragma unroll
      for (int a = 0; a < kNB; ++a)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int nt = kNB * nh + a, r = m0 + g8 + 8 * hh, cl = n0 + nt * 8 + 2 * t4, c = kk + cl;
          if (r >= Lc || c >= K) continue;
          float dkv[2], dev[2];
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int d = c + e;
            if (d >= K) continue;
            const float deL = aDe[nt][2 * hh + e], dkL = aDk[nt][2 * hh + e], dE = sdG[r * K + d];
            const float de = dE * expf(float(sG[r])) + deL;  // rung 8's de
            dev[e] = de;
            dkv[e] = (e ? dkp[a][hh].y : dkp[a][hh].x) + dkL + sbeta[r] * de;
            if (gated) {
              const float kv = bwdc::bf(sKs[(r)*LT + cl + e]);
              // kLean: E as bwd3_extras_wide forms it, (beta k) exp(G_r)
              const float Ev = kLean ? sbeta[r] * kv * expf(float(sG[r])) : (e ? ev[a][hh].y : ev[a][hh].x);
              sdG[r * K + d] = (e ? dgc[a][hh].y : dgc[a][hh].x) + dE * Ev + (sbeta[r] * kv) * deL - kv * dkL;
            }
          }
          *reinterpret_cast<float2*>(sde + r * LDE + cl) = make_float2(dev[0], c + 1 < K ? dev[1] : 0.f);
          st_bf_pair(dkb + r * HK + c, dkv[0], dkv[1], c, K);
        }
    }
    __syncthreads();  // the slab's de complete
    // dbeta's de k terms of this slab: d = kk + lane, kk + lane + 32 (ascending over the slabs, as rung 10)
    for (int i = warp; i < Lc; i += kThreads / 32) {
      float a = sPa[i * 32 + lane];
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const int dl = lane + 32 * m;
        if (kk + dl < K) a += sde[i * LDE + dl] * bwdc::bf(sKs[i * LT + dl]);
      }
      sPa[i * 32 + lane] = a;
    }
  }
  if (gated) {
    __syncthreads();  // dG complete
    // B11: dg_t = sum_{i >= t} dG_i per channel, the last row first (dG_last is in its last row)
    for (int d = tid; d < K; d += kThreads) {
      float a = 0.f;
      for (int i = Lc - 1; i >= 0; --i) a += sdG[i * K + d], sdG[i * K + d] = a;
    }
    __syncthreads();
  }
  // Per token (one warp each): dbeta = <de, k> + <du0, v> (rung 10's sums); GDN: dg = sum_d dg_d.
  const float* du0b = rb.base(ws.du0, V);
  Tg* dbetab = rb.base_opt(static_cast<Tg*>(out.dbeta), 1);
  Tg* dg1b = rb.base_opt(static_cast<Tg*>(out.dg), 1);
  // V <= 128: four rows' du0 and v loaded at once (one round trip per four rows, not per row); the sum
  // per lane in rung 10's order (its de k terms, then c = lane, lane + 32, ... ascending).
  constexpr int kRB = 4;
  for (int i0 = warp; i0 < Lc; i0 += kRB * (kThreads / 32)) {
    float du[kRB][4], vx[kRB][4];
    if (V <= 128 && !kDuV) {
#pragma unroll
      for (int j = 0; j < kRB; ++j)
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          const int i = i0 + j * (kThreads / 32), c = lane + 32 * m;
          const bool in = i < Lc && c < V;
          du[j][m] = in ? du0b[i * HV + c] : 0.f;
          vx[j][m] = in ? ld(vb + i * HV + c) : 0.f;
        }
    }
#pragma unroll
    for (int j = 0; j < kRB; ++j) {
      const int i = i0 + j * (kThreads / 32);
      if (i >= Lc) break;
      float a = sPa[i * 32 + lane];  // this lane's de k terms (written by this lane only)
      if constexpr (kDuV) {
        a += sDuV[i * LDE + lane];  // columns lane (+ 64, ...) and lane + 32 (+ 64, ...): every column once
        a += sDuV[i * LDE + lane + 32];
      } else if (V <= 128) {
#pragma unroll
        for (int m = 0; m < 4; ++m)
          if (lane + 32 * m < V) a += du[j][m] * vx[j][m];
      } else {
        for (int c = lane; c < V; c += 32) a += du0b[i * HV + c] * ld(vb + i * HV + c);
      }
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
}

template <class Tg, bool kHi = false, unsigned kLo = 0, bool kLean = false, bool kDwaH = false, bool kDuV = false>
void launch_wy(const BwdCall& c, bwdc::Profile& prof) {
  const KParams& p = c.p;
  auto kern = bwd11_wy<Tg, kHi, kLo, kLean, kDwaH, kDuV>;
  constexpr std::size_t smem = g2_smem_all<kHi, kDuV>;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  bwdc::BwdOut o{c.do_, c.dq, c.dk, c.dv, c.dg, c.dbeta, c.db, c.dw};
  kern<<<dim3(p.num_chunks, p.H), kThreads, smem, c.stream>>>(p, o);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  prof.mark();
}

}  // namespace

std::size_t bwd_v11_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwdc::bwd_v11_g2(const BwdCall& c, bwdc::Profile& prof) {  // rung 13 runs G2' through this
  if (c.gate_dtype == 0) launch_wy<float>(c, prof);
  else launch_wy<bf16>(c, prof);
}

void bwdc::bwd_v11_g2_hi(const BwdCall& c, bwdc::Profile& prof) {  // rung 15's G2' (hi-only operands)
  if (c.gate_dtype == 0) launch_wy<float, true>(c, prof);
  else launch_wy<bf16, true>(c, prof);
}

void bwdc::bwd_v11_g2_hy(const BwdCall& c, bwdc::Profile& prof) {  // rung 17's G2' (du0 with dv_new's lo)
  if (c.gate_dtype == 0) launch_wy<float, true, kLoDu0>(c, prof);
  else launch_wy<bf16, true, kLoDu0>(c, prof);
}

void bwdc::bwd_v11_g2_lean(const BwdCall& c, bwdc::Profile& prof) {  // rung 18's G2' (rung 17's, E formed here)
  if (c.gate_dtype == 0) launch_wy<float, true, kLoDu0, true>(c, prof);
  else launch_wy<bf16, true, kLoDu0, true>(c, prof);
}

void bwdc::bwd_v11_g2_dwah(const BwdCall& c, bwdc::Profile& prof) {  // rung 19's G2' (rung 18's, bf16 dw_aux)
  if (c.gate_dtype == 0) launch_wy<float, true, kLoDu0, true, true>(c, prof);
  else launch_wy<bf16, true, kLoDu0, true, true>(c, prof);
}

void bwdc::bwd_v11_g2_duv(const BwdCall& c, bwdc::Profile& prof) {  // rung 21's G2' (rung 18's, <du0, v> on chip)
  if (c.gate_dtype == 0) launch_wy<float, true, kLoDu0, true, false, true>(c, prof);
  else launch_wy<bf16, true, kLoDu0, true, false, true>(c, prof);
}

void bwd_v11_launch(const BwdCall& c) {  // rung 10's G1, then G2'
  bwdc::bwd_split_launch(c, "bwd_v11", bwdc::bwd_v10_g1, bwdc::bwd_v11_g2);
}

}  // namespace linattn::cuda::detail
