/// reference/routing_backward.hpp -- the backward of the routing operations of reference/routing.hpp:
/// CLER's value-target injection (Eq.27) and CLER-H/CLVR's residual injection (Eq.29), full or
/// low-rank P. Given the gradient of a loss with respect to the output, each returns the gradients
/// with respect to every input (derivations: docs/derivation-backward.md, section 7).
/// Proven by finite differences in proofs_tests/test_gradcheck_reference.cpp.
/// @file
#pragma once

#include <string>

#include "reference/check.hpp"
#include "reference/layers_backward.hpp"
#include "reference/routing.hpp"

namespace linattn::ref {

/// @addtogroup backward
/// @{

template <class T>
struct ClerGrads {
  Tensor<T> dv;      ///< [B, T, H, V]
  Tensor<T> dr_prev; ///< [B, T, H, V]
  T dGamma = 0;
};

/// Backward of cler_inject, v~ = v + Gamma rho(r_prev) (Eq.27), with dv_tilde = dL/dv~:
///   dv = dv_tilde;  dGamma = <dv_tilde, rho(r_prev)>;  dr_prev = Gamma J_rho(r_prev)^T dv_tilde
/// where J_rho is the identity, or for rms_norm the RMS normalisation's Jacobian (rms_norm_backward
/// with weight 1 and the same eps).
template <class T>
ClerGrads<T> cler_inject_backward(const Tensor<T>& v, const Tensor<T>& r_prev, T Gamma,
                                  const Tensor<T>& dv_tilde, Rho rho_kind = Rho::identity,
                                  T eps = T(1e-6)) {
  const std::string fn = "cler_inject_backward";
  cler_inject(v, r_prev, Gamma, rho_kind, eps);  // validates v, r_prev, Gamma, rho_kind, eps
  const Tensor<T> routed = rho(rho_kind, r_prev, eps);
  check_shape(fn, "dv_tilde", dv_tilde, v.shape());
  check_finite(fn, "dv_tilde", dv_tilde);
  ClerGrads<T> gr;
  gr.dv = dv_tilde.clone();
  for (index_t i = 0; i < routed.numel(); ++i) gr.dGamma += dv_tilde.data()[i] * routed.data()[i];
  Tensor<T> g(dv_tilde.shape());  // Gamma dv_tilde = dL/d rho(r_prev)
  for (index_t i = 0; i < g.numel(); ++i) g.data()[i] = Gamma * dv_tilde.data()[i];
  gr.dr_prev = rho_kind == Rho::identity
                   ? g
                   : rms_norm_backward(r_prev, Tensor<T>({v.size(-1)}, T(1)), g, eps).dx;
  return gr;
}

template <class T>
struct ResidualInjectGrads {
  Tensor<T> dh;  ///< [B, T, d_model]
  Tensor<T> ds;  ///< [B, T, H, V]
  Tensor<T> dP;  ///< [d_model, H*V] (full P)
  Tensor<T> dU;  ///< [d_model, r]   (low rank)
  Tensor<T> dD;  ///< [r, H*V]       (low rank)
};

namespace detail {
/// `arg` names the projection in errors as routing.hpp does ("P" -> P.U; "" -> U).
template <class T>
ResidualInjectGrads<T> residual_inject_backward(const std::string& arg, const Tensor<T>& h,
                                                const Tensor<T>& s, const Projection<T>& P,
                                                const Tensor<T>& dy) {
  const std::string fn = "residual_inject_backward";
  const index_t HV = detail::check_residual_args(fn, h, s);
  const index_t dm = h.size(2), BT = h.size(0) * h.size(1);
  detail::check_projection(fn, arg, P, dm, HV);
  check_shape(fn, "dy", dy, h.shape());
  check_finite(fn, "dy", dy);
  ResidualInjectGrads<T> gr;
  gr.dh = dy.clone();
  gr.ds = Tensor<T>(s.shape());
  const MatView<T> S{s.data(), BT, HV, HV}, DS{gr.ds.data(), BT, HV, HV};
  const MatView<T> DY{dy.data(), BT, dm, dm};
  if (!P.low_rank()) {
    gr.dP = Tensor<T>({dm, HV});
    const MatView<T> Pm = P.P.mat(), dP = gr.dP.mat();
    for (index_t t = 0; t < BT; ++t)
      for (index_t i = 0; i < dm; ++i)
        for (index_t j = 0; j < HV; ++j) {
          DS(t, j) += Pm(i, j) * DY(t, i);  // ds_t = P^T dy_t
          dP(i, j) += DY(t, i) * S(t, j);   // dP += dy_t s_t^T
        }
    return gr;
  }
  const index_t r = P.U.size(1);
  gr.dU = Tensor<T>({dm, r});
  gr.dD = Tensor<T>({r, HV});
  const MatView<T> U = P.U.mat(), D = P.D.mat(), dU = gr.dU.mat(), dD = gr.dD.mat();
  for (index_t t = 0; t < BT; ++t) {
    Vec<T> z(r, T(0)), dz(r, T(0));
    for (index_t a = 0; a < r; ++a)
      for (index_t j = 0; j < HV; ++j) z[a] += D(a, j) * S(t, j);  // z_t = D s_t
    for (index_t i = 0; i < dm; ++i)
      for (index_t a = 0; a < r; ++a) {
        dU(i, a) += DY(t, i) * z[a];  // dU += dy_t z_t^T
        dz[a] += U(i, a) * DY(t, i);  // dz_t = U^T dy_t
      }
    for (index_t a = 0; a < r; ++a)
      for (index_t j = 0; j < HV; ++j) {
        dD(a, j) += dz[a] * S(t, j);  // dD += dz_t s_t^T
        DS(t, j) += D(a, j) * dz[a];  // ds_t = D^T dz_t
      }
  }
  return gr;
}
}  // namespace detail

/// Backward of residual_inject, y = h + P s per token (Eq.29), with dy = dL/dy [B, T, d_model]
/// and s flattened per token to H*V (head-major, as in the forward):
///   full P:       dh = dy;  ds_t = P^T dy_t;  dP = sum_t dy_t s_t^T
///   P = U D:      z_t = D s_t;  dU = sum_t dy_t z_t^T;  dz_t = U^T dy_t;
///                 dD = sum_t dz_t s_t^T;  ds_t = D^T dz_t
/// (each factor's gradient is proportional to the other factor: see low_rank_projection).
/// Either form of P (the Projection overload of residual_inject).
template <class T>
ResidualInjectGrads<T> residual_inject_backward(const Tensor<T>& h, const Tensor<T>& s,
                                                const Projection<T>& P, const Tensor<T>& dy) {
  return detail::residual_inject_backward("P", h, s, P, dy);
}

/// Full P [d_model, H*V] (the tensor overload of residual_inject). Gives dh, ds, dP.
template <class T>
ResidualInjectGrads<T> residual_inject_backward(const Tensor<T>& h, const Tensor<T>& s,
                                                const Tensor<T>& P, const Tensor<T>& dy) {
  Projection<T> proj;
  proj.P = P;
  return detail::residual_inject_backward("", h, s, proj, dy);
}

/// Low-rank P = U D (U [d_model, r], D [r, H*V]). Gives dh, ds, dU, dD.
template <class T>
ResidualInjectGrads<T> residual_inject_backward(const Tensor<T>& h, const Tensor<T>& s,
                                                const Tensor<T>& U, const Tensor<T>& D,
                                                const Tensor<T>& dy) {
  Projection<T> proj;
  proj.U = U;
  proj.D = D;
  if (!U.defined())
    fail("residual_inject_backward", "U", "a tensor of shape [d_model, r]", "an empty tensor");
  return detail::residual_inject_backward("", h, s, proj, dy);
}

/// @}

}  // namespace linattn::ref
