// optimized/cpu/dispatch.hpp -- compile a kernel once per x86 instruction-set level and let the
// running CPU pick (internal header).
//
// LINATTN_CPU_MULTIVERSION(RET, NAME, PARAMS, BODY...) defines RET NAME PARAMS { BODY } three
// times with GCC function multi-versioning: for baseline x86-64 (SSE2, 16-byte vectors),
// x86-64-v3 (AVX2 + FMA, 32-byte vectors) and x86-64-v4 (AVX-512, 64-byte vectors). Inside BODY
// the constant VB is the vector width in bytes. The loader resolves NAME to the best version the
// CPU supports (an ifunc), so the library runs on any x86-64 machine and uses AVX-512 where it
// exists. `flatten` inlines every call inside BODY, so the templates it instantiates are compiled
// for that target too. On other architectures (or compilers) there is one 16-byte version.
#pragma once

#if defined(LINATTN_CPU_SINGLE_VERSION)
// Sanitizer builds (CMake sets this when LINATTN_SANITIZE is ON): one baseline version, no
// `flatten`. Inlining every call of BODY three times under ASan + UBSan instrumentation made one
// translation unit take over 10 CPU-minutes to compile; the checks need the logic, not the speed.
#define LINATTN_CPU_MULTIVERSION(RET, NAME, PARAMS, ...) \
  RET NAME PARAMS {                                      \
    [[maybe_unused]] constexpr int VB = 16;              \
    __VA_ARGS__                                          \
  }
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
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
#else
#define LINATTN_CPU_MULTIVERSION(RET, NAME, PARAMS, ...)  \
  __attribute__((flatten)) RET NAME PARAMS {               \
    [[maybe_unused]] constexpr int VB = 16;                \
    __VA_ARGS__                                            \
  }
#endif
