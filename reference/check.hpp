/// reference/check.hpp -- argument validation shared by every public function of linattn.
///
/// Each check throws linattn::Error with a message of the form
/// ~~~
///   "<function>: argument '<name>' expected <what> but got <what came>"
/// ~~~
/// so a caller always learns which argument was wrong, what was wanted, and what arrived.
/// Nothing is modified before the checks pass (bad input loses nothing).
/// @file
#pragma once

#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "reference/tensor.hpp"

namespace linattn {

/// @addtogroup tensor
/// @{

[[noreturn]] inline void fail(const std::string& fn, const std::string& arg,
                              const std::string& expected, const std::string& got) {
  throw Error(fn + ": argument '" + arg + "' expected " + expected + " but got " + got);
}

template <class T>
std::string num_str(T x) {
  std::ostringstream os;
  os.precision(17);
  os << x;
  return os.str();
}

/// Shape must equal `expected` exactly (-1 in `expected` matches any size).
template <class T>
void check_shape(const std::string& fn, const std::string& arg, const Tensor<T>& t,
                 const std::vector<index_t>& expected) {
  if (!t.defined()) fail(fn, arg, "a tensor of shape " + shape_str(expected), "an empty tensor");
  bool ok = t.shape().size() == expected.size();
  for (size_t i = 0; ok && i < expected.size(); ++i)
    ok = expected[i] < 0 || expected[i] == t.shape()[i];
  if (!ok) {
    std::string e = shape_str(expected);
    // Not replace(p, 2, "*"): g++ 12 gives a false -Wrestrict warning for that form.
    for (size_t p; (p = e.find("-1")) != std::string::npos;) e.replace(p, 2, 1, '*');
    fail(fn, arg, "shape " + e, "shape " + shape_str(t.shape()));
  }
}

template <class T>
void check_rank(const std::string& fn, const std::string& arg, const Tensor<T>& t, index_t rank) {
  if (!t.defined() || t.dim() != rank)
    fail(fn, arg, "a " + std::to_string(rank) + "-D tensor",
         t.defined() ? std::to_string(t.dim()) + "-D shape " + shape_str(t.shape())
                     : "an empty tensor");
}

/// A size (dimension) must be positive.
inline void check_positive(const std::string& fn, const std::string& what, index_t n) {
  if (n <= 0) fail(fn, what, "a positive size", std::to_string(n));
}

/// Where element `i` of a tensor sits, as "[b, t, h, k]".
inline std::string index_str(const std::vector<index_t>& shape, index_t i) {
  std::vector<index_t> ix(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    ix[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return shape_str(ix);
}

/// Every element finite (no NaN, no Inf).
template <class T>
void check_finite(const std::string& fn, const std::string& arg, const Tensor<T>& t) {
  const index_t n = t.numel();  // hoisted: numel() walks the shape on every call
  const T* p = t.data();
  int bad = 0;  // a branch-free first pass that compilers vectorise; the loop below finds where
  for (index_t i = 0; i < n; ++i) bad |= !(std::fabs(p[i]) <= std::numeric_limits<T>::max());
  if (!bad) return;
  for (index_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i]))
      fail(fn, arg, "finite values", num_str(p[i]) + " at index " + index_str(t.shape(), i));
}

/// Every element in [lo, hi] (or (lo, hi] when lo_open); also rejects NaN/Inf.
template <class T>
void check_range(const std::string& fn, const std::string& arg, const Tensor<T>& t, double lo,
                 double hi, bool lo_open = false) {
  const std::string want = std::string(lo_open ? "(" : "[") + num_str(lo) + ", " + num_str(hi) + "]";
  const index_t n = t.numel();
  const T* p = t.data();
  if (static_cast<double>(static_cast<T>(lo)) == lo && static_cast<double>(static_cast<T>(hi)) == hi) {
    // the same test in T, branch-free so that compilers vectorise it (the bounds are exact in T)
    const T l = static_cast<T>(lo), h = static_cast<T>(hi), big = std::numeric_limits<T>::max();
    int bad = 0;
    if (lo_open)
      for (index_t i = 0; i < n; ++i) bad |= !(std::fabs(p[i]) <= big) | !(p[i] > l) | !(p[i] <= h);
    else
      for (index_t i = 0; i < n; ++i) bad |= !(std::fabs(p[i]) <= big) | !(p[i] >= l) | !(p[i] <= h);
    if (!bad) return;
  }
  for (index_t i = 0; i < n; ++i) {  // find and report the first offending element
    const T x = p[i];
    const bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi;
    if (!ok)
      fail(fn, arg, "values in " + want, num_str(x) + " at index " + index_str(t.shape(), i));
  }
}

/// Scalar versions for the per-token steps.
template <class T>
void check_scalar_range(const std::string& fn, const std::string& arg, T x, double lo, double hi,
                        bool lo_open = false) {
  const bool ok = std::isfinite(x) && (lo_open ? x > lo : x >= lo) && x <= hi;
  if (!ok)
    fail(fn, arg, std::string("a value in ") + (lo_open ? "(" : "[") + num_str(lo) + ", " +
                      num_str(hi) + "]",
         num_str(x));
}

template <class T>
void check_vec(const std::string& fn, const std::string& arg, const std::vector<T>& x, index_t n) {
  if (static_cast<index_t>(x.size()) != n)
    fail(fn, arg, "length " + std::to_string(n), "length " + std::to_string(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i]))
      fail(fn, arg, "finite values", num_str(x[i]) + " at index " + std::to_string(i));
}

template <class T>
void check_vec_range(const std::string& fn, const std::string& arg, const std::vector<T>& x,
                     index_t n, double lo, double hi, bool lo_open = false) {
  check_vec(fn, arg, x, n);
  for (size_t i = 0; i < x.size(); ++i) {
    const bool ok = (lo_open ? x[i] > lo : x[i] >= lo) && x[i] <= hi;
    if (!ok)
      fail(fn, arg,
           std::string("values in ") + (lo_open ? "(" : "[") + num_str(lo) + ", " + num_str(hi) + "]",
           num_str(x[i]) + " at index " + std::to_string(i));
  }
}

/// Sequence offsets for packed variable-length batches (fla's cu_seqlens): must start at 0, be
/// non-decreasing, and end at the packed length T. Returns the number of sequences.
inline index_t check_offsets(const std::string& fn, const std::vector<index_t>& cu_seqlens,
                             index_t B, index_t T) {
  if (cu_seqlens.empty()) return B;
  if (B != 1) fail(fn, "q", "batch size 1 when cu_seqlens is given (packed sequences)", "B = " + std::to_string(B));
  if (cu_seqlens.size() < 2)
    fail(fn, "cu_seqlens", "at least 2 offsets", std::to_string(cu_seqlens.size()));
  if (cu_seqlens.front() != 0)
    fail(fn, "cu_seqlens", "first offset 0", std::to_string(cu_seqlens.front()));
  for (size_t i = 1; i < cu_seqlens.size(); ++i)
    if (cu_seqlens[i] < cu_seqlens[i - 1])
      fail(fn, "cu_seqlens", "non-decreasing offsets",
           std::to_string(cu_seqlens[i - 1]) + " then " + std::to_string(cu_seqlens[i]) +
               " at position " + std::to_string(i));
  if (cu_seqlens.back() != T)
    fail(fn, "cu_seqlens", "last offset equal to the packed length T = " + std::to_string(T),
         std::to_string(cu_seqlens.back()));
  return static_cast<index_t>(cu_seqlens.size()) - 1;
}

/// @}

}  // namespace linattn
