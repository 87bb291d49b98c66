// optimized/cpu/simd_level.cpp -- detection and override of the kernels' instruction-set level.
#include "optimized/cpu/simd_level.hpp"

#include <atomic>
#include <string>

#include "reference/check.hpp"

namespace linattn::cpu {
namespace {
std::atomic<int> forced{0};  // SimdLevel, 0 = automatic
}  // namespace

SimdLevel best_simd_level() {
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
  static const SimdLevel best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) return SimdLevel::avx512;
    if (__builtin_cpu_supports("x86-64-v3")) return SimdLevel::avx2;
    return SimdLevel::baseline;
  }();
  return best;
#else
  return SimdLevel::baseline;
#endif
}

void set_simd_level(SimdLevel level) {
  if (static_cast<int>(level) > static_cast<int>(best_simd_level()))
    fail("set_simd_level", "level",
         std::string("a level this CPU supports (at most ") + simd_level_name(best_simd_level()) + ")",
         simd_level_name(level));
  forced.store(static_cast<int>(level), std::memory_order_relaxed);
}

SimdLevel simd_level() {
  const int f = forced.load(std::memory_order_relaxed);
  return f ? static_cast<SimdLevel>(f) : best_simd_level();
}

const char* simd_level_name(SimdLevel level) {
  switch (level == SimdLevel::automatic ? simd_level() : level) {
    case SimdLevel::avx512: return "x86-64-v4 (AVX-512)";
    case SimdLevel::avx2: return "x86-64-v3 (AVX2, FMA)";
    default: return "baseline (SSE2)";
  }
}

}  // namespace linattn::cpu
