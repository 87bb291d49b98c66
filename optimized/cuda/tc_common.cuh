// optimized/cuda/tc_common.cuh -- what the tensor-core rungs (v2, v3, v4, v5 and the backward's
// rung 3) share: the chunk-major workspace written by their intra-chunk kernels and read by the
// sequential state kernel of v2; device helpers for their common pieces (state fragments, chunk-tile
// cp.async loads, the recurring mma loops); and (namespace tci) v3's intra-chunk kernel as a template
// whose per-channel-gate computation of L and P is a policy class, so that v4 (v4_levels.cu) changes
// only that part.
#pragma once

#include <cstdint>
#include <type_traits>

#include "optimized/cuda/mma.cuh"
#include "optimized/cuda/versions.cuh"

namespace linattn::cuda::detail {

using bf16 = __nv_bfloat16;
constexpr int C = 64;
constexpr int kThreads = 256;
constexpr float kLog2e = 1.4426950408889634f;

__host__ __device__ constexpr int ldk(int KP) { return KP + 8; }
__host__ __device__ inline int vpad(int V) { return (V + 63) / 64 * 64; }

/// Chunk-major workspace of one call; (chunk c, head h) owns block cw = c * H + h of each array.
struct V2Ws {
  bf16* w;    // [cw][64][KP]  w_aux
  bf16* qg;   // [cw][64][KP]  scale * q . exp(G)
  bf16* kd;   // [cw][64][KP]  k . exp(G_C - G)
  bf16* P;    // [cw][64][64]  intra-chunk read (lower triangle incl. diagonal)
  float* u;   // [cw][64][VP]  u = A u0
  float* gC;  // [cw][KP]      exp(G_C)
};

__host__ __device__ inline V2Ws v2_ws(const KParams& p, int KP) {
  const std::int64_t blocks = std::int64_t(p.num_chunks) * p.H;
  V2Ws w;
  char* base = static_cast<char*>(p.ws);
  w.w = reinterpret_cast<bf16*>(base);
  w.qg = w.w + blocks * C * KP;
  w.kd = w.qg + blocks * C * KP;
  w.P = w.kd + blocks * C * KP;
  w.u = reinterpret_cast<float*>(w.P + blocks * C * C);
  w.gC = w.u + blocks * C * vpad(p.V);
  return w;
}

/// Forward rung 6 (v6_lean.cu): the cumulative log2 decay G_i of every row of every chunk, [cw][64]
/// float32, in a region of its own after V2Ws's arrays (tc_lean_workspace_bytes).
__host__ __device__ inline float* lean_g(const KParams& p, int KP) {
  return v2_ws(p, KP).gC + std::int64_t(p.num_chunks) * p.H * KP;
}

// ---------------------------------------------------------------------------------------------
// A K x V state (S in v2_state, dS' in bwd_v3_async.cu's bwd3_dstates) held as mma accumulator
// fragments st[SNT][4]: the warp owns m-tile sm (rows 16 sm + g8 + 8 (e >> 1)) and n-tiles
// sn0 .. sn0 + SNT of the BV value columns from v0 (column v0 + 8 (sn0 + nt) + 2 t4 + (e & 1)).
// ---------------------------------------------------------------------------------------------

/// st = src[base + r V + col] for r < K, col < V; 0 elsewhere and when src is null (src by
/// reference, so that a kernel parameter is read where the callers read it before: same PTX).
template <int SNT>
__device__ __forceinline__ void state_frag_load(float (&st)[SNT][4], const float* const& src, std::int64_t base,
                                                int K, int V, int sm, int sn0, int v0, int g8, int t4) {
#pragma unroll
  for (int nt = 0; nt < SNT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * sm + g8 + (e >> 1) * 8, col = v0 + 8 * (sn0 + nt) + 2 * t4 + (e & 1);
      st[nt][e] = (src && r < K && col < V) ? src[base + std::int64_t(r) * V + col] : 0.f;
    }
}

/// Two adjacent float32 values of an mma fragment (columns col, col + 1 of one row; the second only
/// if col + 1 < V) to d = &row[col]: one 8-byte store when both are in range and d is 8-byte aligned
/// (the fragments' usual case), else one or two 4-byte stores. Same values either way. Two 4-byte
/// stores per lane leave each warp instruction half of the 32-byte sectors it touches (ncu's
/// "uncoalesced global accesses"); the backward's states and state-gradient kernels write every
/// chunk's K x V state this way (537 MB each at B=8 T=4096 H=16 K=V=128).
__device__ __forceinline__ void st_pair(float* d, float x0, float x1, int col, int V) {
  if (col + 1 < V && (reinterpret_cast<std::uintptr_t>(d) & 7) == 0) {
    __stwb(reinterpret_cast<float2*>(d), make_float2(x0, x1));
  } else {
    if (col < V) d[0] = x0;
    if (col + 1 < V) d[1] = x1;
  }
}

/// dst[base + r V + col] = st for r < K, col < V, one 4-byte store per element: the final state and
/// dh0 (once per block).
template <int SNT>
__device__ __forceinline__ void state_frag_store(const float (&st)[SNT][4], float* dst, std::int64_t base,
                                                 int K, int V, int sm, int sn0, int v0, int g8, int t4) {
#pragma unroll
  for (int nt = 0; nt < SNT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * sm + g8 + (e >> 1) * 8, col = v0 + 8 * (sn0 + nt) + 2 * t4 + (e & 1);
      if (r < K && col < V) dst[base + std::int64_t(r) * V + col] = st[nt][e];
    }
}

/// state_frag_store by pairs (st_pair: 8-byte stores where aligned): the backward's per-chunk S and dS'
/// (session 7 call 5: the states kernel 0.673 -> 0.486 ms, the state-gradient kernel 0.851 -> 0.658
/// at B=8 T=4096 H=16 K=V=128, with v_new / dv_new stored the same way). Not used for the forward's
/// final state: there the change bought nothing (once per block) and moved ptxas' register
/// allocation of the forward state kernel (170 -> 245 registers at 64 value columns) with the B=1
/// T=32768 state kernel 3% slower in that call.
template <int SNT>
__device__ __forceinline__ void state_frag_store_pairs(const float (&st)[SNT][4], float* dst, int K, int V, int sm,
                                                       int sn0, int v0, int g8, int t4) {
#pragma unroll
  for (int nt = 0; nt < SNT; ++nt)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int r = 16 * sm + g8 + hh * 8, col = v0 + 8 * (sn0 + nt) + 2 * t4;
      if (r < K) st_pair(dst + std::int64_t(r) * V + col, st[nt][2 * hh], st[nt][2 * hh + 1], col, V);
    }
}

