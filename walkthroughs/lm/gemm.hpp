// walkthroughs/lm/gemm.hpp -- the one matrix-multiply kernel of the trainer, and a transpose.
//
// gemm computes C (M x N) = [C +] op(A) B (K x N), all row-major with leading dimensions, where
// op(A) is A (M x K) or, with trans_a, the transpose of a stored (K x M) matrix (so that weight
// gradients dW = dY^T X need no explicit transpose).
// It is cache-blocked (K in panels of KC, N in strips of NR columns, rows in tiles of MR held in
// registers) and OpenMP-parallel over blocks of rows. Each element of C is owned by one thread and
// accumulated in ascending k, exactly like the naive loop
//     for i, for k, for j: C[i][j] += A[i][k] * B[k][j]
// so the result is bit-for-bit that of the naive loop (without fused multiply-add contraction),
// whatever the number of threads. The inner loop runs over contiguous columns of B and C, so the
// compiler vectorises it without reassociating any sum.
#pragma once

#include <algorithm>
#include <cstring>

#include "walkthroughs/lm/common.hpp"

namespace linattn::lm {

namespace detail {

/// Element (r, k) of op(A): A[r][k], or A[k][r] when TA (A stored transposed).
template <bool TA, class T>
inline T a_at(const T* A, index_t lda, index_t r, index_t k) {
  return TA ? A[k * lda + r] : A[r * lda + k];
}

/// Register tile: C[0:MR, 0:NR] += op(A)[0:MR, 0:kn] B[0:kn, 0:NR].
template <class T, int MR, int NR, bool TA>
inline void gemm_micro(index_t kn, const T* A, index_t lda, const T* B, index_t ldb, T* C,
                       index_t ldc) {
  T acc[MR][NR];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) acc[r][j] = C[r * ldc + j];
  for (index_t k = 0; k < kn; ++k) {
    const T* b = B + k * ldb;
    for (int r = 0; r < MR; ++r) {
      const T a = a_at<TA>(A, lda, r, k);
      for (int j = 0; j < NR; ++j) acc[r][j] += a * b[j];
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < NR; ++j) C[r * ldc + j] = acc[r][j];
}

/// Edge tile of any size mr x nr, same order of operations as gemm_micro.
template <class T, bool TA>
inline void gemm_edge(index_t mr, index_t nr, index_t kn, const T* A, index_t lda, const T* B,
                      index_t ldb, T* C, index_t ldc) {
  for (index_t r = 0; r < mr; ++r)
    for (index_t k = 0; k < kn; ++k) {
      const T a = a_at<TA>(A, lda, r, k);
      const T* b = B + k * ldb;
      T* c = C + r * ldc;
      for (index_t j = 0; j < nr; ++j) c[j] += a * b[j];
    }
}

template <class T, bool TA>
void gemm_impl(index_t M, index_t N, index_t K, const T* A, index_t lda, const T* B, index_t ldb,
               T* C, index_t ldc, bool accumulate) {
  constexpr int MR = 4;                              // rows per register tile
  constexpr int NR = 128 / static_cast<int>(sizeof(T));  // 32 floats / 16 doubles per strip
  constexpr index_t KC = 256;                        // depth of a panel of B kept in cache
  constexpr index_t MC = 32;                         // rows per parallel task
  const index_t nblocks = (M + MC - 1) / MC;
  LM_OMP("omp parallel for schedule(static) if(M * N * K > kParMinMac)")
  for (index_t blk = 0; blk < nblocks; ++blk) {
    const index_t i0 = blk * MC, i1 = std::min(M, i0 + MC);
    if (!accumulate)
      for (index_t i = i0; i < i1; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
    for (index_t k0 = 0; k0 < K; k0 += KC) {
      const index_t kn = std::min(KC, K - k0);
      for (index_t j0 = 0; j0 < N; j0 += NR) {
        const index_t nr = std::min<index_t>(NR, N - j0);
        for (index_t i = i0; i < i1; i += MR) {
          const index_t mr = std::min<index_t>(MR, i1 - i);
          const T* a = TA ? A + k0 * lda + i : A + i * lda + k0;
          const T* b = B + k0 * ldb + j0;
          T* c = C + i * ldc + j0;
          if (mr == MR && nr == NR)
            gemm_micro<T, MR, NR, TA>(kn, a, lda, b, ldb, c, ldc);
          else
            gemm_edge<T, TA>(mr, nr, kn, a, lda, b, ldb, c, ldc);
        }
      }
    }
  }
}

}  // namespace detail

/// C (M x N) = [C +] op(A) @ B (K x N); row-major, leading dimensions lda, ldb, ldc; op(A) is
/// A (M x K), or with trans_a the transpose of A stored as (K x M). accumulate = false overwrites
/// C. Bitwise equal to the naive i-k-j loop (see the file comment).
template <class T>
void gemm(index_t M, index_t N, index_t K, const T* A, index_t lda, const T* B, index_t ldb, T* C,
          index_t ldc, bool accumulate, bool trans_a = false) {
  if (trans_a)
    detail::gemm_impl<T, true>(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
  else
    detail::gemm_impl<T, false>(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

/// out (cols x rows) = in (rows x cols)^T, both dense row-major. Blocked for cache.
template <class T>
void transpose(T* out, const T* in, index_t rows, index_t cols) {
  constexpr index_t TB = 32;
  LM_OMP("omp parallel for schedule(static) if(rows * cols > kParMin)")
  for (index_t i0 = 0; i0 < rows; i0 += TB)
    for (index_t j0 = 0; j0 < cols; j0 += TB)
      for (index_t i = i0; i < std::min(rows, i0 + TB); ++i)
        for (index_t j = j0; j < std::min(cols, j0 + TB); ++j) out[j * rows + i] = in[i * cols + j];
}

}  // namespace linattn::lm
