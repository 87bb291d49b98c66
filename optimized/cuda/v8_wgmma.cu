// optimized/cuda/v8_wgmma.cu -- rung 8 of the CUDA forward ladder (written in session 12): rung 7 with a
// state kernel whose two big products per chunk, w_aux S and q~ S, run on Hopper's warpgroup MMA
// (wgmma.mma_async, sm_90a) instead of mma.sync (RESULTS.md "Forward rung 8").
//
// Why: the state kernel (v2_state, shared by rungs 2-7) is half of the forward at B=8 T=4096 H=16
// K=V=128 (0.49-0.52 ms) and latency-bound: ncu (session 6) found 8 warps per SM, issue slots 26-28%
// busy, 0.3 eligible warps per scheduler, 38% of the stall samples on the HMMAs and the ldmatrix loads
// just before them. Per chunk each warp issues 128 mma.sync m16n8k16 for w_aux S and q~ S (hi + lo
// parts of S) plus 48 ldmatrix.x4 (at KP = 128, BV = 64). With wgmma a warpgroup issues 16 instructions for the same
// 64 x BV x KP products (hi then lo per 16-deep k step), reading both operands from shared memory.
//
// What changes against v2_state (two stages, cp.async tiles, 8 warps = 2 warpgroups):
//   * warpgroup 0 computes w_aux S, warpgroup 1 computes q~ S, each over all BV columns (v2: every warp
//     both products over half the columns); warpgroup 0 then forms v_new = u - w_aux S, warpgroup 1
//     adds P v_new (mma.sync, as v2) and stores o;
//   * w_aux and q~ tiles land in shared memory in wgmma's canonical K-major layout without swizzle
//     (8 x 8 "core matrices" of 128 contiguous bytes) instead of padded rows, and the bf16 hi / lo
//     copies of S are stored transposed, S^T[n][k], in the same layout (B operand, K-major);
//   * the state update S = Diag(exp(G_C)) S + Kd^T v_new, the state fragments, the Kd, P, u, exp(G_C)
//     tiles and every other expression are v2_state's.
// Per value the operations are v2_state's in v2_state's order (for each 16-deep k step: + w_aux S_hi,
// then + w_aux S_lo; o = q~ S_hi + q~ S_lo, then + P v_new), so o and the final state equal rung 7's
// bit for bit if wgmma's m64nNk16 sums equal mma.sync's m16n8k16 sums -- not documented, but so on the
// H200 (session 12), and the test "CUDA v8 wgmma forward equals v7 bit for bit" requires it.
// Range: rung 7's (bf16 inputs, 16 <= K <= 128, gate none or scalar); rung 7's intra kernel; every other
// call runs what rung 7 runs (rung 4, else rung 1).
//
// Measured (H200, session 12 calls 1-8, bench/logs_session12/; RESULTS.md "Forward rung 8"): correct and
// SLOWER, so not `best`. o and the final state equal rung 7's bit for bit (177 assertions per column
// division: so wgmma's m64nNk16 sums round as mma.sync's m16n8k16 sums here), both properties pass,
// memcheck 0 errors, racecheck 0 hazards (3 cases). State kernel alone, GDN: 0.57-0.60 ms against rung 7's
// 0.49 at B=8 T=4096 H=16 K=V=128, 1.52-1.58 against 1.04 at B=1 T=32768. The knobs below show why:
// without its tile loads the kernel takes 0.36 ms (B=8) and 0.64 (B=1), without the wgmma products it
// still takes 0.51-0.53, so the products were not what bounds the state kernel. The w_aux / q~ loads, needed
// first in each chunk and in this layout less coalesced than rung 7's (+83% L2 requests), cost 0.135 ms for
// their 32 KB per block and chunk; the Kd / P loads (24 KB, row-major, needed later) 0.05. None of the
// variants made it faster: the column division (LINATTN_V8_SPLIT=1; slower at B=1), the tile-load order
// (shared-memory order, or issued behind the wgmma), leaving out the fence, the flat grid.
// Static (nvcc 13.0, sm_90a, ptxas -v): the default kernel 197 registers at KP 128 / BV 64, no spill.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "optimized/cuda/tc_common.cuh"