/// Rows r < K of a state's bf16 hi tile sSh ([KP][LDV] in shared memory, columns v0 .. v0 + BV - 1 of the
/// state) to dst[r V + v0 + c] for v0 + c < V (backward rung 19: dS' for G1', which multiplies only its hi part; rung 28:
/// the state kernels' S, kSbf):
/// one 16-byte store per 8-column octet where V % 8 == 0 and dst is 16-byte aligned (whole 128- / 64-byte row
/// segments per warp instruction, where the fragments' 4-byte pairs would cover 16 bytes of each of 8 rows),
/// else item by item. The caller's barriers order it after the tile's writes and before its next ones.
template <int KP, int BV, int LDV>
__device__ __forceinline__ void state_hi_store_rows(const bf16* sSh, bf16* dst, int K, int V, int v0, int tid) {
  constexpr int OPR = BV / 8;  // octets per row
  static_assert(BV % 8 == 0 && LDV % 8 == 0, "16-byte octets in shared memory");
  const bool wide = V % 8 == 0 && (reinterpret_cast<std::uintptr_t>(dst) & 15) == 0;
  for (int idx = tid; idx < KP * OPR; idx += kThreads) {
    const int r = idx / OPR, c8 = (idx % OPR) * 8, col = v0 + c8;
    if (r >= K || col >= V) continue;
    bf16* d = dst + std::int64_t(r) * V + col;
    const bf16* src = sSh + r * LDV + c8;
    if (wide) {
      __stwb(reinterpret_cast<uint4*>(d), *reinterpret_cast<const uint4*>(src));
    } else {
      for (int e = 0; e < 8 && col + e < V; ++e) d[e] = src[e];
    }
  }
}

/// st = Diag(exp(G_C)) st: row r of the state times gC[r] (gC: the chunk's exp(G_C) in shared memory).
template <int SNT>
__device__ __forceinline__ void state_frag_decay(float (&st)[SNT][4], const float* gC, int sm, int g8) {
#pragma unroll
  for (int nt = 0; nt < SNT; ++nt) {
    const float g0 = gC[16 * sm + g8], g1 = gC[16 * sm + g8 + 8];
    st[nt][0] *= g0, st[nt][1] *= g0, st[nt][2] *= g1, st[nt][3] *= g1;
  }
}

/// acc += a B over one 16-deep k step (k0) for the NT n-tiles from column n0 (NT / 2 pairs; an odd
/// last n-tile is the caller's): B bf16 row-major [k][ldb] in shared memory (load_b_kn).
template <int NT>
__device__ __forceinline__ void mma_acc_b(float (&acc)[NT][4], const unsigned (&a)[4], const bf16* B, int ldb, int k0,
                                          int n0) {
#pragma unroll
  for (int np = 0; np < NT / 2; ++np) {
    unsigned b[4];
    load_b_kn(b, B, ldb, k0, n0 + 16 * np);
    mma_bf16(acc[2 * np], a, b[0], b[1]);
    mma_bf16(acc[2 * np + 1], a, b[2], b[3]);
  }
}

/// acc += a1 B1 + a2 B2 over one 16-deep k step (k0) for the NT n-tiles from column n0: B1, B2 bf16
/// row-major [k][ldb] in shared memory (load_b_kn), products in the order a1 B1 then a2 B2 per
/// 16-column pair (with a1 = a2 and B1, B2 the hi and lo parts of one matrix: a times that matrix).
template <int NT>
__device__ __forceinline__ void mma_acc_two_b(float (&acc)[NT][4], const unsigned (&a1)[4], const bf16* B1,
                                              const unsigned (&a2)[4], const bf16* B2, int ldb, int k0, int n0) {
#pragma unroll
  for (int np = 0; np < NT / 2; ++np) {
    unsigned b1[4], b2[4];
    load_b_kn(b1, B1, ldb, k0, n0 + 16 * np);
    load_b_kn(b2, B2, ldb, k0, n0 + 16 * np);
    mma_bf16(acc[2 * np], a1, b1[0], b1[1]);
    mma_bf16(acc[2 * np + 1], a1, b1[2], b1[3]);
    mma_bf16(acc[2 * np], a2, b2[0], b2[1]);
    mma_bf16(acc[2 * np + 1], a2, b2[2], b2[3]);
  }
}

