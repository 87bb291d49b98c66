/// reference/linear_attention.hpp -- linear attention with a feature map (Eqs.3-6), both forms.
///
/// If sim(q, k) ~ phi(q)^T phi(k), causal attention becomes
/// ~~~
///   recurrent:  W_i = W_{i-1} + v_i phi(k_i)^T  (Eqs.4-5),  y_i = W_i phi(q_i)        (Eq.5/8)
///   parallel:   y_i = sum_{j<=i} (phi(q_i) . phi(k_j)) v_j                               (Eq.3, fixed)
/// ~~~
/// Both are the un-normalised numerator. The normalised option divides by z_i . phi(q_i) with
/// z_i = sum_{j<=i} phi(k_j) (plus eps, since relu features can make it 0).
/// Erratum 1 (SPEC section 7): the PDF's Eq.3 prints phi(q)^T W, which does not type-check for
/// W in R^{d_v x d_phi}; the read is W phi(q). The tests use d_v != d_phi so a transposed read
/// cannot pass.
/// @file
#pragma once

#include <vector>

#include "reference/check.hpp"
#include "reference/delta_rules.hpp"
#include "reference/feature_maps.hpp"

namespace linattn::ref {

/// @addtogroup linear_attention
/// @{

template <class T>
struct LinearAttnOptions {
  FeatureMap phi = FeatureMap::identity;
  bool normalize = false;  ///< divide by z_i . phi(q_i) + eps
  T eps = T(1e-6);
};

namespace detail {
template <class T>
void check_seq(const std::string& fn, const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v) {
  check_rank(fn, "q", q, 2);
  check_shape(fn, "k", k, {q.size(0), q.size(1)});
  check_rank(fn, "v", v, 2);
  check_shape(fn, "v", v, {q.size(0), -1});
  check_finite(fn, "q", q);
  check_finite(fn, "k", k);
  check_finite(fn, "v", v);
}
/// The normalised form divides by den_i = z_i . phi(q_i) + eps; refuse a zero (0/0 with eps = 0 and relu
/// features) or non-finite one instead of returning NaN, and any output that overflowed.
template <class T>
void check_row(const std::string& fn, const LinearAttnOptions<T>& opt, index_t i, T den, const T* y, index_t dv) {
  if (opt.normalize && (den == T(0) || !std::isfinite(den)))
    fail(fn, "eps", "a denominator z_i . phi(q_i) + eps that is finite and nonzero (pass eps > 0)",
         num_str(den) + " at token " + std::to_string(i) + " with eps = " + num_str(opt.eps));
  for (index_t e = 0; e < dv; ++e)
    if (!std::isfinite(y[e]))
      fail(fn, "q, k, v", "outputs within the range of the floating-point type",
           num_str(y[e]) + " at token " + std::to_string(i) + " (overflow; every input is finite)");
}
template <class T>
Vec<T> row(const Tensor<T>& x, index_t i) {
  return Vec<T>(x.data() + i * x.size(1), x.data() + (i + 1) * x.size(1));
}
}  // namespace detail

/// Recurrent form (Eqs.4-5, 8) for one head: q, k [T, d_k], v [T, d_v] -> y [T, d_v].
template <class T>
Tensor<T> linear_attention_recurrent(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                     const LinearAttnOptions<T>& opt = {}) {
  detail::check_seq("linear_attention_recurrent", q, k, v);
  check_scalar_range("linear_attention_recurrent", "eps", opt.eps, 0.0, INFINITY);
  const index_t Tn = q.size(0), dk = q.size(1), dv = v.size(1);
  Tensor<T> W({dv, dk});
  Vec<T> z(dk, T(0));
  Tensor<T> y({Tn, dv});
  for (index_t i = 0; i < Tn; ++i) {
    const Vec<T> kappa = feature_map(opt.phi, detail::row(k, i));
    const Vec<T> fq = feature_map(opt.phi, detail::row(q, i));
    Vec<T> yi;
    try {  // inputs are finite: inside the loop only an overflow fails the step's checks
      linear_attention_step(W, kappa, detail::row(v, i));  // W_i = W_{i-1} + v_i kappa_i^T
      yi = read(W, fq);                                    // y_i = W_i phi(q_i)
    } catch (const Error& e) {
      fail("linear_attention_recurrent", "q, k, v", "a state within the range of the floating-point type",
           "an overflow at token " + std::to_string(i) + " [" + e.what() + "]");
    }
    T den = opt.eps;
    if (opt.normalize) {
      for (index_t d = 0; d < dk; ++d) den += (z[d] += kappa[d]) * fq[d];
      for (T& x : yi) x /= den;
    }
    detail::check_row("linear_attention_recurrent", opt, i, den, yi.data(), dv);
    for (index_t e = 0; e < dv; ++e) y(i, e) = yi[e];
  }
  return y;
}

/// Parallel causal form (Eq.3 with the W phi(q) order) for one head: explicit double sum.
template <class T>
Tensor<T> linear_attention_parallel(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                    const LinearAttnOptions<T>& opt = {}) {
  detail::check_seq("linear_attention_parallel", q, k, v);
  check_scalar_range("linear_attention_parallel", "eps", opt.eps, 0.0, INFINITY);
  const index_t Tn = q.size(0), dk = q.size(1), dv = v.size(1);
  Tensor<T> y({Tn, dv});
  for (index_t i = 0; i < Tn; ++i) {
    const Vec<T> fq = feature_map(opt.phi, detail::row(q, i));
    T den = opt.eps;
    for (index_t j = 0; j <= i; ++j) {
      const Vec<T> fk = feature_map(opt.phi, detail::row(k, j));
      T a = 0;  // phi(q_i) . phi(k_j)
      for (index_t d = 0; d < dk; ++d) a += fq[d] * fk[d];
      den += a;
      for (index_t e = 0; e < dv; ++e) y(i, e) += a * v(j, e);
    }
    if (opt.normalize)
      for (index_t e = 0; e < dv; ++e) y(i, e) /= den;
    detail::check_row("linear_attention_parallel", opt, i, den, y.data() + i * dv, dv);
  }
  return y;
}

/// @}

}  // namespace linattn::ref
