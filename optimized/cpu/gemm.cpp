// optimized/cpu/gemm.cpp -- the blocked float GEMM of gemm.hpp (the benchmark's ceiling).
#include "optimized/cpu/gemm.hpp"

#include <algorithm>
#include <vector>

#include "optimized/cpu/dispatch.hpp"
#include "optimized/cpu/small_gemm.hpp"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace linattn::cpu {
namespace {

constexpr index_t KC = 256;  // inner block: a KC x NR panel of B is 32 KB (fits L1)
constexpr index_t MC = 144;  // rows of A per block: MC x KC is 144 KB (fits L2)
constexpr index_t NC = 2048; // columns of B per packed block: KC x NC is 2 MB (fits L3)
constexpr index_t MAX_MR = 12, MAX_NR = 32;

/// Big-GEMM register tile: 12 x 32 on AVX-512 (24 accumulators), 6 x (2 W) otherwise.
template <int VB>
struct BigTile {
  static constexpr int W = VB / 4, NV = 2, NR = NV * W;
  static constexpr int MR = VB == 64 ? 12 : 6;
};

// Packed B: panels of NR columns, each KC x NR contiguous, zero-padded past N.
template <int VB>
void pack_b(index_t kc, index_t nc, const float* B, index_t ldb, float* Bp, index_t panel) {
  constexpr int NR = BigTile<VB>::NR;
  const index_t j0 = panel * NR, nr = std::min<index_t>(NR, nc - j0);
  float* dst = Bp + panel * kc * NR;
  for (index_t p = 0; p < kc; ++p)
    for (index_t j = 0; j < NR; ++j) dst[p * NR + j] = j < nr ? B[p * ldb + j0 + j] : 0.0f;
}

// One MC block of C: pack its rows of A (MR-row slivers, column-major inside a sliver) and run
// the register tile over every (sliver, panel) pair.
template <int VB>
void block_c(index_t mc, index_t nc, index_t kc, const float* A, index_t lda, const float* Bp,
             float* C, index_t ldc, bool first, float* Ap) {
  constexpr int W = BigTile<VB>::W, NV = BigTile<VB>::NV, NR = BigTile<VB>::NR,
                MR = BigTile<VB>::MR;
  const index_t slivers = (mc + MR - 1) / MR, panels = (nc + NR - 1) / NR;
  for (index_t s = 0; s < slivers; ++s)
    for (index_t p = 0; p < kc; ++p)
      for (index_t i = 0; i < MR; ++i) {
        const index_t r = s * MR + i;
        Ap[(s * kc + p) * MR + i] = r < mc ? A[r * lda + p] : 0.0f;
      }
  const kern::Acc acc = first ? kern::Acc::store : kern::Acc::add;
  float edge[MAX_MR * MAX_NR];
  for (index_t jp = 0; jp < panels; ++jp)
    for (index_t s = 0; s < slivers; ++s) {
      const float* a = Ap + s * kc * MR;
      const float* b = Bp + jp * kc * NR;
      const index_t i0 = s * MR, j0 = jp * NR;
      const index_t mr = std::min<index_t>(MR, mc - i0), nr = std::min<index_t>(NR, nc - j0);
      if (mr == MR && nr == NR) {
        kern::tile<float, W, MR, NV>(kc, a, 1, MR, b, NR, C + i0 * ldc + j0, ldc, acc);
      } else {  // edge tile: compute into a scratch tile, then add the valid part
        kern::tile<float, W, MR, NV>(kc, a, 1, MR, b, NR, edge, NR, kern::Acc::store);
        for (index_t i = 0; i < mr; ++i)
          for (index_t j = 0; j < nr; ++j)
            C[(i0 + i) * ldc + j0 + j] = (first ? 0.0f : C[(i0 + i) * ldc + j0 + j]) + edge[i * NR + j];
      }
    }
}

LINATTN_CPU_DISPATCH(int, big_nr, (), (), return BigTile<VB>::NR;)
LINATTN_CPU_DISPATCH(void, pack_b_mv,
                         (index_t kc, index_t nc, const float* B, index_t ldb, float* Bp,
                          index_t panel),
                         (kc, nc, B, ldb, Bp, panel), pack_b<VB>(kc, nc, B, ldb, Bp, panel);)
LINATTN_CPU_DISPATCH(void, block_c_mv,
                         (index_t mc, index_t nc, index_t kc, const float* A, index_t lda,
                          const float* Bp, float* C, index_t ldc, bool first, float* Ap),
                         (mc, nc, kc, A, lda, Bp, C, ldc, first, Ap), block_c<VB>(mc, nc, kc, A, lda, Bp, C, ldc, first, Ap);)
}  // namespace

void sgemm(index_t M, index_t N, index_t K, const float* A, index_t lda, const float* B,
           index_t ldb, float* C, index_t ldc, int num_threads) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (index_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
    return;
  }
  const index_t NR = big_nr();
  std::vector<float> Bp(static_cast<size_t>(KC * (NC + NR)));
#ifdef _OPENMP
  const int nt = num_threads > 0 ? num_threads : omp_get_max_threads();
#else
  const int nt = 1;
  (void)num_threads;
#endif
  std::vector<std::vector<float>> Ap(static_cast<size_t>(nt),
                                     std::vector<float>(static_cast<size_t>((MC + MAX_MR) * KC)));
  for (index_t jc = 0; jc < N; jc += NC) {
    const index_t nc = std::min(NC, N - jc), panels = (nc + NR - 1) / NR;
    for (index_t pc = 0; pc < K; pc += KC) {
      const index_t kc = std::min(KC, K - pc);
      const index_t blocks = (M + MC - 1) / MC;
#pragma omp parallel num_threads(nt)
      {
#pragma omp for schedule(static)
        for (index_t jp = 0; jp < panels; ++jp)
          pack_b_mv(kc, nc, B + pc * ldb + jc, ldb, Bp.data(), jp);
#ifdef _OPENMP
        float* ap = Ap[static_cast<size_t>(omp_get_thread_num())].data();
#else
        float* ap = Ap[0].data();
#endif
#pragma omp for schedule(dynamic, 1)
        for (index_t ib = 0; ib < blocks; ++ib) {
          const index_t i0 = ib * MC, mc = std::min(MC, M - i0);
          block_c_mv(mc, nc, kc, A + i0 * lda + pc, lda, Bp.data(), C + i0 * ldc + jc, ldc,
                     pc == 0, ap);
        }
      }
    }
  }
}

}  // namespace linattn::cpu
