// optimized/cuda/mma.cuh -- warp-level bf16 tensor-core helpers (mma.sync m16n8k16, ldmatrix,
// cp.async) shared by the tensor-core rungs of the ladder.
//
// Fragment layouts of mma.sync.m16n8k16 (g = lane / 4, t = lane % 4):
//   A 16x16 (row-major): a0a1 = A[g][2t..2t+1], a2a3 = A[g+8][2t..], a4a5 = A[g][2t+8..], a6a7 = A[g+8][2t+8..]
//   B 16x8  (k x n):     b0b1 = B[2t..2t+1][g], b2b3 = B[2t+8..2t+9][g]
//   C 16x8  (float):     c0c1 = C[g][2t..2t+1], c2c3 = C[g+8][2t..2t+1]
// Shared-memory tiles are row-major bf16 with a leading dimension `ld` (elements) padded by 8 so
// that the eight 16-byte rows of an ldmatrix fall in different banks.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace linattn::cuda::detail {

__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldsm_x4(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(unsigned (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_u32(p)));
}

__device__ __forceinline__ void ldsm_x2_t(unsigned (&r)[2], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_u32(p)));
}

/// D += A B with bf16 operands and float accumulators.
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// A fragment (16x16 at rows r0.., cols c0..) of a row-major tile.
__device__ __forceinline__ void load_a(unsigned (&a)[4], const __nv_bfloat16* s, int ld, int r0, int c0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(a, s + (r0 + (lane & 15)) * ld + c0 + (lane >> 4) * 8);
}
/// A fragment of A = S^T, where S is a row-major tile: A(m, k) = S[k][m]; m0.., k0...
__device__ __forceinline__ void load_a_t(unsigned (&a)[4], const __nv_bfloat16* s, int ld, int m0, int k0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, rr = lane & 7;
  ldsm_x4_t(a, s + (k0 + rr + (mi >> 1) * 8) * ld + m0 + (mi & 1) * 8);
}
/// B fragments of two n-tiles (n0.. and n0+8..) for k0..k0+15, B stored transposed (row n holds
/// B[.][n], i.e. a row-major [n][k] tile): b[0], b[1] for n-tile 0, b[2], b[3] for n-tile 1.
__device__ __forceinline__ void load_b_nk(unsigned (&b)[4], const __nv_bfloat16* s, int ld, int n0, int k0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, rr = lane & 7;
  ldsm_x4(b, s + (n0 + rr + (mi >> 1) * 8) * ld + k0 + (mi & 1) * 8);
}
/// B fragments of two n-tiles for k0..k0+15, B stored row-major [k][n].
__device__ __forceinline__ void load_b_kn(unsigned (&b)[4], const __nv_bfloat16* s, int ld, int k0, int n0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, rr = lane & 7;
  ldsm_x4_t(b, s + (k0 + rr + (mi & 1) * 8) * ld + n0 + (mi >> 1) * 8);
}

/// B fragment of the one n-tile n0..n0+7 (n0 a multiple of 8) for k0..k0+15, B row-major [k][n]: load_b_kn's
/// b[0], b[1] for that n-tile, from half the bytes (ldmatrix.x2: lanes 0-15 give the row addresses).
__device__ __forceinline__ void load_b_kn8(unsigned (&b)[2], const __nv_bfloat16* s, int ld, int k0, int n0) {
  const int lane = threadIdx.x & 31, mi = (lane >> 3) & 1, rr = lane & 7;
  ldsm_x2_t(b, s + (k0 + rr + mi * 8) * ld + n0);
}
/// The same n-tile's fragments of two row-major [k][n] tiles at once (one ldmatrix.x4): b[0], b[1] from sh and
/// b[2], b[3] from sl, each pair equal to load_b_kn8's (session 17: at 16 value columns each warp of the forward
/// state kernel needs one n-tile of S's hi and lo parts, which two load_b_kn loaded as two 16-column x4 reads).
__device__ __forceinline__ void load_b_kn8_pair(unsigned (&b)[4], const __nv_bfloat16* sh, const __nv_bfloat16* sl,
                                                int ld, int k0, int n0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, rr = lane & 7;
  ldsm_x4_t(b, ((mi >> 1) ? sl : sh) + (k0 + rr + (mi & 1) * 8) * ld + n0);
}

__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}

/// cp.async of 16 bytes; src_bytes < 16 zero-fills the rest (0: all zeros, src not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace linattn::cuda::detail

