/// optimized/cpu/gemm.hpp -- a blocked, packed, multi-threaded float matrix product: the
/// machine's own GEMM rate, measured by the benchmark as the ceiling for the chunked kernels.
///
/// sgemm computes C = A B for row-major matrices (A: M x K, B: K x N, C: M x N) with the
/// classic Goto/BLIS blocking: B is packed in KC x NR panels (L1/L3), A in MC x KC blocks of MR-row
/// slivers (L2), and a register tile of MR x NR accumulators does the arithmetic (the same tile
/// code as the chunked kernels, small_gemm.hpp). Threads (OpenMP) split the MC blocks.
/// @file
/// @ingroup cpu_internals
#pragma once

#include "reference/tensor.hpp"

namespace linattn::cpu {

/// C = A B (row-major; lda, ldb, ldc are row strides). num_threads = 0: OpenMP's default.
void sgemm(index_t M, index_t N, index_t K, const float* A, index_t lda, const float* B,
           index_t ldb, float* C, index_t ldc, int num_threads = 0);

}  // namespace linattn::cpu
