/// optimized/cpu/small_gemm.hpp -- register-blocked matrix products for the chunk-sized matrices
/// of the CPU kernels (internal header).
///
/// gemm(m, n, k, A, rsA, csA, B, ldb, C, ldc, acc, tri) computes  C (acc)= A B  with
/// ~~~
///   A(i, p) = A[i * rsA + p * csA]   (any strides: row-major A, or a transposed one with rsA = 1)
///   B(p, j) = B[p * ldb + j]         (row-major, n a multiple of the vector width W)
///   C(i, j) = C[i * ldc + j]         acc: C = AB (store), C += AB (add) or C -= AB (sub).
/// ~~~
/// tri = lower_a: A is lower triangular (A(i, p) = 0 for p > i), so row i only needs p <= i;
/// tri = lower_c: only C(i, j) with j <= i is wanted (tiles wholly above the diagonal are skipped,
/// the entries of the computed tiles above the diagonal are garbage for the caller to mask).
/// The operands are at most a few hundred KB (one chunk, one head's state), so there is no
/// packing: the loop over column panels is outermost and a K x (NV W) panel of B stays in L1
/// while the row tiles of A stream past it. Every function is always_inline (see simd.hpp).
/// @file
/// @ingroup cpu_internals
#pragma once

#include <algorithm>

#include "optimized/cpu/simd.hpp"

namespace linattn::cpu::kern {

enum class Acc { store, add, sub };
enum class Tri { none, lower_a, lower_c };

/// Register tile shape for W-lane vectors: MR rows x NV vectors of accumulators.
/// 32 vector registers (AVX-512): 8 x 2 = 16 accumulators; 16 registers (AVX2, SSE2): 4 x 2 = 8.
/// MR divides 16, so every chunk-sized matrix (C, SUB and padded K rows) is whole tiles.
template <class T, int W>
struct TileShape {
  static constexpr int NV = 2;
  static constexpr int MR = (W * sizeof(T) == 64) ? 8 : 4;
};

/// Store a tile's accumulators: C = c, C += c or C -= c.
template <class T, int W>
LINATTN_INLINE void put(T* cp, simd::vec<T, W> c, Acc acc) {
  if (acc == Acc::store) simd::store<T, W>(cp, c);
  else if (acc == Acc::add) simd::store<T, W>(cp, simd::load<T, W>(cp) + c);
  else simd::store<T, W>(cp, simd::load<T, W>(cp) - c);
}

/// One MR x (NV W) tile of C (acc)= A B over the inner dimension [0, kc).
template <class T, int W, int MR, int NV>
LINATTN_INLINE void tile(index_t kc, const T* A, index_t rsA, index_t csA, const T* B, index_t ldb,
                         T* C, index_t ldc, Acc acc) {
  using V = simd::vec<T, W>;
  V c[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) c[i][v] = V{};
  for (index_t p = 0; p < kc; ++p) {
    V b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = simd::load<T, W>(B + p * ldb + v * W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const V a = simd::splat<T, W>(A[i * rsA + p * csA]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[i][v] += a * b[v];
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) put<T, W>(C + i * ldc + v * W, c[i][v], acc);
}

/// The same for a last row block of mr < MR rows, one row at a time (not on any hot path: the
/// kernels' matrices are whole tiles; kept simple so that it costs little code).
template <class T, int W, int NV>
LINATTN_INLINE void tile_rows(int mr, index_t kc, const T* A, index_t rsA, index_t csA,
                              const T* B, index_t ldb, T* C, index_t ldc, Acc acc) {
  using V = simd::vec<T, W>;
#pragma GCC unroll 1
  for (int i = 0; i < mr; ++i) {
    V c[NV] = {};
#pragma GCC unroll 1
    for (index_t p = 0; p < kc; ++p) {
      const V a = simd::splat<T, W>(A[i * rsA + p * csA]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) c[v] += a * simd::load<T, W>(B + p * ldb + v * W);
    }
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) put<T, W>(C + i * ldc + v * W, c[v], acc);
  }
}

/// C (acc)= A B for an m x n result with inner dimension k (n a multiple of W).
template <class T, int W>
LINATTN_INLINE void gemm(index_t m, index_t n, index_t k, const T* A, index_t rsA, index_t csA,
                         const T* B, index_t ldb, T* C, index_t ldc, Acc acc,
                         Tri tri = Tri::none) {
  constexpr int MR = TileShape<T, W>::MR, NV = TileShape<T, W>::NV;
  for (index_t j0 = 0; j0 < n; j0 += NV * W) {
    const bool full = j0 + NV * W <= n;
    // lower_c: row blocks that end at or before column j0 hold no wanted entry of this panel
    index_t i0 = tri == Tri::lower_c ? std::min<index_t>(j0 / MR * MR, m) : 0;
    for (; i0 < m; i0 += MR) {
      const int mr = static_cast<int>(std::min<index_t>(MR, m - i0));
      const index_t kc = tri == Tri::lower_a ? std::min<index_t>(k, i0 + mr) : k;
      const T* a = A + i0 * rsA;
      T* c = C + i0 * ldc + j0;
      if (mr == MR && full) tile<T, W, MR, NV>(kc, a, rsA, csA, B + j0, ldb, c, ldc, acc);
      else if (mr == MR) tile<T, W, MR, 1>(kc, a, rsA, csA, B + j0, ldb, c, ldc, acc);
      else if (full) tile_rows<T, W, NV>(mr, kc, a, rsA, csA, B + j0, ldb, c, ldc, acc);
      else tile_rows<T, W, 1>(mr, kc, a, rsA, csA, B + j0, ldb, c, ldc, acc);
    }
  }
}

}  // namespace linattn::cpu::kern
