/// reference/backward.hpp -- the reference backward pass of linattn (one header includes every
/// part), and the finite-difference gradient that proves it (numerical_gradient, grad_error; the
/// test proofs_tests/test_gradcheck_reference.cpp uses them, and so can a kernel author for a new backward).
/// The derivation of each backward is in docs/derivation-backward.md.
/// @file
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "reference/attention_backward.hpp"  // naive_softmax_attn_backward, linear_attention_backward
#include "reference/layers_backward.hpp"     // sigmoid, softplus, SiLU, l2 norm, decay, RMSNorm
#include "reference/recurrent_backward.hpp"  // naive_recurrent_<op>_backward, gdn2_step_backward
#include "reference/routing_backward.hpp"    // cler_inject_backward, residual_inject_backward
#include "reference/check.hpp"

namespace linattn::ref {

/// @addtogroup backward
/// @{

/// The numerical gradient of a scalar loss with respect to every element of x, by finite
/// differences with step h_i = rel_step * max(1, |x_i|). `loss()` must read x's storage: x is
/// perturbed in place (Tensor copies share storage) and restored exactly afterwards.
///   inside (lo, hi):  central        (L(x+h) - L(x-h)) / 2h                  error O(h^2)
///   x - h < lo:       one-sided up   (-3 L(x) + 4 L(x+h) - L(x+2h)) / 2h     error O(h^2)
///   x + h > hi:       one-sided down (3 L(x) - 4 L(x-h) + L(x-2h)) / 2h      error O(h^2)
/// so a domain bound (g <= 0, beta in [0, 1]) is never crossed (a gate at exactly 0 or 1 works).
/// Rounding adds about eps_machine |L| / h per element; the default step 1e-5 (near
/// eps_machine^(1/3) for double) balances it against the h^2 truncation error.
template <class T, class Loss>
Tensor<T> numerical_gradient(const Tensor<T>& x, Loss loss, T rel_step = T(1e-5),
                             T lo = -std::numeric_limits<T>::infinity(),
                             T hi = std::numeric_limits<T>::infinity()) {
  const std::string fn = "numerical_gradient";
  check_finite(fn, "x", x);
  if (!(rel_step > 0)) fail(fn, "rel_step", "a value > 0", num_str(rel_step));
  if (!(lo < hi)) fail(fn, "lo, hi", "lo < hi", num_str(lo) + ", " + num_str(hi));
  check_range(fn, "x", x, double(lo), double(hi));
  Tensor<T> grad(x.shape());
  for (index_t i = 0; i < x.numel(); ++i) {
    T& xi = x.data()[i];
    const T x0 = xi, h = rel_step * std::max(T(1), std::abs(x0));
    auto at = [&](T offset) {
      xi = x0 + offset;
      const T l = static_cast<T>(loss());
      xi = x0;
      return l;
    };
    if (x0 - h >= lo && x0 + h <= hi)
      grad.data()[i] = (at(h) - at(-h)) / (2 * h);
    else if (x0 - h < lo && x0 + 2 * h <= hi)
      grad.data()[i] = (-3 * at(0) + 4 * at(h) - at(2 * h)) / (2 * h);
    else if (x0 + h > hi && x0 - 2 * h >= lo)
      grad.data()[i] = (3 * at(0) - 4 * at(-h) + at(-2 * h)) / (2 * h);
    else
      fail(fn, "rel_step", "a step that fits twice into [lo, hi]", num_str(h));
  }
  return grad;
}

/// Norm-wise distance between an analytic gradient and a numerical one.
struct GradError {
  double abs = 0;  ///< ||analytic - numerical||_2
  double ref = 0;  ///< ||numerical||_2
  bool shape_ok = true;
  /// abs <= rel_tol ||numerical|| + abs_tol sqrt(n): relative, with a floor for rounding noise.
  bool within(double rel_tol, double abs_tol, index_t n) const {
    return shape_ok && std::isfinite(abs) && abs <= rel_tol * ref + abs_tol * std::sqrt(double(n));
  }
  double rel() const { return ref > 0 ? abs / ref : abs; }
};

template <class T>
GradError grad_error(const Tensor<T>& analytic, const Tensor<T>& numerical) {
  GradError e;
  if (analytic.shape() != numerical.shape()) {
    e.shape_ok = false;
    e.abs = std::numeric_limits<double>::infinity();
    return e;
  }
  for (index_t i = 0; i < analytic.numel(); ++i) {
    const double a = double(analytic.data()[i]), n = double(numerical.data()[i]);
    e.abs += (a - n) * (a - n);
    e.ref += n * n;
  }
  e.abs = std::sqrt(e.abs), e.ref = std::sqrt(e.ref);
  return e;
}

/// @}

}  // namespace linattn::ref