/// kk = K K^T and qk = Q K^T for the warp's rows 16 mi.. and columns 32 nh.. (4 n-tiles) of a
/// chunk, K and Q bf16 [64][ldk] in shared memory with KP channels (F3 without the gates, the
/// scalar-gate and no-gate L and P of the intra-chunk kernels).
template <int KP>
__device__ __forceinline__ void mma_kk_qk(float (&kk)[4][4], float (&qk)[4][4], const bf16* sK, const bf16* sQ,
                                          int ldk, int mi, int nh) {
#pragma unroll
  for (int k0 = 0; k0 < KP; k0 += 16) {
    unsigned ak[4], aq[4], b[4];
    load_a(ak, sK, ldk, 16 * mi, k0);
    load_a(aq, sQ, ldk, 16 * mi, k0);
#pragma unroll
    for (int np = 0; np < 2; ++np) {
      load_b_nk(b, sK, ldk, 32 * nh + 16 * np, k0);
      mma_bf16(kk[2 * np], ak, b[0], b[1]);
      mma_bf16(kk[2 * np + 1], ak, b[2], b[3]);
      mma_bf16(qk[2 * np], aq, b[0], b[1]);
      mma_bf16(qk[2 * np + 1], aq, b[2], b[3]);
    }
  }
}

/// acc += Ah B + Al B (+ Ah Bl when kBLo): the products of the intra-chunk kernels with
/// A = (I + L)^-1 (lower triangular 64 x 64, bf16 hi Ah + lo Al, row stride 72) for the warp's rows
/// 16 mi.. and NT n-tiles from column nb of B (and its lo part Bl), bf16 [64][ldb] (w_aux = A E:
/// B = E; u = A u0: B, Bl = u0 hi, lo; the Al Bl term is below bf16 precision and left out).
template <int NT, bool kBLo>
__device__ __forceinline__ void mma_lower_a_hilo(float (&acc)[NT][4], const bf16* sAh, const bf16* sAl, const bf16* B,
                                                 const bf16* Bl, int ldb, int mi, int nb) {
#pragma unroll
  for (int k0 = 0; k0 < 64; k0 += 16) {
    if (k0 > 16 * mi) break;  // A is lower triangular
    unsigned ah[4], al[4], b[4], bl[4];
    load_a(ah, sAh, 72, 16 * mi, k0);
    load_a(al, sAl, 72, 16 * mi, k0);
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
      load_b_kn(b, B, ldb, k0, nb + 16 * np);
      if (kBLo) load_b_kn(bl, Bl, ldb, k0, nb + 16 * np);
      mma_bf16(acc[2 * np], ah, b[0], b[1]);
      mma_bf16(acc[2 * np + 1], ah, b[2], b[3]);
      mma_bf16(acc[2 * np], al, b[0], b[1]);
      mma_bf16(acc[2 * np + 1], al, b[2], b[3]);
      if (kBLo) {
        mma_bf16(acc[2 * np], ah, bl[0], bl[1]);
        mma_bf16(acc[2 * np + 1], ah, bl[2], bl[3]);
      }
    }
  }
}

/// The warp's NT accumulator n-tiles (rows 16 mi + g8 and + 8, columns j0 + 8 nt + 2 t4 and + 1) as
/// bf16 pairs into dst (row stride ld).
template <int NT>
__device__ __forceinline__ void store_frag_bf16(const float (&acc)[NT][4], bf16* dst, int ld, int mi, int j0, int g8,
                                                int t4) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int i = 16 * mi + g8, j = j0 + 8 * nt + 2 * t4;
    *reinterpret_cast<unsigned*>(dst + i * ld + j) = pack_bf16(acc[nt][0], acc[nt][1]);
    *reinterpret_cast<unsigned*>(dst + (i + 8) * ld + j) = pack_bf16(acc[nt][2], acc[nt][3]);
  }
}

/// A (float32 [64][LDA]) as bf16 hi = round(A) into sAh and lo = round(A - hi) into sAl ([64][72]), both rounded
/// to nearest: 16 bits of A reach the tensor cores (all kThreads threads). LDA = 65 (rungs 2 and 4) goes one
/// float at a time; a row stride that keeps rows 16-byte aligned (forward rung 7's LDF = 72) goes four columns a
/// step, 16-byte loads and 8-byte stores, the same values (session 16: fewer instructions in rung 7's intra kernel).
template <int LDA = 65>
__device__ __forceinline__ void split_a_hilo(const float* sA, bf16* sAh, bf16* sAl, int tid) {
  if constexpr (LDA % 4 == 0) {
    for (int idx = tid; idx < 64 * 16; idx += kThreads) {
      const int i = idx >> 4, j = (idx & 15) * 4;
      const float4 a = *reinterpret_cast<const float4*>(sA + i * LDA + j);
      const __nv_bfloat162 h01 = __floats2bfloat162_rn(a.x, a.y), h23 = __floats2bfloat162_rn(a.z, a.w);
      const __nv_bfloat162 l01 = __floats2bfloat162_rn(a.x - __low2float(h01), a.y - __high2float(h01));
      const __nv_bfloat162 l23 = __floats2bfloat162_rn(a.z - __low2float(h23), a.w - __high2float(h23));
      *reinterpret_cast<uint2*>(sAh + i * 72 + j) =
          make_uint2(*reinterpret_cast<const unsigned*>(&h01), *reinterpret_cast<const unsigned*>(&h23));
      *reinterpret_cast<uint2*>(sAl + i * 72 + j) =
          make_uint2(*reinterpret_cast<const unsigned*>(&l01), *reinterpret_cast<const unsigned*>(&l23));
    }
  } else {
    for (int idx = tid; idx < 64 * 64; idx += kThreads) {
      const int i = idx >> 6, j = idx & 63;
      const float a = sA[i * LDA + j];
      const bf16 hi = __float2bfloat16(a);
      sAh[i * 72 + j] = hi;
      sAl[i * 72 + j] = __float2bfloat16(a - __bfloat162float(hi));
    }
  }
}

