// walkthroughs/lm/common.hpp -- small shared pieces of the language-model trainer: the OpenMP
// pragma macro (so the code builds, serially, without OpenMP and without -Wunknown-pragmas
// warnings), thread-count helpers, and the scalar activations with their derivatives.
//
// Determinism rule of the whole trainer: every parallel loop gives each output element to exactly
// one thread, which accumulates it in a fixed order. Results therefore do not depend on the
// number of threads or on scheduling; reductions over the whole model (loss, gradient norm) are
// done serially, in double.
#pragma once

#include <cmath>
#include <cstdint>

#include "reference/check.hpp"

#ifdef _OPENMP
#include <omp.h>
#define LM_OMP(directive) _Pragma(directive)
#else
#define LM_OMP(directive)
#endif

namespace linattn::lm {

/// Parallel loops run serially below this much work: a parallel region costs microseconds on an
/// idle machine and up to a scheduler time slice on a loaded one. kParMin counts elementwise
/// operations, kParMinMac multiply-adds (matmuls, attention).
constexpr index_t kParMin = index_t(1) << 17;
constexpr index_t kParMinMac = index_t(1) << 21;

/// Number of OpenMP threads the parallel loops will use (1 without OpenMP).
inline int num_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// Set the number of OpenMP threads (ignored without OpenMP).
inline void set_num_threads(int n) {
#ifdef _OPENMP
  if (n > 0) omp_set_num_threads(n);
#else
  (void)n;
#endif
}

/// sigma(x) = 1 / (1 + exp(-x)), without overflow for either sign.
template <class T>
inline T sigmoid(T x) {
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

/// SiLU(x) = x sigma(x).
template <class T>
inline T silu(T x) {
  return x * sigmoid(x);
}

/// d SiLU / dx = sigma(x) (1 + x (1 - sigma(x))).
template <class T>
inline T silu_grad(T x) {
  const T s = sigmoid(x);
  return s * (T(1) + x * (T(1) - s));
}

/// softplus(x) = log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), without overflow.
template <class T>
inline T softplus(T x) {
  return (x > 0 ? x : T(0)) + std::log1p(std::exp(-std::abs(x)));
}

}  // namespace linattn::lm
