// optimized/cuda/bwd_v25_g1async.cu -- rung 25 of the CUDA backward ladder: rung 24 (bwd_v24_dswide.cu) with DeltaNet's
// state-side kernel G1' loading its operands by cp.async, a value slab ahead of its products (issue 6; written in
// session 24).
//
// Why: DeltaNet's G1' (bwd12_g1<.., kDsH, kKq8>, bwd_v12_g1slab.cu) took 1.15-1.19 ms at B=8 T=4096 H=16 K=V=128
// against fla's chunk_bwd_dqkwg at 0.47 (bench/analysis_bwd_plan.md, "Session 22", item 1): it moves 1.5x dqkwg's
// bytes but at 2.04 TB/s against 3.41, its most stalled instructions waiting on loads (ncu, session 21: 37.5% of
// stalls long-scoreboard). It stages each 64-column value slab through registers: two batches of loads per slab
// (the 128-register cap of two blocks per SM allows no more in flight), each a DRAM round trip followed by
// conversions, shared stores and a barrier, and the next slab's loads are issued only after this slab's products.
// Here every load is a cp.async (no register holds it, so a slab's whole 57 KB is in flight at once), issued one
// slab ahead: slab vv + 1's loads (and, after the last slab, B9's k and q) run under slab vv's products.
//
// The kernel, bwd25_g1 below (DeltaNet only; grid, block and products rung 12's): per 64-column value slab vv,
//   do, dS' (bf16 from rung 19's dstates) and dv_new (bf16 from rung 20's dstates, kDvH) go by cp.async straight into
//     their padded bf16 tiles, double-buffered (set s & 1 for slab s, vv = 64 s);
//   v_new and S (float32: the forward's, or the saved forward's, KParams::keep) go by cp.async into one unpadded
//     float32 slab each, which the block then converts into v_new's hi and lo tiles and S's hi tile (put_op4's
//     roundings: the values rung 24's G1' stages from registers);
//   then B4 dQg = do S^T, dKd = v_new dS'^T, dw_aux = -dv_new S^T and B5 dP = do v_new^T, the same gemm64 calls on the
//   same tiles in the same order as rung 24's G1' (bwd12_g1<true, true, true, true, false, false, true>).
// After the slabs: dw_aux stored, M2 = dP masked to the lower triangle (Gam = 1: DeltaNet's G is 0), B9's dq^P = M2 k
// and dk^P = scale M2^T q on the k and q slabs loaded under the last slab's products, and the epilogue's dq and
// dk_part (rung 12's expressions at G = 0). So every output equals rung 24's bit for bit (proofs_tests/
// test_cuda_backward.cu, "CUDA v25 gradients equal v24 gradients bit for bit", which also checks each call's route).
//
// Schedule of one block (nV = ceil(V / 64) slabs; one commit group in flight at a time):
//   issue slab 0 -> set 0, raw                                       commit
//   for s < nV:  wait all; barrier (slab s landed; products s-1 done)
//                raw -> v_new hi, lo and S hi tiles; barrier (raw free)
//                issue slab s+1 -> set (s+1) & 1, raw  (or k, q -> set (s+1) & 1's do, dS' tiles after the last)
//                commit; products of slab s on set s & 1
//   store dw_aux; barrier; M2 -> v_new's hi tile; wait all; barrier; B9; epilogue (dq, dk_part from fragments)
//
// Shared memory (dynamic, no static): float32 v_new and S slabs 2 x 16,384 (unpadded: a warp's 16-byte reads cover 512
// contiguous bytes); bf16 64 x 72 tiles of v_new hi, lo and S hi 3 x 9,216; two sets of do, dS', dv_new tiles 2 x 3 x
// 9,216: 115,712 bytes, so two blocks per SM exactly (2 x (115,712 + 1,024 reserved) = 233,472, the H200's 228 KB),
// with the shared-memory carveout set to its maximum. __launch_bounds__(256, 2): 128 registers at most (the staging
// registers of rung 24's G1' are gone).
//
// Range (bwd_v25_launch, bwdc::g1a_ok): DeltaNet inside rung 18's range with rung 20's bf16 dv_new (bwdc::dv_bf16_ok:
// V % 8 == 0, the workspace arrays 16-byte aligned), K % 8 == 0, and q, k, v, do, ws.A and ws.dwa 16-byte aligned (the
// host APIs already require q, k, v so: chunk_cuda.cu's plan_call; g1a_ok checks them again, since every copy here is
// 16 bytes, 8 bf16 or 4 float32, wholly inside a row's range or wholly outside, zero-filled). Elsewhere, and for GDN,
// KDA and GDN2: rung 24. Workspace: rung 3's (dv_new's bf16 copy in ws.du0's first half, as rung 20).
#include <cstdint>
#include <stdexcept>