/// cp.async (not committed) of chunk-head block cw's w_aux, Qg (when kQg) and Kd tiles ([64][KP]
/// in the workspace) into shared dW, dQ, dK ([64][ldk(KP)]).
template <int KP, bool kQg>
__device__ __forceinline__ void cp_async_wqk_tiles(bf16* dW, bf16* dQ, bf16* dK, const V2Ws& ws, std::int64_t cw,
                                                   int tid) {
  // A fixed 16-byte column per thread, rows RS apart: one offset, constant steps (session 16's pattern).
  constexpr int PK = KP / 8, LDK = ldk(KP), RS = kThreads / PK;
  static_assert(kThreads % PK == 0 && 64 % RS == 0, "a fixed column per thread, whole sweeps");
  const int d8 = (tid % PK) * 8, i0 = tid / PK;
  const std::int64_t src0 = (cw * 64 + i0) * KP + d8;
#pragma unroll
  for (int it = 0; it < 64 / RS; ++it) {
    const int i = i0 + it * RS;
    const std::int64_t src = src0 + it * RS * KP;
    cp_async16(dW + i * LDK + d8, ws.w + src);
    if (kQg) cp_async16(dQ + i * LDK + d8, ws.qg + src);
    cp_async16(dK + i * LDK + d8, ws.kd + src);
  }
}

/// cp.async (not committed) of block cw's P tile ([64][64]) into shared dP ([64][72]).
__device__ __forceinline__ void cp_async_p_tile(bf16* dP, const bf16* P, std::int64_t cw, int tid) {
  constexpr int RS = kThreads / 8;  // a fixed 16-byte column per thread, rows RS apart (constant steps)
  static_assert(kThreads % 8 == 0 && 64 % RS == 0, "whole sweeps");
  const int j8 = (tid & 7) * 8, i0 = tid >> 3;
  const bf16* src = P + (cw * 64 + i0) * 64 + j8;
#pragma unroll
  for (int it = 0; it < 64 / RS; ++it) cp_async16(dP + (i0 + it * RS) * 72 + j8, src + it * RS * 64);
}

/// cp.async (not committed) of block cw's exp(G_C) ([KP] float32) into shared dG.
template <int KP>
__device__ __forceinline__ void cp_async_gc(float* dG, const float* gC, std::int64_t cw, int tid) {
  for (int idx = tid; idx < KP / 4; idx += kThreads) cp_async16(dG + idx * 4, gC + cw * KP + idx * 4);
}

/// The fragments to shared memory as bf16 hi = bf16(st) in sSh and lo = bf16(st - hi) in sSl (both
/// [KP][LDV], columns relative to v0), the operand pair of the hi + lo products.
template <int LDV, int SNT>
__device__ __forceinline__ void state_frag_store_hilo(const float (&st)[SNT][4], bf16* sSh, bf16* sSl,
                                                      int sm, int sn0, int g8, int t4) {
#pragma unroll
  for (int nt = 0; nt < SNT; ++nt) {
    const int r = 16 * sm + g8, col = 8 * (sn0 + nt) + 2 * t4;
    const unsigned h01 = pack_bf16(st[nt][0], st[nt][1]), h23 = pack_bf16(st[nt][2], st[nt][3]);
    const __nv_bfloat162 a = *reinterpret_cast<const __nv_bfloat162*>(&h01);
    const __nv_bfloat162 b = *reinterpret_cast<const __nv_bfloat162*>(&h23);
    *reinterpret_cast<unsigned*>(sSh + r * LDV + col) = h01;
    *reinterpret_cast<unsigned*>(sSh + (r + 8) * LDV + col) = h23;
    *reinterpret_cast<unsigned*>(sSl + r * LDV + col) =
        pack_bf16(st[nt][0] - __low2float(a), st[nt][1] - __high2float(a));
    *reinterpret_cast<unsigned*>(sSl + (r + 8) * LDV + col) =
        pack_bf16(st[nt][2] - __low2float(b), st[nt][3] - __high2float(b));
  }
}

/// state_frag_store_hilo's hi tile alone: bf16_rn of the warp's state fragments into sSh (backward rung 29's dstates,
/// whose B1 reads no lo part).
template <int LDV, int SNT>
__device__ __forceinline__ void state_frag_store_hi(const float (&st)[SNT][4], bf16* sSh, int sm, int sn0, int g8,
                                                    int t4) {
#pragma unroll
  for (int nt = 0; nt < SNT; ++nt) {
    const int r = 16 * sm + g8, col = 8 * (sn0 + nt) + 2 * t4;
    *reinterpret_cast<unsigned*>(sSh + r * LDV + col) = pack_bf16(st[nt][0], st[nt][1]);
    *reinterpret_cast<unsigned*>(sSh + (r + 8) * LDV + col) = pack_bf16(st[nt][2], st[nt][3]);
  }
}