namespace linattn::cuda::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// wgmma (PTX ISA 9.7.15) helpers: shared-memory matrix descriptors and the m64nNk16 bf16 MMA.
// ---------------------------------------------------------------------------------------------

/// Matrix descriptor of a K-major bf16 operand in the canonical layout without swizzle: core matrices
/// of 8 rows x 8 elements (16 bytes per row, 128 contiguous bytes); `lbo` the byte offset between
/// core matrices adjacent in K, `sbo` between core matrices adjacent in M (or N). Bits: start address
/// >> 4 in [0, 14), lbo >> 4 in [16, 30), sbo >> 4 in [32, 46), base offset 0, layout type 0 (none).
__device__ __forceinline__ std::uint64_t wg_desc(const void* p, unsigned lbo, unsigned sbo) {
  const unsigned a = smem_u32(p);
  return std::uint64_t((a & 0x3FFFFu) >> 4) | (std::uint64_t((lbo >> 4) & 0x3FFFu) << 16) |
         (std::uint64_t((sbo >> 4) & 0x3FFFu) << 32);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
/// Keeps the compiler from moving reads or writes of the accumulators across the wgmma fence / wait
/// (the registers are the asynchronous MMA's operands between the two).
template <int NT>
__device__ __forceinline__ void wg_fence_acc(float (&acc)[NT][4]) {
#pragma unroll
  for (int j = 0; j < NT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(acc[j][e])::"memory");
}
/// Generic-proxy writes to shared memory (st.shared, cp.async) made visible to the async proxy (wgmma).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/// acc += A B for one 16-deep k step: A 64 x 16 (descriptor da), B 16 x N (descriptor db, K-major),
/// float32 accumulators in mma.sync's fragment order per 8-column n-tile (acc[j][e]: row 16 w + g8 +
/// 8 (e >> 1), column 8 j + 2 t4 + (e & 1), w the warp within the warpgroup).
template <int N>
__device__ __forceinline__ void wgmma_bf16(float (&acc)[N / 8][4], std::uint64_t da, std::uint64_t db);

#define LINATTN_WG_F(j) "+f"(acc[j][0]), "+f"(acc[j][1]), "+f"(acc[j][2]), "+f"(acc[j][3])

template <>
__device__ __forceinline__ void wgmma_bf16<8>(float (&acc)[1][4], std::uint64_t da, std::uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
      : LINATTN_WG_F(0)
      : "l"(da), "l"(db), "r"(1));
}

template <>
__device__ __forceinline__ void wgmma_bf16<16>(float (&acc)[2][4], std::uint64_t da, std::uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, p, 1, 1, 0, 0;\n}\n"
      : LINATTN_WG_F(0), LINATTN_WG_F(1)
      : "l"(da), "l"(db), "r"(1));
}

template <>
__device__ __forceinline__ void wgmma_bf16<32>(float (&acc)[4][4], std::uint64_t da, std::uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : LINATTN_WG_F(0), LINATTN_WG_F(1), LINATTN_WG_F(2), LINATTN_WG_F(3)
      : "l"(da), "l"(db), "r"(1));
}

template <>
__device__ __forceinline__ void wgmma_bf16<64>(float (&acc)[8][4], std::uint64_t da, std::uint64_t db) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : LINATTN_WG_F(0), LINATTN_WG_F(1), LINATTN_WG_F(2), LINATTN_WG_F(3), LINATTN_WG_F(4), LINATTN_WG_F(5),
        LINATTN_WG_F(6), LINATTN_WG_F(7)
      : "l"(da), "l"(db), "r"(1));
}
#undef LINATTN_WG_F

/// Element offset of (row r, column k) of a K-major tile with PK = KP / 8 core matrices per 8-row
/// group: core matrix (r / 8, k / 8) at ((r / 8) PK + k / 8) x 64 elements, row r % 8 at 8 (r % 8).
template <int PK>
__device__ __forceinline__ int core_off(int r, int k) {
  return (((r >> 3) * PK + (k >> 3)) << 6) + ((r & 7) << 3) + (k & 7);
}