#include "optimized/cuda/bwd_common.cuh"

namespace linattn::cuda::detail {
namespace {

using bwdc::C;
using bwdc::kThreads;
using bwdc::kTile;
using bwdc::LT;
using bf16 = __nv_bfloat16;

constexpr std::size_t kRawBytes = sizeof(float) * C * C;   // 16,384: one unpadded 64 x 64 float32 slab
constexpr std::size_t kTileB = sizeof(bf16) * kTile;        // 9,216: one padded 64 x 72 bf16 tile
/// The layout for kSh = false (rung 25: S arrives as float32) and true (rung 28, bwd_v28_sbf16.cu: S arrives as its
/// bf16 hi part, copied straight into a fourth tile of each set; no S slab, no single S hi tile).
template <bool kSh>
struct G1aLayout {
  static constexpr std::size_t kOffVh = (kSh ? 1 : 2) * kRawBytes;            // after the v_new (and S) slabs
  static constexpr std::size_t kOffSet = kOffVh + (kSh ? 2 : 3) * kTileB;     // v_new hi, lo (, S hi), then the sets
  static constexpr std::size_t kSetB = (kSh ? 4 : 3) * kTileB;                // do, dS', dv_new (, S hi)
  static constexpr std::size_t kSmem = kOffSet + 2 * kSetB;                   // 115,712 (rung 25), 108,544 (rung 28)
};
constexpr std::size_t kG1aSmem = G1aLayout<false>::kSmem;
static_assert(kG1aSmem == 115712 && G1aLayout<true>::kSmem == 108544, "the file comments' shared-memory figures");
static_assert(2 * (kG1aSmem + 1024) <= 233472, "two blocks per SM on the H200 (228 KB per SM, 1 KB reserved per block)");

/// cp.async (not committed) of value slab vv of one (chunk, head, 64-channel K slab kk): do, dv_new (bf16, rows of the
/// chunk, i < Lc) and dS' (bf16, state rows d = kk + i < K) into their padded tiles; v_new (rows i < Lc) and S (rows
/// d < K) into the unpadded float32 slabs. Columns vv + c < V; everything else zero-filled (a 16-byte copy with source
/// size 0 reads nothing). Copy o = tid + t * kThreads: bf16 row o >> 3, columns 8 (o & 7) .. + 7; float32 row o >> 4,
/// columns 4 (o & 15) .. + 3. V % 8 == 0, so a copy's columns are all in range or all out.
/// kSh (rung 28): S is bf16 (Sb's bytes are bf16 values, rows d = kk + i < K) and goes into the tile tSh like dS'; rS
/// is unused.
template <bool kSh>
__device__ __forceinline__ void issue_slab(bf16* tDo, bf16* tDs, bf16* tDv, bf16* tSh, float* rV, float* rS,
                                           const bf16* dOb, const bf16* dvb, const float* vnb, const bf16* dSb,
                                           const float* Sb, int vv, int kk, int K, int V, int HV, int Lc, int tid) {
  const bf16* Shb = reinterpret_cast<const bf16*>(Sb);
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const int o = tid + t * kThreads, i = o >> 3, c = 8 * (o & 7), cc = vv + c;
    const bool in = i < Lc && cc < V, ins = kk + i < K && cc < V;
    cp_async16(tDo + i * LT + c, in ? dOb + i * HV + cc : dOb, in ? 16 : 0);
    cp_async16(tDv + i * LT + c, in ? dvb + i * HV + cc : dvb, in ? 16 : 0);
    cp_async16(tDs + i * LT + c, ins ? dSb + std::int64_t(kk + i) * V + cc : dSb, ins ? 16 : 0);
    if constexpr (kSh) cp_async16(tSh + i * LT + c, ins ? Shb + std::int64_t(kk + i) * V + cc : Shb, ins ? 16 : 0);
  }
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    const int o = tid + t * kThreads, i = o >> 4, c = 4 * (o & 15), cc = vv + c;
    const bool in = i < Lc && cc < V, ins = kk + i < K && cc < V;
    cp_async16(rV + i * C + c, in ? vnb + i * HV + cc : vnb, in ? 16 : 0);
    if constexpr (!kSh) cp_async16(rS + i * C + c, ins ? Sb + std::int64_t(kk + i) * V + cc : Sb, ins ? 16 : 0);
  }
}