/// Benchmark knob: with LINATTN_TC_ONLY=intra (or state) set, only that kernel is launched, so the
/// benchmark can time the two kernels apart (the results are then wrong). Unset: both run.
bool skip_kernel(const char* which);
/// The sequential state kernel of v2 (used by v3 too); KP = 64 or 128.
void tc_state_launch(const Call& c, int KP);
/// The state kernel's value-column tile (16, 32 or 64; LINATTN_V2_BV overrides), as v2_state picks it.
int tc_pick_bv(const KParams& p);
inline int tc_pick_kp(int K) { return K <= 64 ? 64 : 128; }

/// Attribute `a` of the current device (cudaDeviceGetAttribute; defined in v10_pipeline.cu): e.g. its SM count for
/// rung 10's pipelining and rung 24's dstates width (bwd_v3_async.cu's dstates_bv).
int device_attr(cudaDeviceAttr a);
std::size_t tc_workspace_bytes(const KParams& p);
// tc_lean_workspace_bytes and tc_state_lean_launch (forward rung 6's lean workspace and state kernel):
// versions.cuh, which chunk_cuda.cu reads too.
/// Forward rung 10's state kernel (v2_state_pdl: v2_state's default kernel that signals
/// griddepcontrol.launch_dependents first); KP = 64 or 128, BV as tc_pick_bv.
void tc_state_pdl_launch(const Call& c, int KP);
/// Dynamic shared memory of v2_state's default kernel (two stages) at KP and BV (16, 32 or 64).
std::size_t tc_state_smem_bytes(int KP, int BV);
/// Registers per thread of v2_state_pdl at KP and 16 columns (cudaFuncGetAttributes), for rung 10.
int tc_state_pdl_regs(int KP);
/// Forward rung 10's cluster state kernel (v2_state_mc; session 17): 16 columns, clusters of `cl` value tiles
/// of one head sharing each chunk's tiles by multicast tensor copies. Same outputs as tc_state_pdl_launch bit for
/// bit. False (nothing launched) if the driver cannot encode the tensor maps.
bool tc_state_mc_launch(const Call& c, int KP, int cl);
/// cudaOccupancyMaxActiveClusters of v2_state_mc at KP with clusters of `cl` (0 if the query fails).
int tc_state_mc_max_clusters(int KP, int cl);
/// Dynamic shared memory and registers per thread of v2_state_mc at KP.
std::size_t tc_state_mc_smem_bytes(int KP);
int tc_state_mc_regs(int KP);


