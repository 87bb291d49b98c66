/// optimized/cpu/simd_level.hpp -- which compiled version of the CPU kernels runs.
///
/// Every kernel of optimized/cpu is compiled three times: for baseline x86-64 (SSE2), for
/// x86-64-v3 (AVX2 + FMA) and for x86-64-v4 (AVX-512); see dispatch.hpp. By default each call uses
/// the best version the running CPU supports. Tests (and curious readers) can force a lower level
/// to check that every version computes the same thing.
/// @file
/// @ingroup cpu_internals
#pragma once

namespace linattn::cpu {

enum class SimdLevel { automatic = 0, baseline = 1, avx2 = 2, avx512 = 3 };

/// Force a level for the whole process (automatic: the best supported). Throws linattn::Error
/// if the CPU does not support the level asked for. Not meant to be changed while kernels run.
void set_simd_level(SimdLevel level);

/// The best level the CPU supports.
SimdLevel best_simd_level();

/// The level the kernels use now (never automatic).
SimdLevel simd_level();

/// "baseline (SSE2)", "x86-64-v3 (AVX2, FMA)" or "x86-64-v4 (AVX-512)".
const char* simd_level_name(SimdLevel level = SimdLevel::automatic);

}  // namespace linattn::cpu