/// G1' of rung 25 (the file comment): B4, B5 and B9's P half for one 64-channel slab of K of one (chunk, head), DeltaNet;
/// writes dq, ws.dwa (dw_aux, float32) and ws.dkLP (dk_part) as rung 24's G1' does, bit for bit.
/// kDwaH (rung 26, bwd_v26_wyasync.cu): dw_aux stored as bf16 pairs (round to nearest even: rung 19's kDwaH) into
/// ws.dwa's first half, for rung 26's G2', which copies it into its tile by cp.async.
/// kSh (rung 28, bwd_v28_sbf16.cu; with kDwaH): ws.S holds S's bf16 hi part (the states kernel's, or the saving
/// forward's, from their bf16 hi tile by state_hi_store_rows: bf16_rn of the float32 state, the value put_op4<true> makes of it here
/// otherwise), copied by cp.async straight into a fourth tile of each set; only v_new is converted on chip.
/// kDkH (rung 31, bwd_v31_dkbf16.cu; with kDwaH): dk_part stored as bf16 pairs (round to nearest even) into ws.dkLP's
/// first half, for rung 31's G2' (bwd26_wy's kR31), as fla's chunk_bwd_dqkwg stores its dk: half the bytes written.
/// kStE (rung 32, bwd_v32_g1stage.cu; with kDkH): the three bf16 outputs dw_aux, dq and dk_part go through tiles of the
/// free set (the last value slab's, read by nothing after its products) and leave as 16-byte row segments (a warp
/// writes whole 128-byte rows) instead of 4-byte pairs (16 bytes per row and instruction, half a sector); the same
/// bf16_rn values, so bit for bit with kStE = false. Needs out.dq 16-byte aligned (backward_device requires it;
/// launch_g1a checks it again).
template <bool kDwaH, bool kSh = false, bool kDkH = false, bool kStE = false>
__global__ void __launch_bounds__(kThreads, 2) bwd25_g1(KParams p, bwdc::BwdOut out) {
  using bwdc::gemm64;
  using bwdc::zero;
  using L = G1aLayout<kSh>;
  constexpr int kSetT = kSh ? 4 : 3;                                        // tiles per set
  extern __shared__ __align__(16) unsigned char smem_raw[];
  float* rV = reinterpret_cast<float*>(smem_raw);                          // [64][64] v_new slab (float32)
  float* rS = rV + C * C;                                                   // [64][64] S slab (float32; !kSh only)
  bf16* tVh = reinterpret_cast<bf16*>(smem_raw + L::kOffVh);                // v_new hi; M2 after the slabs
  bf16* tVl = tVh + kTile;                                                  // v_new lo
  bf16* tSh1 = tVl + kTile;                                                 // S hi (!kSh; kSh: each set's 4th tile)
  bf16* set0 = reinterpret_cast<bf16*>(smem_raw + L::kOffSet);              // set s: do, dS', dv_new (, S hi) at
                                                                            // set0 + kSetT s kTile

  const int K = p.K, V = p.V, H = p.H, h = blockIdx.y;
  const int nK = (K + 63) / 64, chunk = blockIdx.x / nK, kk = (blockIdx.x - chunk * nK) * 64;
  const int tid = threadIdx.x, warp = tid >> 5;
  const int m0 = (warp & 3) * 16, n0 = (warp >> 2) * 32;
  int tok0, Lc;
  chunk_of(p, chunk, tok0, Lc);
  const bwdc::RowBase rb(p, tok0, h);
  const bwdc::BWs ws = bwdc::bwd_ws(p);
  const int HK = rb.HK, HV = rb.HV;
  const bf16* dOb = rb.base(static_cast<const bf16*>(out.do_), V);
  const bf16* dvb = rb.base(reinterpret_cast<const bf16*>(ws.du0), V);  // rung 20's bf16 dv_new
  const float* vnb = rb.base(ws.vn, V);
  // kSh: S's bf16 hi part, [chunks, H, K, V] bf16 from ws.S's start (the states kernels' kSbf layout); issue_slab
  // takes it as the bytes of Sb
  const float* Sb = kSh ? reinterpret_cast<const float*>(reinterpret_cast<const bf16*>(ws.S) +
                                                         (std::int64_t(chunk) * H + h) * K * V)
                        : ws.S + (std::int64_t(chunk) * H + h) * K * V;
  const bf16* dSb = reinterpret_cast<const bf16*>(ws.dS) + (std::int64_t(chunk) * H + h) * K * V;  // rung 19's bf16 dS'
  const int nV = (V + 63) / 64;

  float accQ[4][4], accK[4][4], accW[4][4], accP[4][4];
  zero(accQ), zero(accK), zero(accW), zero(accP);
  issue_slab<kSh>(set0, set0 + kTile, set0 + 2 * kTile, set0 + 3 * kTile, rV, rS, dOb, dvb, vnb, dSb, Sb, 0, kk, K, V,
                  HV, Lc, tid);
  cp_async_commit();
#pragma unroll 1
  for (int s = 0; s < nV; ++s) {
    cp_async_wait<0>();
    __syncthreads();  // slab s in shared memory (every thread's copies); slab s - 1's products done
    // v_new -> hi + lo (put_split4), S -> hi (put_op4<true>): rung 24's roundings of the same float32 values
#pragma unroll
    for (int t = 0; t < 4; ++t) {
      const int o = tid + t * kThreads, i = o >> 4, c = 4 * (o & 15);
      float x[4];
      bwdc::ld4(rV + i * C + c, x);
      bwdc::put_op4<false>(tVh, tVl, i, c, x);
      if constexpr (!kSh) {
        float y[4];
        bwdc::ld4(rS + i * C + c, y);
        bwdc::put_op4<true>(tSh1, nullptr, i, c, y);
      }
    }
    __syncthreads();  // the hi / lo tiles written; the float32 slabs free
    bf16* nxt = set0 + kSetT * ((s + 1) & 1) * kTile;  // last read by slab s - 1's products
    if (s + 1 < nV) {
      issue_slab<kSh>(nxt, nxt + kTile, nxt + 2 * kTile, nxt + 3 * kTile, rV, rS, dOb, dvb, vnb, dSb, Sb, 64 * (s + 1),
                      kk, K, V, HV, Lc, tid);
    } else {
      // B9's k and q slabs (rung 22's octets: K % 8 == 0, so an octet is wholly inside K or outside) into the free
      // set's do and dS' tiles, under the last slab's products
      const bf16 *kb = rb.base(static_cast<const bf16*>(p.k), K), *qb = rb.base(static_cast<const bf16*>(p.q), K);
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        const int o = tid + t * kThreads, j = o >> 3, d = 8 * (o & 7);
        const bool inside = j < Lc && kk + d < K;
        cp_async16(nxt + j * LT + d, inside ? kb + j * HK + kk + d : kb, inside ? 16 : 0);
        cp_async16(nxt + kTile + j * LT + d, inside ? qb + j * HK + kk + d : qb, inside ? 16 : 0);
      }
    }
    cp_async_commit();
    const bf16* cur = set0 + kSetT * (s & 1) * kTile;
    const bf16 *sdo = cur, *sdS = cur + kTile, *sdv = cur + 2 * kTile, *tSh = kSh ? cur + 3 * kTile : tSh1;
    // B4: dQg = do S^T, dKd = v_new dS'^T, dw_aux = -dv_new S^T (negated below); B5: dP = do v_new^T (hi + lo)
    gemm64<false, false>(accQ, sdo, nullptr, tSh, nullptr, m0, n0);
    gemm64<false, false>(accK, tVh, nullptr, sdS, nullptr, m0, n0);
    gemm64<false, false>(accW, sdv, nullptr, tSh, nullptr, m0, n0);
    gemm64<false, false>(accP, sdo, nullptr, tVh, tVl, m0, n0);
  }
  // dw_aux of this slab (G2' reads it); kStE: staged after the barrier below
  if constexpr (!kStE) {
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
  __syncthreads();  // every product's tiles read: M2 goes over v_new's hi tile (kStE: the free set's tiles are free)
  // kStE: the free set (the last slab's, (nV - 1) & 1; k and q went into the other) holds the staged outputs: tile 0 dq,
  // tile 1 dk_part, tile 2 dw_aux
  bf16* stg = set0 + kSetT * ((nV + 1) & 1) * kTile;
  if constexpr (kStE)
    bwdc::each_acc_pair(accW, m0, n0, [&](int r, int c, float x0, float x1) {
      *reinterpret_cast<__nv_bfloat162*>(stg + 2 * kTile + r * LT + c) =
          __halves2bfloat162(__float2bfloat16_rn(-x0), __float2bfloat16_rn(-x1));  // st_bf_pair's value of -accW
    });
  // B9's M2 = dP (.) Gam, lower with the diagonal; DeltaNet's Gam_ij = exp(0) = 1 exactly, so M2 = dP there (the value
  // of rung 24's x * expf(float(G_i - G_j)))
  bwdc::each_acc(accP, m0, n0, [&](int i, int j, float x) { bwdc::put_op<true>(tVh, nullptr, i, j, (i < Lc && j <= i) ? x : 0.f); });
  cp_async_wait<0>();
  __syncthreads();  // M2, k, q in shared memory
  const bf16* kq = set0 + kSetT * (nV & 1) * kTile;
  // B9's P half: dq^P = M2 k, dk^P = scale M2^T q (rung 24's aDk = 0 + scale aDkq)
  float aDq[4][4], aDk[4][4], aDkq[4][4];
  zero(aDq), zero(aDk), zero(aDkq);
  gemm64<false, true>(aDq, tVh, nullptr, kq, nullptr, m0, n0);
  gemm64<true, true>(aDkq, tVh, nullptr, kq + kTile, nullptr, m0, n0);
  const float scale = p.scale;
#pragma unroll
  for (int a = 0; a < 4; ++a)
#pragma unroll
    for (int b = 0; b < 4; ++b) aDk[a][b] += scale * aDkq[a][b];
  // Rung 12's epilogue at G = 0: dq = scale (dQg exp(0) + dq^P), dk_part = dKd exp(0) + dk^P. exp(0) = 1 exactly and a
  // product by 1 fused into the add is the plain sum, so these are rung 24's values; stored by pairs (the same values).
  bf16* dqb = rb.base(static_cast<bf16*>(out.dq), K);
  float* dkLPb = kDkH ? nullptr : rb.base(ws.dkLP, K);
  bf16* dkLPh = kDkH ? rb.base(reinterpret_cast<bf16*>(ws.dkLP), K) : nullptr;  // kDkH: bf16 dk_part
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int lane = tid & 31, r = m0 + (lane >> 2) + 8 * hh, c = n0 + nt * 8 + 2 * (lane & 3), d = kk + c;
      if (!kStE && r >= Lc) continue;
      const float q0 = scale * (accQ[nt][2 * hh] + aDq[nt][2 * hh]), q1 = scale * (accQ[nt][2 * hh + 1] + aDq[nt][2 * hh + 1]);
      const float k0 = accK[nt][2 * hh] + aDk[nt][2 * hh], k1 = accK[nt][2 * hh + 1] + aDk[nt][2 * hh + 1];
      if constexpr (kStE) {  // st_bf_pair's values into the staging tiles (rows past Lc too: never copied out)
        *reinterpret_cast<__nv_bfloat162*>(stg + r * LT + c) =
            __halves2bfloat162(__float2bfloat16_rn(q0), __float2bfloat16_rn(q1));
        *reinterpret_cast<__nv_bfloat162*>(stg + kTile + r * LT + c) =
            __halves2bfloat162(__float2bfloat16_rn(k0), __float2bfloat16_rn(k1));
      } else {
        bwdc::st_bf_pair(dqb + r * HK + d, q0, q1, d, K);
        if constexpr (kDkH) bwdc::st_bf_pair(dkLPh + r * HK + d, k0, k1, d, K);
        else bwdc::st_pair_w(dkLPb + r * HK + d, k0, k1, d, K);
      }
    }
  if constexpr (kStE) {
    __syncthreads();  // the three staging tiles complete
    // 16-byte row segments: copy o = tid + t kThreads is row o >> 3, columns 8 (o & 7) .. + 7 (K % 8 == 0: a segment is
    // wholly inside K or outside); rows < Lc
    bf16* dwab = rb.base(reinterpret_cast<bf16*>(ws.dwa), K);
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      const int o = tid + t * kThreads, i = o >> 3, c = 8 * (o & 7), d = kk + c;
      if (i >= Lc || d >= K) continue;
      *reinterpret_cast<uint4*>(dqb + i * HK + d) = *reinterpret_cast<const uint4*>(stg + i * LT + c);
      *reinterpret_cast<uint4*>(dkLPh + i * HK + d) = *reinterpret_cast<const uint4*>(stg + kTile + i * LT + c);
      *reinterpret_cast<uint4*>(dwab + i * HK + d) = *reinterpret_cast<const uint4*>(stg + 2 * kTile + i * LT + c);
    }
  }
}