// ---------------------------------------------------------------------------------------------
// tci: the intra-chunk kernel of v3_async.cu (its algorithm and comments are there) with one hook.
// For per-channel gates (KDA, GDN2) Diag::lp<KP, GDN2>(Tiles, scale, p) fills L (strictly lower,
// float32, zero-initialised, times beta_i for KDA) and P (lower with the diagonal, bf16, times
// scale) of the chunk; it may use sE, sX, sKt (Diag::kt_rows rows) and sAh / sAl as scratch, and the
// kernel synchronises after it. Every other phase is v3's.
// ---------------------------------------------------------------------------------------------
namespace tci {

struct Tiles {
  bf16 *sK, *sQ, *sE, *sX, *sKt;
  float *sL;
  bf16 *sP, *sAh, *sAl;
  float *sBeta, *sG, *sB;
};

template <int KP, bool CH, bool GDN2, int KT_ROWS>
struct Smem {
  static constexpr int LDK = ldk(KP);
  static constexpr int tile = 64 * LDK * 2;
  static constexpr int sK = 0;
  static constexpr int sQ = sK + tile;
  static constexpr int sE = sQ + tile;                 // also sT (phase 4) and the u0 hi tile
  static constexpr int sX = sE + tile;                 // q tilde (per-channel gates only)
  static constexpr int sKt = sX + (CH ? tile : 0);     // [KT_ROWS][LDK] (per-channel gates only)
  static constexpr int sL = sKt + (CH ? KT_ROWS * LDK * 2 : 0);
  static constexpr int sA = sL + 64 * 65 * 4;
  static constexpr int sAh = sA + 64 * 65 * 4;
  static constexpr int sAl = sAh + 64 * 72 * 2;
  static constexpr int sP = sAl + 64 * 72 * 2;
  static constexpr int sBeta = sP + 64 * 72 * 2;
  static constexpr int sTot = sBeta + 64 * 4;          // [4][KP] segment totals of the cumsum
  static constexpr int sG = sTot + (CH ? 4 * KP * 4 : 0);
  static constexpr int sB = sG + (CH ? 64 * KP * 4 : 64 * 4);
  static constexpr int bytes = sB + (GDN2 ? 64 * KP * 4 : 0);
  static_assert(3 * 16 * 17 * 4 <= tile && 8 * 16 * 9 * 4 <= tile, "sT must fit in sE");
};

__device__ __forceinline__ float to_f(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ void unpack8(const uint4& v, float (&f)[8]) {
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
#pragma unroll
  for (int e = 0; e < 4; ++e) f[2 * e] = __low2float(h[e]), f[2 * e + 1] = __high2float(h[e]);
}
/// A 16-byte store to global memory (one st.global.v4). Written as `*reinterpret_cast<uint4*>(g) =
/// pack8(..)`, nvcc stores the register-built vector member by member (four st.global.u32 in the PTX:
/// it does not vectorize a global store whose alignment it cannot prove), and ncu measured those
/// stores of phase 5 at 75% excess L2 sectors, 25 of the intra kernel's 30 M excess sectors (session 7
/// call 4). Same bytes, same values: every output is unchanged.
__device__ __forceinline__ void st_global16(void* g, uint4 v) { __stwb(reinterpret_cast<uint4*>(g), v); }
__device__ __forceinline__ void st_global16(float* g, float4 v) { __stwb(reinterpret_cast<float4*>(g), v); }
__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint4 v;
  v.x = pack_bf16(f[0], f[1]), v.y = pack_bf16(f[2], f[3]), v.z = pack_bf16(f[4], f[5]), v.w = pack_bf16(f[6], f[7]);
  return v;
}
__device__ __forceinline__ void ld8f(const float* s, float (&f)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(s), b = *reinterpret_cast<const float4*>(s + 4);
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
/// Channels c0..c0+3 and c1..c1+3 of one shared row: 8-byte (bf16) and 16-byte (float) reads, so
/// consecutive lanes with consecutive c0 read one contiguous span (no bank conflict); f[0..3] from
/// c0, f[4..7] from c1. st4x2_bf16 stores them the same way (rung 4's operand build).
__device__ __forceinline__ void ld4x2_bf16(const bf16* row, int c0, int c1, float (&f)[8]) {
  const uint2 a = *reinterpret_cast<const uint2*>(row + c0), b = *reinterpret_cast<const uint2*>(row + c1);
  const __nv_bfloat162* ha = reinterpret_cast<const __nv_bfloat162*>(&a);
  const __nv_bfloat162* hb = reinterpret_cast<const __nv_bfloat162*>(&b);
  f[0] = __low2float(ha[0]), f[1] = __high2float(ha[0]), f[2] = __low2float(ha[1]), f[3] = __high2float(ha[1]);
  f[4] = __low2float(hb[0]), f[5] = __high2float(hb[0]), f[6] = __low2float(hb[1]), f[7] = __high2float(hb[1]);
}
__device__ __forceinline__ void ld4x2_f32(const float* row, int c0, int c1, float (&f)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(row + c0), b = *reinterpret_cast<const float4*>(row + c1);
  f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
}
__device__ __forceinline__ void st4x2_bf16(bf16* row, int c0, int c1, const float (&f)[8]) {
  *reinterpret_cast<uint2*>(row + c0) = make_uint2(pack_bf16(f[0], f[1]), pack_bf16(f[2], f[3]));
  *reinterpret_cast<uint2*>(row + c1) = make_uint2(pack_bf16(f[4], f[5]), pack_bf16(f[6], f[7]));
}
/// mma fragments (layouts in mma.cuh) of a float32 shared tile with leading dimension ld, each value
/// x split into bf16 hi = bf16(x) and lo = bf16(x - hi): hi + lo keeps about 16 bits of x, so three
/// products hi.hi + hi.lo + lo.hi carry a relative error near 2^-16 (float32 accumulation).
__device__ __forceinline__ void split2(float x0, float x1, unsigned& hi, unsigned& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x0, x1);
  hi = *reinterpret_cast<const unsigned*>(&h);
  lo = pack_bf16(x0 - __low2float(h), x1 - __high2float(h));
}
/// A operand: rows r0..r0+15, columns c0..c0+15.
__device__ __forceinline__ void frag_a_f32(unsigned (&hi)[4], unsigned (&lo)[4], const float* s, int ld, int r0,
                                           int c0, int g8, int t4) {
  const float* p = s + (r0 + g8) * ld + c0 + 2 * t4;
  split2(p[0], p[1], hi[0], lo[0]);
  split2(p[8 * ld], p[8 * ld + 1], hi[1], lo[1]);
  split2(p[8], p[9], hi[2], lo[2]);
  split2(p[8 * ld + 8], p[8 * ld + 9], hi[3], lo[3]);
}
/// B operand (k x n): rows (k) k0..k0+15, columns (n) n0..n0+7 of a row-major tile.
__device__ __forceinline__ void frag_b_f32(unsigned (&hi)[2], unsigned (&lo)[2], const float* s, int ld, int k0,
                                           int n0, int g8, int t4) {
  const float* p = s + (k0 + 2 * t4) * ld + n0 + g8;
  split2(p[0], p[ld], hi[0], lo[0]);
  split2(p[8 * ld], p[9 * ld], hi[1], lo[1]);
}
/// D += A B with A, B given as hi + lo (the lo . lo term dropped).
__device__ __forceinline__ void mma_hilo3(float (&d)[4], const unsigned (&ah)[4], const unsigned (&al)[4],
                                          const unsigned (&bh)[2], const unsigned (&bl)[2]) {
  mma_bf16(d, ah, bh[0], bh[1]);
  mma_bf16(d, ah, bl[0], bl[1]);
  mma_bf16(d, al, bh[0], bh[1]);
}
/// 2^x by one MUFU.EX2 (ex2.approx.ftz: results below 2^-126 flush to 0), for x <= 0 where exp2f
/// spends three more instructions on the subnormal-result path.
__device__ __forceinline__ float ex2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
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
        // Two quads; the second only where it lies inside the row (V % 8 == 4: the last group of 8
        // has 4 columns, and reading 4 more ran past the end of w on the last row: compute-sanitizer,
        // session 8 call 4, GDN2 at V = 20 with float32 gates).
        const float* wf = reinterpret_cast<const float*>(wg) + base;
        const float4 a = *reinterpret_cast<const float4*>(wf);
        t.w[s][0] = a.x, t.w[s][1] = a.y, t.w[s][2] = a.z, t.w[s][3] = a.w;
        if (col + 4 < V) {
          const float4 b = *reinterpret_cast<const float4*>(wf + 4);
          t.w[s][4] = b.x, t.w[s][5] = b.y, t.w[s][6] = b.z, t.w[s][7] = b.w;
        }
      } else {
        for (int e = 0; e < 8; ++e)
          if (col + e < V) t.w[s][e] = ld(wg + base + e);
      }
    }
  }
}

