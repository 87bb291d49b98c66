/// optimized/cpu/dispatch.hpp -- compile a kernel once per x86 instruction-set level and run the
/// version the CPU supports (internal header).
///
/// LINATTN_CPU_DISPATCH(RET, NAME, PARAMS, ARGS, BODY...) defines NAME_baseline (SSE2, 16-byte
/// vectors), NAME_avx2 (target x86-64-v3: AVX2 + FMA, 32-byte vectors) and NAME_avx512 (target
/// x86-64-v4: AVX-512, 64-byte vectors), each RET NAME_x PARAMS { BODY } with the constant VB = its
/// vector width in bytes, and RET NAME PARAMS, which calls the version of cpu::simd_level(): the
/// best the CPU supports, unless a test forced a lower one (simd_level.hpp). ARGS is the names of
/// PARAMS in parentheses. `flatten` inlines every call inside BODY, so the templates it
/// instantiates are compiled for that target too; nothing outside these functions is compiled for
/// AVX2/AVX-512, so the library runs on any x86-64 CPU.
///
/// LINATTN_CPU_MULTIVERSION(RET, NAME, PARAMS, BODY...) is the same three versions under one name
/// with GCC function multi-versioning: the loader picks the best for the CPU (an ifunc); no
/// override.
///
/// Sanitizer builds (LINATTN_CPU_SINGLE_VERSION, set by CMake when LINATTN_SANITIZE is ON): one
/// baseline version, no `flatten`. Inlining every call of BODY three times under ASan + UBSan
/// instrumentation made one translation unit take over 10 CPU-minutes to compile; the checks need
/// the logic, not the speed. On other architectures (or compilers): one 16-byte version.
/// @file
/// @ingroup cpu_internals
#pragma once

#include "optimized/cpu/simd_level.hpp"

#if defined(LINATTN_CPU_SINGLE_VERSION)
#define LINATTN_CPU_ONE_VERSION_ATTR
#else
#define LINATTN_CPU_ONE_VERSION_ATTR __attribute__((flatten))
#endif

#if defined(LINATTN_CPU_SINGLE_VERSION) || !defined(__x86_64__) || !defined(__GNUC__) || \
    defined(__clang__)
#define LINATTN_CPU_MULTIVERSION(RET, NAME, PARAMS, ...) \
  LINATTN_CPU_ONE_VERSION_ATTR RET NAME PARAMS {         \
    [[maybe_unused]] constexpr int VB = 16;              \
    __VA_ARGS__                                          \
  }
#define LINATTN_CPU_DISPATCH(RET, NAME, PARAMS, ARGS, ...) \
  LINATTN_CPU_MULTIVERSION(RET, NAME, PARAMS, __VA_ARGS__)
#else
#define LINATTN_CPU_MULTIVERSION(RET, NAME, PARAMS, ...)                                  \
  __attribute__((target("default"), flatten)) RET NAME PARAMS {                          \
    [[maybe_unused]] constexpr int VB = 16;                                               \
    __VA_ARGS__                                                                           \
  }                                                                                       \
  __attribute__((target("arch=x86-64-v3"), flatten)) RET NAME PARAMS {                   \
    [[maybe_unused]] constexpr int VB = 32;                                               \
    __VA_ARGS__                                                                           \
  }                                                                                       \
  __attribute__((target("arch=x86-64-v4"), flatten)) RET NAME PARAMS {                   \
    [[maybe_unused]] constexpr int VB = 64;                                               \
    __VA_ARGS__                                                                           \
  }
#define LINATTN_CPU_DISPATCH(RET, NAME, PARAMS, ARGS, ...)                 \
  __attribute__((flatten)) RET NAME##_baseline PARAMS {                  \
    [[maybe_unused]] constexpr int VB = 16;                              \
    __VA_ARGS__                                                          \
  }                                                                      \
  __attribute__((target("arch=x86-64-v3"), flatten)) RET NAME##_avx2 PARAMS { \
    [[maybe_unused]] constexpr int VB = 32;                              \
    __VA_ARGS__                                                          \
  }                                                                      \
  __attribute__((target("arch=x86-64-v4"), flatten)) RET NAME##_avx512 PARAMS { \
    [[maybe_unused]] constexpr int VB = 64;                              \
    __VA_ARGS__                                                          \
  }                                                                      \
  RET NAME PARAMS {                                                      \
    switch (::linattn::cpu::simd_level()) {                              \
      case ::linattn::cpu::SimdLevel::avx512: return NAME##_avx512 ARGS; \
      case ::linattn::cpu::SimdLevel::avx2: return NAME##_avx2 ARGS;     \
      default: return NAME##_baseline ARGS;                              \
    }                                                                    \
  }
#endif