template <bool kDwaH, bool kSh = false, bool kDkH = false, bool kStE = false>
void launch_g1a(const BwdCall& c, bwdc::Profile& prof) {
  const KParams& p = c.p;
  if (!bwdc::g1a_ok(c))
    throw std::logic_error("linattn::cuda: bwd25_g1: DeltaNet inside rung 20's bf16 dv_new range with K % 8 == 0 and "
                           "do 16-byte aligned only (bwd_v25_launch checks it)");
  static_assert(!kDkH || kDwaH, "kDkH (rung 31) goes with kDwaH (rung 26's bf16 dw_aux)");
  static_assert(!kStE || kDkH, "kStE (rung 32) stages bf16 outputs only: with kDkH");
  if (kStE && reinterpret_cast<std::uintptr_t>(c.dq) % 16 != 0)
    throw std::logic_error("linattn::cuda: bwd25_g1 with staged stores writes dq by 16 bytes: dq must be 16-byte "
                           "aligned (backward_device requires it)");
  auto kern = bwd25_g1<kDwaH, kSh, kDkH, kStE>;
  constexpr std::size_t smem = G1aLayout<kSh>::kSmem;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          int(cudaSharedmemCarveoutMaxShared)));
  bwdc::BwdOut o{c.do_, c.dq, c.dk, c.dv, c.dg, c.dbeta, c.db, c.dw};
  const int nK = (p.K + 63) / 64;
  kern<<<dim3(unsigned(p.num_chunks) * unsigned(nK), p.H), kThreads, smem, c.stream>>>(p, o);
  LINATTN_CUDA_CHECK(cudaGetLastError());
  prof.mark();
}

}  // namespace