/// The intra-chunk kernel's body. kLean (forward rung 6, v6_lean.cu; gate none or scalar only):
/// phase 5 writes the chunk's cumulative log2 decays G_i (lean_g, 64 floats per (chunk, head))
/// instead of the q~ = scale q exp(G) and k~ = k exp(G_C - G) tiles; the lean state kernel reads q
/// and k from the inputs and applies those row factors itself. Everything else (w_aux, P, u,
/// exp(G_C)) is the same computation. intra (kLean = false) is the kernel of forward rungs 3-5 (and
/// of rung 6's calls that run v4), of the saving forward outside rung 7's range (v4_intra_launch_with_A; inside
/// it, since session 14, rung 7's intra kernel with A) and of the prepare of
/// backward rungs 3-10, unchanged.
template <int KP, int GATE, bool GDN2, class Tg, class Diag, bool kLean>
__device__ __forceinline__ void intra_body(const KParams& p, float* a_out) {
  static_assert(!kLean || (GATE != kGateChannel && !GDN2), "kLean: gate none or scalar (one factor per row)");
  constexpr bool CH = GATE == kGateChannel;
  using S = Smem<KP, CH, GDN2, Diag::kt_rows>;
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
      mma_kk_qk<KP>(kk, qk, sK, sQ, LDK, mi, nh);
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
    Diag::template lp<KP, GDN2>(Tiles{sK, sQ, sE, sX, sKt, sL, sP, sAh, sAl, sBeta, sG, sB}, scale, p);
  }
  __syncthreads();

  // ---- Phase 4: A = (I + L)^-1: the diagonal 16 x 16 blocks by float32 forward substitution, the
  // off-diagonal ones in float32 (v3, as v2) or on tensor cores (Diag::tc_inverse: v4 revision 3);
  // sT lives in sE, free here.
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
  if (Diag::tc_inverse) {
    // Off-diagonal blocks on tensor cores (rung 4 revision 3): level lev = I - J, one warp per
    // (block, 8-column half): T = sum_{M=J}^{I-1} L_IM A_MJ, then A_IJ = -A_II T, both as hi + lo
    // bf16 products (mma_hilo3; about 2^-16 relative, the precision split_a_hilo keeps of A anyway).
    // T goes through a warp-private 16 x 8 scratch in sT (sE) to become the second product's B.
    float* sTw = sT + warp * (16 * 9);
    for (int lev = 1; lev < 4; ++lev) {
      const int nb = 4 - lev, blk = warp >> 1;
      if (blk < nb) {
        const int I = lev + blk, J = I - lev, n0 = 16 * J + 8 * (warp & 1);
        float t[4] = {};
        for (int M = J; M < I; ++M) {
          unsigned ah[4], al[4], bh[2], bl[2];
          frag_a_f32(ah, al, sL, 65, 16 * I, 16 * M, g8, t4);
          frag_b_f32(bh, bl, sA, 65, 16 * M, n0, g8, t4);
          mma_hilo3(t, ah, al, bh, bl);
        }
        sTw[g8 * 9 + 2 * t4] = t[0], sTw[g8 * 9 + 2 * t4 + 1] = t[1];
        sTw[(g8 + 8) * 9 + 2 * t4] = t[2], sTw[(g8 + 8) * 9 + 2 * t4 + 1] = t[3];
        __syncwarp();
        float a2[4] = {};
        unsigned ah[4], al[4], bh[2], bl[2];
        frag_a_f32(ah, al, sA, 65, 16 * I, 16 * I, g8, t4);
        frag_b_f32(bh, bl, sTw, 9, 0, 0, g8, t4);
        mma_hilo3(a2, ah, al, bh, bl);
        sA[(16 * I + g8) * 65 + n0 + 2 * t4] = -a2[0], sA[(16 * I + g8) * 65 + n0 + 2 * t4 + 1] = -a2[1];
        sA[(16 * I + g8 + 8) * 65 + n0 + 2 * t4] = -a2[2], sA[(16 * I + g8 + 8) * 65 + n0 + 2 * t4 + 1] = -a2[3];
        __syncwarp();  // sTw is rewritten at the next level
      }
      __syncthreads();
    }
  } else {  // v3: off-diagonal blocks on CUDA cores, float32
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
  }
  if (a_out)  // A kept by the backward rungs' prepare (bwd_v3_front) and the saving forward (outside rung 7's
              // range since session 14: inside it rung 7's intra kernel writes A, v7_overlap.cu kA); null otherwise
    for (int idx = tid; idx < Lc * 64; idx += kThreads) a_out[row(idx >> 6) * 64 + (idx & 63)] = sA[(idx >> 6) * 65 + (idx & 63)];
  split_a_hilo(sA, sAh, sAl, tid);

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
    if (!kLean) {
      st_global16(ws.qg + (cw * 64 + i) * KP + d8, pack8(qv));
      st_global16(ws.kd + (cw * 64 + i) * KP + d8, pack8(kv));
    }
    if (i == 0) {
      float gcv[8];
#pragma unroll
      for (int t = 0; t < 8; ++t) gcv[t] = exp2f(GC[t]);
      st_global16(ws.gC + cw * KP + d8, make_float4(gcv[0], gcv[1], gcv[2], gcv[3]));
      st_global16(ws.gC + cw * KP + d8 + 4, make_float4(gcv[4], gcv[5], gcv[6], gcv[7]));
    }
  }
  for (int idx = tid; idx < 64 * 8; idx += kThreads) {
    const int i = idx >> 3, j8 = (idx & 7) * 8;
    *reinterpret_cast<uint4*>(ws.P + (cw * 64 + i) * 64 + j8) = *reinterpret_cast<const uint4*>(sP + i * 72 + j8);
  }
  if (kLean && tid < 64) lean_g(p, KP)[cw * 64 + tid] = Gs(tid);  // G_i in log2 units (0: DeltaNet)
  __syncthreads();

  // w_aux = A (e . exp(G)), staged in sQ (free now), stored with 16-byte vectors.
  {
    constexpr int NT = KP / 16;
    const int mi = warp >> 1, nb = (warp & 1) * (KP / 2);
    float acc[NT][4] = {};
    mma_lower_a_hilo<NT, false>(acc, sAh, sAl, sE, nullptr, LDK, mi, nb);
    store_frag_bf16(acc, sQ, LDK, mi, nb, g8, t4);
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
        hi[t] = to_f(__float2bfloat16(u0));
        lo[t] = u0 - hi[t];
      }
      *reinterpret_cast<uint4*>(sE + i * LDK + c8) = pack8(hi);
      *reinterpret_cast<uint4*>(sK + i * LDK + c8) = pack8(lo);
    }
    if (v0 + 64 < VP) load_vtile<GDN2, Tg>(vt, p, tok0, Lc, h, v0 + 64);
    __syncthreads();
    const int mi = warp >> 1, nb = (warp & 1) * 32;
    float acc[4][4] = {};
    mma_lower_a_hilo<4, true>(acc, sAh, sAl, sE, sK, LDK, mi, nb);
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
      const int i = 16 * mi + g8, j = v0 + nb + 8 * nt + 2 * t4;
      *reinterpret_cast<float2*>(ws.u + (cw * 64 + i) * VP + j) = make_float2(acc[nt][0], acc[nt][1]);
      *reinterpret_cast<float2*>(ws.u + (cw * 64 + i + 8) * VP + j) = make_float2(acc[nt][2], acc[nt][3]);
    }
    __syncthreads();
  }
}

