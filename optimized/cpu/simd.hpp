/// optimized/cpu/simd.hpp -- the small SIMD vocabulary of the CPU kernels (internal header).
///
/// Vectors are GCC vector extensions, vec<T, W> = W lanes of T, so one source compiles to SSE2,
/// AVX2 or AVX-512 depending on the target of the function it is inlined into (see dispatch.hpp:
/// every kernel is compiled three times and the best version for the running CPU is picked at
/// load time). Everything here is always_inline for that reason: a helper compiled for another
/// target would have a different calling convention for vector arguments.
///
/// vexp is the only transcendental: exp on vectors, accurate to ~2 ulp (float) and ~1 ulp
/// (double) on the domain the kernels use it on, x <= 0 (SPEC section 4: only non-positive
/// differences of cumulative log-gates are exponentiated). Results below the smallest normal
/// number are flushed to 0 by a select (never by multiplying an inf or a NaN by 0).
/// @file
/// @ingroup cpu_internals
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "reference/tensor.hpp"

#define LINATTN_INLINE [[gnu::always_inline]] inline

namespace linattn::cpu::simd {

template <class T, int W>
struct VecType {
  typedef T type __attribute__((vector_size(W * sizeof(T))));
};
template <class T, int W>
using vec = typename VecType<T, W>::type;

/// The integer vector of the same lane count and width (int32 lanes for float, int64 for double).
template <class T>
using lane_int = std::conditional_t<sizeof(T) == 4, std::int32_t, std::int64_t>;
template <class T, int W>
using ivec = typename VecType<lane_int<T>, W>::type;

template <class T, int W>
LINATTN_INLINE vec<T, W> load(const T* p) {
  vec<T, W> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T, int W>
LINATTN_INLINE void store(T* p, vec<T, W> v) {
  std::memcpy(p, &v, sizeof v);
}
/// Every lane = x. (Through memory: GCC expands x - vec{} or a lane-wise build of a generic
/// vector type lane by lane, and vec{} + x costs an add because -0 + 0 = +0.)
template <class T, int W>
LINATTN_INLINE vec<T, W> splat(T x) {
  T t[W];
  for (int i = 0; i < W; ++i) t[i] = x;
  return load<T, W>(t);
}
namespace detail {
template <class T, int W, int H>
struct RotateMask {  // lane c takes lane c + H (mod W)
  static constexpr auto make() {
    struct { lane_int<T> m[W]; } r{};
    for (int c = 0; c < W; ++c) r.m[c] = (c + H) % W;
    return r;
  }
  static constexpr auto m = make();
};
template <class T, int W, int H>
LINATTN_INLINE vec<T, W> fold(vec<T, W> v) {
  if constexpr (H >= 1) {
    ivec<T, W> m;
    std::memcpy(&m, RotateMask<T, W, H>::m.m, sizeof m);
    return fold<T, W, H / 2>(v + __builtin_shuffle(v, m));
  } else {
    return v;
  }
}
}  // namespace detail

/// The sum of the lanes, as a tree: log2(W) rotate-and-add steps.
template <class T, int W>
LINATTN_INLINE T hsum(vec<T, W> v) {
  return detail::fold<T, W, W / 2>(v)[0];
}

/// exp(x) lane-wise for x <= 0 (also correct up to x ~ 88 for float, ~ 709 for double).
/// Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, exp(x) = 2^n p(r).
template <class T, int W>
LINATTN_INLINE vec<T, W> vexp(vec<T, W> x) {
  using V = vec<T, W>;
  using I = ivec<T, W>;
  if constexpr (sizeof(T) == 4) {
    const V lo = splat<float, W>(-87.33654f);  // ln(FLT_MIN): below this the result is subnormal
    const V xc = x < lo ? lo : (x > splat<float, W>(88.0f) ? splat<float, W>(88.0f) : x);
    // n = floor(x log2(e) + 1/2)
    const V fx = xc * 1.44269504088896341f + 0.5f;
    I n = __builtin_convertvector(fx, I);  // truncation towards 0
    const V fn0 = __builtin_convertvector(n, V);
    n = n + (fn0 > fx);  // true lanes are -1: floor for negative fx
    const V fn = __builtin_convertvector(n, V);
    const V r = (xc - fn * 0.693359375f) - fn * -2.12194440e-4f;
    // Cephes expf polynomial (minimax on [-ln2/2, ln2/2], ~1 ulp)
    V p = splat<float, W>(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * (r * r) + r + 1.0f;
    const I bits = (n + 127) << 23;  // 2^n, n >= -126 here
    const V res = p * (V)bits;
    return x < lo ? V{} : res;  // select: subnormal range flushed to 0
  } else {
    const V lo = splat<double, W>(-708.3964185322641);  // ln(DBL_MIN)
    const V xc = x < lo ? lo : (x > splat<double, W>(709.0) ? splat<double, W>(709.0) : x);
    const V fx = xc * 1.4426950408889634074 + 0.5;
    I n = __builtin_convertvector(fx, I);
    const V fn0 = __builtin_convertvector(n, V);
    n = n + (fn0 > fx);
    const V fn = __builtin_convertvector(n, V);
    const V r = (xc - fn * 6.93145751953125e-1) - fn * 1.42860682030941723212e-6;
    // Taylor series to degree 13: |r|^14 / 14! < 5e-18 on |r| <= ln2/2
    V p = splat<double, W>(1.0 / 6227020800.0);
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    const I bits = (n + 1023) << 52;
    const V res = p * (V)bits;
    return x < lo ? V{} : res;
  }
}

namespace detail {
/// Shuffle masks of one butterfly stage of a W x W transpose (see transpose below).
template <class T, int W, int H>
struct TransposeMasks {
  static constexpr auto make(bool high) {
    struct { lane_int<T> m[W]; } r{};
    for (int c = 0; c < W; ++c)
      r.m[c] = high ? ((c & H) ? W + c : c + H) : ((c & H) ? W + c - H : c);
    return r;
  }
  static constexpr auto lo = make(false), hi = make(true);
};
template <class T, int W, int H>
LINATTN_INLINE void transpose_stage(vec<T, W>* m) {
  if constexpr (H < W) {
    ivec<T, W> lo, hi;
    std::memcpy(&lo, TransposeMasks<T, W, H>::lo.m, sizeof lo);
    std::memcpy(&hi, TransposeMasks<T, W, H>::hi.m, sizeof hi);
    for (int r = 0; r < W; ++r)
      if (!(r & H)) {
        const vec<T, W> a = m[r], b = m[r + H];
        m[r] = __builtin_shuffle(a, b, lo);
        m[r + H] = __builtin_shuffle(a, b, hi);
      }
    transpose_stage<T, W, 2 * H>(m);
  }
}
}  // namespace detail

/// dst = src^T for a rows x cols matrix (both multiples of W), in W x W blocks held in
/// registers: log2(W) butterfly stages, each exchanging one bit of the row and column index
/// (rows r and r + H swap their elements whose column has bit H set with the other row's).
template <class T, int W>
LINATTN_INLINE void transpose(const T* src, index_t lds, index_t rows, index_t cols, T* dst,
                              index_t ldd) {
  for (index_t r0 = 0; r0 < rows; r0 += W)
    for (index_t c0 = 0; c0 < cols; c0 += W) {
      vec<T, W> m[W];
      for (int r = 0; r < W; ++r) m[r] = load<T, W>(src + (r0 + r) * lds + c0);
      detail::transpose_stage<T, W, 1>(m);
      for (int c = 0; c < W; ++c) store<T, W>(dst + (c0 + c) * ldd + r0, m[c]);
    }
}

/// dst[0, n) = src[0, n), dst[n, np) = 0 (src == nullptr: all zero). In whole vectors where
/// possible (a memcpy call of a few hundred bytes costs more than the copy on some CPUs).
template <class T, int W>
LINATTN_INLINE void copy_row(const T* src, index_t n, index_t np, T* dst) {
  index_t d = 0;
  if (src) {
    for (; d + W <= n; d += W) store<T, W>(dst + d, load<T, W>(src + d));
    for (; d < n; ++d) dst[d] = src[d];
  }
  for (; d < np; ++d) dst[d] = T(0);
}

/// Padded row lengths of the kernels' buffers are multiples of PAD elements: a multiple of every
/// vector width used (16 floats or 8 doubles for AVX-512), so rows are whole vectors.
constexpr index_t PAD = 16;

/// Round n up to a multiple of m.
constexpr index_t round_up(index_t n, index_t m) { return (n + m - 1) / m * m; }

}  // namespace linattn::cpu::simd
