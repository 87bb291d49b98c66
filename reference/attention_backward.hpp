/// reference/attention_backward.hpp -- the reference backward of causal softmax attention (Eq.1,
/// GQA included) and of linear attention with a feature map (Eqs.3-6, reference/linear_attention.hpp).
///
/// Both are written in the explicit-sum form of their forwards, recomputing what they need:
/// ~~~
///   softmax:  s_ij = scale q_i . k_j + mask_ij,  P_ij = softmax_j(s_ij),  y_i = sum_j P_ij v_j
///             dv_j += P_ij dy_i;  dP_ij = dy_i . v_j;  ds_ij = P_ij (dP_ij - sum_l P_il dP_il)
///             dq_i += scale ds_ij k_j;  dk_j += scale ds_ij q_i;  dmask_ij += ds_ij
///   linear:   a_ij = phi(q_i) . phi(k_j) (j <= i),  y_i = sum_j a_ij v_j  [/ den_i, den_i = eps + sum_j a_ij]
/// ~~~
/// Proven by finite differences in proofs_tests/test_gradcheck_reference.cpp.
/// @file
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "reference/check.hpp"
#include "reference/feature_maps.hpp"
#include "reference/layers_backward.hpp"
#include "reference/linear_attention.hpp"
#include "reference/softmax_attention.hpp"