template <int KP, int GATE, bool GDN2, class Tg, class Diag>
__global__ void __launch_bounds__(kThreads) intra(KParams p, float* a_out) {
  intra_body<KP, GATE, GDN2, Tg, Diag, false>(p, a_out);
}

/// Forward rung 6's intra kernel (intra_body with kLean): gate none or scalar.
template <int KP, int GATE, class Tg, class Diag>
__global__ void __launch_bounds__(kThreads) intra_lean(KParams p) {
  intra_body<KP, GATE, false, Tg, Diag, true>(p, nullptr);
}

template <int KP, int GATE, bool GDN2, class Tg, class Diag>
void launch_one(const Call& c, float* a_out) {
  constexpr int bytes = Smem<KP, GATE == kGateChannel, GDN2, Diag::kt_rows>::bytes;
  static_assert(bytes <= 227 * 1024, "shared memory");
  auto kern = intra<KP, GATE, GDN2, Tg, Diag>;
  LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  kern<<<dim3(c.p.num_chunks, c.p.H), kThreads, bytes, c.stream>>>(c.p, a_out);
  LINATTN_CUDA_CHECK(cudaGetLastError());
}

/// The intra-chunk kernel for any gate kind and gate dtype (KP = tc_pick_kp(K)); a_out as
/// v3_intra_launch_with_A (null: not written).
template <class Diag, int KP>
void launch(const Call& c, float* a_out = nullptr) {
  if (c.p.num_chunks == 0) return;
  auto go = [&](auto tg) {
    using Tg = decltype(tg);
    if (c.p.gate == kGateNone) return launch_one<KP, kGateNone, false, Tg, Diag>(c, a_out);
    if (c.p.gate == kGateScalar) return launch_one<KP, kGateScalar, false, Tg, Diag>(c, a_out);
    if (!c.p.gdn2) return launch_one<KP, kGateChannel, false, Tg, Diag>(c, a_out);
    return launch_one<KP, kGateChannel, true, Tg, Diag>(c, a_out);
  };
  if (c.gate_dtype == 0) go(float{});
  else go(bf16{});
}

/// Forward rung 6's intra kernel for gate none or scalar (KP = tc_pick_kp(K)); workspace: V2Ws plus
/// lean_g (the q~, k~ regions are left unwritten).
template <class Diag, int KP>
void launch_lean(const Call& c) {
  if (c.p.num_chunks == 0) return;
  auto go = [&](auto tg) {
    using Tg = decltype(tg);
    constexpr int bytes = Smem<KP, false, false, Diag::kt_rows>::bytes;
    auto kern = c.p.gate == kGateScalar ? intra_lean<KP, kGateScalar, Tg, Diag> : intra_lean<KP, kGateNone, Tg, Diag>;
    LINATTN_CUDA_CHECK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    kern<<<dim3(c.p.num_chunks, c.p.H), kThreads, bytes, c.stream>>>(c.p);
    LINATTN_CUDA_CHECK(cudaGetLastError());
  };
  if (c.gate_dtype == 0) go(float{});
  else go(bf16{});
}

}  // namespace tci

}  // namespace linattn::cuda::detail