bool bwdc::g1a_ok(const BwdCall& c) {
  const bwdc::BWs ws = bwdc::bwd_ws(c.p);
  auto al16 = [](const void* a) { return reinterpret_cast<std::uintptr_t>(a) % 16 == 0; };
  return c.p.gate == kGateNone && !c.p.gdn2 && bwdc::dv_bf16_ok(c) && c.p.K % 8 == 0 && al16(c.do_) && al16(c.p.q) &&
         al16(c.p.k) && al16(c.p.v) && al16(ws.A) && al16(ws.dwa) && al16(ws.dkLP);
}
void bwdc::bwd_v25_g1(const BwdCall& c, bwdc::Profile& prof) { launch_g1a<false>(c, prof); }
void bwdc::bwd_v25_g1_dwah(const BwdCall& c, bwdc::Profile& prof) { launch_g1a<true>(c, prof); }
void bwdc::bwd_v28_g1(const BwdCall& c, bwdc::Profile& prof) {
  if (!c.s_bf16)
    throw std::logic_error("linattn::cuda: bwd_v28_g1 reads S as bf16: the front (or the saving forward) must have "
                           "stored it so (BwdCall::s_bf16)");
  launch_g1a<true, true>(c, prof);
}
void bwdc::bwd_v31_g1(const BwdCall& c, bwdc::Profile& prof) {
  if (!c.s_bf16)
    throw std::logic_error("linattn::cuda: bwd_v31_g1 reads S as bf16: the front (or the saving forward) must have "
                           "stored it so (BwdCall::s_bf16)");
  launch_g1a<true, true, true>(c, prof);
}
void bwdc::bwd_v31_g1_f32s(const BwdCall& c, bwdc::Profile& prof) { launch_g1a<true, false, true>(c, prof); }
void bwdc::bwd_v32_g1(const BwdCall& c, bwdc::Profile& prof) {
  if (!c.s_bf16)
    throw std::logic_error("linattn::cuda: bwd_v32_g1 reads S as bf16: the front (or the saving forward) must have "
                           "stored it so (BwdCall::s_bf16)");
  launch_g1a<true, true, true, true>(c, prof);
}
void bwdc::bwd_v32_g1_f32s(const BwdCall& c, bwdc::Profile& prof) { launch_g1a<true, false, true, true>(c, prof); }

std::size_t bwd_v25_workspace_bytes(const KParams& p) { return bwd_v3_workspace_bytes(p); }

void bwd_v25_launch(const BwdCall& c) {
  if (c.p.N == 0 || !bwdc::in_rung18_range(c) || !bwdc::g1a_ok(c)) return bwd_v24_launch(c);
  // DeltaNet: rung 24's front (bf16 dS', its dstates width pick) with rung 20's bf16 dv_new, rung 25's G1', rung 21's G2'
  bwdc::bwd_split_launch(c, "bwd_v25_g1a", bwdc::bwd_v25_g1, bwdc::bwd_v11_g2_duv, /*g_only=*/true, /*ds_bf16=*/true,
                         /*dv_bf16=*/true, bwdc::DsPick::wide);
}

}  // namespace linattn::cuda::detail