namespace linattn::ref {

/// @addtogroup backward
/// @{

template <class T>
struct AttentionGrads {
  Tensor<T> dq, dk, dv;
  Tensor<T> dmask;  ///< [T, T] when a mask was given (summed over batch and heads); else undefined
};

/// Backward of naive_softmax_attn (Eq.1). q [B,T,H,K], k [B,T,Hkv,K], v [B,T,Hkv,V], do_ [B,T,H,V].
/// With GQA the gradients of a key/value head sum over the H / Hkv query heads that read it.
/// Masked pairs (-inf) have P = 0 and get no gradient.
template <class T>
AttentionGrads<T> naive_softmax_attn_backward(const Tensor<T>& q, const Tensor<T>& k,
                                              const Tensor<T>& v, const Tensor<T>& do_,
                                              const SoftmaxOptions<T>& opt = {}) {
  const std::string fn = "naive_softmax_attn_backward";
  naive_softmax_attn(q, k, v, opt);  // validates every argument (and that no query is fully masked)
  const index_t B = q.size(0), Tn = q.size(1), H = q.size(2), K = q.size(3);
  const index_t Hkv = k.size(2), V = v.size(3), group = H / Hkv;
  check_shape(fn, "do", do_, {B, Tn, H, V});
  check_finite(fn, "do", do_);
  const T scale = opt.scale ? *opt.scale : T(1) / std::sqrt(T(K));

  AttentionGrads<T> gr{Tensor<T>(q.shape()), Tensor<T>(k.shape()), Tensor<T>(v.shape()), {}};
  if (opt.mask.defined()) gr.dmask = Tensor<T>({Tn, Tn});
  std::vector<T> P(static_cast<size_t>(Tn)), dP(static_cast<size_t>(Tn));
  for (index_t b = 0; b < B; ++b)
    for (index_t h = 0; h < H; ++h) {
      const index_t hk = h / group;
      for (index_t i = 0; i < Tn; ++i) {
        const index_t jmax = opt.causal ? i : Tn - 1;
        // Recompute P_i. (softmax of the scores, max-subtracted as in the forward)
        T m = -std::numeric_limits<T>::infinity();
        for (index_t j = 0; j <= jmax; ++j) {
          T dot = 0;
          for (index_t d = 0; d < K; ++d) dot += q(b, i, h, d) * k(b, j, hk, d);
          P[j] = scale * dot + (opt.mask.defined() ? opt.mask(i, j) : T(0));
          m = std::max(m, P[j]);
        }
        T z = 0;
        for (index_t j = 0; j <= jmax; ++j) z += (P[j] = std::exp(P[j] - m));
        for (index_t j = 0; j <= jmax; ++j) P[j] /= z;
        // dP_ij = dy_i . v_j;  dv_j += P_ij dy_i;  D_i = sum_j P_ij dP_ij (= dy_i . y_i).
        T Di = 0;
        for (index_t j = 0; j <= jmax; ++j) {
          T acc = 0;
          for (index_t e = 0; e < V; ++e) {
            acc += do_(b, i, h, e) * v(b, j, hk, e);
            gr.dv(b, j, hk, e) += P[j] * do_(b, i, h, e);
          }
          dP[j] = acc;
          Di += P[j] * acc;
        }
        // ds_ij = P_ij (dP_ij - D_i); through s_ij = scale q_i . k_j + mask_ij.
        for (index_t j = 0; j <= jmax; ++j) {
          const T ds = P[j] * (dP[j] - Di);
          for (index_t d = 0; d < K; ++d) {
            gr.dq(b, i, h, d) += scale * ds * k(b, j, hk, d);
            gr.dk(b, j, hk, d) += scale * ds * q(b, i, h, d);
          }
          if (opt.mask.defined()) gr.dmask(i, j) += ds;
        }
      }
    }
  return gr;
}

/// Backward of one feature map phi (feature_maps.hpp): dx = J_phi(x)^T dy.
///   identity: dy;  l2norm: (dy - y (y . dy)) / sqrt(||x||^2 + eps);
///   elu+1: dy for x > 0, dy exp(x) otherwise;  relu: dy for x > 0, 0 otherwise.
template <class T>
Vec<T> feature_map_backward(FeatureMap f, const Vec<T>& x, const Vec<T>& dy) {
  check_vec("feature_map_backward", "x", x, static_cast<index_t>(x.size()));
  check_vec("feature_map_backward", "dy", dy, static_cast<index_t>(x.size()));
  Vec<T> dx(dy);
  switch (f) {
    case FeatureMap::identity: return dx;
    case FeatureMap::l2norm: return l2_normalize_backward(x, dy);
    case FeatureMap::elu_plus_one:
      for (size_t i = 0; i < x.size(); ++i) dx[i] = x[i] > 0 ? dy[i] : dy[i] * std::exp(x[i]);
      return dx;
    case FeatureMap::relu:
      for (size_t i = 0; i < x.size(); ++i) dx[i] = x[i] > 0 ? dy[i] : T(0);
      return dx;
  }
  return dx;
}

/// Backward of linear_attention_recurrent / linear_attention_parallel (one head: q, k [T, d_k],
/// v, dy [T, d_v]), through the parallel form (Eq.3 with the W phi(q) order):
///   a_ij = phi(q_i) . phi(k_j), num_i = sum_{j<=i} a_ij v_j, den_i = eps + sum_{j<=i} a_ij,
///   y_i = num_i (/ den_i when normalised).
///   dnum_i = dy_i [/ den_i];  dden_i = -(dy_i . y_i) / den_i (normalised only);
///   da_ij = dnum_i . v_j + dden_i;  dv_j += a_ij dnum_i;
///   dphi(q_i) += da_ij phi(k_j);  dphi(k_j) += da_ij phi(q_i);  then feature_map_backward.
template <class T>
AttentionGrads<T> linear_attention_backward(const Tensor<T>& q, const Tensor<T>& k,
                                            const Tensor<T>& v, const Tensor<T>& dy,
                                            const LinearAttnOptions<T>& opt = {}) {
  const std::string fn = "linear_attention_backward";
  detail::check_seq(fn, q, k, v);
  check_shape(fn, "dy", dy, v.shape());
  check_finite(fn, "dy", dy);
  const index_t Tn = q.size(0), dk = q.size(1), dv = v.size(1);
  std::vector<Vec<T>> fq(Tn), fk(Tn), dfq(Tn, Vec<T>(dk, T(0))), dfk(Tn, Vec<T>(dk, T(0)));
  for (index_t i = 0; i < Tn; ++i)
    fq[i] = feature_map(opt.phi, detail::row(q, i)), fk[i] = feature_map(opt.phi, detail::row(k, i));
  AttentionGrads<T> gr{Tensor<T>(q.shape()), Tensor<T>(k.shape()), Tensor<T>(v.shape()), {}};
  Vec<T> a(Tn);
  for (index_t i = 0; i < Tn; ++i) {
    // Forward of row i, recomputed.
    T den = opt.eps;
    Vec<T> num(dv, T(0));
    for (index_t j = 0; j <= i; ++j) {
      a[j] = 0;
      for (index_t d = 0; d < dk; ++d) a[j] += fq[i][d] * fk[j][d];
      den += a[j];
      for (index_t e = 0; e < dv; ++e) num[e] += a[j] * v(j, e);
    }
    // dnum, dden.
    Vec<T> dnum(dv);
    T dden = 0;
    for (index_t e = 0; e < dv; ++e) {
      dnum[e] = opt.normalize ? dy(i, e) / den : dy(i, e);
      if (opt.normalize) dden -= dy(i, e) * (num[e] / den) / den;
    }
    for (index_t j = 0; j <= i; ++j) {
      T da = dden;
      for (index_t e = 0; e < dv; ++e) {
        da += dnum[e] * v(j, e);
        gr.dv(j, e) += a[j] * dnum[e];
      }
      for (index_t d = 0; d < dk; ++d) dfq[i][d] += da * fk[j][d], dfk[j][d] += da * fq[i][d];
    }
  }
  for (index_t i = 0; i < Tn; ++i) {
    const Vec<T> dqi = feature_map_backward(opt.phi, detail::row(q, i), dfq[i]);
    const Vec<T> dki = feature_map_backward(opt.phi, detail::row(k, i), dfk[i]);
    for (index_t d = 0; d < dk; ++d) gr.dq(i, d) = dqi[d], gr.dk(i, d) = dki[d];
  }
  return gr;
}

/// @}

}  // namespace linattn::ref