// ---------------------------------------------------------------------------------------------
// sm_90 bulk asynchronous copies completing on an mbarrier (v2_state's kBulk, LINATTN_STATE_BULK=1;
// PTX ISA 8.0: mbarrier, cp.async.bulk). A copy moves `bytes` (a multiple of 16; both addresses
// 16-byte aligned) from global to shared memory and, when done, subtracts them from the barrier's
// tx-count; a phase of the barrier completes when its pending arrivals and its tx-count are both 0.
// ---------------------------------------------------------------------------------------------
namespace linattn::cuda::detail {

/// mbarrier.init with `count` expected arrivals per phase (one thread; fence_mbarrier_init and a
/// block barrier before anyone else uses it).
__device__ __forceinline__ void mbar_init(void* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}
/// Makes the preceding mbarrier.init visible to the async proxy (the bulk copies' completions).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/// One arrival on the barrier's current phase, after raising its tx-count by `bytes` (expect-tx).
__device__ __forceinline__ void mbar_arrive_expect_tx(void* bar, unsigned bytes) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
/// Spins until the barrier's phase with parity `parity` (0 or 1) has completed (acquire: the bytes
/// its copies wrote are then visible to this thread).
__device__ __forceinline__ void mbar_wait_parity(void* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(smem_u32(bar)), "r"(parity)
                 : "memory");
  } while (!done);
}
/// cp.async.bulk of `bytes` from global src to shared dst, completing on barrier bar.
__device__ __forceinline__ void bulk_g2s(void* dst, const void* src, unsigned bytes, void* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_u32(dst)),
               "l"(src), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}


// ---------------------------------------------------------------------------------------------
// Thread-block clusters and multicast tensor copies (sm_90a; session 17, forward rung 10's cluster state kernel
// v2_state_mc). A tensor copy (TMA: cp.async.bulk.tensor) moves a box of a tensor described by a CUtensorMap
// into shared memory; with .multicast::cluster the same box lands at the same offset in every CTA of ctaMask,
// each completing its bytes on the mbarrier at the same offset in that CTA (PTX ISA 8.0).
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ unsigned cluster_ctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ unsigned cluster_nctarank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}
/// Every thread of every CTA of the cluster arrives, then waits for all (release / acquire at cluster scope).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
/// One arrival (release, cluster scope) on the mbarrier at `bar`'s offset in the cluster's CTA `rank`.
__device__ __forceinline__ void mbar_arrive_remote(void* bar, unsigned rank) {
  asm volatile(
      "{\n .reg .b32 ra;\n mapa.shared::cluster.u32 ra, %0, %1;\n"
      " mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n}\n" ::"r"(smem_u32(bar)),
      "r"(rank)
      : "memory");
}
/// mbar_wait_parity with acquire at cluster scope (the phase's arrivals came from other CTAs of the cluster).
__device__ __forceinline__ void mbar_wait_parity_cluster(void* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
/// The box at coordinates (c0, c1) of the 2-d tensor map `tmap` (the address of a __grid_constant__ kernel
/// parameter) to shared `dst` of every CTA in `mask`, completing on the barrier at `bar`'s offset in each.
__device__ __forceinline__ void tma2_multicast(void* dst, const void* tmap, int c0, int c1, void* bar,
                                               unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<std::uint64_t>(tmap)), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"(mask)
      : "memory");
}

/// Fragments from a 64-row bf16 tile written by tensor copies of 64 x 64 boxes with the 128-byte swizzle: column
/// half hh = c / 64 at hh * 8192 bytes (1024-byte aligned), row r at r * 128, its 16-byte chunk j = (c % 64) / 8
/// stored at chunk j ^ (r % 8). load_a's A fragment (rows r0.., columns c0..) and load_a_t's fragment of the
/// transpose (A(m, k) = tile[k][m]; m0.., k0..). The 8 rows of each 8 x 8 matrix land in 8 different chunks, so
/// in different banks: no conflicts without padding. Columns c are multiples of 8 (a fragment's 16-byte rows).
__device__ __forceinline__ const __nv_bfloat16* sw128_at(const __nv_bfloat16* s, int r, int c) {
  return s + (c >> 6) * 4096 + r * 64 + ((((c & 63) >> 3) ^ (r & 7)) << 3);
}
__device__ __forceinline__ void load_a_sw128(unsigned (&a)[4], const __nv_bfloat16* s, int r0, int c0) {
  const int lane = threadIdx.x & 31;
  ldsm_x4(a, sw128_at(s, r0 + (lane & 15), c0 + (lane >> 4) * 8));
}
__device__ __forceinline__ void load_a_t_sw128(unsigned (&a)[4], const __nv_bfloat16* s, int m0, int k0) {
  const int lane = threadIdx.x & 31, mi = lane >> 3, rr = lane & 7;
  ldsm_x4_t(a, sw128_at(s, k0 + rr + (mi >> 1) * 8, m0 + (mi & 1) * 8));
}

}  // namespace linattn::cuda::detail