/// Rung 8's shared layout (byte offsets; two pipeline stages as v2_state's default).
template <int KP, int BV>
struct V8Smem {
  static constexpr int PK = KP / 8;
  static constexpr int LDK = ldk(KP);
  static constexpr int LDV = BV + 8;
  static constexpr int LDU = BV + 4;                  // float
  static constexpr int tileC = 64 * KP * 2;           // w_aux, q~: core-matrix layout, no padding
  static constexpr int tileK = 64 * LDK * 2;          // Kd: padded rows (ldmatrix.trans, as v2_state)
  static constexpr int sW = 0;                        // [2] bf16 core [64][KP]
  static constexpr int sQg = sW + 2 * tileC;          // [2] bf16 core [64][KP]
  static constexpr int sKd = sQg + 2 * tileC;         // [2] bf16 [64][LDK]
  static constexpr int sP = sKd + 2 * tileK;          // [2] bf16 [64][72]
  static constexpr int sU = sP + 2 * 64 * 72 * 2;     // [2] f32 [64][LDU]
  static constexpr int sgC = sU + 2 * 64 * LDU * 4;   // [2] f32 [KP]
  static constexpr int sSh = sgC + 2 * KP * 4;        // bf16 core [BV][KP]: S^T, hi part
  static constexpr int sSl = sSh + BV * KP * 2;       // bf16 core [BV][KP]: S^T, lo part
  static constexpr int sVn = sSl + BV * KP * 2;       // bf16 [64][LDV]
  static constexpr int bytes = sVn + 64 * LDV * 2;
  static_assert(sSh % 16 == 0 && sW % 16 == 0 && sQg % 16 == 0 && tileC % 16 == 0, "wgmma operands 16-byte aligned");
  static_assert(bytes <= 227 * 1024, "rung 8 state kernel shared memory over the sm_90 limit");
};

/// The state fragments to shared memory as S^T hi = bf16(S) and lo = bf16(S - hi) in the K-major core
/// layout (element (n, k) of S^T at core_off<PK>(n, k)): v2's state_frag_store_hilo values, transposed.
template <int KP, int SNT>
__device__ __forceinline__ void store_state_core_hilo(const float (&st)[SNT][4], bf16* sSh, bf16* sSl, int sm, int sn0,
                                                      int g8, int t4) {
  constexpr int PK = KP / 8;
#pragma unroll
  for (int nt = 0; nt < SNT; ++nt) {
    const int r = 16 * sm + g8, col = 8 * (sn0 + nt) + 2 * t4;
    const unsigned h01 = pack_bf16(st[nt][0], st[nt][1]), h23 = pack_bf16(st[nt][2], st[nt][3]);
    const __nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162*>(&h01);
    const __nv_bfloat162 b = *reinterpret_cast<const __nv_bfloat162*>(&h23);
    const unsigned l01 = pack_bf16(st[nt][0] - __low2float(a), st[nt][1] - __high2float(a));
    const unsigned l23 = pack_bf16(st[nt][2] - __low2float(b), st[nt][3] - __high2float(b));
    const __nv_bfloat162 la = *reinterpret_cast<const __nv_bfloat162*>(&l01);
    const __nv_bfloat162 lb = *reinterpret_cast<const __nv_bfloat162*>(&l23);
    sSh[core_off<PK>(col, r)] = a.x, sSh[core_off<PK>(col + 1, r)] = a.y;
    sSh[core_off<PK>(col, r + 8)] = b.x, sSh[core_off<PK>(col + 1, r + 8)] = b.y;
    sSl[core_off<PK>(col, r)] = la.x, sSl[core_off<PK>(col + 1, r)] = la.y;
    sSl[core_off<PK>(col, r + 8)] = lb.x, sSl[core_off<PK>(col + 1, r + 8)] = lb.y;
  }
}

// LINATTN_V8_SKIP (a benchmark knob for finding the state kernel's critical path; any bit set makes the
// outputs WRONG): 1 no wgmma, 2 no state-update MMAs, 4 tiles loaded for chunks 0-1 only, 8 no S^T
// stores, 16 no P v_new / o stores, 32 no v_new epilogue, 64 no fence.proxy.async, 128 no w_aux / q~ tile
// loads, 256 no Kd / P tile loads, 512 no u tile loads. 0 (unset): the kernel.
constexpr int kSkipWgmma = 1, kSkipUpdate = 2, kSkipLoads = 4, kSkipStore = 8, kSkipOut = 16, kSkipVnew = 32,
              kSkipFence = 64, kSkipLoadWQ = 128, kSkipLoadKP = 256, kSkipLoadU = 512;

