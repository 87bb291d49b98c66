/// reference/feature_maps.hpp -- the feature maps phi of linear attention (Sec.3, Eqs.3-6).
///
/// phi: R^{d_k} -> R^{d_phi}; every map here keeps d_phi = d_k. kappa = phi(k) is what the
/// memory W in R^{d_v x d_phi} is written with, phi(q) what it is read with.
/// @file
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "reference/check.hpp"

namespace linattn::ref {

/// @addtogroup linear_attention
/// @{

enum class FeatureMap { identity, l2norm, elu_plus_one, relu };

inline const char* to_string(FeatureMap f) {
  switch (f) {
    case FeatureMap::identity: return "identity";
    case FeatureMap::l2norm: return "l2norm";
    case FeatureMap::elu_plus_one: return "elu+1";
    case FeatureMap::relu: return "relu";
  }
  return "?";
}

/// x / sqrt(||x||^2 + eps): the L2 normalisation applied to q and k (eps 1e-6 as in the authors'
/// code, SPEC section 5). eps = 0 gives the exact unit vector (x must then be non-zero).
template <class T>
std::vector<T> l2_normalize(const std::vector<T>& x, T eps = T(1e-6)) {
  check_vec("l2_normalize", "x", x, static_cast<index_t>(x.size()));
  check_scalar_range("l2_normalize", "eps", eps, 0.0, INFINITY);
  T ss = 0;
  for (T xi : x) ss += xi * xi;
  const T inv = T(1) / std::sqrt(ss + eps);
  std::vector<T> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv;
  return y;
}

/// phi(x) for the chosen feature map (Eqs.3-6).
template <class T>
std::vector<T> feature_map(FeatureMap f, const std::vector<T>& x) {
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isfinite(x[i]))
      fail("feature_map", "x", "finite values", num_str(x[i]) + " at index " + std::to_string(i));
  std::vector<T> y(x.size());
  switch (f) {
    case FeatureMap::identity: return x;
    case FeatureMap::l2norm: return l2_normalize(x);
    case FeatureMap::elu_plus_one:
      for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] > 0 ? x[i] + 1 : std::exp(x[i]);
      return y;
    case FeatureMap::relu:
      for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] > 0 ? x[i] : T(0);
      return y;
  }
  return y;
}

/// @}

}  // namespace linattn::ref
