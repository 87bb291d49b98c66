/// reference/softmax_attention.hpp -- causal softmax attention (Eq.1; Sec.3.1 Eqs.7-13).
///
/// y_i = sum_{j<=i} softmax_j(scale q_i . k_j + mask_ij) v_j, computed per query with explicit
/// sums (max-subtracted for stability). It is the comparison baseline and the softmax layer of
/// hybrid stacks. Grouped-query attention (GQA): k and v may have fewer heads Hkv dividing H;
/// query head h reads key/value head h / (H / Hkv).
/// @file
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "reference/check.hpp"

namespace linattn::ref {

/// @addtogroup softmax_attention
/// @{

template <class T>
struct SoftmaxOptions {
  std::optional<T> scale;  ///< default K^-1/2 (the sqrt(d_k) of Eq.1)
  bool causal = true;      ///< only j <= i
  Tensor<T> mask;          ///< optional additive mask [T, T] (may hold -inf to block pairs)
};

/// Eq.1 with an optional additive mask m:
/// \f$ y_i = \sum_{j \le i} \mathrm{softmax}_j\big(q_i^\top k_j / \sqrt{d_k} + m_{ij}\big)\, v_j \f$.
/// q [B, T, H, K], k [B, T, Hkv, K], v [B, T, Hkv, V] -> y [B, T, H, V].
template <class T>
Tensor<T> naive_softmax_attn(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                             const SoftmaxOptions<T>& opt = {}) {
  const std::string fn = "naive_softmax_attn";
  check_rank(fn, "q", q, 4);
  const index_t B = q.size(0), Tn = q.size(1), H = q.size(2), K = q.size(3);
  check_positive(fn, "q.shape[3] (K)", K);
  check_rank(fn, "k", k, 4);
  check_shape(fn, "k", k, {B, Tn, -1, K});
  const index_t Hkv = k.size(2);
  if (Hkv <= 0 || H % Hkv != 0)
    fail(fn, "k", "a head count dividing H = " + std::to_string(H), std::to_string(Hkv));
  check_rank(fn, "v", v, 4);
  check_shape(fn, "v", v, {B, Tn, Hkv, -1});
  const index_t V = v.size(3);
  check_finite(fn, "q", q);
  check_finite(fn, "k", k);
  check_finite(fn, "v", v);
  if (opt.mask.defined()) {
    check_shape(fn, "mask", opt.mask, {Tn, Tn});
    for (T m : opt.mask)
      if (std::isnan(m) || m == std::numeric_limits<T>::infinity())
        fail(fn, "mask", "finite values or -inf", num_str(m));
  }
  if (opt.scale && !std::isfinite(*opt.scale))
    fail(fn, "scale", "a finite value", num_str(*opt.scale));
  const T scale = opt.scale ? *opt.scale : T(1) / std::sqrt(T(K));
  const index_t group = H / Hkv;
  Tensor<T> y({B, Tn, H, V});
  std::vector<T> s(static_cast<size_t>(Tn));
  for (index_t b = 0; b < B; ++b)
    for (index_t h = 0; h < H; ++h) {
      const index_t hk = h / group;
      for (index_t i = 0; i < Tn; ++i) {
        const index_t jmax = opt.causal ? i : Tn - 1;
        T m = -std::numeric_limits<T>::infinity();
        for (index_t j = 0; j <= jmax; ++j) {  // scores
          T dot = 0;
          for (index_t d = 0; d < K; ++d) dot += q(b, i, h, d) * k(b, j, hk, d);
          if (std::isnan(scale * dot) || scale * dot == std::numeric_limits<T>::infinity())  // -inf: weight 0
            fail(fn, "q, k", "scores scale q_i . k_j within the range of the floating-point type",
                 num_str(scale * dot) + " at batch " + std::to_string(b) + ", head " + std::to_string(h) +
                     ", query " + std::to_string(i) + ", key " + std::to_string(j) + " (overflow)");
          s[j] = scale * dot + (opt.mask.defined() ? opt.mask(i, j) : T(0));
          m = std::max(m, s[j]);
        }
        if (m == -std::numeric_limits<T>::infinity()) {
          if (!opt.mask.defined())  // every score overflowed to -inf: no key to attend to
            fail(fn, "q, k", "scores scale q_i . k_j within the range of the floating-point type",
                 "-inf for every key of query " + std::to_string(i) + " (batch " + std::to_string(b) + ", head " +
                     std::to_string(h) + "; overflow)");
          fail(fn, "mask", "at least one unmasked key per query", "query " + std::to_string(i) + " fully masked");
        }
        T z = 0;
        for (index_t j = 0; j <= jmax; ++j) z += (s[j] = std::exp(s[j] - m));
        for (index_t e = 0; e < V; ++e) {
          T acc = 0;
          for (index_t j = 0; j <= jmax; ++j) acc += s[j] * v(b, j, hk, e);
          y(b, i, h, e) = acc / z;
          if (!std::isfinite(y(b, i, h, e)))
            fail(fn, "v", "values whose weighted sums stay within the range of the floating-point type",
                 num_str(y(b, i, h, e)) + " at batch " + std::to_string(b) + ", query " + std::to_string(i) +
                     ", head " + std::to_string(h) + " (overflow)");
        }
      }
    }
  return y;
}

/// @}

}  // namespace linattn::ref