/// The sequential pass over the chunks of one sequence for one head and BV value columns (v2_state's
/// forward: Eq.(SPEC 4, step 3): v_new = u - w_aux S, o = q~ S + P v_new, S <- Diag(exp(G_C)) S + Kd^T v_new).
template <int KP, int BV, bool kSplit, bool kKnobs>
__global__ void __launch_bounds__(kThreads) v8_state(KParams p, int skip_arg) {
  // The LINATTN_V8_SKIP bits; a compile-time 0 in the kernel that runs without the knob (kKnobs false),
  // so its code has none of the knob's branches (with them, ptxas injected warpgroup.arrive before the
  // wgmma, C7519, and KP 128 / BV 64 took 216 registers instead of 197; review13).
  const int skip = kKnobs ? skip_arg : 0;
  using S = V8Smem<KP, BV>;
  constexpr int PK = S::PK, LDK = S::LDK, LDV = S::LDV, LDU = S::LDU;
  extern __shared__ __align__(128) char smem[];
  bf16* sSh = reinterpret_cast<bf16*>(smem + S::sSh);
  bf16* sSl = reinterpret_cast<bf16*>(smem + S::sSl);
  bf16* sVn = reinterpret_cast<bf16*>(smem + S::sVn);
  const int K = p.K, V = p.V, H = p.H;
  // Grid (N, H, value tiles), or with LINATTN_STATE_GRID=flat one dimension with the value tile fastest
  // (a head's value tiles side by side, sharing its w_aux, q~, Kd, P reads in L2), as v2_state.
  int n, h, v0;
  if (gridDim.y == 1 && gridDim.z == 1) {
    const int nvt = (p.V + BV - 1) / BV, bx = blockIdx.x, r = bx / nvt;
    v0 = (bx - r * nvt) * BV, h = r % p.H, n = r / p.H;
  } else {
    n = blockIdx.x, h = blockIdx.y, v0 = blockIdx.z * BV;
  }
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g8 = lane >> 2, t4 = lane & 3;
  const int wg = warp >> 2, wq = warp & 3;  // warpgroup; warp within it (rows 16 wq .. 16 wq + 15)
  const V2Ws ws = v2_ws(p, KP);
  const int VP = vpad(V);
  bf16* o = static_cast<bf16*>(p.o);

  const int t_begin = seq_begin(p, n), t_end = seq_end(p, n);
  const int nchunks = (t_end - t_begin + C - 1) / C;
  const int c_first = p.seq_chunk0 ? p.seq_chunk0[n] : n * p.chunks_per_seq;

  // State fragment ownership, as v2_state: m-tile sm (rows 16 sm of S), n-tiles sn0 .. sn0 + SNT.
  constexpr int MT = KP / 16, NG = 8 / MT, SNT = BV / 8 / NG;
  static_assert(SNT >= 1, "BV too small for this KP");
  const int sm = warp % MT, sn0 = (warp / MT) * SNT;
  float st[SNT][4];
  const std::int64_t sbase = (std::int64_t(n) * H + h) * K * V;
  state_frag_load(st, p.h0, sbase, K, V, sm, sn0, v0, g8, t4);
  store_state_core_hilo<KP>(st, sSh, sSl, sm, sn0, g8, t4);

  auto issue = [&](int ci) {  // cp.async the tiles of chunk ci (of this sequence) into stage ci % 2
    const int stg = ci & 1;
    const std::int64_t cw = std::int64_t(c_first + ci) * H + h;
    bf16* dW = reinterpret_cast<bf16*>(smem + S::sW + stg * S::tileC);
    bf16* dQ = reinterpret_cast<bf16*>(smem + S::sQg + stg * S::tileC);
    bf16* dK = reinterpret_cast<bf16*>(smem + S::sKd + stg * S::tileK);
    // w_aux, q~: 16-byte piece idx in shared-memory order (core matrix idx / 8, its row idx % 8), so a
    // warp writes 512 contiguous bytes (no bank conflict) and reads 64 contiguous bytes of 8 rows.
    for (int idx = tid; idx < 64 * PK; idx += kThreads) {
      if (skip & kSkipLoadWQ) break;
      const int cm = idx >> 3, i = (cm / PK) * 8 + (idx & 7), d8 = (cm % PK) * 8;
      const std::int64_t src = (cw * 64 + i) * KP + d8;
      cp_async16(dW + idx * 8, ws.w + src);
      cp_async16(dQ + idx * 8, ws.qg + src);
    }
    for (int idx = tid; idx < 64 * PK; idx += kThreads) {  // Kd: padded rows, as v2_state
      if (skip & kSkipLoadKP) break;
      const int i = idx / PK, d8 = (idx % PK) * 8;
      cp_async16(dK + i * LDK + d8, ws.kd + (cw * 64 + i) * KP + d8);
    }
    if (!(skip & kSkipLoadKP)) cp_async_p_tile(reinterpret_cast<bf16*>(smem + S::sP + stg * 64 * 72 * 2), ws.P, cw, tid);
    float* dU = reinterpret_cast<float*>(smem + S::sU + stg * 64 * LDU * 4);
    for (int idx = tid; idx < 64 * (BV / 4); idx += kThreads) {
      if (skip & kSkipLoadU) break;
      const int i = idx / (BV / 4), c4 = (idx % (BV / 4)) * 4;
      cp_async16(dU + i * LDU + c4, ws.u + (cw * 64 + i) * VP + v0 + c4, v0 + c4 < VP ? 16 : 0);
    }
    cp_async_gc<KP>(reinterpret_cast<float*>(smem + S::sgC + stg * KP * 4), ws.gC, cw, tid);
    cp_async_commit();
  };

  if (nchunks > 0) issue(0);
  for (int ci = 0; ci < nchunks; ++ci) {
    const int stg = ci & 1, tok0 = t_begin + ci * C, Lc = min(C, t_end - tok0);
    cp_async_wait<0>();
    if (!(skip & kSkipFence)) fence_proxy_async();  // this thread's tiles of chunk ci and S^T stores, visible to wgmma
    __syncthreads();  // ... for every thread; the previous chunk fully done (its stage is free)
    const bf16* sP = reinterpret_cast<const bf16*>(smem + S::sP + stg * 64 * 72 * 2);
    const float* sU = reinterpret_cast<const float*>(smem + S::sU + stg * 64 * LDU * 4);
    const float* sgC = reinterpret_cast<const float*>(smem + S::sgC + stg * KP * 4);

    // kSplit = false: warpgroup 0 acc = w_aux S, warpgroup 1 acc = q~ S over all BV columns.
    // kSplit = true (LINATTN_V8_SPLIT=1): warpgroup g both products over columns cb = g BV / 2 ..
    // (v2_state's division of the columns). Per k step + A S_hi, then + A S_lo, for every accumulator.
    constexpr int NA = kSplit ? BV / 16 : BV / 8;  // n-tiles per accumulator
    constexpr int NC = kSplit ? BV / 2 : BV;       // columns per accumulator
    const int cb = kSplit ? wg * (BV / 2) : 0;
    float acc[NA][4], accq[kSplit ? NA : 1][4];
#pragma unroll
    for (int j = 0; j < NA; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
#pragma unroll
    for (int j = 0; j < (kSplit ? NA : 1); ++j) accq[j][0] = accq[j][1] = accq[j][2] = accq[j][3] = 0.f;
    wg_fence_acc(acc);
    if constexpr (kSplit) wg_fence_acc(accq);
    wg_fence();
    const bf16* sBh = sSh + (cb >> 3) * PK * 64;  // S^T rows cb.. (core layout: 8 rows = PK core matrices)
    const bf16* sBl = sSl + (cb >> 3) * PK * 64;
    const bf16* sWs = reinterpret_cast<const bf16*>(smem + S::sW + stg * S::tileC);
    const bf16* sQs = reinterpret_cast<const bf16*>(smem + S::sQg + stg * S::tileC);
    const bf16* sA = wg == 0 ? sWs : sQs;  // kSplit = false: this warpgroup's product's tile
#pragma unroll
    for (int s = 0; s < KP / 16; ++s) {
      if (skip & kSkipWgmma) break;
      const std::uint64_t dbh = wg_desc(sBh + 128 * s, 128, PK * 128), dbl = wg_desc(sBl + 128 * s, 128, PK * 128);
      if constexpr (kSplit) {
        const std::uint64_t dw = wg_desc(sWs + 128 * s, 128, PK * 128), dq = wg_desc(sQs + 128 * s, 128, PK * 128);
        wgmma_bf16<NC>(acc, dw, dbh);
        wgmma_bf16<NC>(accq, dq, dbh);
        wgmma_bf16<NC>(acc, dw, dbl);
        wgmma_bf16<NC>(accq, dq, dbl);
      } else {
        const std::uint64_t da = wg_desc(sA + 128 * s, 128, PK * 128);
        wgmma_bf16<NC>(acc, da, dbh);
        wgmma_bf16<NC>(acc, da, dbl);
      }
    }
    wg_commit();
    // The next chunk's tiles (into the other stage) while the tensor cores work: a warpgroup's wgmma
    // starts only when its four warps have issued it, so issuing the ~19 cp.async per thread first
    // (v2_state's order) put the whole load issue before the products. Measured: no gain (call 4: 0.593 ms
    // against 0.582 with v2_state's order in calls 2-3).
    if (ci + 1 < nchunks && (!(skip & kSkipLoads) || ci + 1 < 2)) issue(ci + 1);
    wg_wait0();
    wg_fence_acc(acc);
    if constexpr (kSplit) wg_fence_acc(accq);

    const int i = 16 * wq + g8;
    if ((kSplit || wg == 0) && !(skip & kSkipVnew)) {  // v_new = u - w_aux S (bf16 to sVn), columns cb..
#pragma unroll
      for (int nt = 0; nt < NA; ++nt) {
        const int col = cb + 8 * nt + 2 * t4;
        const float2 u01 = *reinterpret_cast<const float2*>(sU + i * LDU + col);
        const float2 u23 = *reinterpret_cast<const float2*>(sU + (i + 8) * LDU + col);
        acc[nt][0] = u01.x - acc[nt][0], acc[nt][1] = u01.y - acc[nt][1];
        acc[nt][2] = u23.x - acc[nt][2], acc[nt][3] = u23.y - acc[nt][3];
        *reinterpret_cast<unsigned*>(sVn + i * LDV + col) = pack_bf16(acc[nt][0], acc[nt][1]);
        *reinterpret_cast<unsigned*>(sVn + (i + 8) * LDV + col) = pack_bf16(acc[nt][2], acc[nt][3]);
      }
    }
    __syncthreads();  // v_new complete in sVn; every wgmma read of S^T done (each warpgroup waited)

    // o = q~ S + P v_new (P lower triangular), then store o (rows < Lc, columns < V).
    auto out = [&](float (&oc)[NA][4]) {
#pragma unroll
      for (int k0 = 0; k0 < 64; k0 += 16) {
        if (k0 > 16 * wq) break;
        unsigned a[4];
        load_a(a, sP, 72, 16 * wq, k0);
        mma_acc_b(oc, a, sVn, LDV, k0, cb);
        if (NA % 2) {  // one n-tile (BV = 16 split): as v2_state's odd n-tile
          unsigned b[4];
          const int nn = cb + 8 * (NA - 1), sel = (nn >> 3) & 1;
          load_b_kn(b, sVn, LDV, k0, nn & ~15);
          mma_bf16(oc[NA - 1], a, sel ? b[2] : b[0], sel ? b[3] : b[1]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < NA; ++nt)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int ii = i + 8 * hh, col = v0 + cb + 8 * nt + 2 * t4;
          if (ii >= Lc) continue;
          bf16* dst = o + (std::int64_t(tok0 + ii) * H + h) * V + col;
          if (col + 1 < V && (V % 2) == 0) {
            *reinterpret_cast<unsigned*>(dst) = pack_bf16(oc[nt][2 * hh], oc[nt][2 * hh + 1]);
          } else {
            if (col < V) dst[0] = __float2bfloat16(oc[nt][2 * hh]);
            if (col + 1 < V) dst[1] = __float2bfloat16(oc[nt][2 * hh + 1]);
          }
        }
    };
    if (!(skip & kSkipOut)) {
      if constexpr (kSplit) out(accq);
      else if (wg == 1) out(acc);
    }

    // S = Diag(exp(G_C)) S + Kd^T v_new (rows 16 sm.. of S, n-tiles sn0..), as v2_state.
    const bf16* sKd = reinterpret_cast<const bf16*>(smem + S::sKd + stg * S::tileK);
    state_frag_decay(st, sgC, sm, g8);
#pragma unroll
    for (int k0 = 0; k0 < 64; k0 += 16) {
      if (skip & kSkipUpdate) break;
      unsigned a[4];
      load_a_t(a, sKd, LDK, 16 * sm, k0);
      mma_acc_b(st, a, sVn, LDV, k0, 8 * sn0);
      if (SNT % 2) {
        unsigned b[4];
        const int nn = 8 * sn0, sel = (nn >> 3) & 1;
        load_b_kn(b, sVn, LDV, k0, nn & ~15);
        mma_bf16(st[SNT - 1], a, sel ? b[2] : b[0], sel ? b[3] : b[1]);
      }
    }
    // Read by the next chunk's wgmma after its first barrier; this chunk's wgmma reads of S^T all
    // completed before the barrier above (each warpgroup waited for its group), as in v2_state.
    if (!(skip & kSkipStore)) store_state_core_hilo<KP>(st, sSh, sSl, sm, sn0, g8, t4);
  }
  if (p.ht) state_frag_store(st, p.ht, sbase, K, V, sm, sn0, v0, g8, t4);
}

/// LINATTN_V8_SKIP's bits (0 when unset); a nonzero value makes rung 8's outputs wrong, so the first
/// launch with one says so on stderr.
int v8_skip_knob() {
  const char* env = std::getenv("LINATTN_V8_SKIP");
  const int skip = env ? std::atoi(env) : 0;
  static bool warned = false;
  if (skip != 0 && !warned) {
    warned = true;
    std::fprintf(stderr, "linattn: LINATTN_V8_SKIP=%d is set: forward rung 8 leaves parts of its state kernel out "
                 "(a benchmark knob); its outputs are wrong\n", skip);
  }
  return skip;
}

template <int KP, int BV>
void launch_state(const Call& c) {
  constexpr int bytes = V8Smem<KP, BV>::bytes;
  const char* split_env = std::getenv("LINATTN_V8_SPLIT");
  const bool split = split_env && std::atoi(split_env) == 1;
  const int skip = v8_skip_knob();
  // v8_state's knob instantiations only when a knob is set (kKnobs): the default kernel has no knob code.
  auto kern = split ? (skip ? v8_state<KP, BV, true, true> : v8_state<KP, BV, true, false>)
                    : (skip ? v8_state<KP, BV, false, true> : v8_state<KP, BV, false, false>);
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  const int nvt = (c.p.V + BV - 1) / BV;
  // LINATTN_STATE_GRID=flat as in v2_state; rung 7's other state-kernel knobs (LINATTN_STATE_OCC2, _STAGES,
  // _BULK, _PREFETCH) do not apply to this kernel.
  const char* grid = std::getenv("LINATTN_STATE_GRID");
  const bool flat = grid && std::string(grid) == "flat";
  kern<<<flat ? dim3(unsigned(c.p.N) * c.p.H * nvt) : dim3(c.p.N, c.p.H, nvt), kThreads, bytes, c.stream>>>(c.p,
                                                                                                          skip);
  LINATTN_CUDA_CHECK(cudaGetLastError());
}

template <int KP>
void launch_state_kp(const Call& c) {
  const int bv = tc_pick_bv(c.p);  // v2_state's tile width (BV changes no value: each column is independent)
  if (bv == 64) return launch_state<KP, 64>(c);
  if (bv == 32) return launch_state<KP, 32>(c);
  return launch_state<KP, 16>(c);
}

}  // namespace

std::size_t v8_workspace_bytes(const KParams& p) { return v7_workspace_bytes(p); }

void v8_launch(Call c) {
  if (!v7_in_range(c)) return v7_launch(c);  // rung 4 where it takes the call, else rung 1
  const int KP = tc_pick_kp(c.p.K);
  v7_intra_launch(c, KP);
  if (skip_kernel("state")) return;
  if (KP == 64) return launch_state_kp<64>(c);
  return launch_state_kp<128>(c);
}

}  // namespace linattn::cuda::detail
