/// reference/layers_backward.hpp -- forward/backward pairs of the small pieces around the core
/// recurrence in the model of SPEC section 5: sigmoid, softplus, SiLU, L2 normalisation of q and k,
/// the GDN/KDA decay parametrisation g = -exp(A_log) softplus(a + dt_bias), and per-head RMSNorm.
///
/// Each piece is a plain forward function and a `_backward` that takes the forward's inputs and the
/// gradient of a loss with respect to the output (dy) and returns the gradients with respect to the
/// inputs (chain rule written out, llm.c style). Elementwise pieces work on tensors of any shape.
/// Everything is proven against central finite differences in proofs_tests/test_gradcheck_reference.cpp.
/// @file
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "reference/check.hpp"
#include "reference/delta_rules.hpp"  // Vec
#include "reference/feature_maps.hpp"

namespace linattn::ref {

/// @addtogroup backward
/// @{

namespace detail {
template <class T>
void check_same_shape(const std::string& fn, const std::string& arg, const Tensor<T>& t,
                      const Tensor<T>& like) {
  check_shape(fn, arg, t, like.shape());
  check_finite(fn, arg, t);
}
/// sigma(x) = 1 / (1 + exp(-x)), evaluated without overflow for either sign of x.
template <class T>
T sigmoid1(T x) {
  if (x >= 0) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}
/// softplus(x) = log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|)), without overflow.
template <class T>
T softplus1(T x) {
  return std::max(x, T(0)) + std::log1p(std::exp(-std::abs(x)));
}
template <class T, class F>
Tensor<T> map(const std::string& fn, const Tensor<T>& x, F f) {
  check_finite(fn, "x", x);
  Tensor<T> y(x.shape());
  for (index_t i = 0; i < x.numel(); ++i) y.data()[i] = f(x.data()[i]);
  return y;
}
/// dx_i = dy_i * f'(x_i) for an elementwise f.
template <class T, class DF>
Tensor<T> map_backward(const std::string& fn, const Tensor<T>& x, const Tensor<T>& dy, DF df) {
  check_finite(fn, "x", x);
  check_same_shape(fn, "dy", dy, x);
  Tensor<T> dx(x.shape());
  for (index_t i = 0; i < x.numel(); ++i) dx.data()[i] = dy.data()[i] * df(x.data()[i]);
  return dx;
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Elementwise activations.
// ---------------------------------------------------------------------------------------------

/// y = sigmoid(x) (beta, GDN2's b and w, KDA's output gate; SPEC section 5).
template <class T>
Tensor<T> sigmoid(const Tensor<T>& x) {
  return detail::map("sigmoid", x, [](T t) { return detail::sigmoid1(t); });
}
/// dx = dy * s (1 - s), s = sigmoid(x).
template <class T>
Tensor<T> sigmoid_backward(const Tensor<T>& x, const Tensor<T>& dy) {
  return detail::map_backward("sigmoid_backward", x, dy, [](T t) {
    const T s = detail::sigmoid1(t);
    return s * (T(1) - s);
  });
}

/// y = softplus(x) = log(1 + exp(x)).
template <class T>
Tensor<T> softplus(const Tensor<T>& x) {
  return detail::map("softplus", x, [](T t) { return detail::softplus1(t); });
}
/// dx = dy * sigmoid(x)  (d/dx log(1 + e^x) = e^x / (1 + e^x)).
template <class T>
Tensor<T> softplus_backward(const Tensor<T>& x, const Tensor<T>& dy) {
  return detail::map_backward("softplus_backward", x, dy,
                              [](T t) { return detail::sigmoid1(t); });
}

/// y = SiLU(x) = x sigmoid(x) (after the short convolution; the GDN/GDN2 output gate).
template <class T>
Tensor<T> silu(const Tensor<T>& x) {
  return detail::map("silu", x, [](T t) { return t * detail::sigmoid1(t); });
}
/// dx = dy * (s + x s (1 - s)), s = sigmoid(x).
template <class T>
Tensor<T> silu_backward(const Tensor<T>& x, const Tensor<T>& dy) {
  return detail::map_backward("silu_backward", x, dy, [](T t) {
    const T s = detail::sigmoid1(t);
    return s * (T(1) + t * (T(1) - s));
  });
}

// ---------------------------------------------------------------------------------------------
// L2 normalisation of q and k (eps 1e-6, SPEC section 5).
// ---------------------------------------------------------------------------------------------

/// Backward of y = x / sqrt(||x||^2 + eps) (feature_maps.hpp's l2_normalize):
/// with n = sqrt(||x||^2 + eps), dx = (dy - y (y . dy)) / n.
template <class T>
Vec<T> l2_normalize_backward(const Vec<T>& x, const Vec<T>& dy, T eps = T(1e-6)) {
  check_vec("l2_normalize_backward", "x", x, static_cast<index_t>(x.size()));
  check_vec("l2_normalize_backward", "dy", dy, static_cast<index_t>(x.size()));
  T ss = 0;
  for (T xi : x) ss += xi * xi;
  const T inv = T(1) / std::sqrt(ss + eps);
  T ydy = 0;
  for (size_t i = 0; i < x.size(); ++i) ydy += x[i] * inv * dy[i];
  Vec<T> dx(x.size());
  for (size_t i = 0; i < x.size(); ++i) dx[i] = inv * (dy[i] - x[i] * inv * ydy);
  return dx;
}

/// l2_normalize over the last dimension of a tensor of any rank (e.g. q, k [B, T, H, K]).
template <class T>
Tensor<T> l2_normalize_last(const Tensor<T>& x, T eps = T(1e-6)) {
  check_finite("l2_normalize_last", "x", x);
  Tensor<T> y(x.shape());
  const MatView<T> X = x.mat(), Y = y.mat();
  for (index_t r = 0; r < X.rows; ++r) {
    const Vec<T> yr = l2_normalize(Vec<T>(X.row(r), X.row(r) + X.cols), eps);
    std::copy(yr.begin(), yr.end(), Y.row(r));
  }
  return y;
}
template <class T>
Tensor<T> l2_normalize_last_backward(const Tensor<T>& x, const Tensor<T>& dy, T eps = T(1e-6)) {
  check_finite("l2_normalize_last_backward", "x", x);
  detail::check_same_shape("l2_normalize_last_backward", "dy", dy, x);
  Tensor<T> dx(x.shape());
  const MatView<T> X = x.mat(), DY = dy.mat(), DX = dx.mat();
  for (index_t r = 0; r < X.rows; ++r) {
    const Vec<T> d = l2_normalize_backward(Vec<T>(X.row(r), X.row(r) + X.cols),
                                           Vec<T>(DY.row(r), DY.row(r) + X.cols), eps);
    std::copy(d.begin(), d.end(), DX.row(r));
  }
  return dx;
}

// ---------------------------------------------------------------------------------------------
// The decay parametrisation g = -exp(A_log) * softplus(a + dt_bias) (SPEC section 5).
// ---------------------------------------------------------------------------------------------

template <class T>
struct DecayGrads {
  Tensor<T> dA_log;   ///< [H]
  Tensor<T> da;       ///< like a
  Tensor<T> ddt_bias; ///< like dt_bias
};

namespace detail {
/// Shapes: a [B, T, H] (GDN, scalar decay) with dt_bias [H], or a [B, T, H, K] (KDA/GDN2,
/// per-key-channel decay) with dt_bias [H, K]; A_log [H] in both cases. Returns H * (1 or K).
template <class T>
index_t check_decay(const std::string& fn, const Tensor<T>& A_log, const Tensor<T>& a,
                    const Tensor<T>& dt_bias) {
  if (!a.defined() || (a.dim() != 3 && a.dim() != 4))
    fail(fn, "a", "a 3-D [B, T, H] or 4-D [B, T, H, K] tensor",
         a.defined() ? "shape " + shape_str(a.shape()) : "an empty tensor");
  const index_t H = a.size(2);
  check_shape(fn, "A_log", A_log, {H});
  if (a.dim() == 3)
    check_shape(fn, "dt_bias", dt_bias, {H});
  else
    check_shape(fn, "dt_bias", dt_bias, {H, a.size(3)});
  check_finite(fn, "A_log", A_log);
  check_finite(fn, "a", a);
  check_finite(fn, "dt_bias", dt_bias);
  return dt_bias.numel();
}
}  // namespace detail

/// g = -exp(A_log[h]) * softplus(a + dt_bias): the log-space decay of GDN (scalar per head and
/// token) and, with a per-channel a and dt_bias, of KDA/GDN2. g <= 0 always.
template <class T>
Tensor<T> decay_from_logits(const Tensor<T>& A_log, const Tensor<T>& a, const Tensor<T>& dt_bias) {
  const index_t HK = detail::check_decay("decay_from_logits", A_log, a, dt_bias);
  const index_t per_head = HK / A_log.size(0);
  Tensor<T> g(a.shape());
  for (index_t i = 0; i < a.numel(); ++i) {
    const index_t c = i % HK;  // (h, k) channel of element i
    g.data()[i] = -std::exp(A_log.data()[c / per_head]) *
                  detail::softplus1(a.data()[i] + dt_bias.data()[c]);
  }
  return g;
}

/// With s = softplus(a + dt_bias), g = -exp(A_log) s:
///   dA_log[h] = sum over the tokens (and channels) of head h of dg * g   (dg/dA_log = g),
///   da        = dg * (-exp(A_log)) * sigmoid(a + dt_bias),
///   ddt_bias  = da summed over the batch and time.
template <class T>
DecayGrads<T> decay_from_logits_backward(const Tensor<T>& A_log, const Tensor<T>& a,
                                         const Tensor<T>& dt_bias, const Tensor<T>& dg) {
  const std::string fn = "decay_from_logits_backward";
  const index_t HK = detail::check_decay(fn, A_log, a, dt_bias);
  detail::check_same_shape(fn, "dg", dg, a);
  const index_t per_head = HK / A_log.size(0);
  DecayGrads<T> gr{Tensor<T>(A_log.shape()), Tensor<T>(a.shape()), Tensor<T>(dt_bias.shape())};
  for (index_t i = 0; i < a.numel(); ++i) {
    const index_t c = i % HK, h = c / per_head;
    const T x = a.data()[i] + dt_bias.data()[c], A = std::exp(A_log.data()[h]);
    const T d = dg.data()[i];
    gr.dA_log.data()[h] += d * (-A * detail::softplus1(x));
    gr.da.data()[i] = d * (-A) * detail::sigmoid1(x);
    gr.ddt_bias.data()[c] += gr.da.data()[i];
  }
  return gr;
}

// ---------------------------------------------------------------------------------------------
// Per-head RMSNorm with a weight (the output norm of every linear mixer, SPEC section 5).
// ---------------------------------------------------------------------------------------------

template <class T>
struct RMSNormGrads {
  Tensor<T> dx;       ///< like x
  Tensor<T> dweight;  ///< [D]
};

namespace detail {
template <class T>
void check_rms(const std::string& fn, const Tensor<T>& x, const Tensor<T>& weight, T eps) {
  if (!x.defined() || x.dim() < 1)
    fail(fn, "x", "a tensor with a last (head) dimension", "an empty tensor");
  check_positive(fn, "x.shape[-1] (D)", x.size(-1));
  check_shape(fn, "weight", weight, {x.size(-1)});
  check_finite(fn, "x", x);
  check_finite(fn, "weight", weight);
  if (!(eps > 0) || !std::isfinite(eps)) fail(fn, "eps", "a finite value > 0", num_str(eps));
}
}  // namespace detail

/// y = x / sqrt(mean(x^2) + eps) (.) weight over the last dimension D (one head of [B, T, H, D]).
/// eps default 1e-5 (fla's norm_eps default, used by the authors' layers).
template <class T>
Tensor<T> rms_norm(const Tensor<T>& x, const Tensor<T>& weight, T eps = T(1e-5)) {
  detail::check_rms("rms_norm", x, weight, eps);
  Tensor<T> y(x.shape());
  const MatView<T> X = x.mat(), Y = y.mat();
  for (index_t r = 0; r < X.rows; ++r) {
    T ms = 0;
    for (index_t d = 0; d < X.cols; ++d) ms += X(r, d) * X(r, d);
    const T inv = T(1) / std::sqrt(ms / T(X.cols) + eps);
    for (index_t d = 0; d < X.cols; ++d) Y(r, d) = X(r, d) * inv * weight.data()[d];
  }
  return y;
}

/// With rho = (mean(x^2) + eps)^(-1/2), x_hat = rho x, y = x_hat (.) weight:
///   dweight = sum over rows of dy (.) x_hat;  g = dy (.) weight;
///   dx = rho (g - x_hat mean(g (.) x_hat)).
template <class T>
RMSNormGrads<T> rms_norm_backward(const Tensor<T>& x, const Tensor<T>& weight,
                                  const Tensor<T>& dy, T eps = T(1e-5)) {
  const std::string fn = "rms_norm_backward";
  detail::check_rms(fn, x, weight, eps);
  detail::check_same_shape(fn, "dy", dy, x);
  RMSNormGrads<T> gr{Tensor<T>(x.shape()), Tensor<T>(weight.shape())};
  const MatView<T> X = x.mat(), DY = dy.mat(), DX = gr.dx.mat();
  const index_t D = X.cols;
  for (index_t r = 0; r < X.rows; ++r) {
    T ms = 0;
    for (index_t d = 0; d < D; ++d) ms += X(r, d) * X(r, d);
    const T rho = T(1) / std::sqrt(ms / T(D) + eps);
    T mean_gx = 0;
    for (index_t d = 0; d < D; ++d) {
      const T xh = X(r, d) * rho;
      gr.dweight.data()[d] += DY(r, d) * xh;
      mean_gx += DY(r, d) * weight.data()[d] * xh;
    }
    mean_gx /= T(D);
    for (index_t d = 0; d < D; ++d)
      DX(r, d) = rho * (DY(r, d) * weight.data()[d] - X(r, d) * rho * mean_gx);
  }
  return gr;
}

/// @}

}  // namespace linattn::ref
